//! What the simulated agents work on: four kinds of task from two sources, the canned words
//! they answer with, the side effect each kind performs, and the opening tour.

use lastword_core::{ErrorCause, Safety, Source};
use lastword_store::NewTask;
use rand::Rng;

/// A kind of task, with where it comes from and what acting on it does.
pub(crate) struct Kind {
    pub name: &'static str,
    pub source: Source,
    /// The `effects.kind` recorded when it acts.
    pub effect: &'static str,
    messages: &'static [&'static str],
}

pub(crate) const KINDS: [Kind; 4] = [
    Kind {
        name: "reply_to_mention",
        source: Source::Notification,
        effect: "post_reply",
        messages: &[
            "replied to {from} in thread #{n}",
            "answered {from}'s question in #{n} with a link to the runbook",
        ],
    },
    Kind {
        name: "triage_issue",
        source: Source::Notification,
        effect: "add_label",
        messages: &[
            "labelled issue #{n} as bug and assigned @dana",
            "closed issue #{n} as a duplicate of #{m}",
        ],
    },
    Kind {
        name: "send_digest",
        source: Source::Tick,
        effect: "send_email",
        messages: &[
            "sent the daily digest (#{n}) to 14 subscribers",
            "sent digest #{n}: 3 open incidents, 2 new mentions",
        ],
    },
    Kind {
        name: "sync_calendar",
        source: Source::Tick,
        effect: "update_calendar",
        messages: &[
            "moved 2 events to match the new standup time (sync #{n})",
            "declined a double-booked meeting (sync #{n})",
        ],
    },
];

const PEOPLE: [&str; 5] = ["@alice", "@bob", "@chen", "@dana", "@emeka"];

pub(crate) fn kind(name: &str) -> &'static Kind {
    KINDS.iter().find(|k| k.name == name).unwrap_or(&KINDS[0])
}

/// The action message for a run of `kind` on a task with `payload`.
pub(crate) fn message(kind: &Kind, payload: &serde_json::Value, variant: usize) -> String {
    let n = payload["n"].as_i64().unwrap_or(0);
    let from = payload["from"].as_str().unwrap_or("@someone");
    kind.messages[variant % kind.messages.len()]
        .replace("{from}", from)
        .replace("{n}", &n.to_string())
        .replace("{m}", &(n / 2).max(1).to_string())
}

/// The error detail a failing run reports.
pub(crate) fn failure_detail(cause: ErrorCause, variant: usize) -> String {
    let options: &[&str] = match cause {
        ErrorCause::ApiError => &[
            "model API returned 529 Overloaded after 3 retries",
            "model API returned 500 Internal Server Error (request id req_7f3a)",
        ],
        ErrorCause::Timeout => {
            &["tool call github.search exceeded its 120s deadline", "no model response within 300s"]
        }
        ErrorCause::ContextOverflow => &[
            "prompt is 213441 tokens; the model's limit is 200000",
            "thread history too long to summarise: 1.2 MB of comments",
        ],
        ErrorCause::Crash => &[
            "worker process exited with signal 11 (SIGSEGV) in the tool sandbox",
            "panicked at 'index out of bounds' in the markdown renderer",
        ],
        ErrorCause::Other => &["unexpected state"],
    };
    options[variant % options.len()].to_string()
}

/// A random task; `n` is its sequence number in this fleet.
pub(crate) fn random_task(rng: &mut impl Rng, n: u64, unsafe_share: f64) -> NewTask {
    let notification = rng.gen_bool(0.65);
    let which = rng.gen_range(0..2);
    let is_unsafe = rng.gen_bool(unsafe_share);
    let person = PEOPLE[rng.gen_range(0..PEOPLE.len())];
    let kind = &KINDS[if notification { which } else { 2 + which }];
    new_task(kind, n, is_unsafe, person, None)
}

fn new_task(kind: &Kind, n: u64, is_unsafe: bool, person: &str, tour: Option<&[&str]>) -> NewTask {
    let mut payload = match kind.source {
        Source::Notification => {
            serde_json::json!({ "n": n, "from": person, "text": format!("{person}: can you take a look at #{n}?") })
        }
        Source::Tick => serde_json::json!({ "n": n, "schedule": "every 5m" }),
    };
    if let Some(tour) = tour {
        payload["tour"] = serde_json::json!(tour);
    }
    NewTask::new(kind.name, kind.source, if is_unsafe { Safety::Unsafe } else { Safety::Idempotent })
        .with_payload(payload)
}

/// The opening tour: one task per kind of event, each carrying the fates of its attempts in
/// `payload.tour` (later attempts, if any, draw from the rates). The first is unsafe and slow:
/// it is re-claimed, both attempts run its effect, and the late finish is a lost lease.
pub(crate) fn tour() -> Vec<NewTask> {
    let script: [(&str, bool, &[&str]); 11] = [
        ("reply_to_mention", true, &["slow", "acted"]),
        ("triage_issue", false, &["acted"]),
        ("sync_calendar", false, &["idle"]),
        ("reply_to_mention", false, &["idle"]),
        ("triage_issue", false, &["api_error", "acted"]),
        ("send_digest", false, &["timeout", "acted"]),
        ("reply_to_mention", false, &["context_overflow", "acted"]),
        ("triage_issue", false, &["crash", "acted"]),
        ("sync_calendar", false, &["silent", "idle"]),
        ("reply_to_mention", false, &["empty"]),
        ("send_digest", false, &["other", "acted"]),
    ];
    script
        .iter()
        .enumerate()
        .map(|(i, (name, is_unsafe, fates))| {
            new_task(kind(name), i as u64 + 1, *is_unsafe, PEOPLE[i % PEOPLE.len()], Some(fates))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fate::Fate;

    #[test]
    fn tour_scripts_name_real_fates_and_cover_every_kind_of_event() {
        let mut seen = std::collections::BTreeSet::new();
        for task in tour() {
            for f in task.payload["tour"].as_array().unwrap() {
                let fate: Fate = f.as_str().unwrap().parse().unwrap();
                seen.insert(format!(
                    "{fate:?}/{}",
                    if fate == Fate::Idle { task.source.as_str() } else { "" }
                ));
            }
        }
        for want in [
            "Acted/",
            "Idle/notification",
            "Idle/tick",
            "Slow/",
            "Silent/",
            "Empty/",
            "Failed(ApiError)/",
            "Failed(Timeout)/",
            "Failed(ContextOverflow)/",
            "Failed(Crash)/",
        ] {
            assert!(seen.contains(want), "{want} missing from {seen:?}");
        }
        assert_eq!(tour()[0].safety, Safety::Unsafe);
    }

    #[test]
    fn messages_are_never_blank() {
        for k in &KINDS {
            for v in 0..4 {
                let m = message(k, &serde_json::json!({"n": 5, "from": "@a"}), v);
                assert!(!m.trim().is_empty() && !m.contains('{'), "{m}");
            }
        }
    }
}
