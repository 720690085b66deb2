//! The task page's actions: re-queue, mark compensated, undo. Each opens a confirmation that
//! names exactly what will change (from `lastword_core::action::requeue_changes`), asks for a
//! reason, and, where it applies, for the explicit choice to fence a live lease holder and an
//! acknowledgement that an unsafe task's effects may run again. The form's state lives in
//! [`ActionUi`], owned by the page, so a refetch of the task (live updates, or after the
//! action) does not lose what the operator typed; the page also stops refetching on live
//! updates while a confirmation is open, so the epoch it submits is the one on screen.

use crate::api::actions::act_on_task;
use lastword_core::action::{lease_live, requeue_changes, MAX_REASON, MAX_REFERENCE};
use lastword_core::{ActionKind, ActionOutcome, ActionRequest, AttentionKind, TaskDetail};
use leptos::prelude::*;

/// What the last action said, shown above the task until the next one.
#[derive(Clone, Debug, PartialEq)]
pub enum Feedback {
    Done(String),
    Refused(String),
    Error(String),
}

/// The confirmation form's state, owned by the task page.
#[derive(Clone, Copy)]
pub struct ActionUi {
    pub open: RwSignal<Option<ActionKind>>,
    pub reason: RwSignal<String>,
    pub reference: RwSignal<String>,
    pub fence: RwSignal<bool>,
    pub unsafe_ack: RwSignal<bool>,
    /// The operator says the deterministic cause of the last failure was fixed.
    pub retry_deterministic: RwSignal<bool>,
    /// The attention item an acknowledgement takes.
    pub attention: RwSignal<Option<AttentionKind>>,
    pub feedback: RwSignal<Option<Feedback>>,
    /// One per opened confirmation: a double click or a retried request applies once.
    pub request_id: RwSignal<String>,
    /// The run the operator came from (`?run=` from a failure row), recorded in the audit.
    pub run_id: RwSignal<Option<i64>>,
}

impl ActionUi {
    pub fn new() -> Self {
        ActionUi {
            open: RwSignal::new(None),
            reason: RwSignal::new(String::new()),
            reference: RwSignal::new(String::new()),
            fence: RwSignal::new(false),
            unsafe_ack: RwSignal::new(false),
            retry_deterministic: RwSignal::new(false),
            attention: RwSignal::new(None),
            feedback: RwSignal::new(None),
            request_id: RwSignal::new(String::new()),
            run_id: RwSignal::new(None),
        }
    }

    pub fn open(&self, kind: ActionKind) {
        self.reason.set(String::new());
        self.reference.set(String::new());
        self.fence.set(false);
        self.unsafe_ack.set(false);
        self.retry_deterministic.set(false);
        self.request_id.set(new_request_id(kind));
        self.open.set(Some(kind));
    }
}

impl Default for ActionUi {
    fn default() -> Self {
        Self::new()
    }
}

/// A fresh idempotency key: random in the browser; the server never submits one itself.
pub fn new_request_id(kind: ActionKind) -> String {
    #[cfg(feature = "hydrate")]
    let nonce = format!("{:x}{:x}", (js_sys::Math::random() * 1e15) as u64, js_sys::Date::now() as u64);
    #[cfg(not(feature = "hydrate"))]
    let nonce = format!("{:x}", chrono::Utc::now().timestamp_micros());
    format!("ui-{}-{nonce}", kind.as_str())
}

/// A checkbox bound to `checked`: the explicit "yes, I mean it" a risky action asks for
/// (fence a live holder, re-run a deterministic failure, repeat an unsafe task's effects).
#[component]
pub fn Checkbox(checked: RwSignal<bool>, #[prop(optional)] testid: Option<&'static str>) -> impl IntoView {
    view! {
        <input type="checkbox" data-testid=testid prop:checked=move || checked.get()
            on:change=move |ev| checked.set(event_target_checked(&ev)) />
    }
}

/// The feedback line, above the task.
#[component]
pub fn ActionFeedback(ui: ActionUi) -> impl IntoView {
    move || {
        ui.feedback.get().map(|f| match f {
            Feedback::Done(m) => {
                view! { <p class="banner banner-ok" role="status" data-testid="action-result">{m}</p> }
                    .into_any()
            }
            Feedback::Refused(m) => view! {
                <p class="banner banner-error" role="alert" data-testid="action-refused">
                    <strong>"Refused: "</strong>{m}" The page now shows the task as it is."
                </p>
            }
            .into_any(),
            Feedback::Error(m) => {
                view! { <p class="banner banner-error" role="alert" data-testid="action-error">{m}</p> }
                    .into_any()
            }
        })
    }
}

