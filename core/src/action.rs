//! Operator actions: what an operator asks for (re-queue, mark compensated, undo), the rules
//! that check the request before any database work, and the answers — applied, replayed (a
//! double submission), or refused with an explanation of what changed since the operator
//! looked. The store carries them out in one transaction each; the server and the pages only
//! translate. Pure, so the explanations are unit-tested here.

use crate::model::{Effect, OperatorAction, Run, Task};
use crate::query::ParamError;
use crate::state::{Cause, ErrorCause, RunState, Tokens};
use crate::views::double_execution;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The longest reason, reference and request id accepted (characters).
pub const MAX_REASON: usize = 2000;
pub const MAX_REFERENCE: usize = 200;
pub const MAX_REQUEST_ID: usize = 100;
/// A bulk re-queue touches at most this many tasks; a wider filter must be narrowed first.
pub const BULK_MAX: usize = 500;

/// `operator_actions.action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionKind {
    Requeue,
    Compensate,
    Uncompensate,
    /// Takes an attention item (`crate::attention`): changes nothing on the task, says who
    /// has it.
    Acknowledge,
}

impl ActionKind {
    pub const ALL: [ActionKind; 4] =
        [ActionKind::Requeue, ActionKind::Compensate, ActionKind::Uncompensate, ActionKind::Acknowledge];

    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::Requeue => "requeue",
            ActionKind::Compensate => "compensate",
            ActionKind::Uncompensate => "uncompensate",
            ActionKind::Acknowledge => "acknowledge",
        }
    }

    pub fn parse(s: &str) -> Option<ActionKind> {
        ActionKind::ALL.into_iter().find(|k| k.as_str() == s.trim())
    }

    /// How the audit page names it.
    pub fn label(self) -> &'static str {
        match self {
            ActionKind::Requeue => "re-queued",
            ActionKind::Compensate => "marked compensated",
            ActionKind::Uncompensate => "undid compensation",
            ActionKind::Acknowledge => "acknowledged",
        }
    }
}

/// One action on one task, as the API, the pages and the CLI submit it. Which fields matter
/// depends on the kind; [`ActionRequest::validate`] says which are required.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionRequest {
    /// Why: required, written to the audit trail.
    #[serde(default)]
    pub reason: String,
    /// The fencing token the operator's page showed. Required for a re-queue: if the task was
    /// claimed (or re-queued) since, the action is refused rather than applied to a task the
    /// operator has not seen.
    #[serde(default)]
    pub expected_epoch: Option<i64>,
    /// The status the operator's page showed (`leased`, `dead`, …); refused if it changed.
    #[serde(default)]
    pub expected_status: Option<String>,
    /// Re-queue even though a worker holds a live lease: that worker is fenced (its heartbeat
    /// and final write will match zero rows).
    #[serde(default)]
    pub fence: bool,
    /// Compensation only: a ticket, refund id, … (optional).
    #[serde(default)]
    pub reference: Option<String>,
    /// The run the operator acted from (a failure row); recorded in the audit trail.
    #[serde(default)]
    pub run_id: Option<i64>,
    /// A client-chosen key: the same request submitted twice applies once.
    #[serde(default)]
    pub request_id: Option<String>,
    /// Re-queue even though the last run failed with a deterministic cause ([`RetryPolicy`]):
    /// the operator changed what made it fail (a shorter input, a bigger context window).
    #[serde(default)]
    pub retry_deterministic: bool,
    /// Acknowledge only: the item taken (`double_execution`, `unsafe_lost_lease`, `loop`, `dead`); the
    /// reason is the note others see.
    #[serde(default)]
    pub attention: Option<crate::attention::AttentionKind>,
}

/// Failure causes that fail the same way when the task runs again unchanged (issue 14,
/// "Retries that cannot work"): an input too large for the model's context overflows it on
/// every attempt, unlike a timeout or an API error. Re-queueing a task whose last run failed
/// so is refused unless the operator says the cause was fixed; a bulk re-queue by filter
/// leaves such tasks out unless asked. `context_overflow` by default; `--deterministic-causes`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    pub deterministic: Vec<ErrorCause>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { deterministic: vec![ErrorCause::ContextOverflow] }
    }
}

