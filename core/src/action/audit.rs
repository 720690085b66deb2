//! The audit trail's vocabulary and filter: how an outcome is recorded (`applied`,
//! `refused:<code>`) and the audit page's / API's query.

use super::*;
use crate::model::OperatorAction;
use crate::query::ParamError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// `operator_actions.outcome` of an applied action.
pub const APPLIED: &str = "applied";
/// `operator_actions.outcome` of a refused attempt starts with this, then the refusal code.
pub const REFUSED_PREFIX: &str = "refused:";

/// The `outcome` recorded for a refusal with `code`.
pub fn refused_outcome(code: &str) -> String {
    format!("{REFUSED_PREFIX}{code}")
}

/// Which audit entries: every field narrows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
                    let known: Vec<&str> = ActionKind::ALL.iter().map(|k| k.as_str()).collect();
                    ParamError::new("action", format!("{v:?} is not one of {}", known.join(", ")))
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
                    "unknown parameter; expected actor, action, outcome, task, since, until, after, limit",
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
