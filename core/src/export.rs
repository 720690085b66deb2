//! A task's whole story as Markdown, for a ticket or a postmortem (issue 14, "Exports").
//!
//! Pure: the same [`TaskDetail`] the task page shows, rendered to text that pastes into GitHub,
//! Jira or Confluence. Everything a runner wrote (worker names, outputs, error details, effect
//! keys) is untrusted: table cells are escaped so they cannot end a cell or a row, and outputs
//! sit in fenced code blocks whose fence is longer than any backtick run inside, so no text a
//! runner wrote is ever read as Markdown or HTML.

use crate::{Cause, TaskDetail, TraceLinks};
use chrono::{DateTime, SecondsFormat, Utc};
use std::fmt::Write;

/// The longest output or error detail quoted whole; longer texts are cut with a note (the JSON
/// export and the task page have all of it).
pub const MAX_QUOTED_CHARS: usize = 4_000;

fn when(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn when_opt(t: Option<DateTime<Utc>>) -> String {
    t.map(when).unwrap_or_else(|| "—".to_string())
}

/// Text made safe for one table cell: no line breaks, no `|`, and Markdown's inline
/// punctuation escaped so a worker called `*boss*` or `<img>` stays text.
pub fn cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\r' | '\n' | '\t' => out.push(' '),
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '~' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// `text` as a fenced code block that nothing inside can close.
pub fn fenced(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body: String = text.chars().take(MAX_QUOTED_CHARS).collect();
    let cut = text.chars().count() > MAX_QUOTED_CHARS;
    let mut out = format!("{fence}text\n{body}\n{fence}\n");
    if cut {
        let _ = writeln!(
            out,
            "\n*(cut at {MAX_QUOTED_CHARS} of {} characters; the JSON export has the whole text)*",
            text.chars().count()
        );
    }
    out
}

fn cause_label(cause: Option<Cause>) -> &'static str {
    cause.map(Cause::as_str).unwrap_or("—")
}