impl RetryPolicy {
    /// A comma-separated list of causes (`context_overflow,other`); empty or `none`: none.
    pub fn parse(list: &str) -> Result<RetryPolicy, String> {
        let list = list.trim();
        if list.is_empty() || list == "none" {
            return Ok(RetryPolicy { deterministic: Vec::new() });
        }
        let mut deterministic = Vec::new();
        for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let cause = part.parse::<ErrorCause>().map_err(|e| e.message)?;
            if !deterministic.contains(&cause) {
                deterministic.push(cause);
            }
        }
        Ok(RetryPolicy { deterministic })
    }

    /// The deterministic cause `latest` (a task's newest run) failed with, if it did: a
    /// re-queue would fail the same way.
    pub fn doomed_by(&self, latest: Option<&Run>) -> Option<ErrorCause> {
        let run = latest.filter(|r| r.state == RunState::Failed)?;
        self.deterministic.iter().copied().find(|c| run.cause == Some(Cause::from(*c)))
    }
}

/// Trims, then checks: reason present and not too long, reference and request id bounded,
/// the epoch present for a re-queue. A failure names the field (400).
impl ActionRequest {
    /// What the audit trail keeps of a request that was refused before validation (a viewer's
    /// attempt): its text trimmed and cut to the lengths a valid request may have, so a refused
    /// request cannot write more than an accepted one.
    pub fn as_recorded_refusal(&self) -> ActionRequest {
        let cut = |s: &str, max: usize| s.trim().chars().filter(|c| *c != '\0').take(max).collect::<String>();
        ActionRequest {
            reason: cut(&self.reason, MAX_REASON),
            reference: self.reference.as_deref().map(|r| cut(r, MAX_REFERENCE)),
            request_id: None,
            ..self.clone()
        }
    }

    pub fn validate(mut self, kind: ActionKind) -> Result<ActionRequest, ParamError> {
        crate::query::refuse_nul("reason", &self.reason)?;
        if let Some(r) = &self.reference {
            crate::query::refuse_nul("reference", r)?;
        }
        if let Some(id) = &self.request_id {
            crate::query::refuse_nul("request_id", id)?;
        }
        self.reason = self.reason.trim().to_string();
        if self.reason.is_empty() {
            return Err(ParamError::new("reason", "a reason is required: it is written to the audit trail"));
        }
        if self.reason.chars().count() > MAX_REASON {
            return Err(ParamError::new("reason", format!("at most {MAX_REASON} characters")));
        }
        self.reference = self.reference.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
        if let Some(r) = &self.reference {
            if kind != ActionKind::Compensate {
                return Err(ParamError::new("reference", "only a compensation takes a reference"));
            }
            if r.chars().count() > MAX_REFERENCE {
                return Err(ParamError::new("reference", format!("at most {MAX_REFERENCE} characters")));
            }
        }
        self.request_id = self.request_id.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
        if let Some(id) = &self.request_id {
            validate_request_id(id)?;
        }
        if kind == ActionKind::Requeue && self.expected_epoch.is_none() {
            return Err(ParamError::new(
                "expected_epoch",
                "required for a re-queue: the lease epoch your page showed, so a task that changed since is not re-queued blind",
            ));
        }
        if matches!(self.expected_epoch, Some(e) if e < 0) {
            return Err(ParamError::new("expected_epoch", "must not be negative"));
        }
        if let Some(s) = &self.expected_status {
            if s.parse::<crate::model::TaskStatus>().is_err() {
                return Err(ParamError::new(
                    "expected_status",
                    format!("{s:?} is not a task status (queued, leased, completed, failed, dead)"),
                ));
            }
        }
        if self.fence && kind != ActionKind::Requeue {
            return Err(ParamError::new("fence", "only a re-queue fences a lease holder"));
        }
        if self.retry_deterministic && kind != ActionKind::Requeue {
            return Err(ParamError::new("retry_deterministic", "only a re-queue retries a task"));
        }
        match (kind, self.attention) {
            (ActionKind::Acknowledge, None) => {
                return Err(ParamError::new(
                    "attention",
                    "required: the item you take (double_execution, unsafe_lost_lease or dead)",
                ))
            }
            (ActionKind::Acknowledge, Some(_)) | (_, None) => {}
            (_, Some(_)) => {
                return Err(ParamError::new("attention", "only an acknowledgement names an item"))
            }
        }
        if matches!(self.run_id, Some(id) if id <= 0) {
            return Err(ParamError::new("run_id", "must be a positive id"));
        }
        Ok(self)
    }
}

