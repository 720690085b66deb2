//! Attention items and their acknowledgements (issue 14, "Acknowledge and hand over").
//!
//! A task needs someone when it executed twice and awaits compensation, when an unsafe run lost
//! its lease (its effects may have run twice), when it is in a re-claim loop (its newest
//! [`LOOP_CLAIMS`] finished attempts all failed and it is still being retried: a poison task that
//! kills or stalls every worker that takes it), or when it is dead. Whoever takes one
//! acknowledges it with a note ("investigating — refund team paged"); everyone else sees it
//! taken. An acknowledgement is an operator action (`acknowledge`, audited like the others,
//! `operator_actions.attention` naming the item) so the trail says who took what and when, and
//! a second person taking it over is a second entry.
//!
//! An acknowledgement holds for the incident it was made on: a dead task is the same incident
//! while the task's epoch is unchanged (a re-queue and a new death is a new one); a loop is the
//! same incident while its streak of failed attempts lasts (an acknowledgement made during the
//! streak holds for its later claims; one made before a healthy run does not); a double
//! execution and an unsafe lost lease stay taken until the task is compensated (a compensation
//! ends them; an undo reopens them untaken), whatever the epoch.

use crate::model::{Effect, OperatorAction, Run, Safety, Task, TaskStatus};
use crate::state::{RunState, Tokens};

string_enum!(
    /// What on a task needs someone.
    AttentionKind, "attention" {
        /// Unsafe, executed twice, not compensated.
        DoubleExecution => "double_execution",
        /// An unsafe task with a run whose final write was rejected (its effects may have run twice).
        UnsafeLostLease => "unsafe_lost_lease",
        /// Claimed again and again without reaching a terminal token ([`in_loop`]).
        Loop => "loop",
        /// Every attempt used.
        Dead => "dead",
    }
);

/// Failed attempts in a row, newest first, that make a task still being retried a re-claim loop.
/// The SQL twin (the store's count for `/metrics` and the notifier) uses the same number, and
/// so does the predicate of its index (migration 0013): change them together (a test checks).
pub const LOOP_CLAIMS: usize = 3;

impl AttentionKind {
    /// A kind as a query parameter or a row names it (surrounding blanks ignored).
    pub fn parse(s: &str) -> Option<AttentionKind> {
        s.trim().parse().ok()
    }

    /// How a page names it.
    pub fn label(self) -> &'static str {
        match self {
            AttentionKind::DoubleExecution => "executed twice, awaiting compensation",
            AttentionKind::UnsafeLostLease => "unsafe task lost its lease",
            AttentionKind::Loop => "re-claim loop",
            AttentionKind::Dead => "dead",
        }
    }

    /// Whether an acknowledgement applied at `epoch_at` (the task's epoch then: the audit
    /// row's `epoch_after`) still holds for a task at `epoch` whose loop streak (if any) began
    /// at `loop_from`.
    fn holds(self, epoch_at: Option<i64>, epoch: i64, loop_from: Option<i64>) -> bool {
        match self {
            AttentionKind::DoubleExecution | AttentionKind::UnsafeLostLease => true,
            AttentionKind::Loop => matches!((epoch_at, loop_from), (Some(at), Some(from)) if at >= from),
            AttentionKind::Dead => epoch_at == Some(epoch),
        }
    }
}

/// A task still being retried (`queued` or `leased`), claimed at least [`LOOP_CLAIMS`] times
/// since it was last re-queued (`attempts`; an operator's re-queue starts it afresh), whose
/// newest [`LOOP_CLAIMS`] finished attempts all failed (a run still under its lease is not
/// finished and does not break the streak): the epoch of the oldest attempt of that streak,
/// else `None`. `runs` oldest first, as a task's detail holds them.
pub fn loop_streak(task: &Task, runs: &[Run]) -> Option<i64> {
    let claims = usize::try_from(task.attempts).unwrap_or(0);
    if !matches!(task.status, TaskStatus::Queued | TaskStatus::Leased) || claims < LOOP_CLAIMS {
        return None;
    }
    let mut ended = runs.iter().rev().filter(|r| r.state != RunState::Running);
    let streak: Vec<&Run> = ended.by_ref().take(LOOP_CLAIMS).collect();
    (streak.len() == LOOP_CLAIMS && streak.iter().all(|r| r.state.is_failure()))
        .then(|| streak.last().map(|r| r.lease_epoch))
        .flatten()
}

