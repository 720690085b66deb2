//! Bulk re-queue: which tasks a filter or a selection names, the preview that sorts them
//! (re-queued, live, deterministic, skipped), the token that names exactly that set, and the
//! confirmed request that must match it.

use super::*;
use crate::model::{OperatorAction, Safety, TaskStatus};
use crate::query::ParamError;
use crate::state::ErrorCause;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The task as a list or a preview shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskRef {
    pub id: i64,
    pub kind: String,
    pub safety: Safety,
    pub status: TaskStatus,
    pub owner: Option<String>,
    pub lease_epoch: i64,
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// The cause its newest run failed with, when that run failed (not lost its lease).
    #[serde(default)]
    pub last_failure: Option<ErrorCause>,
}

impl TaskRef {
    /// Held by a worker whose lease has not expired.
    pub fn lease_live(&self, now: DateTime<Utc>) -> bool {
        lease_live(self.status, self.owner.as_deref(), self.lease_expires_at, now)
    }
}

/// What a bulk re-queue would do, shown before it is confirmed ("this will re-queue 37 tasks").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkPreview {
    /// The tasks it would re-queue, by id. With `fence`, includes live leases.
    pub tasks: Vec<TaskRef>,
    /// Held by a live lease: skipped unless the operator fences them.
    pub live: Vec<TaskRef>,
    /// Their newest run failed with a deterministic cause ([`RetryPolicy`]): they would fail
    /// the same way, so they are left out unless the operator includes them.
    #[serde(default)]
    pub deterministic: Vec<TaskRef>,
    /// Completed since the matching run: a filter's sweep leaves them alone.
    pub skipped_completed: i64,
    /// Completed tasks an explicit selection re-queues (they will run again).
    pub rerun_completed: i64,
    pub skipped_queued: i64,
    /// The unsafe tasks among `tasks` (their effects may run again).
    pub unsafe_count: i64,
    /// More than [`BULK_MAX`] tasks matched: nothing can be applied until the filter narrows.
    pub too_many: bool,
    /// Names exactly this preview's set (every task id with its epoch, and `fence`): a
    /// confirmation carries it back, and is applied only if the set is still the same — not
    /// merely as large. See [`preview_token`].
    #[serde(default)]
    pub token: String,
}

/// What a bulk re-queue takes that it would otherwise leave out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkOptions {
    /// Tasks held by a live lease (their workers are fenced).
    #[serde(default)]
    pub fence: bool,
    /// Tasks whose newest run failed with a deterministic cause (the operator fixed it).
    #[serde(default)]
    pub include_deterministic: bool,
}

impl BulkOptions {
    /// Live leases taken, deterministic failures left out.
    pub fn fenced() -> BulkOptions {
        BulkOptions { fence: true, include_deterministic: false }
    }
}

/// The token of a preview's set: FNV-1a (64 bits, hex) over the sorted `id:epoch` pairs and
/// the fence flag. Not a secret and not a signature — anyone who may re-queue may re-queue
/// anyway — only a short, stable name for "these tasks at these epochs", so that the page, the
/// API and the CLI can say "apply what I reviewed" across two requests, and any server replica
/// computes the same name.
pub fn preview_token(tasks: &[TaskRef], fence: bool) -> String {
    let mut pairs: Vec<(i64, i64)> = tasks.iter().map(|t| (t.id, t.lease_epoch)).collect();
    pairs.sort_unstable();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    feed(if fence { b"fence;" } else { b"nofence;" });
    for (id, epoch) in pairs {
        feed(format!("{id}:{epoch};").as_bytes());
    }
    format!("{:016x}-{}", hash, tasks.len())
}

/// A confirmed bulk re-queue: the count the operator saw in the preview.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BulkRequeueRequest {
    #[serde(default)]
    pub reason: String,
    /// How many tasks the preview said (optional: the token names the set, count included);
    /// refused (409) if the filter now selects another number.
    #[serde(default)]
    pub expected_count: Option<i64>,
    /// The preview's [`BulkPreview::token`]; refused (409) unless the filter selects exactly
    /// that set of tasks at those epochs now. Required.
    #[serde(default)]
    pub preview_token: Option<String>,
    /// The operator read that unsafe tasks' effects may run again; refused (409) when the set
    /// has an unsafe task and this is not set.
    #[serde(default)]
    pub acknowledge_unsafe: bool,
    #[serde(default)]
    pub fence: bool,
    /// Re-queue tasks whose newest run failed with a deterministic cause too (left out
    /// otherwise; the preview lists them under `deterministic`).
    #[serde(default)]
    pub include_deterministic: bool,
    /// Instead of the query-string filter: exactly these tasks (a selection).
    #[serde(default)]
    pub task_ids: Option<Vec<i64>>,
    #[serde(default)]
    pub request_id: Option<String>,
}

impl BulkRequeueRequest {
    /// A confirmation of exactly what `preview` showed (its token names the tasks and their
    /// epochs), for `reason`; everything else at its default.
    pub fn confirming(preview: &BulkPreview, reason: &str) -> BulkRequeueRequest {
        BulkRequeueRequest {
            reason: reason.into(),
            preview_token: Some(preview.token.clone()),
            ..Default::default()
        }
    }

    /// What this confirmation takes beyond the default.
    pub fn options(&self) -> BulkOptions {
        BulkOptions { fence: self.fence, include_deterministic: self.include_deterministic }
    }

