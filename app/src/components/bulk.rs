//! The failures page's bulk re-queue: of the rows an operator ticked, or of every task the
//! current filter matches. It first shows a preview from the server ("this will re-queue 37
//! tasks", how many are unsafe, what is skipped and why), then sends back the preview's token
//! (naming exactly the tasks and epochs the operator reviewed) and the unsafe acknowledgement;
//! the server re-checks both in the applying transaction and refuses if the set moved.

use crate::api::actions::{bulk_requeue, requeue_preview};
use crate::components::actions::{new_request_id, Checkbox};
use lastword_core::action::{count_tasks, MAX_REASON};
use lastword_core::{ActionKind, BulkOptions, BulkOutcome, BulkPreview, BulkRequeueRequest};
use leptos::prelude::*;

/// What the panel re-queues.
#[derive(Clone, Debug, PartialEq)]
pub enum BulkScope {
    /// Every task with a run matching the failures page's query string.
    Filter(String),
    /// The ticked rows' tasks.
    Tasks(Vec<i64>),
}

/// The panel; `open` is cleared by Cancel, and `done` runs after an applied re-queue.
#[component]
pub fn BulkRequeuePanel(scope: BulkScope, open: RwSignal<bool>, done: Callback<String>) -> impl IntoView {
    let fence = RwSignal::new(false);
    let include_deterministic = RwSignal::new(false);
    let reason = RwSignal::new(String::new());
    let unsafe_ack = RwSignal::new(false);
    let request_id = StoredValue::new(new_request_id(ActionKind::Requeue));
    let message = RwSignal::new(None::<(bool, String)>);
    let (query, task_ids) = match scope.clone() {
        BulkScope::Filter(q) => (Some(q), None),
        BulkScope::Tasks(ids) => (None, Some(ids)),
    };
    let preview = {
        let (query, task_ids) = (query.clone(), task_ids.clone());
        Resource::new(
            move || BulkOptions { fence: fence.get(), include_deterministic: include_deterministic.get() },
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
                Ok(BulkOutcome::Refused { message: m, .. }) => {
                    // A new preview, a new confirmation, a new request id.
                    request_id.set_value(new_request_id(ActionKind::Requeue));
                    message.set(Some((false, m)));
                    preview.refetch();
                }
                Err(e) => message.set(Some((false, format!("Could not re-queue: {e}")))),
            }
        }
    });
    let what = match &scope {
        BulkScope::Filter(_) => "every task with a failure matching the current filter".to_string(),
        BulkScope::Tasks(ids) => format!("the {} selected tasks", ids.len()),
    };

    view! {
        <section class="confirm bulk" data-testid="bulk-panel" aria-label="Bulk re-queue">
            <h3>{format!("Re-queue {what}")}</h3>
            {move || message.get().map(|(_, m)| view! { <p class="banner banner-error" role="alert" data-testid="bulk-refused">{m}</p> })}
            <Suspense fallback=|| view! { <p class="muted">"Counting…"</p> }>
                {move || preview.get().map(|p| match p {
                    Err(e) => view! { <p class="banner banner-error" role="alert">{format!("Could not preview: {e}")}</p> }.into_any(),
                    Ok(p) => view! { <PreviewBody preview=p fence=fence include_deterministic=include_deterministic reason=reason unsafe_ack=unsafe_ack apply=apply open=open /> }.into_any(),
                })}
            </Suspense>
        </section>
    }
}

/// What the operator confirmed: the preview they read and their answers to it.
#[derive(Clone, Debug)]
struct Confirmed {
    token: String,
    count: i64,
    reason: String,
    fence: bool,
    include_deterministic: bool,
    unsafe_ack: bool,
}