/// The buttons and the open confirmation. `refetch` reloads the task after an action.
/// `doomed`: the deterministic cause the task's last run failed with (a re-queue asks the
/// operator to confirm it was fixed; `RetryPolicy::doomed_by`).
#[component]
pub fn TaskActions(
    detail: TaskDetail,
    ui: ActionUi,
    refetch: Callback<()>,
    doomed: Option<lastword_core::ErrorCause>,
) -> impl IntoView {
    let task = detail.task.clone();
    let task_id = task.id;
    // As of the read, not the wall clock: the server's HTML and the hydrated page must agree on
    // whether a re-queue has to fence a live holder (the server decides again when it applies).
    let live = lease_live(task.status, task.owner.as_deref(), task.lease_expires_at, detail.as_of);
    let is_unsafe = task.safety == lastword_core::Safety::Unsafe;
    let compensated = task.compensated_at.is_some();
    let compensable = !compensated && detail.compensable();

    let action = Action::new(move |(kind, request): &(ActionKind, ActionRequest)| {
        act_on_task(task_id, *kind, request.clone())
    });
    // When an answer arrives: say what happened, close the form, and show the task as it is.
    Effect::new(move |_| {
        if let Some(answer) = action.value().get() {
            let feedback = match answer {
                Ok(ActionOutcome::Applied { task, action })
                | Ok(ActionOutcome::Replayed { task, action }) => {
                    let what = action.action.label();
                    let epochs = match (action.epoch_seen, action.epoch_after) {
                        (Some(a), Some(b)) if a != b => format!(" — epoch {a} → {b}, now {}", task.status),
                        _ => String::new(),
                    };
                    Feedback::Done(format!("Task #{} {what} by {}{epochs}.", task.id, action.actor))
                }
                Ok(ActionOutcome::Refused(r)) => Feedback::Refused(r.message),
                Err(e) => Feedback::Error(format!("Could not act: {e}")),
            };
            ui.feedback.set(Some(feedback));
            ui.open.set(None);
            refetch.run(());
        }
    });

    let submit = {
        let task = task.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            let Some(kind) = ui.open.get_untracked() else { return };
            let request = ActionRequest {
                reason: ui.reason.get_untracked(),
                expected_epoch: Some(task.lease_epoch),
                expected_status: (kind == ActionKind::Requeue).then(|| task.status.to_string()),
                fence: kind == ActionKind::Requeue && ui.fence.get_untracked(),
                reference: (kind == ActionKind::Compensate).then(|| ui.reference.get_untracked()),
                run_id: ui.run_id.get_untracked(),
                request_id: Some(ui.request_id.get_untracked()),
                retry_deterministic: kind == ActionKind::Requeue && ui.retry_deterministic.get_untracked(),
                attention: if kind == ActionKind::Acknowledge { ui.attention.get_untracked() } else { None },
            };
            action.dispatch((kind, request));
        }
    };
    let needs_fence = live;
    let needs_ack = is_unsafe;
    let needs_retry_ok = doomed.is_some();
    let can_submit = move || {
        let kind = ui.open.get();
        !ui.reason.get().trim().is_empty()
            && !action.pending().get()
            && match kind {
                Some(ActionKind::Requeue) => {
                    (!needs_fence || ui.fence.get())
                        && (!needs_ack || ui.unsafe_ack.get())
                        && (!needs_retry_ok || ui.retry_deterministic.get())
                }
                Some(ActionKind::Acknowledge) => ui.attention.get().is_some(),
                _ => true,
            }
    };

    let changes = requeue_changes(&task);
    let owner = task.owner.clone().unwrap_or_default();
    let expires = task.lease_expires_at.map(lastword_core::action::fmt_time).unwrap_or_default();
    let epoch = task.lease_epoch;
    let effects = detail.effects.clone();
    let queued = task.status == lastword_core::TaskStatus::Queued;
    let items = detail.attention.clone();
    let items_for_form = items.clone();

    view! {
        <section class="actions" aria-labelledby="actions-title" data-testid="actions">
            <h2 id="actions-title">"Act"</h2>
            <div class="action-buttons">
                <button
                    type="button"
                    class="btn"
                    data-testid="requeue-open"
                    disabled=queued
                    title=if queued { "already queued" } else { "put it back in the queue under a new epoch" }
                    on:click=move |_| ui.open(ActionKind::Requeue)
                >
                    "Re-queue…"
                </button>
                {compensable.then(|| view! {
                    <button type="button" class="btn" data-testid="compensate-open" on:click=move |_| ui.open(ActionKind::Compensate)>
                        "Mark compensated…"
                    </button>
                })}
                {compensated.then(|| view! {
                    <button type="button" class="btn btn-quiet" data-testid="uncompensate-open" on:click=move |_| ui.open(ActionKind::Uncompensate)>
                        "Undo compensation…"
                    </button>
                })}
                {(!items.is_empty()).then(|| {
                    let first = items.first().copied();
                    view! {
                        <button type="button" class="btn" data-testid="acknowledge-open"
                            title="take it: everyone sees who has it and your note"
                            on:click=move |_| { ui.open(ActionKind::Acknowledge); ui.attention.set(first); }>
                            "Acknowledge…"
                        </button>
                    }
                })}
            </div>
            <Show when=move || ui.open.get().is_some()>
                <form class="confirm" data-testid="confirm-form" on:submit=submit>
                    {
                        let changes = changes.clone();
                        let owner = owner.clone();
                        let expires = expires.clone();
                        let effects = effects.clone();
                        let items = items_for_form.clone();
                        move || match ui.open.get() {
                            Some(ActionKind::Requeue) => view! {
                                <h3>{format!("Re-queue task #{task_id}")}</h3>
                                <p>"This will, in one transaction with its audit entry:"</p>
                                <ul data-testid="requeue-changes">
                                    {changes.iter().map(|c| view! { <li>{c.clone()}</li> }).collect_view()}
                                </ul>
                                {needs_fence.then(|| view! {
                                    <label class="fence" data-testid="fence-choice">
                                        <Checkbox checked=ui.fence testid="fence" />
                                        {format!(
                                            " Fence {owner}: it holds a live lease until {expires} (epoch {epoch}). Its heartbeat and final write will be rejected; anything it does after that is a lost-lease completion."
                                        )}
                                    </label>
                                })}
                                {doomed.map(|cause| view! {
                                    <div class="banner banner-warn" data-testid="deterministic-warning">
                                        <strong>{format!("The last run failed with {}: a re-run of the same input fails the same way.", cause.as_str())}</strong>
                                        <label>
                                            <Checkbox checked=ui.retry_deterministic testid="retry-deterministic" />
                                            " The cause is fixed (smaller input, larger context): re-queue anyway"
                                        </label>
                                    </div>
                                })}
                                {needs_ack.then(|| view! {
                                    <div class="banner banner-warn" data-testid="unsafe-warning">
                                        <strong>"Unsafe task: its effects may run again."</strong>
                                        {if effects.is_empty() {
                                            view! { <p>"No effects recorded so far."</p> }.into_any()
                                        } else {
                                            view! {
                                                <p>"Already recorded:"</p>
                                                <ul>
                                                    {effects.iter().map(|e| view! {
                                                        <li><code>{e.kind.clone()}</code>" key "<code>{e.idempotency_key.clone()}</code>{format!(" under epoch {}", e.lease_epoch)}</li>
                                                    }).collect_view()}
                                                </ul>
                                            }.into_any()
                                        }}
                                        <label>
                                            <Checkbox checked=ui.unsafe_ack testid="unsafe-ack" />
                                            " I understand these effects may run again"
                                        </label>
                                    </div>
                                })}
                            }
                            .into_any(),
                            Some(ActionKind::Compensate) => view! {
                                <h3>{format!("Mark task #{task_id} compensated")}</h3>
                                <p>"Records that the duplicate effect was compensated: the task leaves the needs-attention lists and shows who did it, when and why."</p>
                                <label class="field">
                                    "Reference (ticket, refund id) — optional"
                                    <input type="text" data-testid="reference" maxlength=MAX_REFERENCE prop:value=move || ui.reference.get()
                                        on:input=move |ev| ui.reference.set(event_target_value(&ev)) />
                                </label>
                            }
                            .into_any(),
                            Some(ActionKind::Uncompensate) => view! {
                                <h3>{format!("Undo the compensation mark on task #{task_id}")}</h3>
                                <p>"The task goes back on the needs-attention lists; the original mark stays in the audit trail."</p>
                            }
                            .into_any(),
                            Some(ActionKind::Acknowledge) => view! {
                                <h3>{format!("Acknowledge task #{task_id}")}</h3>
                                <p>"Says you have it: everyone sees who took it, when, and your note (below). Nothing on the task changes."</p>
                                <fieldset class="field" data-testid="attention-choice">
                                    <legend>"Item"</legend>
                                    {items.iter().map(|k| {
                                        let k = *k;
                                        view! {
                                            <label>
                                                <input type="radio" name="attention" value=k.as_str()
                                                    prop:checked=move || ui.attention.get() == Some(k)
                                                    on:change=move |_| ui.attention.set(Some(k)) />
                                                {format!(" {}", k.label())}
                                            </label>
                                        }
                                    }).collect_view()}
                                </fieldset>
                            }
                            .into_any(),
                            None => ().into_any(),
                        }
                    }
                    <label class="field">
                        {move || if ui.open.get() == Some(ActionKind::Acknowledge) {
                            "Note (required, everyone sees it: what you are doing, e.g. \"investigating — refund team paged\")"
                        } else {
                            "Reason (required, goes to the audit trail)"
                        }}
                        <textarea data-testid="reason" required=true maxlength=MAX_REASON rows="2" prop:value=move || ui.reason.get()
                            on:input=move |ev| ui.reason.set(event_target_value(&ev))></textarea>
                    </label>
                    <div class="action-buttons">
                        <button type="submit" class="btn btn-danger" data-testid="confirm" disabled=move || !can_submit()>
                            {move || match ui.open.get() {
                                Some(ActionKind::Requeue) => format!("Re-queue task #{task_id}"),
                                Some(ActionKind::Compensate) => "Mark compensated".to_string(),
                                Some(ActionKind::Uncompensate) => "Undo compensation".to_string(),
                                Some(ActionKind::Acknowledge) => "Acknowledge".to_string(),
                                None => String::new(),
                            }}
                        </button>
                        <button type="button" class="btn btn-quiet" data-testid="cancel" on:click=move |_| ui.open.set(None)>"Cancel"</button>
                    </div>
                </form>
            </Show>
        </section>
    }
}
