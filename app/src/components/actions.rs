//! The task page's actions: re-queue, mark compensated, undo. Each opens a confirmation that
//! names exactly what will change (from `lastword_core::action::requeue_changes`), asks for a
//! reason, and, where it applies, for the explicit choice to fence a live lease holder and an
//! acknowledgement that an unsafe task's effects may run again. The form's state lives in
//! [`ActionUi`], owned by the page, so a refetch of the task (live updates, or after the
//! action) does not lose what the operator typed; the page also stops refetching on live
//! updates while a confirmation is open, so the epoch it submits is the one on screen. The page
//! sends what the form submits and turns the answer into [`Feedback`].

use lastword_core::action::{lease_live, requeue_changes, MAX_REASON, MAX_REFERENCE};
use lastword_core::{
    ActionKind, ActionOutcome, ActionRequest, AttentionKind, Effect, ErrorCause, Task, TaskDetail,
};
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

/// What a confirmation must have before it can be sent, decided once per task as of its read.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Requirements {
    /// A live lease holder: the operator must choose to fence it.
    fence: bool,
    /// An unsafe task: the operator must acknowledge its effects may run again.
    unsafe_ack: bool,
    /// The last run failed deterministically: the operator must say the cause is fixed.
    retry_ok: bool,
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
    let task_id = task.id;
    // As of the read, not the wall clock: the server's HTML and the hydrated page must agree on
    // whether a re-queue has to fence a live holder (the server decides again when it applies).
    let live = lease_live(task.status, task.owner.as_deref(), task.lease_expires_at, detail.as_of);
    let needs = Requirements {
        fence: live,
        unsafe_ack: task.safety == lastword_core::Safety::Unsafe,
        retry_ok: doomed.is_some(),
    };
    let compensated = task.compensated_at.is_some();
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
    let items = detail.attention.clone();

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
            <Show when=move || ui.open.get().is_some()>
                <form class="confirm" data-testid="confirm-form" on:submit=on_submit.clone()>
                    {
                        let (task, effects, items) = (task.clone(), detail.effects.clone(), items.clone());
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
                                view! { <AcknowledgeConfirm task_id=task_id items=items.clone() ui=ui /> }
                                    .into_any()
                            }
                            None => ().into_any(),
                        }
                    }
                    <label class="field">
                        {move || {
                            if ui.open.get() == Some(ActionKind::Acknowledge) {
                                "Note (required, everyone sees it: what you are doing, e.g. \"investigating — refund team paged\")"
                            } else {
                                "Reason (required, goes to the audit trail)"
                            }
                        }}
                        <textarea
                            data-testid="reason"
                            required=true
                            maxlength=MAX_REASON
                            rows="2"
                            prop:value=move || ui.reason.get()
                            on:input=move |ev| ui.reason.set(event_target_value(&ev))
                        ></textarea>
                    </label>
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
            </Show>
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
