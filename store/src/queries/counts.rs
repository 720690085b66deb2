//! Reads that count: the overview's states, causes and series, the attention counts, the
//! workers' activity and the leases held now, and the folds that turn their rows into the
//! wire types. The history-wide counts here are the rollups' oracle (`testing`); pages count
//! from `crate::rollups`.

use super::predicates::*;
use super::sql::{Dialect, SqlBuf, Value};
use chrono::{DateTime, Utc};
use lastword_core::{Bucket, Cause, HeldLease, RunState, Tokens, WorkerSummary};

/// Below this many rows (by the catalogue's estimate) a table's total is counted exactly; above
/// it the estimate stands, marked as one: an exact `COUNT(*)` of 10 M runs took 0.8 s a request.
pub(crate) const EXACT_TOTALS_BELOW: i64 = 100_000;

/// Runs claimed in `[since, until)` counted per state and error.
#[cfg(feature = "testing")] // counts from history: the rollups' oracle in the tests
pub(crate) fn overview_counts(
    d: &Dialect,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    let (mut buf, s, u) = SqlBuf::with_window(now, tokens, since, until);
    let sql = format!(
        "SELECT {} AS state, r.error, COUNT(*) FROM runs r WHERE r.claimed_at >= {s} AND r.claimed_at < {u} \
         GROUP BY 1, 2",
        d.state_sql
    );
    buf.push(&sql);
    buf
}

/// Runs claimed in `[since, until)` counted per time bucket (epoch seconds / `bucket_secs`)
/// and state.
#[cfg(feature = "testing")] // counts from history: the rollups' oracle in the tests
pub(crate) fn overview_series(
    d: &Dialect,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    bucket_secs: i64,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    let (mut buf, s, u) = SqlBuf::with_window(now, tokens, since, until);
    let b = buf.arg(Value::I64(bucket_secs));
    let sql = format!(
        "SELECT {} AS bucket, {} AS state, COUNT(*) FROM runs r \
         WHERE r.claimed_at >= {s} AND r.claimed_at < {u} GROUP BY 1, 2 ORDER BY 1, 2",
        (d.bucket)(&b),
        d.state_sql
    );
    buf.push(&sql);
    buf
}

/// The "needs attention" counts for `[since, until)` in one row: unsafe lost leases, unsafe
/// double executions not compensated (among tasks with runs or effects in the window), silent
/// runs, dead tasks.
pub(crate) fn attention(
    d: &Dialect,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    let (mut buf, s, u) = SqlBuf::with_window(now, tokens, since, until);
    let lost = state_predicate(d, RunState::LostLease);
    let silent = state_predicate(d, RunState::Silent);
    let needs = needs_compensation_predicate(d);
    let sql = format!(
        "SELECT \
           (SELECT COUNT(*) FROM runs r JOIN tasks t ON t.id = r.task_id \
             WHERE r.claimed_at >= {s} AND r.claimed_at < {u} AND t.safety = 'unsafe' AND {lost}), \
           (SELECT COUNT(*) FROM tasks t \
             WHERE t.id IN (SELECT r.task_id FROM runs r WHERE r.claimed_at >= {s} AND r.claimed_at < {u} \
                            UNION SELECT e.task_id FROM effects e WHERE e.created_at >= {s} AND e.created_at < {u}) \
               AND {needs}), \
           (SELECT COUNT(*) FROM runs r WHERE r.claimed_at >= {s} AND r.claimed_at < {u} AND {silent}), \
           (SELECT COUNT(*) FROM tasks t WHERE t.status = 'dead' AND t.updated_at >= {s} AND t.updated_at < {u})"
    );
    buf.push(&sql);
    buf
}