/// Letters, digits and `-_.:` only, at most [`MAX_REQUEST_ID`] characters: it ends up in logs and
/// in a unique index.
pub fn validate_request_id(id: &str) -> Result<(), ParamError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_REQUEST_ID
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if ok {
        Ok(())
    } else {
        Err(ParamError::new(
            "request_id",
            format!("1 to {MAX_REQUEST_ID} characters of letters, digits and - _ . :"),
        ))
    }
}

/// Why an action was not applied. Every refusal changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalCode {
    /// The task's epoch or status is not what the operator saw.
    Changed,
    /// A worker holds a live lease and the operator did not choose to fence it.
    LeaseLive,
    /// Re-queue of a task that is already queued.
    AlreadyQueued,
    /// Compensation of a task with no double execution and no lost-lease effect.
    NothingToCompensate,
    AlreadyCompensated,
    NotCompensated,
    /// The request id was already used for a different action or task.
    RequestIdReused,
    /// Bulk: the set of tasks the filter selects is not the one previewed.
    PreviewChanged,
    /// Bulk: the filter selects more than [`BULK_MAX`] tasks.
    TooMany,
    /// Bulk: the set has unsafe tasks and the operator did not acknowledge that their effects
    /// may run again.
    UnsafeNotAcknowledged,
    /// Re-queue of a task whose last run failed with a deterministic cause ([`RetryPolicy`])
    /// without `retry_deterministic`: it would fail the same way.
    DeterministicFailure,
    /// Acknowledgement of an item the task does not have (any more).
    NotAnAttentionItem,
}

impl RefusalCode {
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalCode::Changed => "changed",
            RefusalCode::LeaseLive => "lease_live",
            RefusalCode::AlreadyQueued => "already_queued",
            RefusalCode::NothingToCompensate => "nothing_to_compensate",
            RefusalCode::AlreadyCompensated => "already_compensated",
            RefusalCode::NotCompensated => "not_compensated",
            RefusalCode::RequestIdReused => "request_id_reused",
            RefusalCode::PreviewChanged => "preview_changed",
            RefusalCode::TooMany => "too_many",
            RefusalCode::UnsafeNotAcknowledged => "unsafe_not_acknowledged",
            RefusalCode::DeterministicFailure => "deterministic_failure",
            RefusalCode::NotAnAttentionItem => "not_an_attention_item",
        }
    }
}

/// A refused action: what is wrong, in words an operator can act on, and the task as it is now
/// so the page can show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    pub code: RefusalCode,
    pub message: String,
    pub task: Option<Task>,
}

/// The answer to one action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ActionOutcome {
    /// Done now, in one transaction with its audit row.
    Applied {
        task: Task,
        action: OperatorAction,
    },
    /// The same request id was applied before: nothing was done again.
    Replayed {
        task: Task,
        action: OperatorAction,
    },
    Refused(Refusal),
}

/// The task as a list or a preview shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    pub id: i64,
    pub kind: String,
    pub safety: String,
    pub status: String,
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
        lease_live(&self.status, self.owner.as_deref(), self.lease_expires_at, now)
    }
}

/// What a bulk re-queue would do, shown before it is confirmed ("this will re-queue 37 tasks").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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

/// `operator_actions.outcome` of an applied action.
pub const APPLIED: &str = "applied";
/// `operator_actions.outcome` of a refused attempt starts with this, then the refusal code.
pub const REFUSED_PREFIX: &str = "refused:";

