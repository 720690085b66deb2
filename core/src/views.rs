//! The answers the dashboard's pages and the JSON API are built from, and the per-task rules
//! (double execution, needs compensation) that turn rows into "needs attention".

use crate::model::{Effect, OperatorAction, Run, Task};
use crate::state::{trim_token, Cause, RunState, Tokens};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Lists and the timeline carry at most this many characters of a run's `output` and
/// `error_detail`. A runner's output is untrusted and unbounded (a 300 KB blob in one row made
/// a whole page slow); a row needs a glance, and the whole text is one click away on the task
/// page and at `/api/v1/runs/{id}`.
pub const LIST_TEXT_PREFIX: usize = 300;
/// The timeline's prefix: a tooltip line, for up to 5 000 bars in one answer.
pub const TIMELINE_TEXT_PREFIX: usize = 80;
/// At most this many runs asked for by id at once (the runs one live batch named, merged into
/// the timeline the browser has): about a second's changes on a 200-worker fleet. A bigger
/// batch is cheaper to answer by fetching the window again.
pub const TIMELINE_RUNS_CAP: usize = 500;

/// A run in a list, with the task facts a list row shows. Its `output` and `error_detail` are
/// prefixes of at most [`LIST_TEXT_PREFIX`] characters ([`TIMELINE_TEXT_PREFIX`] on the
/// timeline); `text_truncated` says one was cut.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunListItem {
    #[serde(flatten)]
    pub run: Run,
    pub kind: String,
    pub source: crate::model::Source,
    pub safety: crate::model::Safety,
    #[serde(default)]
    pub text_truncated: bool,
}

/// One keyset page of runs, newest claim first; `next` is the cursor for the following page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunPage {
    pub runs: Vec<RunListItem>,
    pub next: Option<String>,
}

/// How many runs per failure cause match a filter (ignoring its own cause selection).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CauseFacets {
    pub counts: Vec<(Cause, i64)>,
    /// When part of the counts came from rollups: the oldest moment those parts were computed
    /// at (every change committed before it is counted; later changes to past runs show within
    /// a refresh, ~2 s). Absent when everything was counted at request time, and from older
    /// servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_at: Option<DateTime<Utc>>,
    /// Causes whose count reached the cap of a filter the rollups cannot answer (text, kind,
    /// source, task, worker): the count is a lower bound, shown as "10 000+".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capped: Vec<Cause>,
}

/// Counts over a time window for the overview.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Overview {
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    pub by_state: Vec<(RunState, i64)>,
    pub by_cause: Vec<(Cause, i64)>,
    /// Runs per time bucket and state, oldest bucket first, for the small chart.
    pub series: Vec<Bucket>,
    pub attention: Attention,
    /// How fresh the parts that came from rollups are (see [`CauseFacets::counted_at`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_at: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Bucket {
    pub start: Option<DateTime<Utc>>,
    pub counts: Vec<(RunState, i64)>,
}

/// What an on-call engineer must look at, each a link to the filtered list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Attention {
    /// Lost-lease completions of unsafe tasks in the window.
    pub unsafe_lost_leases: i64,
    /// Unsafe tasks executed twice and not marked compensated.
    pub needs_compensation: i64,
    /// Runs that never said how they ended (lease lapsed, unfinished).
    pub silent_runs: i64,
    /// Tasks that used all their attempts.
    pub dead_tasks: i64,
    /// Tasks in a re-claim loop now, whatever the window (`crate::attention::loop_streak`).
    #[serde(default)]
    pub loops: i64,
    /// The first few of them, oldest id first, for links.
    #[serde(default)]
    pub loop_tasks: Vec<i64>,
    /// How many of those someone has acknowledged (`crate::attention`): the rest are open.
    #[serde(default)]
    pub taken: AttentionTaken,
}

/// The acknowledged part of [`Attention`]'s task counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttentionTaken {
    pub needs_compensation: i64,
    pub dead_tasks: i64,
    #[serde(default)]
    pub loops: i64,
    /// Lost-lease runs in the window of unsafe tasks someone acknowledged that item of (since
    /// the task's newest compensation), runs like [`Attention::unsafe_lost_leases`].
    #[serde(default)]
    pub unsafe_lost_leases: i64,
}

/// A worker seen in a window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerSummary {
    pub worker: String,
    pub runs: i64,
    pub failures: i64,
    pub last_claim_at: Option<DateTime<Utc>>,
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    /// Tasks whose lease this worker holds now.
    pub leases: Vec<HeldLease>,
    /// True when it holds a lease that already expired (paused, hung, or dead without a word).
    pub holds_lapsed_lease: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeldLease {
    pub task_id: i64,
    pub lease_epoch: i64,
    pub lease_expires_at: Option<DateTime<Utc>>,
}