/// The acknowledged part of the attention counts (`lastword_core::attention`), read from the
/// acknowledgements (few rows, each an index lookup by task): dead tasks of the window whose
/// death someone took at its epoch, and unsafe, uncompensated double executions active in the
/// window that someone took since their last compensation. Read by the rollup-backed overview
/// and its oracle alike.
pub(crate) fn attention_taken(since: DateTime<Utc>, until: DateTime<Utc>) -> SqlBuf {
    let mut buf = SqlBuf::default();
    let (s, u) = (buf.arg(Value::Time(since)), buf.arg(Value::Time(until)));
    let applied = lastword_core::action::APPLIED;
    let acks = |item: &str| {
        format!(
            "FROM operator_actions a JOIN tasks t ON t.id = a.task_id \
             WHERE a.action = 'acknowledge' AND a.outcome = '{applied}' AND a.attention = '{item}'"
        )
    };
    let sql = format!(
        "SELECT \
           (SELECT COUNT(DISTINCT t.id) {dead} AND a.epoch_after = t.lease_epoch AND t.status = 'dead' \
              AND t.updated_at >= {s} AND t.updated_at < {u}), \
           (SELECT COUNT(DISTINCT t.id) {double} AND t.safety = 'unsafe' AND t.compensated_at IS NULL \
              AND NOT EXISTS (SELECT 1 FROM operator_actions c WHERE c.task_id = t.id AND c.action = 'compensate' \
                                AND c.outcome = '{applied}' AND c.id > a.id) \
              AND (EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id AND r.claimed_at >= {s} AND r.claimed_at < {u}) \
                   OR EXISTS (SELECT 1 FROM effects e WHERE e.task_id = t.id AND e.created_at >= {s} AND e.created_at < {u}))), \
           (SELECT COUNT(*) FROM runs r JOIN tasks t ON t.id = r.task_id \
              WHERE r.completion_rows = 0 AND r.finished_at IS NOT NULL AND r.claimed_at >= {s} AND r.claimed_at < {u} \
                AND t.safety = 'unsafe' AND t.compensated_at IS NULL \
                AND EXISTS (SELECT 1 FROM operator_actions a WHERE a.task_id = t.id AND a.action = 'acknowledge' \
                              AND a.outcome = '{applied}' AND a.attention = 'unsafe_lost_lease' \
                              AND NOT EXISTS (SELECT 1 FROM operator_actions c WHERE c.task_id = t.id \
                                                AND c.action = 'compensate' AND c.outcome = '{applied}' AND c.id > a.id)))",
        dead = acks("dead"),
        double = acks("double_execution"),
    );
    buf.push(&sql);
    buf
}

/// Per worker with runs claimed since `since`: runs, failures, last claim, last heartbeat.
#[cfg(feature = "testing")] // counts from history: the rollups' oracle in the tests
pub(crate) fn worker_activity(
    d: &Dialect,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    tokens: &Tokens,
) -> SqlBuf {
    let mut buf = SqlBuf::with_state_params(now, tokens);
    let s = buf.arg(Value::Time(since));
    let failure = any_of(RunState::ALL.iter().filter(|st| st.is_failure()).map(|st| state_predicate(d, *st)));
    let sql = format!(
        "SELECT r.worker, COUNT(*), COUNT(CASE WHEN {failure} THEN 1 END), MAX(r.claimed_at), MAX(r.heartbeat_at) \
         FROM runs r WHERE r.claimed_at >= {s} GROUP BY r.worker"
    );
    buf.push(&sql);
    buf
}

/// Every lease held now, with the claim and heartbeat of the run that holds it.
pub(crate) const HELD_LEASES: &str =
    "SELECT t.owner, t.id, t.lease_epoch, t.lease_expires_at, r.claimed_at, \
     r.heartbeat_at FROM tasks t LEFT JOIN runs r ON r.task_id = t.id AND r.lease_epoch = t.lease_epoch \
     WHERE t.status = 'leased' AND t.owner IS NOT NULL ORDER BY t.owner, t.id";

fn parse_state(s: &str) -> RunState {
    // The SQL twin only emits known states (see `rows::RunRow`).
    s.parse::<RunState>().unwrap_or(RunState::Running)
}

/// A `(state, error, count)` row of the grouped count queries.
pub(crate) type StateErrorCount = (String, Option<String>, i64);
/// Counts per state and per cause, every value of each vocabulary listed in order.
pub(crate) type StateAndCauseCounts = (Vec<(RunState, i64)>, Vec<(Cause, i64)>);