/// The `outcome` recorded for a refusal with `code`.
pub fn refused_outcome(code: &str) -> String {
    format!("{REFUSED_PREFIX}{code}")
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
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum BulkOutcome {
    Applied { actions: Vec<OperatorAction> },
    Replayed { actions: Vec<OperatorAction> },
    Refused { code: RefusalCode, message: String, preview: Option<BulkPreview> },
}

/// Held by a worker whose lease has not expired: re-queueing it would fence a worker that may
/// be making progress.
pub fn lease_live(
    status: &str,
    owner: Option<&str>,
    expires: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    status == "leased" && owner.is_some() && expires.is_some_and(|t| t > now)
}

/// Whether there is a duplicate effect to compensate: the task executed twice, or a run lost
/// its lease after recording an effect (the effect ran under a lease that was no longer its).
pub fn compensable(runs: &[Run], effects: &[Effect], tokens: &Tokens) -> bool {
    double_execution(runs, effects, tokens)
        || runs
            .iter()
            .any(|r| r.state == RunState::LostLease && effects.iter().any(|e| e.lease_epoch == r.lease_epoch))
}

/// Why a re-queue of a task whose last run failed with `cause` would not help, and how to
/// insist (the page, the API and the CLI say the same).
pub fn doomed_retry_message(task_id: i64, cause: ErrorCause) -> String {
    format!(
        "task {task_id}'s last run failed with {}, which fails the same way when the task runs again unchanged. Fix what caused it first (a smaller input, a larger context), then re-queue with retry_deterministic (the page's \"the cause is fixed\" box, the CLI's --retry-deterministic).",
        cause.as_str()
    )
}

/// "1 task", "37 tasks".
pub fn count_tasks(n: impl Into<i64>) -> String {
    match n.into() {
        1 => "1 task".to_string(),
        n => format!("{n} tasks"),
    }
}

/// `2026-11-30 03:12:05 UTC`.
pub fn fmt_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// What changed between what the operator saw (`epoch_seen`, `status_seen`) and `current`, in
/// one sentence: "re-claimed by worker-7 at 2026-11-30 03:12:05 UTC, epoch 5 → 6".
/// `latest_run` is the task's newest run, `latest_action` its newest audit entry.
pub fn explain_change(
    epoch_seen: i64,
    status_seen: Option<&str>,
    current: &Task,
    latest_run: Option<&Run>,
    latest_action: Option<&OperatorAction>,
) -> String {
    let epochs = format!("epoch {epoch_seen} → {}", current.lease_epoch);
    if current.lease_epoch != epoch_seen {
        let by_operator = latest_action.filter(|a| {
            a.action == ActionKind::Requeue.as_str() && a.epoch_after == Some(current.lease_epoch)
        });
        let claimed = latest_run.filter(|r| r.lease_epoch == current.lease_epoch);
        let what = match (by_operator, claimed) {
            (Some(a), _) => format!("re-queued by {} at {}", a.actor, fmt_time(a.created_at)),
            (None, Some(r)) => format!("re-claimed by {} at {}", r.worker, fmt_time(r.claimed_at)),
            (None, None) => "changed".to_string(),
        };
        return format!("{what}, {epochs}; it is {} now", describe_status(current));
    }
    match status_seen {
        Some(seen) if seen != current.status => {
            format!("status {seen} → {} (epoch {epoch_seen} unchanged)", describe_status(current))
        }
        _ => format!("it is {} now", describe_status(current)),
    }
}

/// `leased by worker-3 until 03:14:05 UTC`, `dead after 3 attempts`, `queued`, …
pub fn describe_status(task: &Task) -> String {
    match (task.status.as_str(), task.owner.as_deref(), task.lease_expires_at) {
        ("leased", Some(owner), Some(until)) => format!("leased by {owner} until {}", fmt_time(until)),
        ("leased", Some(owner), None) => format!("leased by {owner}"),
        ("dead", _, _) => format!("dead after {} attempts", task.attempts),
        (status, _, _) => status.to_string(),
    }
}

/// The confirmation's list of exactly what a re-queue changes, from the task as the operator
/// sees it: "status leased → queued", "owner worker-3 cleared (fenced)", "epoch 5 → 6", …
pub fn requeue_changes(task: &Task) -> Vec<String> {
    let mut changes = Vec::new();
    if task.status != "queued" {
        changes.push(format!("status {} → queued", task.status));
    }
    if let Some(owner) = &task.owner {
        changes.push(format!("owner {owner} cleared: its heartbeat and final write will be rejected"));
    }
    changes.push(format!(
        "lease epoch {} → {} (fences every earlier lease)",
        task.lease_epoch,
        task.lease_epoch + 1
    ));
    if task.attempts != 0 {
        changes.push(format!("attempts {} → 0 (a fresh budget of {})", task.attempts, task.max_attempts));
    }
    changes
}

/// Which tasks a bulk re-queue is about: the tasks of the runs a filter matches (the failures
/// page's "all matching"), or an explicit selection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BulkSelection {
    Filter(crate::query::RunFilter),
    Tasks(Vec<i64>),
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
        match r.status.as_str() {
            "completed" if explicit => {
                preview.rerun_completed += 1;
                preview.tasks.push(r);
            }
            "completed" => preview.skipped_completed += 1,
            "queued" => preview.skipped_queued += 1,
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
    preview.unsafe_count = preview.tasks.iter().filter(|t| t.safety == "unsafe").count() as i64;
    preview.token = preview_token(&preview.tasks, options.fence);
    preview
}

/// The checks an action must pass against the task as it is inside the action's transaction
/// (locked). `Ok(())`: apply it. The explanation of a change needs the newest run and audit
/// entry, which the store passes in.
pub struct Decision<'a> {
    pub kind: ActionKind,
    pub request: &'a ActionRequest,
    pub task: &'a Task,
    pub now: DateTime<Utc>,
    /// Whether the task has a duplicate effect to compensate ([`compensable`]).
    pub compensable: bool,
    pub latest_run: Option<&'a Run>,
    pub latest_action: Option<&'a OperatorAction>,
    /// Which failure causes a re-queue cannot fix.
    pub retry: &'a RetryPolicy,
    /// The task's open attention items ([`crate::attention::items`]).
    pub attention: &'a [crate::attention::AttentionKind],
}

