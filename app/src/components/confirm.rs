//! A task action's confirmation form (re-queue, mark compensated, undo, acknowledge), with a
//! wasm chunk of its own: it opens on an operator's click, so a first visit to the task page
//! does not download it (docs/bundle-size.md). [`TaskActions`] owns the buttons and the form's
//! state ([`ActionUi`]); this module draws the open form and decides when it may be sent.
//!
//! A failure row's "re-queue" link opens the task page with the re-queue confirmation open
//! (`?act=requeue`), so the server renders the form, and hydration must find the form's code
//! loaded when it reaches it: a lazy part still loading hydrates as absent, so hydration meets
//! the server's form where it expects nothing and fails (tried: the page never came alive).
//! [`load_before_hydration`] loads it first; `end2end/tests/bundle.spec.ts` covers both ways in.
//!
//! [`TaskActions`]: crate::components::actions::TaskActions

use crate::components::actions::{ActionUi, Checkbox, Submission};
use crate::components::reason::ReasonField;
use lastword_core::action::{requeue_changes, MAX_REFERENCE};
use lastword_core::{ActionKind, AttentionKind, Effect, ErrorCause, Task};
use leptos::prelude::*;

/// Everything the open form needs from the task page.
#[derive(Clone)]
pub struct OpenConfirmation {
    pub task: Task,
    pub effects: Vec<Effect>,
    /// The task's open attention items (what an acknowledgement may take).
    pub items: Vec<AttentionKind>,
    pub ui: ActionUi,
    pub needs: Requirements,
    /// The deterministic cause the task's last run failed with, if any.
    pub doomed: Option<ErrorCause>,
    /// Sends the confirmed action.
    pub submit: Callback<Submission>,
    /// True while a sent action is on its way.
    pub pending: Signal<bool>,
}

/// The open confirmation. Called in a `Transition`: the first call waits for the form's chunk.
#[lazy]
pub fn confirm_form(open: OpenConfirmation) -> AnyView {
    view! { <ConfirmForm open /> }.into_any()
}

/// Loads the form's chunk if the page the server sent has the form open; the browser entry point
/// awaits it before hydrating (the module's header says why).
#[cfg(feature = "hydrate")]
pub async fn load_before_hydration() {
    let rendered_open = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.query_selector("[data-testid=confirm-form]").ok().flatten())
        .is_some();
    if rendered_open {
        __preload_confirm_form().await;
    }
}

/// What a confirmation must have before it can be sent, decided once per task as of its read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Requirements {
    /// A live lease holder: the operator must choose to fence it.
    pub fence: bool,
    /// An unsafe task: the operator must acknowledge its effects may run again.
    pub unsafe_ack: bool,
    /// The last run failed deterministically: the operator must say the cause is fixed.
    pub retry_ok: bool,
}

impl Requirements {
    /// Whether the form as filled in may be submitted.
    fn met(&self, ui: &ActionUi) -> bool {
        !ui.reason.get().trim().is_empty()
            && match ui.open.get() {
                Some(ActionKind::Requeue) => {
                    (!self.fence || ui.fence.get())
                        && (!self.unsafe_ack || ui.unsafe_ack.get())
                        && (!self.retry_ok || ui.retry_deterministic.get())
                }
                Some(ActionKind::Acknowledge) => ui.attention.get().is_some(),
                _ => true,
            }
    }
}

#[component]
fn ConfirmForm(open: OpenConfirmation) -> impl IntoView {
    let OpenConfirmation { task, effects, items, ui, needs, doomed, submit, pending } = open;
    let task_id = task.id;
    let on_submit = {
        let task = task.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            if let Some(kind) = ui.open.get_untracked() {
                submit.run((task.id, kind, ui.request(kind, &task)));
            }
        }
    };
    let can_submit = move || needs.met(&ui) && !pending.get();
    view! {
        <form class="confirm" data-testid="confirm-form" on:submit=on_submit>
            {
                let (task, effects, items) = (task.clone(), effects.clone(), items.clone());
                move || match ui.open.get() {
                    Some(ActionKind::Requeue) => {
                        view! {
                            <RequeueConfirm
                                task=task.clone()
                                effects=effects.clone()
                                ui=ui
                                needs=needs
                                doomed=doomed
                            />
                        }
                            .into_any()
                    }
                    Some(ActionKind::Compensate) => {
                        view! { <CompensateConfirm task_id=task_id ui=ui /> }.into_any()
                    }
                    Some(ActionKind::Uncompensate) => {
                        view! {
                            <h3>{format!("Undo the compensation mark on task #{task_id}")}</h3>
                            <p>
                                "The task goes back on the needs-attention lists; the original mark stays in the audit trail."
                            </p>
                        }
                            .into_any()
                    }
                    Some(ActionKind::Acknowledge) => {
                        view! { <AcknowledgeConfirm task_id=task_id items=items.clone() ui=ui /> }.into_any()
                    }
                    None => ().into_any(),
                }
            }
            <ReasonField
                reason=ui.reason
                label=Signal::derive(move || {
                    if ui.open.get() == Some(ActionKind::Acknowledge) {
                        "Note (required, everyone sees it: what you are doing, e.g. \"investigating — refund team paged\")"
                    } else {
                        "Reason (required, goes to the audit trail)"
                    }
                })
                testid="reason"
            />
            <div class="action-buttons">
                <button
                    type="submit"
                    class="btn btn-danger"
                    data-testid="confirm"
                    disabled=move || !can_submit()
                >
                    {move || match ui.open.get() {
                        Some(ActionKind::Requeue) => format!("Re-queue task #{task_id}"),
                        Some(ActionKind::Compensate) => "Mark compensated".to_string(),
                        Some(ActionKind::Uncompensate) => "Undo compensation".to_string(),
                        Some(ActionKind::Acknowledge) => "Acknowledge".to_string(),
                        None => String::new(),
                    }}
                </button>
                <button
                    type="button"
                    class="btn btn-quiet"
                    data-testid="cancel"
                    on:click=move |_| ui.open.set(None)
                >
                    "Cancel"
                </button>
            </div>
        </form>
    }
}