/// The task's story: facts, what needs doing, every attempt with its worker, epoch, times,
/// final write, state, cause and trace, the outputs, effects and the audit trail.
pub fn task_markdown(detail: &TaskDetail, links: Option<&TraceLinks>, exported_at: DateTime<Utc>) -> String {
    let t = &detail.task;
    let mut md = String::new();
    let _ = writeln!(md, "# Task #{} — {}\n", t.id, cell(&t.kind));
    let _ = writeln!(md, "Exported from lastword at {}.\n", when(exported_at));
    let mut flags = Vec::new();
    if detail.double_execution {
        flags.push("**executed twice** (effects under two epochs, or two runs acted)".to_string());
    }
    if detail.needs_compensation {
        flags.push("**needs compensation**".to_string());
    }
    if let Some(at) = t.compensated_at {
        flags.push(format!(
            "compensated at {} by {}: {}{}",
            when(at),
            cell(t.compensated_by.as_deref().unwrap_or("?")),
            cell(t.compensation_reason.as_deref().unwrap_or("")),
            t.compensation_ref.as_deref().map(|r| format!(" (ref {})", cell(r))).unwrap_or_default()
        ));
    }
    for flag in &flags {
        let _ = writeln!(md, "- {flag}");
    }
    if !flags.is_empty() {
        md.push('\n');
    }

    md.push_str("| field | value |\n|---|---|\n");
    let facts: [(&str, String); 10] = [
        ("status", cell(t.status.as_str())),
        ("kind", cell(&t.kind)),
        ("source", cell(t.source.as_str())),
        ("safety", cell(t.safety.as_str())),
        ("lease epoch", t.lease_epoch.to_string()),
        ("holder", t.owner.as_deref().map(cell).unwrap_or_else(|| "—".into())),
        ("lease expires", when_opt(t.lease_expires_at)),
        ("attempts", format!("{} of {}", t.attempts, t.max_attempts)),
        ("created", when(t.created_at)),
        ("updated", when(t.updated_at)),
    ];
    for (name, value) in facts {
        let _ = writeln!(md, "| {name} | {value} |");
    }
    let _ = writeln!(md, "\nPayload:\n\n{}", fenced(&t.payload.to_string()));

    let _ = writeln!(md, "## Attempts ({})\n", detail.runs.len());
    if detail.runs.is_empty() {
        md.push_str("Never claimed.\n\n");
    } else {
        md.push_str("| epoch | run | worker | claimed | finished | final write | state | cause | trace |\n");
        md.push_str("|---|---|---|---|---|---|---|---|---|\n");
        for r in &detail.runs {
            let write = match r.completion_rows {
                Some(0) => "rejected (0 rows: lease lost)",
                Some(_) => "accepted",
                None => "—",
            };
            let trace = match (&r.trace_id, links) {
                (Some(id), Some(l)) => match l.url(id) {
                    Some(url) => format!("[{}]({url})", cell(id)),
                    None => cell(id),
                },
                (Some(id), None) => cell(id),
                (None, _) => "—".to_string(),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {write} | {} | {} | {trace} |",
                r.lease_epoch,
                r.id,
                cell(&r.worker),
                when(r.claimed_at),
                when_opt(r.finished_at),
                r.state.as_str(),
                cause_label(r.cause),
            );
        }
        md.push('\n');
        for r in &detail.runs {
            let _ =
                writeln!(md, "### Epoch {} — {} ({})\n", r.lease_epoch, cell(&r.worker), r.state.as_str());
            match (&r.error, &r.output) {
                (Some(error), _) => {
                    let _ = writeln!(md, "Error `{}`:\n", error.replace('`', ""));
                    md.push_str(&fenced(r.error_detail.as_deref().unwrap_or("")));
                }
                (None, Some(output)) if !output.trim().is_empty() => {
                    let what = if r.completion_rows == Some(0) {
                        "Output (discarded: the lease was lost)"
                    } else {
                        "Output"
                    };
                    let _ = writeln!(md, "{what}:\n");
                    md.push_str(&fenced(output));
                }
                (None, Some(_)) => {
                    md.push_str("Output: **empty** (the contract reserves empty output for failure).\n")
                }
                (None, None) if r.finished_at.is_some() => {
                    md.push_str("Output: **none** (the contract reserves empty output for failure).\n")
                }
                (None, None) => md.push_str("Never reported an end.\n"),
            }
            md.push('\n');
        }
    }

    let _ = writeln!(md, "## Effects ({})\n", detail.effects.len());
    if detail.effects.is_empty() {
        md.push_str("No side effects recorded.\n\n");
    } else {
        md.push_str("| kind | idempotency key | epoch | run | at |\n|---|---|---|---|---|\n");
        for e in &detail.effects {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                cell(&e.kind),
                cell(&e.idempotency_key),
                e.lease_epoch,
                e.run_id,
                when(e.created_at)
            );
        }
        md.push('\n');
    }

    let _ = writeln!(md, "## Audit trail ({})\n", detail.audit.len());
    if detail.audit.is_empty() {
        md.push_str("No operator actions.\n");
    } else {
        md.push_str("| at | actor | via | action | outcome | epoch seen → after | reason | reference |\n");
        md.push_str("|---|---|---|---|---|---|---|---|\n");
        for a in &detail.audit {
            let epochs = format!(
                "{} → {}",
                a.epoch_seen.map(|e| e.to_string()).unwrap_or_else(|| "—".into()),
                a.epoch_after.map(|e| e.to_string()).unwrap_or_else(|| "—".into())
            );
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {epochs} | {} | {} |",
                when(a.created_at),
                cell(&a.actor),
                cell(a.via.as_deref().unwrap_or("—")),
                cell(a.action.as_str()),
                cell(&a.outcome),
                cell(&a.reason),
                cell(a.reference.as_deref().unwrap_or("—")),
            );
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Effect, OperatorAction, Run, RunState, Task};

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2027-01-15T08:00:00Z").unwrap().with_timezone(&Utc)
    }

    fn run(epoch: i64, worker: &str, state: RunState, output: Option<&str>, rows: Option<i32>) -> Run {
        Run {
            id: 100 + epoch,
            task_id: 42,
            worker: worker.into(),
            finished_at: Some(t0()),
            output: output.map(str::to_string),
            completion_rows: rows,
            state,
            ..crate::fixtures::run(epoch, t0())
        }
    }

    fn detail() -> TaskDetail {
        let mut first =
            run(1, "w|1\nforged | row", RunState::LostLease, Some("sent ``` the refund"), Some(0));
        first.trace_id = Some("abc/123".into());
        let mut second = run(2, "w2", RunState::Acted, Some("sent the refund"), Some(1));
        second.trace_id = Some("def".into());
        TaskDetail {
            task: Task {
                kind: "refund".into(),
                payload: serde_json::json!({"order": 7}),
                result: Some("sent the refund".into()),
                lease_epoch: 2,
                attempts: 2,
                ..crate::fixtures::task(42, "completed", t0())
            },
            runs: vec![first, second],
            effects: vec![Effect {
                id: 1,
                run_id: 101,
                task_id: 42,
                lease_epoch: 1,
                kind: "refund".into(),
                idempotency_key: "task-42-refund".into(),
                created_at: t0(),
            }],
            double_execution: true,
            needs_compensation: true,
            audit: vec![OperatorAction {
                task_id: 42,
                reason: "<script>alert(1)</script>".into(),
                reference: Some("INC-7".into()),
                status_seen: Some(crate::TaskStatus::Leased),
                ..crate::fixtures::action(9, "requeue", "ann", 1, t0())
            }],
            attention: Vec::new(),
            acknowledgements: Vec::new(),
            as_of: t0(),
        }
    }

    #[test]
    fn the_story_names_every_attempt_effect_and_action() {
        let links = TraceLinks::parse("https://t.example/trace/{trace_id}").unwrap();
        let md = task_markdown(&detail(), Some(&links), t0());
        assert!(md.starts_with("# Task #42 — refund\n"), "{md}");
        assert!(md.contains("**executed twice**") && md.contains("**needs compensation**"));
        assert!(md.contains("| attempts | 2 of 3 |"));
        assert!(
            md.contains("## Attempts (2)")
                && md.contains("## Effects (1)")
                && md.contains("## Audit trail (1)")
        );
        assert!(md.contains("| rejected (0 rows: lease lost) | lost_lease |"), "{md}");
        assert!(md.contains("[abc/123](https://t.example/trace/abc%2F123)"), "{md}");
        assert!(md.contains("| task-42-refund | 1 | 101 |"), "{md}");
        assert!(md.contains("Output (discarded: the lease was lost):"));
        assert!(md.contains("| ann | session | requeue | applied | 1 → 2 |"), "{md}");
    }

    #[test]
    fn runner_text_cannot_escape_its_cell_or_its_code_block() {
        let md = task_markdown(&detail(), None, t0());
        // The worker name with a pipe and a line break stays inside its cell, on its row.
        assert!(md.contains(r"| w\|1 forged \| row |"), "{md}");
        assert!(!md.contains("\nforged"), "{md}");
        // The reason's HTML is escaped text.
        assert!(md.contains(r"\<script\>alert(1)\</script\>"), "{md}");
        // An output holding a triple backtick is fenced with four.
        assert!(md.contains("````text\nsent ``` the refund\n````"), "{md}");
        // Without a template the trace id is text, escaped like every runner-written cell.
        assert!(md.contains("| def |"), "{md}");
        let mut detail = detail();
        detail.runs[1].trace_id = Some("a|b\n# forged".into());
        let md = task_markdown(&detail, None, t0());
        assert!(md.contains(r"| a\|b \# forged |"), "{md}");
    }

    #[test]
    fn long_texts_are_cut_with_a_note() {
        let long = "y".repeat(MAX_QUOTED_CHARS + 10);
        let block = fenced(&long);
        assert!(block.contains(&format!("cut at {MAX_QUOTED_CHARS} of {}", MAX_QUOTED_CHARS + 10)));
        assert!(!block.contains(&"y".repeat(MAX_QUOTED_CHARS + 1)));
    }
}
