//! Attention items and their acknowledgements (issue 14, "Acknowledge and hand over").
//!
//! A task needs someone when it executed twice and awaits compensation, when an unsafe run lost
//! its lease (its effects may have run twice), or when it is dead. Whoever takes one
//! acknowledges it with a note ("investigating — refund team paged"); everyone else sees it
//! taken. An acknowledgement is an operator action (`acknowledge`, audited like the others,
//! `operator_actions.attention` naming the item) so the trail says who took what and when, and
//! a second person taking it over is a second entry.
//!
//! An acknowledgement holds for the incident it was made on: a dead task is the same incident
//! while the task's epoch is unchanged (a re-queue and a new death is a new one); a double
//! execution and an unsafe lost lease stay taken until the task is compensated (a compensation
//! ends them; an undo reopens them untaken), whatever the epoch.

use crate::model::{Effect, OperatorAction, Run, Task};
use crate::state::{RunState, Tokens};
use serde::{Deserialize, Serialize};

/// What on a task needs someone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionKind {
    /// Unsafe, executed twice, not compensated.
    DoubleExecution,
    /// An unsafe task with a run whose final write was rejected (its effects may have run twice).
    UnsafeLostLease,
    /// Every attempt used.
    Dead,
}

impl AttentionKind {
    pub const ALL: [AttentionKind; 3] =
        [AttentionKind::DoubleExecution, AttentionKind::UnsafeLostLease, AttentionKind::Dead];

    pub fn as_str(self) -> &'static str {
        match self {
            AttentionKind::DoubleExecution => "double_execution",
            AttentionKind::UnsafeLostLease => "unsafe_lost_lease",
            AttentionKind::Dead => "dead",
        }
    }

    pub fn parse(s: &str) -> Option<AttentionKind> {
        AttentionKind::ALL.into_iter().find(|k| k.as_str() == s.trim())
    }

    /// How a page names it.
    pub fn label(self) -> &'static str {
        match self {
            AttentionKind::DoubleExecution => "executed twice, awaiting compensation",
            AttentionKind::UnsafeLostLease => "unsafe task lost its lease",
            AttentionKind::Dead => "dead",
        }
    }

    /// Whether an acknowledgement applied at `epoch_at` (the task's epoch then: the audit
    /// row's `epoch_after`) still holds for a task at `epoch`.
    fn holds(self, epoch_at: Option<i64>, epoch: i64) -> bool {
        match self {
            AttentionKind::DoubleExecution | AttentionKind::UnsafeLostLease => true,
            AttentionKind::Dead => epoch_at == Some(epoch),
        }
    }
}

/// The items open on a task, from its rows (the task page and the store's check agree).
pub fn items(task: &Task, runs: &[Run], effects: &[Effect], tokens: &Tokens) -> Vec<AttentionKind> {
    let double = crate::views::double_execution(runs, effects, tokens);
    let mut out = Vec::new();
    if crate::views::needs_compensation(task, double) {
        out.push(AttentionKind::DoubleExecution);
    }
    if task.safety == "unsafe"
        && task.compensated_at.is_none()
        && runs.iter().any(|r| r.state == RunState::LostLease)
    {
        out.push(AttentionKind::UnsafeLostLease);
    }
    if task.status == "dead" {
        out.push(AttentionKind::Dead);
    }
    out
}

/// The acknowledgements that hold now, newest first, one per item that is still open: `audit`
/// is the task's trail (newest first), `open` its items.
pub fn current(task: &Task, audit: &[OperatorAction], open: &[AttentionKind]) -> Vec<OperatorAction> {
    use crate::action::ActionKind;
    let mut out: Vec<OperatorAction> = Vec::new();
    for a in audit {
        // Older than the newest compensation: that incident ended (an undo reopens it untaken).
        if a.action == ActionKind::Compensate.as_str() && a.refused().is_none() {
            break;
        }
        if a.action != ActionKind::Acknowledge.as_str() || a.refused().is_some() {
            continue;
        }
        let Some(kind) = a.attention.as_deref().and_then(AttentionKind::parse) else { continue };
        let taken = out.iter().any(|o| o.attention.as_deref() == Some(kind.as_str()));
        if open.contains(&kind) && kind.holds(a.epoch_after, task.lease_epoch) && !taken {
            out.push(a.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn task(status: &str, epoch: i64) -> Task {
        let t0 = Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, 0).unwrap();
        Task {
            id: 7,
            kind: "refund".into(),
            source: "notification".into(),
            safety: "unsafe".into(),
            status: status.into(),
            payload: serde_json::json!({}),
            result: None,
            owner: None,
            lease_epoch: epoch,
            lease_expires_at: None,
            attempts: 1,
            max_attempts: 1,
            compensated_at: None,
            compensated_by: None,
            compensation_reason: None,
            compensation_ref: None,
            created_at: t0,
            updated_at: t0,
        }
    }

    fn ack(kind: AttentionKind, epoch: i64, actor: &str, id: i64) -> OperatorAction {
        OperatorAction {
            id,
            task_id: 7,
            run_id: None,
            action: "acknowledge".into(),
            actor: actor.into(),
            reason: "investigating".into(),
            reference: None,
            epoch_seen: Some(epoch),
            epoch_after: Some(epoch),
            status_seen: Some("dead".into()),
            outcome: crate::action::APPLIED.into(),
            request_id: None,
            created_at: Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, 0).unwrap(),
            via: Some("session".into()),
            attention: Some(kind.as_str().into()),
        }
    }

    #[test]
    fn a_dead_task_is_an_item_and_its_newest_acknowledgement_holds_for_its_epoch() {
        let dead = task("dead", 3);
        assert_eq!(items(&dead, &[], &[], &Tokens::default()), [AttentionKind::Dead]);
        assert!(items(&task("completed", 3), &[], &[], &Tokens::default()).is_empty());
        // Newest first: bob took it over from ann.
        let trail = [ack(AttentionKind::Dead, 3, "bob", 2), ack(AttentionKind::Dead, 3, "ann", 1)];
        let now = current(&dead, &trail, &[AttentionKind::Dead]);
        assert_eq!(now.iter().map(|a| a.actor.as_str()).collect::<Vec<_>>(), ["bob"]);
        // Re-queued and dead again: a new incident, nobody has it.
        assert!(current(&task("dead", 5), &trail, &[AttentionKind::Dead]).is_empty());
        // A refused attempt or another action is no acknowledgement; a closed item has none.
        let mut refused = ack(AttentionKind::Dead, 3, "eve", 3);
        refused.outcome = "refused:forbidden".into();
        assert!(current(&dead, &[refused], &[AttentionKind::Dead]).is_empty());
        assert!(current(&dead, &trail, &[]).is_empty());
    }

    #[test]
    fn a_double_execution_stays_taken_across_epochs() {
        let later = task("completed", 9);
        let trail = [ack(AttentionKind::DoubleExecution, 2, "ann", 1)];
        assert_eq!(current(&later, &trail, &[AttentionKind::DoubleExecution]).len(), 1);
        // A compensation ends it; an undo later reopens it untaken.
        let mut compensated = ack(AttentionKind::DoubleExecution, 9, "carol", 2);
        compensated.action = "compensate".into();
        compensated.attention = None;
        let after_undo = [compensated, ack(AttentionKind::DoubleExecution, 2, "ann", 1)];
        assert!(current(&later, &after_undo, &[AttentionKind::DoubleExecution]).is_empty());
        assert_eq!(AttentionKind::parse("unsafe_lost_lease"), Some(AttentionKind::UnsafeLostLease));
        assert_eq!(AttentionKind::parse("nope"), None);
    }
}
