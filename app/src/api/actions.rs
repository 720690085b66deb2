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

    /// What a viewer tried, for the audit trail.
    pub enum Attempt<'a> {
        /// One action on one task.
        Task(i64, lastword_core::ActionKind, &'a lastword_core::ActionRequest),
        /// A bulk re-queue: its selection (the page's filter or a selection) and request.
        Bulk(Option<String>, &'a lastword_core::BulkRequeueRequest),
    }

    /// The signed-in operator, or why not (401 nobody, 403 a viewer). A viewer's attempt is
    /// written to the audit trail as refused, task by task.
    pub async fn operator(attempt: Attempt<'_>) -> Result<lastword_core::Principal, ServerFnError> {
        match crate::auth::current_principal() {
            Some(p) if p.can_act() => Ok(p),
            Some(p) => {
                if let Ok(store) = crate::api::ssr::store() {
                    let recorded = match attempt {
                        Attempt::Task(id, kind, request) => {
                            let request = request.as_recorded_refusal();
                            store
                                .record_refusal(id, kind, &request, &p.actor(), "forbidden", now())
                                .await
                                .map(|_| ())
                        }
                        Attempt::Bulk(query, request) => match selection(query, request.task_ids.clone()) {
                            Ok(selection) => store
                                .record_bulk_refusal(&selection, request, &p.actor(), "forbidden", now())
                                .await
                                .map(|_| ()),
                            // An unreadable filter selects nothing to record.
                            Err(_) => Ok(()),
                        },
                    };
                    if let Err(e) = recorded {
                        tracing::error!(error = %e, "recording a viewer's refused attempt failed");
                    }
                }
                Err(refuse(http::StatusCode::FORBIDDEN, lastword_core::auth::viewer_may_not_act(&p.name)))
            }
            None => Err(refuse(http::StatusCode::UNAUTHORIZED, "sign in to act")),
        }
    }

    pub use lastword_core::write_now as now;

    /// What a bulk request selects: the failures page's query string or the ticked tasks
    /// ([`lastword_core::BulkSelection::from_request`], as at the API and the CLI).
    pub fn selection(
        query: Option<String>,
        task_ids: Option<Vec<i64>>,
    ) -> Result<lastword_core::BulkSelection, ServerFnError> {
        let pairs = super::super::ssr::query_pairs(query.as_deref().unwrap_or_default());
        lastword_core::BulkSelection::from_request(&pairs, task_ids, now(), &[])
            .map_err(|e| bad_input(e.to_string()))
    }
}

/// Re-queue, mark compensated or undo it, as the signed-in operator.
#[server(prefix = "/api/fn", endpoint = "act", input = Json, output = crate::api::JsonAnswer)]
pub async fn act_on_task(
    task_id: i64,
    kind: ActionKind,
    request: ActionRequest,
) -> Result<ActionOutcome, ServerFnError> {
    let actor = ssr::operator(ssr::Attempt::Task(task_id, kind, &request)).await?;
    let request = request.validate(kind).map_err(|e| super::ssr::bad_input(e.to_string()))?;
    let store = super::ssr::store()?;
    store
        .act(task_id, kind, &request, &actor.actor(), ssr::now())
        .await
        .map_err(super::ssr::store_error)?
        .ok_or_else(|| super::ssr::not_found(format!("no task {task_id}")))
}

/// What re-queueing every task of the failures page's filter (or of a selection) would do.
#[server(prefix = "/api/fn", endpoint = "requeue_preview", input = Json, output = crate::api::JsonAnswer)]
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
#[server(prefix = "/api/fn", endpoint = "bulk_requeue", input = Json, output = crate::api::JsonAnswer)]
pub async fn bulk_requeue(
    query: Option<String>,
    request: BulkRequeueRequest,
) -> Result<BulkOutcome, ServerFnError> {
    let actor = ssr::operator(ssr::Attempt::Bulk(query.clone(), &request)).await?;
    let request = request.validate().map_err(|e| super::ssr::bad_input(e.to_string()))?;
    let selection = ssr::selection(query, request.task_ids.clone())?;
    let store = super::ssr::store()?;
    store
        .bulk_requeue(&selection, &request, &actor.actor(), ssr::now())
        .await
        .map_err(super::ssr::store_error)
}

/// One page of the audit trail for the audit page's query string.
#[server(prefix = "/api/fn", endpoint = "audit", output = crate::api::JsonAnswer)]
pub async fn get_audit(query: String) -> Result<AuditAnswer, ServerFnError> {
    let pairs = super::ssr::query_pairs(&query);
    let (filter, page) = match lastword_core::action::parse_audit_query(&pairs, ssr::now()) {
        Ok(parsed) => parsed,
        Err(e) => return Ok(AuditAnswer::BadFilter(e)),
    };
    let store = super::ssr::store()?;
    Ok(AuditAnswer::Page(store.audit(&filter, &page).await.map_err(super::ssr::store_error)?))
}