/// Whether `task` is in a re-claim loop ([`loop_streak`]).
pub fn in_loop(task: &Task, runs: &[Run]) -> bool {
    loop_streak(task, runs).is_some()
}

/// The items open on a task, from its rows (the task page and the store's check agree).
pub fn items(task: &Task, runs: &[Run], effects: &[Effect], tokens: &Tokens) -> Vec<AttentionKind> {
    let double = crate::views::double_execution(runs, effects, tokens);
    let mut out = Vec::new();
    if crate::views::needs_compensation(task, double) {
        out.push(AttentionKind::DoubleExecution);
    }
    // Only while a compensation can close it: the lost run recorded an effect (its side effect
    // ran under a lease that was no longer its own). The notifier's SQL twin is
    // `lastword_store::alerts::open_items`.
    let lost_with_effect = runs
        .iter()
        .any(|r| r.state == RunState::LostLease && effects.iter().any(|e| e.lease_epoch == r.lease_epoch));
    if task.safety == Safety::Unsafe && task.compensated_at.is_none() && lost_with_effect {
        out.push(AttentionKind::UnsafeLostLease);
    }
    if in_loop(task, runs) {
        out.push(AttentionKind::Loop);
    }
    if task.status == TaskStatus::Dead {
        out.push(AttentionKind::Dead);
    }
    out
}