    pub fn validate(mut self) -> Result<BulkRequeueRequest, ParamError> {
        let single = ActionRequest {
            reason: std::mem::take(&mut self.reason),
            expected_epoch: Some(0),
            request_id: self.request_id.take(),
            ..Default::default()
        }
        .validate(ActionKind::Requeue)?;
        self.reason = single.reason;
        self.request_id = single.request_id;
        if self.expected_count.is_some_and(|n| n < 0) {
            return Err(ParamError::new("expected_count", "must not be negative"));
        }
        self.preview_token = self.preview_token.map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
        match &self.preview_token {
            None => {
                return Err(ParamError::new(
                    "preview_token",
                    "required: the token of the preview you reviewed (GET /api/v1/requeue/preview)",
                ))
            }
            Some(t) if t.len() > 64 || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') => {
                return Err(ParamError::new("preview_token", "not a preview token"))
            }
            _ => {}
        }
        if let Some(ids) = &mut self.task_ids {
            if ids.is_empty() {
                return Err(ParamError::new("task_ids", "select at least one task"));
            }
            if ids.iter().any(|id| *id <= 0) {
                return Err(ParamError::new("task_ids", "ids are positive integers"));
            }
            ids.sort_unstable();
            ids.dedup();
            if ids.len() > BULK_MAX {
                return Err(ParamError::new("task_ids", format!("at most {BULK_MAX} tasks at once")));
            }
        }
        Ok(self)
    }
}

/// The answer to a bulk re-queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum BulkOutcome {
    Applied { actions: Vec<OperatorAction> },
    Replayed { actions: Vec<OperatorAction> },
    Refused { code: RefusalCode, message: String, preview: Option<BulkPreview> },
}

/// "1 task", "37 tasks".
pub fn count_tasks(n: impl Into<i64>) -> String {
    match n.into() {
        1 => "1 task".to_string(),
        n => format!("{n} tasks"),
    }
}

/// Which tasks a bulk re-queue is about: the tasks of the runs a filter matches (the failures
/// page's "all matching"), or an explicit selection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum BulkSelection {
    Filter(crate::query::RunFilter),
    Tasks(Vec<i64>),
}

impl BulkSelection {
    /// What a bulk request selects, the same at every door (the JSON API, the page's server
    /// functions, the CLI): the named `task_ids`, or else the run filter of `pairs`
    /// ([`crate::query::parse_bulk_filter`]: failures only unless a state or cause narrows it;
    /// paging ignored). Both at once is ambiguous and refused. `route_params` are the door's own
    /// parameters among `pairs` (the API's `fence`), neither filter nor error.
    pub fn from_request(
        pairs: &[(String, String)],
        task_ids: Option<Vec<i64>>,
        now: DateTime<Utc>,
        route_params: &[&str],
    ) -> Result<BulkSelection, ParamError> {
        let filter: Vec<(String, String)> =
            pairs.iter().filter(|(k, _)| !route_params.contains(&k.as_str())).cloned().collect();
        let filtered = filter.iter().any(|(k, _)| !crate::query::PAGE_PARAMS.contains(&k.as_str()));
        match task_ids {
            Some(_) if filtered => {
                Err(ParamError::new("task_ids", "send either task_ids or a filter in the query, not both"))
            }
            Some(ids) => Ok(BulkSelection::Tasks(ids)),
            None => Ok(BulkSelection::Filter(crate::query::parse_bulk_filter(&filter, now, route_params)?)),
        }
    }
}

/// Sorts the selected tasks (as locked in the bulk transaction) into what a re-queue would do.
/// `refs` holds up to `BULK_MAX + 1` tasks (one more says "too many"). A filter's sweep skips
/// tasks that completed since their failure; an explicit selection (ticked rows) re-queues
/// them, as the task page would — the preview counts them so the operator sees it.
///
/// A task whose newest run failed with a deterministic cause (`retry`) is listed under
/// `deterministic` and re-queued only with `options.include_deterministic`, whichever way it
/// was selected (a ticked row is still a retry that cannot work).
pub fn classify(
    refs: Vec<TaskRef>,
    selection: &BulkSelection,
    options: BulkOptions,
    retry: &RetryPolicy,
    now: DateTime<Utc>,
) -> BulkPreview {
    let explicit = matches!(selection, BulkSelection::Tasks(_));
    let mut preview = BulkPreview { too_many: refs.len() > BULK_MAX, ..Default::default() };
    for r in refs.into_iter().take(BULK_MAX) {
        let doomed = r.last_failure.is_some_and(|c| retry.deterministic.contains(&c));
        match r.status {
            TaskStatus::Completed if explicit => {
                preview.rerun_completed += 1;
                preview.tasks.push(r);
            }
            TaskStatus::Completed => preview.skipped_completed += 1,
            TaskStatus::Queued => preview.skipped_queued += 1,
            _ if r.lease_live(now) => {
                if options.fence {
                    preview.tasks.push(r.clone());
                }
                preview.live.push(r);
            }
            _ if doomed => {
                if options.include_deterministic {
                    preview.tasks.push(r.clone());
                }
                preview.deterministic.push(r);
            }
            _ => preview.tasks.push(r),
        }
    }
    preview.unsafe_count = preview.tasks.iter().filter(|t| t.safety == Safety::Unsafe).count() as i64;
    preview.token = preview_token(&preview.tasks, options.fence);
    preview
}