impl Decision<'_> {
    /// A refusal carries the task (the page shows it); it is built once per refused action, so
    /// its size does not matter.
    #[allow(clippy::result_large_err)]
    pub fn check(&self) -> Result<(), Refusal> {
        let task = self.task;
        let refuse = |code, message: String| Err(Refusal { code, message, task: Some(task.clone()) });
        let changed_epoch = self.request.expected_epoch.is_some_and(|e| e != task.lease_epoch);
        let changed_status = self.request.expected_status.as_deref().is_some_and(|s| s != task.status);
        if changed_epoch || changed_status {
            let seen = self.request.expected_epoch.unwrap_or(task.lease_epoch);
            let what = explain_change(
                seen,
                self.request.expected_status.as_deref(),
                task,
                self.latest_run,
                self.latest_action,
            );
            return refuse(
                RefusalCode::Changed,
                format!(
                    "task {} changed since you looked: {what}. Nothing was done; review it and try again.",
                    task.id
                ),
            );
        }
        match self.kind {
            ActionKind::Requeue => {
                if task.status == "queued" {
                    return refuse(
                        RefusalCode::AlreadyQueued,
                        format!(
                            "task {} is already queued (epoch {}); a worker will claim it",
                            task.id, task.lease_epoch
                        ),
                    );
                }
                if lease_live(&task.status, task.owner.as_deref(), task.lease_expires_at, self.now)
                    && !self.request.fence
                {
                    let owner = task.owner.as_deref().unwrap_or("a worker");
                    let until = task.lease_expires_at.map(fmt_time).unwrap_or_default();
                    return refuse(
                        RefusalCode::LeaseLive,
                        format!(
                            "{owner} holds a live lease on task {} until {until} (epoch {}). Re-queue with fence to take it: {owner}'s heartbeat and final write will then be rejected.",
                            task.id, task.lease_epoch
                        ),
                    );
                }
                if let Some(cause) = self.retry.doomed_by(self.latest_run) {
                    if !self.request.retry_deterministic {
                        return refuse(
                            RefusalCode::DeterministicFailure,
                            doomed_retry_message(task.id, cause),
                        );
                    }
                }
            }
            ActionKind::Compensate => {
                if let (Some(at), Some(by)) = (task.compensated_at, task.compensated_by.as_deref()) {
                    return refuse(
                        RefusalCode::AlreadyCompensated,
                        format!(
                            "task {} was already marked compensated by {by} at {}: {}",
                            task.id,
                            fmt_time(at),
                            task.compensation_reason.as_deref().unwrap_or("")
                        ),
                    );
                }
                if !self.compensable {
                    return refuse(
                        RefusalCode::NothingToCompensate,
                        format!(
                            "task {} shows no double execution and no effect recorded by a lost-lease run: nothing to compensate",
                            task.id
                        ),
                    );
                }
            }
            ActionKind::Uncompensate => {
                if task.compensated_at.is_none() {
                    return refuse(
                        RefusalCode::NotCompensated,
                        format!("task {} is not marked compensated", task.id),
                    );
                }
            }
            ActionKind::Acknowledge => {
                let wanted = self.request.attention;
                if !wanted.is_some_and(|k| self.attention.contains(&k)) {
                    let open: Vec<&str> = self.attention.iter().map(|k| k.as_str()).collect();
                    return refuse(
                        RefusalCode::NotAnAttentionItem,
                        format!(
                            "task {} is not {} now (open: {}); nothing to acknowledge",
                            task.id,
                            wanted.map(|k| k.label()).unwrap_or("that"),
                            if open.is_empty() { "none".to_string() } else { open.join(", ") }
                        ),
                    );
                }
            }
        }
        Ok(())
    }
}