/// `(state, error, count)` rows → counts per state and per failure cause, each in its
/// vocabulary's order with zeros included.
pub(crate) fn fold_state_error_counts(rows: &[StateErrorCount]) -> StateAndCauseCounts {
    let mut by_state: Vec<(RunState, i64)> = RunState::ALL.iter().map(|s| (*s, 0)).collect();
    let mut by_cause: Vec<(Cause, i64)> = Cause::ALL.iter().map(|c| (*c, 0)).collect();
    for (state, error, n) in rows {
        let state = parse_state(state);
        if let Some(slot) = by_state.iter_mut().find(|(s, _)| *s == state) {
            slot.1 += n;
        }
        if let Some(cause) = crate::rows::cause_of(state, error.as_deref()) {
            if let Some(slot) = by_cause.iter_mut().find(|(c, _)| *c == cause) {
                slot.1 += n;
            }
        }
    }
    (by_state, by_cause)
}

/// At most this many buckets are filled in with zeros; a finer series is returned sparse.
pub(crate) const MAX_FILLED_BUCKETS: i64 = 2000;

/// `(bucket, state, count)` rows (bucket = epoch seconds / `bucket_secs`) → one [`Bucket`]
/// per bucket from `since` to `until`, oldest first, every state listed.
pub(crate) fn fold_series(
    rows: &[(i64, String, i64)],
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    bucket_secs: i64,
) -> Vec<Bucket> {
    let first = since.timestamp().div_euclid(bucket_secs);
    // `until` is exclusive: a run claimed exactly at `until` is not counted.
    let last = (until.timestamp() - i64::from(until.timestamp_subsec_nanos() == 0)).div_euclid(bucket_secs);
    let mut keys: Vec<i64> = if last >= first && last - first < MAX_FILLED_BUCKETS {
        (first..=last).collect()
    } else {
        Vec::new()
    };
    keys.extend(rows.iter().map(|(b, _, _)| *b));
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .map(|b| {
            let mut counts: Vec<(RunState, i64)> = RunState::ALL.iter().map(|s| (*s, 0)).collect();
            for (_, state, n) in rows.iter().filter(|(rb, _, _)| *rb == b) {
                let state = parse_state(state);
                if let Some(slot) = counts.iter_mut().find(|(s, _)| *s == state) {
                    slot.1 += n;
                }
            }
            Bucket { start: DateTime::from_timestamp(b.saturating_mul(bucket_secs), 0), counts }
        })
        .collect()
}

/// Per-worker activity in the window, merged with the leases held now.
pub(crate) type ActivityRow = (String, i64, i64, Option<DateTime<Utc>>, Option<DateTime<Utc>>);
/// A held lease: owner, task, epoch, expiry, and the claim and heartbeat of its run.
pub(crate) type LeaseRow =
    (String, i64, i64, Option<DateTime<Utc>>, Option<DateTime<Utc>>, Option<DateTime<Utc>>);

pub(crate) fn fold_workers(
    activity: Vec<ActivityRow>,
    leases: Vec<LeaseRow>,
    now: DateTime<Utc>,
) -> Vec<WorkerSummary> {
    let mut by_name: std::collections::BTreeMap<String, WorkerSummary> = std::collections::BTreeMap::new();
    let blank = |worker: &str| WorkerSummary {
        worker: worker.to_string(),
        runs: 0,
        failures: 0,
        last_claim_at: None,
        last_heartbeat_at: None,
        leases: Vec::new(),
        holds_lapsed_lease: false,
    };
    for (worker, runs, failures, last_claim, last_heartbeat) in activity {
        let w = by_name.entry(worker.clone()).or_insert_with(|| blank(&worker));
        w.runs = runs;
        w.failures = failures;
        w.last_claim_at = last_claim;
        w.last_heartbeat_at = last_heartbeat;
    }
    for (owner, task_id, lease_epoch, lease_expires_at, claimed_at, heartbeat_at) in leases {
        let w = by_name.entry(owner.clone()).or_insert_with(|| blank(&owner));
        w.last_claim_at = w.last_claim_at.max(claimed_at);
        w.last_heartbeat_at = w.last_heartbeat_at.max(heartbeat_at);
        w.holds_lapsed_lease |= lease_expires_at.is_some_and(|e| e <= now);
        w.leases.push(HeldLease { task_id, lease_epoch, lease_expires_at });
    }
    by_name.into_values().collect()
}
