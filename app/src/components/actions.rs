//! The task page's actions: re-queue, mark compensated, undo. Each opens a confirmation that
//! names exactly what will change (from `lastword_core::action::requeue_changes`), asks for a
//! reason, and, where it applies, for the explicit choice to fence a live lease holder and an
//! acknowledgement that an unsafe task's effects may run again. The form's state lives in
//! [`ActionUi`], owned by the page, so a refetch of the task (live updates, or after the
//! action) does not lose what the operator typed; the page also stops refetching on live
//! updates while a confirmation is open, so the epoch it submits is the one on screen. The page
//! sends what the form submits and turns the answer into [`Feedback`]. The open form itself is
//! a lazy part of the page (`components::confirm`).

use crate::components::confirm::{confirm_form, OpenConfirmation, Requirements};
use lastword_core::action::lease_live;
use lastword_core::{ActionKind, ActionOutcome, ActionRequest, AttentionKind, ErrorCause, Task, TaskDetail};
use leptos::prelude::*;

/// What the last action said, shown above the task until the next one.
#[derive(Clone, Debug, PartialEq)]
pub enum Feedback {
    Done(String),
    Refused(String),
    Error(String),
}

impl Feedback {
    /// The sentence for a server's answer: what applied (with the epoch change, which tells the
    /// operator the fence moved), what was refused and why, or that the request failed.
    pub fn of<E: std::fmt::Display>(answer: &Result<ActionOutcome, E>) -> Feedback {
        match answer {
            Ok(ActionOutcome::Applied { task, action }) | Ok(ActionOutcome::Replayed { task, action }) => {
                let what = action.action.label();
                let epochs = match (action.epoch_seen, action.epoch_after) {
                    (Some(a), Some(b)) if a != b => format!(" — epoch {a} → {b}, now {}", task.status),
                    _ => String::new(),
                };
                Feedback::Done(format!("Task #{} {what} by {}{epochs}.", task.id, action.actor))
            }
            Ok(ActionOutcome::Refused(r)) => Feedback::Refused(r.message.clone()),
            Err(e) => Feedback::Error(format!("Could not act: {e}")),
        }
    }
}

/// What the confirmation submits: the task it acts on, the kind and the request.
pub type Submission = (i64, ActionKind, ActionRequest);

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

    /// The request the open form makes of `task` (read untracked: the moment of submitting).
    pub fn request(&self, kind: ActionKind, task: &Task) -> ActionRequest {
        ActionRequest {
            reason: self.reason.get_untracked(),
            expected_epoch: Some(task.lease_epoch),
            expected_status: (kind == ActionKind::Requeue).then(|| task.status.to_string()),
            fence: kind == ActionKind::Requeue && self.fence.get_untracked(),
            reference: (kind == ActionKind::Compensate).then(|| self.reference.get_untracked()),
            run_id: self.run_id.get_untracked(),
            request_id: Some(self.request_id.get_untracked()),
            retry_deterministic: kind == ActionKind::Requeue && self.retry_deterministic.get_untracked(),
            attention: if kind == ActionKind::Acknowledge { self.attention.get_untracked() } else { None },
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
        <input
            type="checkbox"
            data-testid=testid
            prop:checked=move || checked.get()
            on:change=move |ev| checked.set(event_target_checked(&ev))
        />
    }
}

/// The feedback line, above the task.
#[component]
pub fn ActionFeedback(ui: ActionUi) -> impl IntoView {
    move || {
        ui.feedback.get().map(|f| match f {
            Feedback::Done(m) => view! {
                <p class="banner banner-ok" role="status" data-testid="action-result">
                    {m}
                </p>
            }
            .into_any(),
            Feedback::Refused(m) => view! {
                <p class="banner banner-error" role="alert" data-testid="action-refused">
                    <strong>"Refused: "</strong>
                    {m}
                    " The page now shows the task as it is."
                </p>
            }
            .into_any(),
            Feedback::Error(m) => view! {
                <p class="banner banner-error" role="alert" data-testid="action-error">
                    {m}
                </p>
            }
            .into_any(),
        })
    }
}