/// A re-queue's confirmation: exactly what changes, and the explicit choices it needs.
#[component]
fn RequeueConfirm(
    task: Task,
    effects: Vec<Effect>,
    ui: ActionUi,
    needs: Requirements,
    doomed: Option<ErrorCause>,
) -> impl IntoView {
    let owner = task.owner.clone().unwrap_or_default();
    let expires = task.lease_expires_at.map(lastword_core::action::fmt_time).unwrap_or_default();
    let epoch = task.lease_epoch;
    view! {
        <h3>{format!("Re-queue task #{}", task.id)}</h3>
        <p>"This will, in one transaction with its audit entry:"</p>
        <ul data-testid="requeue-changes">
            {requeue_changes(&task).into_iter().map(|c| view! { <li>{c}</li> }).collect_view()}
        </ul>
        {needs
            .fence
            .then(|| {
                view! {
                    <label class="fence" data-testid="fence-choice">
                        <Checkbox checked=ui.fence testid="fence" />
                        {format!(
                            " Fence {owner}: it holds a live lease until {expires} (epoch {epoch}). Its heartbeat and final write will be rejected; anything it does after that is a lost-lease completion.",
                        )}
                    </label>
                }
            })}
        {doomed
            .map(|cause| {
                view! {
                    <div class="banner banner-warn" data-testid="deterministic-warning">
                        <strong>
                            {format!(
                                "The last run failed with {}: a re-run of the same input fails the same way.",
                                cause.as_str(),
                            )}
                        </strong>
                        <label>
                            <Checkbox checked=ui.retry_deterministic testid="retry-deterministic" />
                            " The cause is fixed (smaller input, larger context): re-queue anyway"
                        </label>
                    </div>
                }
            })}
        {needs
            .unsafe_ack
            .then(|| {
                view! {
                    <div class="banner banner-warn" data-testid="unsafe-warning">
                        <strong>"Unsafe task: its effects may run again."</strong>
                        {if effects.is_empty() {
                            view! { <p>"No effects recorded so far."</p> }.into_any()
                        } else {
                            view! {
                                <p>"Already recorded:"</p>
                                <ul>
                                    {effects
                                        .iter()
                                        .map(|e| {
                                            view! {
                                                <li>
                                                    <code>{e.kind.clone()}</code>
                                                    " key "
                                                    <code>{e.idempotency_key.clone()}</code>
                                                    {format!(" under epoch {}", e.lease_epoch)}
                                                </li>
                                            }
                                        })
                                        .collect_view()}
                                </ul>
                            }
                                .into_any()
                        }}
                        <label>
                            <Checkbox checked=ui.unsafe_ack testid="unsafe-ack" />
                            " I understand these effects may run again"
                        </label>
                    </div>
                }
            })}
    }
}

/// Marking a task compensated: what it records, and an optional reference.
#[component]
fn CompensateConfirm(task_id: i64, ui: ActionUi) -> impl IntoView {
    view! {
        <h3>{format!("Mark task #{task_id} compensated")}</h3>
        <p>
            "Records that the duplicate effect was compensated: the task leaves the needs-attention lists and shows who did it, when and why."
        </p>
        <label class="field">
            "Reference (ticket, refund id) — optional"
            <input
                type="text"
                data-testid="reference"
                maxlength=MAX_REFERENCE
                prop:value=move || ui.reference.get()
                on:input=move |ev| ui.reference.set(event_target_value(&ev))
            />
        </label>
    }
}

/// Taking an attention item: which one.
#[component]
fn AcknowledgeConfirm(task_id: i64, items: Vec<AttentionKind>, ui: ActionUi) -> impl IntoView {
    view! {
        <h3>{format!("Acknowledge task #{task_id}")}</h3>
        <p>
            "Says you have it: everyone sees who took it, when, and your note (below). Nothing on the task changes."
        </p>
        <fieldset class="field" data-testid="attention-choice">
            <legend>"Item"</legend>
            {items
                .into_iter()
                .map(|k| {
                    view! {
                        <label>
                            <input
                                type="radio"
                                name="attention"
                                value=k.as_str()
                                prop:checked=move || ui.attention.get() == Some(k)
                                on:change=move |_| ui.attention.set(Some(k))
                            />
                            {format!(" {}", k.label())}
                        </label>
                    }
                })
                .collect_view()}
        </fieldset>
    }
}
