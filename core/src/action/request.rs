//! What an operator asks for: the action kinds, the request with its limits and validation
//! (before any database work), and which failure causes a re-queue cannot fix.

use crate::model::Run;
use crate::query::ParamError;
use crate::state::{Cause, ErrorCause, RunState};
use serde::{Deserialize, Serialize};

/// The longest reason, reference and request id accepted (characters).
pub const MAX_REASON: usize = 2000;
pub const MAX_REFERENCE: usize = 200;
pub const MAX_REQUEST_ID: usize = 100;
/// A bulk re-queue touches at most this many tasks; a wider filter must be narrowed first.
pub const BULK_MAX: usize = 500;

string_enum!(
    /// `operator_actions.action`.
    ActionKind, "action" {
        Requeue => "requeue",
        Compensate => "compensate",
        Uncompensate => "uncompensate",
        /// Takes an attention item (`crate::attention`): changes nothing on the task, says who
        /// has it.
        Acknowledge => "acknowledge",
    }
);

impl ActionKind {
    /// Reads an action's name as a form or the CLI gives it (surrounding white space ignored).
    pub fn parse(s: &str) -> Option<ActionKind> {
        s.trim().parse().ok()
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