/// Everything the task page and `GET /api/v1/tasks/{id}` show.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskDetail {
    #[serde(flatten)]
    pub task: Task,
    pub runs: Vec<Run>,
    pub effects: Vec<Effect>,
    pub double_execution: bool,
    pub needs_compensation: bool,
    pub audit: Vec<OperatorAction>,
    /// What on the task needs someone now (`crate::attention`).
    #[serde(default)]
    pub attention: Vec<crate::attention::AttentionKind>,
    /// Who has taken which of those items: the acknowledgements that hold, newest first.
    #[serde(default)]
    pub acknowledgements: Vec<OperatorAction>,
    /// The time the rows were read (the server's clock). Whatever is drawn relative to "now" (a
    /// running attempt's bar, whether its lease has lapsed, whether a re-queue must fence) is
    /// drawn as of this instant, so the server's HTML and the browser's hydration agree.
    pub as_of: DateTime<Utc>,
}

/// A run that finished having acted: `acted`, or a lost lease whose discarded output was an
/// action (not blank, not a token, no error).
pub fn run_acted(run: &Run, tokens: &Tokens) -> bool {
    match run.state {
        RunState::Acted => true,
        RunState::LostLease => {
            let out = run.output.as_deref().map(trim_token).unwrap_or("");
            run.error.is_none()
                && !out.is_empty()
                && out != trim_token(&tokens.no_action)
                && out != trim_token(&tokens.skip)
        }
        _ => false,
    }
}

/// Effects recorded under two or more lease epochs, or two or more runs that acted.
pub fn double_execution(runs: &[Run], effects: &[Effect], tokens: &Tokens) -> bool {
    let mut epochs: Vec<i64> = effects.iter().map(|e| e.lease_epoch).collect();
    epochs.sort_unstable();
    epochs.dedup();
    epochs.len() >= 2 || runs.iter().filter(|r| run_acted(r, tokens)).count() >= 2
}

/// An unsafe task executed twice, not yet marked compensated.
pub fn needs_compensation(task: &Task, double_execution: bool) -> bool {
    task.safety == crate::model::Safety::Unsafe && double_execution && task.compensated_at.is_none()
}

impl TaskDetail {
    /// Whether there is a duplicate effect to compensate ([`crate::action::compensable`], from
    /// the flags the server decided with its tokens, so the page needs none).
    pub fn compensable(&self) -> bool {
        self.double_execution || crate::action::lost_lease_effect(&self.runs, &self.effects)
    }

    /// Assembles the detail and decides the two flags from the rows.
    pub fn new(
        task: Task,
        runs: Vec<Run>,
        effects: Vec<Effect>,
        audit: Vec<OperatorAction>,
        tokens: &Tokens,
        as_of: DateTime<Utc>,
    ) -> Self {
        let double = double_execution(&runs, &effects, tokens);
        let needs = needs_compensation(&task, double);
        let attention = crate::attention::items(&task, &runs, &effects, tokens);
        let acknowledgements = crate::attention::current(&task, &runs, &audit, &attention);
        TaskDetail {
            task,
            runs,
            effects,
            double_execution: double,
            needs_compensation: needs,
            audit,
            attention,
            acknowledgements,
            as_of,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn run(epoch: i64, state: RunState, output: Option<&str>, error: Option<&str>) -> Run {
        let t = Utc.timestamp_opt(1_800_000_000, 0).unwrap();
        Run {
            finished_at: Some(t),
            output: output.map(str::to_string),
            error: error.map(str::to_string),
            completion_rows: Some(1),
            state,
            ..crate::fixtures::run(epoch, t)
        }
    }

    fn effect(epoch: i64) -> Effect {
        Effect {
            idempotency_key: "k".into(),
            ..crate::fixtures::effect(epoch, Utc.timestamp_opt(1_800_000_000, 0).unwrap())
        }
    }

    #[test]
    fn double_execution_rules() {
        let tk = Tokens::default();
        use RunState::*;
        // Effects under two epochs.
        assert!(double_execution(&[], &[effect(1), effect(2)], &tk));
        // Two effects under one epoch are one execution.
        assert!(!double_execution(&[], &[effect(1), effect(1)], &tk));
        // A lost lease that acted plus the accepted re-run.
        let lost = run(1, LostLease, Some("sent reply"), None);
        let acted = run(2, Acted, Some("sent reply"), None);
        assert!(double_execution(&[lost.clone(), acted.clone()], &[], &tk));
        // A lost lease whose output was a token did nothing visible.
        let lost_quiet = run(1, LostLease, Some(" skip "), None);
        assert!(!double_execution(&[lost_quiet, acted.clone()], &[], &tk));
        // A lost lease carrying an error did not act.
        let lost_err = run(1, LostLease, Some("x"), Some("timeout"));
        assert!(!double_execution(&[lost_err, acted], &[], &tk));
    }
}
