//! The failures page's bulk re-queue, as the page owns it: the preview (asked again whenever
//! the operator changes an option that changes the set), the apply, and what an answer does to
//! the page. `components::bulk` draws it.

use crate::api::actions::{bulk_requeue, requeue_preview};
use crate::components::actions::new_request_id;
use crate::components::bulk::{BulkPanel, BulkScope, BulkUi, Confirmed, PreviewBody};
use lastword_core::action::count_tasks;
use lastword_core::{ActionKind, BulkOutcome, BulkRequeueRequest};
use leptos::prelude::*;

/// The bulk re-queue as the page shows it, with a wasm chunk of its own loaded on first use: it
/// opens only on an operator's click, never with the page, so the page's first visit does not
/// download it (docs/bundle-size.md). Called in a `Transition`: the first call waits for the chunk.
#[lazy]
pub fn bulk_requeue_panel(scope: BulkScope, open: RwSignal<bool>, done: Callback<String>) -> AnyView {
    view! { <BulkRequeue scope open done /> }.into_any()
}

/// The open panel; `open` is cleared by Cancel and after an applied re-queue, when `done` gets
/// the sentence to show.
#[component]
fn BulkRequeue(scope: BulkScope, open: RwSignal<bool>, done: Callback<String>) -> impl IntoView {
    let ui = BulkUi::new();
    // One per confirmation: a double click or a retried request applies once.
    let request_id = StoredValue::new(new_request_id(ActionKind::Requeue));
    let refusal = RwSignal::new(None::<String>);
    let (query, task_ids) = match scope.clone() {
        BulkScope::Filter(q) => (Some(q), None),
        BulkScope::Tasks(ids) => (None, Some(ids)),
    };
    let preview = {
        let (query, task_ids) = (query.clone(), task_ids.clone());
        Resource::new(
            move || ui.options(),
            move |options| requeue_preview(query.clone(), task_ids.clone(), options),
        )
    };
    let apply = Action::new(move |confirmed: &Confirmed| {
        let request = BulkRequeueRequest {
            reason: confirmed.reason.clone(),
            expected_count: Some(confirmed.count),
            preview_token: Some(confirmed.token.clone()),
            acknowledge_unsafe: confirmed.unsafe_ack,
            fence: confirmed.fence,
            include_deterministic: confirmed.include_deterministic,
            task_ids: task_ids.clone(),
            request_id: Some(request_id.get_value()),
        };
        bulk_requeue(query.clone(), request)
    });
    Effect::new(move |_| {
        if let Some(answer) = apply.value().get() {
            match answer {
                Ok(BulkOutcome::Applied { actions }) | Ok(BulkOutcome::Replayed { actions }) => {
                    let ids: Vec<String> = actions.iter().map(|a| format!("#{}", a.task_id)).collect();
                    done.run(format!("Re-queued {}: {}.", count_tasks(actions.len() as i64), ids.join(", ")));
                    open.set(false);
                }
                Ok(BulkOutcome::Refused { message, .. }) => {
                    // A new preview, a new confirmation, a new request id.
                    request_id.set_value(new_request_id(ActionKind::Requeue));
                    refusal.set(Some(message));
                    preview.refetch();
                }
                Err(e) => refusal.set(Some(format!("Could not re-queue: {e}"))),
            }
        }
    });
    let send = Callback::new(move |confirmed: Confirmed| {
        apply.dispatch(confirmed);
    });
    let pending = Signal::derive(move || apply.pending().get());
    let close = Callback::new(move |()| open.set(false));

    view! {
        <BulkPanel scope=scope refusal=refusal.into()>
            <Transition fallback=|| {
                view! { <p class="muted">"Counting…"</p> }
            }>
                {move || {
                    preview
                        .get()
                        .map(|p| match p {
                            Err(e) => {
                                view! {
                                    <p class="banner banner-error" role="alert">
                                        {format!("Could not preview: {e}")}
                                    </p>
                                }
                                    .into_any()
                            }
                            Ok(p) => {
                                view! {
                                    <PreviewBody preview=p ui=ui apply=send pending=pending close=close />
                                }
                                    .into_any()
                            }
                        })
                }}
            </Transition>
        </BulkPanel>
    }
}