/// Which audit entries: every field narrows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<ActionKind>,
    /// `Some(true)`: applied actions only; `Some(false)`: refused attempts only.
    pub applied: Option<bool>,
    pub task_id: Option<i64>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

/// One keyset page of the audit trail, newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPage {
    pub actions: Vec<OperatorAction>,
    pub next: Option<String>,
}

/// `actor`, `action`, `task`, `since`, `until`, `after` (a cursor), `limit` → filter and page.
/// The cursor is the run list's ([`crate::Cursor`], over `created_at`).
pub fn parse_audit_query(
    pairs: &[(String, String)],
    now: DateTime<Utc>,
) -> Result<(AuditFilter, crate::PageRequest), ParamError> {
    let mut filter = AuditFilter::default();
    let mut page = crate::PageRequest::default();
    for (key, value) in pairs {
        let v = value.trim();
        if v.is_empty() {
            continue;
        }
        crate::query::refuse_nul(key, v)?;
        match key.as_str() {
            "actor" => filter.actor = Some(v.to_string()),
            "action" => {
                filter.action = Some(ActionKind::parse(v).ok_or_else(|| {
                    ParamError::new("action", format!("{v:?} is not requeue, compensate or uncompensate"))
                })?)
            }
            "outcome" => {
                filter.applied = Some(match v {
                    "applied" => true,
                    "refused" => false,
                    _ => return Err(ParamError::new("outcome", format!("{v:?} is not applied or refused"))),
                })
            }
            "task" => {
                filter.task_id = Some(
                    v.parse()
                        .ok()
                        .filter(|id: &i64| *id > 0)
                        .ok_or_else(|| ParamError::new("task", format!("{v:?} is not a task id")))?,
                )
            }
            "since" => filter.since = Some(crate::query::parse_time("since", v, now)?),
            "until" => filter.until = Some(crate::query::parse_time("until", v, now)?),
            "after" => page.after = Some(crate::Cursor::decode(v)?),
            "limit" => {
                page.limit = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=500).contains(n))
                    .ok_or_else(|| ParamError::new("limit", "an integer from 1 to 500"))?
            }
            other => {
                return Err(ParamError::new(
                    other,
                    "unknown parameter; expected actor, action, task, since, until, after, limit",
                ))
            }
        }
    }
    Ok((filter, page))
}

