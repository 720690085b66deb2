//! The audit trail's keyset page.

use super::predicates::{where_clause, window_conditions};
use super::sql::{SqlBuf, Value};
use lastword_core::{Cursor, PageRequest};

/// One keyset page of the audit trail, newest first (`operator_actions_created_idx`, or the
/// actor index when filtered by actor).
pub(crate) fn audit(filter: &lastword_core::AuditFilter, page: &PageRequest) -> SqlBuf {
    let mut buf = SqlBuf::default();
    let mut conds = Vec::new();
    if let Some(actor) = &filter.actor {
        conds.push(format!("actor = {}", buf.arg(Value::Text(actor.clone()))));
    }
    if let Some(action) = filter.action {
        conds.push(format!("action = {}", buf.arg(Value::Text(action.as_str().to_string()))));
    }
    match filter.applied {
        Some(true) => conds.push(format!("outcome = '{}'", lastword_core::action::APPLIED)),
        Some(false) => conds.push(format!("outcome LIKE '{}%'", lastword_core::action::REFUSED_PREFIX)),
        None => {}
    }
    if let Some(task) = filter.task_id {
        conds.push(format!("task_id = {}", buf.arg(Value::I64(task))));
    }
    window_conditions(&mut buf, &mut conds, "created_at", filter.since, filter.until);
    if let Some(Cursor { claimed_at, id }) = page.after {
        let at = buf.arg(Value::Time(claimed_at));
        let id = buf.arg(Value::I64(id));
        conds
            .push(format!("created_at <= {at} AND (created_at < {at} OR (created_at = {at} AND id < {id}))"));
    }
    let limit = buf.arg(Value::I64(i64::from(page.limit) + 1));
    let sql = format!(
        "SELECT {} FROM operator_actions{} ORDER BY created_at DESC, id DESC LIMIT {limit}",
        crate::rows::ACTION_COLUMNS,
        where_clause(&conds)
    );
    buf.push(&sql);
    buf
}