/// The buttons and the open confirmation. `submit` sends the confirmed action; `pending` is
/// true while it is on its way. `doomed`: the deterministic cause the task's last run failed
/// with (a re-queue asks the operator to confirm it was fixed; `RetryPolicy::doomed_by`).
#[component]
pub fn TaskActions(
    detail: TaskDetail,
    ui: ActionUi,
    submit: Callback<Submission>,
    pending: Signal<bool>,
    doomed: Option<ErrorCause>,
) -> impl IntoView {
    let task = detail.task.clone();
    // As of the read, not the wall clock: the server's HTML and the hydrated page must agree on
    // whether a re-queue has to fence a live holder (the server decides again when it applies).
    let live = lease_live(task.status, task.owner.as_deref(), task.lease_expires_at, detail.as_of);
    let needs = Requirements {
        fence: live,
        unsafe_ack: task.safety == lastword_core::Safety::Unsafe,
        retry_ok: doomed.is_some(),
    };
    let compensated = task.compensated_at.is_some();
    let items = detail.attention.clone();
    // Whether a form is open, not which: switching forms redraws inside the form, not the form.
    let is_open = Memo::new(move |_| ui.open.get().is_some());
    let open = OpenConfirmation {
        task: task.clone(),
        effects: detail.effects.clone(),
        items: items.clone(),
        ui,
        needs,
        doomed,
        submit,
        pending,
    };

    view! {
        <section class="actions" aria-labelledby="actions-title" data-testid="actions">
            <h2 id="actions-title">"Act"</h2>
            <ActionButtons
                ui=ui
                queued=task.status == lastword_core::TaskStatus::Queued
                compensable=!compensated && detail.compensable()
                compensated=compensated
                first_item=items.first().copied()
            />
            <Transition>{move || is_open.get().then(|| Suspend::new(confirm_form(open.clone())))}</Transition>
        </section>
    }
}

/// The buttons that open a confirmation: only those that apply to the task as it is.
#[component]
fn ActionButtons(
    ui: ActionUi,
    queued: bool,
    compensable: bool,
    compensated: bool,
    /// The first open attention item (what "Acknowledge…" takes unless the operator picks another).
    first_item: Option<AttentionKind>,
) -> impl IntoView {
    view! {
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
            {compensable
                .then(|| {
                    view! {
                        <button
                            type="button"
                            class="btn"
                            data-testid="compensate-open"
                            on:click=move |_| ui.open(ActionKind::Compensate)
                        >
                            "Mark compensated…"
                        </button>
                    }
                })}
            {compensated
                .then(|| {
                    view! {
                        <button
                            type="button"
                            class="btn btn-quiet"
                            data-testid="uncompensate-open"
                            on:click=move |_| ui.open(ActionKind::Uncompensate)
                        >
                            "Undo compensation…"
                        </button>
                    }
                })}
            {first_item
                .is_some()
                .then(|| {
                    view! {
                        <button
                            type="button"
                            class="btn"
                            data-testid="acknowledge-open"
                            title="take it: everyone sees who has it and your note"
                            on:click=move |_| {
                                ui.open(ActionKind::Acknowledge);
                                ui.attention.set(first_item);
                            }
                        >
                            "Acknowledge…"
                        </button>
                    }
                })}
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use lastword_core::{fixtures, Refusal, RefusalCode};

    #[test]
    fn feedback_names_what_applied_and_the_epoch_change_or_why_it_was_refused() {
        let at = Utc.with_ymd_and_hms(2026, 12, 4, 3, 0, 0).unwrap();
        let task = fixtures::task(7, "queued", at);
        let action = fixtures::action(1, "requeue", "ann", 3, at);
        let applied: Result<_, String> = Ok(ActionOutcome::Applied { task: task.clone(), action });
        assert_eq!(
            Feedback::of(&applied),
            Feedback::Done("Task #7 re-queued by ann — epoch 3 → 4, now queued.".into())
        );
        let compensated = fixtures::action(2, "compensate", "ann", 3, at);
        let replayed: Result<_, String> = Ok(ActionOutcome::Replayed { task, action: compensated });
        assert_eq!(Feedback::of(&replayed), Feedback::Done("Task #7 marked compensated by ann.".into()));
        let refusal = Refusal { code: RefusalCode::Changed, message: "re-claimed by w-2".into(), task: None };
        let refused: Result<_, String> = Ok(ActionOutcome::Refused(refusal));
        assert_eq!(Feedback::of(&refused), Feedback::Refused("re-claimed by w-2".into()));
        let failed: Result<ActionOutcome, String> = Err("database down".into());
        assert_eq!(Feedback::of(&failed), Feedback::Error("Could not act: database down".into()));
    }
}
