//! The values that cross the runner API: what a worker holds ([`Lease`]), how it may end a run
//! ([`Outcome`]), and what the database answered ([`Heartbeat`], [`Finish`], [`EffectRecorded`]).
//! The types make the contract's rules hard to break by accident: a successful finish needs a
//! non-blank [`ActionMessage`] or one of the two tokens, and a lost lease is its own variant.

use chrono::{DateTime, Utc};
use lastword_core::{ErrorCause, Safety, Source, TaskStatus};
use std::fmt;

/// A task this worker holds, under the fencing token `epoch`. Every write for the run is guarded
/// by (`task_id`, this worker, `epoch`). Cloning is allowed so a call that failed on a transient
/// error can be retried; a run is still finished at most once (a second finish is refused).
#[derive(Clone, Debug, PartialEq)]
pub struct Lease {
    pub task_id: i64,
    /// The `runs` row of this attempt.
    pub run_id: i64,
    /// The fencing token: `tasks.lease_epoch` as set by this claim.
    pub epoch: i64,
    pub claimed_at: DateTime<Utc>,
    /// When the lease lapses unless a heartbeat extends it.
    pub expires_at: DateTime<Utc>,
    pub kind: String,
    pub source: Source,
    pub safety: Safety,
    pub payload: serde_json::Value,
    /// Claims of this task so far, this one included.
    pub attempts: i32,
    pub max_attempts: i32,
}

/// The text of a run that did something. Never empty or blank: the contract reserves an empty
/// output for failures, so a successful empty finish cannot be expressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionMessage(String);

/// Returned by [`ActionMessage::new`] for empty or white-space-only text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("an action message must not be empty or blank (use Outcome::NoActionNeeded, Outcome::Skip or Outcome::Failed)")]
pub struct BlankMessage;

impl ActionMessage {
    /// Refuses text that is empty after trimming the same white space the dashboard trims.
    pub fn new(text: impl Into<String>) -> Result<Self, BlankMessage> {
        let text = text.into();
        if lastword_core::trim_token(&text).is_empty() {
            Err(BlankMessage)
        } else {
            Ok(ActionMessage(text))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ActionMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a run ends: exactly one of these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The run did something; the message says what (written to `runs.output`). A message
    /// that equals one of the tokens (after trimming) reads as that token on the dashboard.
    Acted(ActionMessage),
    /// A notification that owed nothing: writes the no-action token.
    NoActionNeeded,
    /// A tick with nothing to do: writes the skip token.
    Skip,
    /// The run failed: writes `runs.error = cause`, `runs.error_detail = detail`. The task is
    /// re-queued until `max_attempts`, then `dead`.
    Failed { cause: ErrorCause, detail: String },
}

/// The answer to a heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heartbeat {
    /// The lease now lasts until `until` (also stored in the [`Lease`]).
    Extended { until: DateTime<Utc> },
    /// The guarded update matched no row: someone else holds the task now (or nobody, after an
    /// operator requeue or a finish). `holder`/`epoch` are the task's current owner and token.
    /// The worker should stop; its final write will be rejected.
    Lost { holder: Option<String>, epoch: i64 },
}

/// The answer to a finish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The final write matched the task (`completion_rows = 1`); the task is now `status`
    /// (`completed`, or `queued`/`dead` after a failure).
    Accepted { status: TaskStatus },
    /// The final write matched nothing (`completion_rows = 0`): the lease was lost, the output
    /// was recorded on the run but discarded for the task. `holder`/`epoch` are the task's
    /// current owner and fencing token.
    LostLease { holder: Option<String>, epoch: i64 },
}

/// The answer to recording a side effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EffectRecorded {
    /// The `effects` row (the existing one when the same key was recorded by this run before).
    pub id: i64,
    /// Whether this worker still held the lease (owner and epoch matched) when it was recorded.
    /// False means the effect ran under a stale token: likely a double execution.
    pub lease_current: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_messages_refuse_blank_text() {
        assert_eq!(ActionMessage::new(""), Err(BlankMessage));
        assert_eq!(ActionMessage::new(" \t\r\n\x0B\x0C"), Err(BlankMessage));
        let m = ActionMessage::new("  replied to #42 ").unwrap();
        assert_eq!(m.as_str(), "  replied to #42 ", "kept as written");
    }
}