/// The acknowledgements that hold now, newest first, one per item that is still open: `audit`
/// is the task's trail (newest first), `runs` its attempts (oldest first), `open` its items.
pub fn current(
    task: &Task,
    runs: &[Run],
    audit: &[OperatorAction],
    open: &[AttentionKind],
) -> Vec<OperatorAction> {
    use crate::action::ActionKind;
    let loop_from = loop_streak(task, runs);
    let mut out: Vec<OperatorAction> = Vec::new();
    for a in audit {
        // Older than the newest compensation: that incident ended (an undo reopens it untaken).
        if a.action == ActionKind::Compensate && a.refused().is_none() {
            break;
        }
        if a.action != ActionKind::Acknowledge || a.refused().is_some() {
            continue;
        }
        let Some(kind) = a.attention else { continue };
        let taken = out.iter().any(|o| o.attention == Some(kind));
        if open.contains(&kind) && kind.holds(a.epoch_after, task.lease_epoch, loop_from) && !taken {
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
            kind: "refund".into(),
            lease_epoch: epoch,
            max_attempts: 1,
            ..crate::fixtures::task(7, status, t0)
        }
    }

    fn ack(kind: AttentionKind, epoch: i64, actor: &str, id: i64) -> OperatorAction {
        let at = Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, 0).unwrap();
        OperatorAction {
            task_id: 7,
            reason: "investigating".into(),
            status_seen: Some(TaskStatus::Dead),
            attention: Some(kind),
            ..crate::fixtures::action(id, "acknowledge", actor, epoch, at)
        }
    }

    #[test]
    fn a_dead_task_is_an_item_and_its_newest_acknowledgement_holds_for_its_epoch() {
        let dead = task("dead", 3);
        assert_eq!(items(&dead, &[], &[], &Tokens::default()), [AttentionKind::Dead]);
        assert!(items(&task("completed", 3), &[], &[], &Tokens::default()).is_empty());
        // Newest first: bob took it over from ann.
        let trail = [ack(AttentionKind::Dead, 3, "bob", 2), ack(AttentionKind::Dead, 3, "ann", 1)];
        let now = current(&dead, &[], &trail, &[AttentionKind::Dead]);
        assert_eq!(now.iter().map(|a| a.actor.as_str()).collect::<Vec<_>>(), ["bob"]);
        // Re-queued and dead again: a new incident, nobody has it.
        assert!(current(&task("dead", 5), &[], &trail, &[AttentionKind::Dead]).is_empty());
        // A refused attempt or another action is no acknowledgement; a closed item has none.
        let mut refused = ack(AttentionKind::Dead, 3, "eve", 3);
        refused.outcome = "refused:forbidden".into();
        assert!(current(&dead, &[], &[refused], &[AttentionKind::Dead]).is_empty());
        assert!(current(&dead, &[], &trail, &[]).is_empty());
    }

    #[test]
    fn a_double_execution_stays_taken_across_epochs() {
        let later = task("completed", 9);
        let trail = [ack(AttentionKind::DoubleExecution, 2, "ann", 1)];
        assert_eq!(current(&later, &[], &trail, &[AttentionKind::DoubleExecution]).len(), 1);
        // A compensation ends it; an undo later reopens it untaken.
        let mut compensated = ack(AttentionKind::DoubleExecution, 9, "carol", 2);
        compensated.action = crate::action::ActionKind::Compensate;
        compensated.attention = None;
        let after_undo = [compensated, ack(AttentionKind::DoubleExecution, 2, "ann", 1)];
        assert!(current(&later, &[], &after_undo, &[AttentionKind::DoubleExecution]).is_empty());
        assert_eq!(AttentionKind::parse("unsafe_lost_lease"), Some(AttentionKind::UnsafeLostLease));
        assert_eq!(AttentionKind::parse("nope"), None);
    }

    fn run(epoch: i64, state: RunState) -> Run {
        let t = Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, 0).unwrap() + chrono::Duration::minutes(epoch);
        Run { task_id: 7, state, ..crate::fixtures::run(epoch, t) }
    }

    #[test]
    fn a_task_whose_newest_attempts_all_failed_is_a_loop_until_it_ends() {
        use RunState::*;
        let retried = |status: &str, epoch: i64| Task { attempts: 4, ..task(status, epoch) };
        let leased = retried("leased", 4);
        let streak = [run(1, Silent), run(2, LostLease), run(3, Failed), run(4, Running)];
        // The attempt under its lease does not break the streak; it began at epoch 1.
        assert_eq!(loop_streak(&leased, &streak), Some(1));
        assert!(items(&leased, &streak, &[], &Tokens::default()).contains(&AttentionKind::Loop));
        // Two failures after a healthy run are not yet a loop; a finished or dead task is none.
        let short = [run(1, Acted), run(2, Silent), run(3, EmptyOutput)];
        assert_eq!(loop_streak(&leased, &short), None);
        assert_eq!(loop_streak(&retried("dead", 4), &streak), None);
        assert_eq!(loop_streak(&retried("completed", 4), &streak), None);
        // Re-queued by an operator (attempts start again): not a loop until claimed again.
        assert_eq!(loop_streak(&task("queued", 5), &streak), None);
        // An acknowledgement made during the streak holds for its later claims; one made
        // before it (an earlier loop that ended) does not.
        let open = [AttentionKind::Loop];
        let during = [ack(AttentionKind::Loop, 2, "ann", 1)];
        assert_eq!(current(&leased, &streak, &during, &open).len(), 1);
        let later = [run(0, Acted), run(5, Silent), run(6, Silent), run(7, Failed)];
        assert_eq!(loop_streak(&retried("queued", 7), &later), Some(5));
        assert!(current(&retried("queued", 7), &later, &during, &open).is_empty());
    }

    #[test]
    fn an_unsafe_lost_lease_is_an_item_only_when_its_run_recorded_an_effect() {
        let t = task("completed", 2);
        let runs = [run(1, RunState::LostLease), run(2, RunState::Acted)];
        let unsafe_lost = |effects: &[Effect]| {
            items(&t, &runs, effects, &Tokens::default()).contains(&AttentionKind::UnsafeLostLease)
        };
        assert!(!unsafe_lost(&[]), "nothing ran twice that a compensation could undo");
        let effect = |epoch| Effect {
            id: epoch,
            run_id: epoch,
            task_id: 7,
            lease_epoch: epoch,
            kind: "charge".into(),
            idempotency_key: format!("k{epoch}"),
            created_at: Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, 0).unwrap(),
        };
        assert!(!unsafe_lost(&[effect(2)]), "the effect is the accepted run's");
        assert!(unsafe_lost(&[effect(1)]));
        let compensated = Task { compensated_at: Some(Utc::now()), ..t.clone() };
        assert!(!items(&compensated, &runs, &[effect(1)], &Tokens::default())
            .contains(&AttentionKind::UnsafeLostLease));
    }
}