/// The query string of an audit filter (the page's links; the inverse of [`parse_audit_query`]).
pub fn audit_query_string(filter: &AuditFilter, after: Option<&str>) -> String {
    let mut parts: Vec<(&str, String)> = Vec::new();
    if let Some(a) = &filter.actor {
        parts.push(("actor", a.clone()));
    }
    if let Some(a) = filter.action {
        parts.push(("action", a.as_str().to_string()));
    }
    if let Some(t) = filter.task_id {
        parts.push(("task", t.to_string()));
    }
    if let Some(t) = filter.since {
        parts.push(("since", t.to_rfc3339()));
    }
    if let Some(t) = filter.until {
        parts.push(("until", t.to_rfc3339()));
    }
    if let Some(a) = after {
        parts.push(("after", a.to_string()));
    }
    parts
        .into_iter()
        .map(|(k, v)| format!("{k}={}", crate::query::encode_component(&v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 3, 12, 5).unwrap()
    }

    fn task(status: &str, owner: Option<&str>, epoch: i64) -> Task {
        Task {
            id: 42,
            kind: "reply".into(),
            source: "notification".into(),
            safety: "unsafe".into(),
            status: status.into(),
            payload: serde_json::json!({}),
            result: None,
            owner: owner.map(str::to_string),
            lease_epoch: epoch,
            lease_expires_at: owner.map(|_| t0() + chrono::Duration::seconds(30)),
            attempts: 2,
            max_attempts: 3,
            compensated_at: None,
            compensated_by: None,
            compensation_reason: None,
            compensation_ref: None,
            created_at: t0(),
            updated_at: t0(),
            dead_reason: None,
        }
    }

    fn run(worker: &str, epoch: i64) -> Run {
        Run {
            id: epoch,
            task_id: 42,
            worker: worker.into(),
            lease_epoch: epoch,
            claimed_at: t0(),
            lease_expires_at: t0(),
            heartbeat_at: None,
            finished_at: None,
            output: None,
            error: None,
            error_detail: None,
            completion_rows: None,
            trace_id: None,
            state: RunState::Running,
            cause: None,
            reclaim_reason: None,
        }
    }

    #[test]
    fn a_retry_policy_names_the_causes_a_rerun_cannot_fix() {
        assert_eq!(RetryPolicy::default().deterministic, [ErrorCause::ContextOverflow]);
        assert_eq!(
            RetryPolicy::parse(" timeout ,context_overflow,timeout").unwrap().deterministic,
            [ErrorCause::Timeout, ErrorCause::ContextOverflow]
        );
        assert!(RetryPolicy::parse("none").unwrap().deterministic.is_empty());
        assert!(RetryPolicy::parse("").unwrap().deterministic.is_empty());
        assert!(RetryPolicy::parse("melted").is_err());

        let failed = |cause: ErrorCause| Run {
            state: RunState::Failed,
            cause: Some(cause.into()),
            error: Some(cause.as_str().into()),
            ..run("w1", 1)
        };
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.doomed_by(Some(&failed(ErrorCause::ContextOverflow))),
            Some(ErrorCause::ContextOverflow)
        );
        assert_eq!(policy.doomed_by(Some(&failed(ErrorCause::Timeout))), None);
        assert_eq!(policy.doomed_by(Some(&run("w1", 1))), None, "a running run dooms nothing");
        assert_eq!(policy.doomed_by(None), None);
    }

    #[test]
    fn a_re_claim_is_explained_with_the_worker_time_and_epochs() {
        let now = task("leased", Some("worker-7"), 6);
        let msg = explain_change(5, Some("leased"), &now, Some(&run("worker-7", 6)), None);
        assert!(msg.starts_with("re-claimed by worker-7 at 2026-11-30 03:12:05 UTC, epoch 5 → 6"), "{msg}");
        assert!(msg.contains("leased by worker-7 until"), "{msg}");
    }

    #[test]
    fn an_operator_requeue_is_explained_with_the_actor() {
        let now = task("queued", None, 6);
        let action = OperatorAction {
            id: 1,
            task_id: 42,
            run_id: None,
            action: "requeue".into(),
            actor: "alice".into(),
            reason: "r".into(),
            reference: None,
            epoch_seen: Some(5),
            epoch_after: Some(6),
            status_seen: Some("failed".into()),
            outcome: "applied".into(),
            request_id: None,
            created_at: t0(),
            via: Some("session".into()),
            attention: None,
        };
        let msg = explain_change(5, None, &now, Some(&run("w1", 5)), Some(&action));
        assert_eq!(msg, "re-queued by alice at 2026-11-30 03:12:05 UTC, epoch 5 → 6; it is queued now");
    }

    #[test]
    fn a_status_change_at_the_same_epoch_names_both_statuses() {
        let now = task("completed", None, 5);
        let msg = explain_change(5, Some("leased"), &now, None, None);
        assert_eq!(msg, "status leased → completed (epoch 5 unchanged)");
    }

    #[test]
    fn validation_trims_and_names_the_field() {
        let bad = |r: ActionRequest, k| r.validate(k).unwrap_err().param;
        let base = ActionRequest { reason: "stuck".into(), expected_epoch: Some(3), ..Default::default() };
        assert_eq!(
            bad(ActionRequest { reason: "   ".into(), ..base.clone() }, ActionKind::Requeue),
            "reason"
        );
        assert_eq!(
            bad(ActionRequest { expected_epoch: None, ..base.clone() }, ActionKind::Requeue),
            "expected_epoch"
        );
        assert!(ActionRequest { expected_epoch: None, ..base.clone() }
            .validate(ActionKind::Compensate)
            .is_ok());
        assert_eq!(
            bad(ActionRequest { request_id: Some("a b".into()), ..base.clone() }, ActionKind::Requeue),
            "request_id"
        );
        assert_eq!(
            bad(ActionRequest { reference: Some("T-1".into()), ..base.clone() }, ActionKind::Requeue),
            "reference"
        );
        assert_eq!(bad(ActionRequest { fence: true, ..base.clone() }, ActionKind::Compensate), "fence");
        assert_eq!(
            bad(ActionRequest { expected_status: Some("gone".into()), ..base.clone() }, ActionKind::Requeue),
            "expected_status"
        );
        let ok = ActionRequest { reason: "  stuck \n".into(), reference: Some("  ".into()), ..base }
            .validate(ActionKind::Compensate)
            .unwrap();
        assert_eq!(ok.reason, "stuck");
        assert_eq!(ok.reference, None);
    }

    #[test]
    fn bulk_validation_needs_the_preview_token_and_dedupes_ids() {
        let base = BulkRequeueRequest {
            reason: "sweep".into(),
            preview_token: Some("00aa11bb22cc33dd-2".into()),
            ..Default::default()
        };
        assert!(base.clone().validate().is_ok(), "the count is optional");
        for token in [None, Some(" "), Some("a b"), Some("<script>")] {
            let request = BulkRequeueRequest { preview_token: token.map(str::to_string), ..base.clone() };
            assert_eq!(request.validate().unwrap_err().param, "preview_token", "{token:?}");
        }
        assert_eq!(
            BulkRequeueRequest { expected_count: Some(-1), ..base.clone() }.validate().unwrap_err().param,
            "expected_count"
        );
        let ok = BulkRequeueRequest { task_ids: Some(vec![3, 1, 3]), ..base.clone() }.validate().unwrap();
        assert_eq!(ok.task_ids, Some(vec![1, 3]));
        assert_eq!(
            BulkRequeueRequest { task_ids: Some(vec![]), ..base }.validate().unwrap_err().param,
            "task_ids"
        );
    }

    #[test]
    fn a_preview_token_names_the_set_and_epochs_not_the_count_or_order() {
        let r = |id: i64, epoch: i64| TaskRef {
            id,
            kind: "reply".into(),
            safety: "idempotent".into(),
            status: "dead".into(),
            owner: None,
            lease_epoch: epoch,
            lease_expires_at: None,
            last_failure: None,
        };
        let token = preview_token(&[r(1, 2), r(5, 1)], false);
        assert_eq!(token, preview_token(&[r(5, 1), r(1, 2)], false), "order does not matter");
        assert_ne!(token, preview_token(&[r(1, 2), r(6, 1)], false), "another task, same count");
        assert_ne!(token, preview_token(&[r(1, 3), r(5, 1)], false), "same task, another epoch");
        assert_ne!(token, preview_token(&[r(1, 2), r(5, 1)], true), "fencing is part of it");
        assert!(token.ends_with("-2"), "{token}");
    }

    #[test]
    fn the_confirmation_lists_every_change() {
        let changes = requeue_changes(&task("leased", Some("worker-3"), 5));
        assert_eq!(changes[0], "status leased → queued");
        assert!(changes[1].starts_with("owner worker-3 cleared"));
        assert!(changes[2].starts_with("lease epoch 5 → 6"));
        assert!(changes[3].starts_with("attempts 2 → 0"));
    }

    #[test]
    fn only_an_unexpired_held_lease_is_live() {
        let now = t0();
        assert!(lease_live("leased", Some("w"), Some(now + chrono::Duration::seconds(1)), now));
        assert!(!lease_live("leased", Some("w"), Some(now), now));
        assert!(!lease_live("queued", None, None, now));
    }
}