#[component]
fn PreviewBody(
    preview: BulkPreview,
    fence: RwSignal<bool>,
    include_deterministic: RwSignal<bool>,
    reason: RwSignal<String>,
    unsafe_ack: RwSignal<bool>,
    apply: Action<Confirmed, Result<BulkOutcome, ServerFnError>>,
    open: RwSignal<bool>,
) -> impl IntoView {
    let count = preview.tasks.len() as i64;
    let unsafe_count = preview.unsafe_count;
    let live = preview.live.clone();
    let deterministic = preview.deterministic.clone();
    if preview.too_many {
        return view! {
            <p class="banner banner-error" data-testid="bulk-too-many">
                {format!("More than {} tasks match: narrow the filter (a time window, a cause, a worker) first.", lastword_core::action::BULK_MAX)}
            </p>
            <button type="button" class="btn btn-quiet" on:click=move |_| open.set(false)>"Close"</button>
        }
        .into_any();
    }
    let can_apply = move || {
        count > 0
            && !reason.get().trim().is_empty()
            && (unsafe_count == 0 || unsafe_ack.get())
            && !apply.pending().get()
    };
    let token = preview.token.clone();
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        apply.dispatch(Confirmed {
            token: token.clone(),
            count,
            reason: reason.get_untracked(),
            fence: fence.get_untracked(),
            include_deterministic: include_deterministic.get_untracked(),
            unsafe_ack: unsafe_ack.get_untracked(),
        });
    };
    view! {
        <form on:submit=submit>
            <p class="preview-count" data-testid="bulk-count">{format!("This will re-queue {}.", count_tasks(count))}</p>
            <ul class="muted">
                <li>"Each: status → queued, owner cleared, lease epoch + 1 (fencing any earlier holder), attempts → 0."</li>
                {(preview.skipped_completed > 0).then(|| view! { <li>{format!("Skipped: {} completed since their failure (select them, or use the task page, to run them again).", preview.skipped_completed)}</li> })}
                {(preview.rerun_completed > 0).then(|| view! { <li data-testid="bulk-rerun"><strong>{format!("{} of them completed since their failure and will run again.", preview.rerun_completed)}</strong></li> })}
                {(preview.skipped_queued > 0).then(|| view! { <li>{format!("Skipped: {} already queued.", preview.skipped_queued)}</li> })}
            </ul>
            {(!live.is_empty()).then(|| {
                let holders: Vec<String> = live.iter().map(|t| format!("#{} ({})", t.id, t.owner.clone().unwrap_or_default())).collect();
                view! {
                    <label class="fence" data-testid="bulk-fence">
                        <Checkbox checked=fence />
                        {format!(" Also fence {} tasks held by a live lease: {}", holders.len(), holders.join(", "))}
                    </label>
                }
            })}
            {(!deterministic.is_empty()).then(|| {
                let doomed: Vec<String> = deterministic.iter().map(|t| {
                    format!("#{} ({})", t.id, t.last_failure.map(|c| c.as_str()).unwrap_or("?"))
                }).collect();
                view! {
                    <label class="fence" data-testid="bulk-deterministic">
                        <Checkbox checked=include_deterministic testid="bulk-include-deterministic" />
                        {format!(
                            " Also re-queue {} whose last run failed with a cause a re-run does not fix (the cause is fixed): {}",
                            count_tasks(doomed.len() as i64), doomed.join(", ")
                        )}
                    </label>
                }
            })}
            {(unsafe_count > 0).then(|| view! {
                <div class="banner banner-warn" data-testid="bulk-unsafe">
                    <strong>{format!("{unsafe_count} of them are unsafe: their effects may run again.")}</strong>
                    <label>
                        <Checkbox checked=unsafe_ack testid="bulk-unsafe-ack" />
                        " I understand"
                    </label>
                </div>
            })}
            <label class="field">
                "Reason (required, goes to the audit trail)"
                <textarea data-testid="bulk-reason" required=true maxlength=MAX_REASON rows="2" prop:value=move || reason.get()
                    on:input=move |ev| reason.set(event_target_value(&ev))></textarea>
            </label>
            <div class="action-buttons">
                <button type="submit" class="btn btn-danger" data-testid="bulk-confirm" disabled=move || !can_apply()>
                    {format!("Re-queue {}", count_tasks(count))}
                </button>
                <button type="button" class="btn btn-quiet" on:click=move |_| open.set(false)>"Cancel"</button>
            </div>
        </form>
    }
    .into_any()
}
