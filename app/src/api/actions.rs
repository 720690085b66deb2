//! Operator actions from the pages: the task page's re-queue / compensate / undo, the failures
//! page's bulk re-queue with its preview, and the audit page. Each checks that the signed-in
//! principal may act (the JSON API's extractor does the same for scripts), then makes the one
//! store call whose transaction decides. Refusals come back as values, not errors, so the page
//! can show what changed.

use lastword_core::{
    ActionKind, ActionOutcome, ActionRequest, AuditPage, BulkOutcome, BulkPreview, BulkRequeueRequest,
};
use leptos::prelude::*;
use leptos::server_fn::codec::Json;

/// The answer of the audit page: a page, or the parameter that was wrong.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum AuditAnswer {
    Page(AuditPage),
    BadFilter(lastword_core::ParamError),
}

#[cfg(feature = "ssr")]
mod ssr {
    use crate::api::ssr::{bad_input, refuse};
    use leptos::prelude::ServerFnError;

    /// The signed-in operator, or why not (401 nobody, 403 a viewer). A viewer's attempt on a
    /// task is written to the audit trail as refused (`task`: the task and what was tried).
    pub async fn operator(
        task: Option<(i64, lastword_core::ActionKind, &lastword_core::ActionRequest)>,
    ) -> Result<lastword_core::Principal, ServerFnError> {
        match crate::auth::current_principal() {
            Some(p) if p.can_act() => Ok(p),
            Some(p) => {
                if let (Some((id, kind, request)), Ok(store)) = (task, crate::api::ssr::store()) {
                    let request = request.as_recorded_refusal();
                    if let Err(e) =
                        store.record_refusal(id, kind, &request, &p.actor(), "forbidden", now()).await
                    {
                        tracing::error!(error = %e, task = id, "recording a viewer's refused attempt failed");
                    }
                }
                Err(refuse(
                    http::StatusCode::FORBIDDEN,
                    format!("viewer {} may not act; operator role required", p.name),
                ))
            }
            None => Err(refuse(http::StatusCode::UNAUTHORIZED, "sign in to act")),
        }
    }

    pub use lastword_core::write_now as now;

    /// A run filter from the failures page's query string (paging ignored).
    pub fn selection(
        query: Option<String>,
        task_ids: Option<Vec<i64>>,
    ) -> Result<lastword_core::BulkSelection, ServerFnError> {
        if let Some(ids) = task_ids {
            return Ok(lastword_core::BulkSelection::Tasks(ids));
        }
        let pairs = super::super::ssr::query_pairs(query.as_deref().unwrap_or_default());
        let filter =
            lastword_core::query::parse_bulk_filter(&pairs, now()).map_err(|e| bad_input(e.to_string()))?;
        Ok(lastword_core::BulkSelection::Filter(filter))
    }
}

/// Re-queue, mark compensated or undo it, as the signed-in operator.
#[server(prefix = "/api/fn", endpoint = "act", input = Json)]
pub async fn act_on_task(
    task_id: i64,
    kind: ActionKind,
    request: ActionRequest,
) -> Result<ActionOutcome, ServerFnError> {
    let actor = ssr::operator(Some((task_id, kind, &request))).await?;
    let request = request.validate(kind).map_err(|e| super::ssr::bad_input(e.to_string()))?;
    let store = super::ssr::store()?;
    store
        .act(task_id, kind, &request, &actor.actor(), ssr::now())
        .await
        .map_err(super::ssr::store_error)?
        .ok_or_else(|| super::ssr::not_found(format!("no task {task_id}")))
}

/// What re-queueing every task of the failures page's filter (or of a selection) would do.
#[server(prefix = "/api/fn", endpoint = "requeue_preview", input = Json)]
pub async fn requeue_preview(
    query: Option<String>,
    task_ids: Option<Vec<i64>>,
    options: lastword_core::BulkOptions,
) -> Result<BulkPreview, ServerFnError> {
    let selection = ssr::selection(query, task_ids)?;
    let store = super::ssr::store()?;
    store.requeue_preview(&selection, options, ssr::now()).await.map_err(super::ssr::store_error)
}

/// Applies a previewed bulk re-queue if its count still holds.
#[server(prefix = "/api/fn", endpoint = "bulk_requeue", input = Json)]
pub async fn bulk_requeue(
    query: Option<String>,
    request: BulkRequeueRequest,
) -> Result<BulkOutcome, ServerFnError> {
    let actor = ssr::operator(None).await?;
    let request = request.validate().map_err(|e| super::ssr::bad_input(e.to_string()))?;
    let selection = ssr::selection(query, request.task_ids.clone())?;
    let store = super::ssr::store()?;
    store
        .bulk_requeue(&selection, &request, &actor.actor(), ssr::now())
        .await
        .map_err(super::ssr::store_error)
}

/// One page of the audit trail for the audit page's query string.
#[server(prefix = "/api/fn", endpoint = "audit")]
pub async fn get_audit(query: String) -> Result<AuditAnswer, ServerFnError> {
    let pairs = super::ssr::query_pairs(&query);
    let (filter, page) = match lastword_core::action::parse_audit_query(&pairs, ssr::now()) {
        Ok(parsed) => parsed,
        Err(e) => return Ok(AuditAnswer::BadFilter(e)),
    };
    let store = super::ssr::store()?;
    Ok(AuditAnswer::Page(store.audit(&filter, &page).await.map_err(super::ssr::store_error)?))
}
