//! One audit entry as a sentence, for a task's audit trail on its page: who did
//! (or tried and was refused) what to which task, the epochs, the reason and the reference.

use crate::components::time::Time;
use lastword_core::{ActionKind, OperatorAction};
use leptos::prelude::*;

/// One entry as a sentence: "alice re-queued task #42 (epoch 5 → 6): reason [ref]".
#[component]
pub fn AuditLine(action: OperatorAction) -> impl IntoView {
    let a = action;
    let label = a.action.label();
    let epochs = match (a.epoch_seen, a.epoch_after) {
        (Some(s), Some(e)) if s != e => format!("epoch {s} → {e}"),
        (_, Some(e)) => format!("epoch {e}"),
        _ => String::new(),
    };
    let refused = a.refused().map(str::to_string);
    let verb =
        if refused.is_some() { format!("tried to {}", kind_verb(a.action)) } else { label.to_string() };
    let is_refused = refused.is_some();
    view! {
        <span
            class="audit-line"
            class:audit-refused=is_refused
            data-action=a.action.as_str()
            data-outcome=a.outcome.clone()
        >
            <Time t=a.created_at />
            " "
            <strong>{a.actor.clone()}</strong>
            " "
            {verb}
            " "
            <a href=format!("/tasks/{}", a.task_id)>{format!("task #{}", a.task_id)}</a>
            {(!epochs.is_empty()).then(|| format!(" ({epochs})"))}
            {refused
                .map(|code| {
                    view! {
                        " — "
                        <span class="tag tag-refused">{format!("refused: {code}")}</span>
                    }
                })}
            ": "
            <q>{a.reason.clone()}</q>
            {a
                .reference
                .clone()
                .map(|r| {
                    view! {
                        " "
                        <span class="tag">{format!("ref {r}")}</span>
                    }
                })}
            {a
                .attention
                .map(|k| {
                    view! {
                        " "
                        <span class="tag" data-testid="audit-attention">
                            {k.as_str()}
                        </span>
                    }
                })}
        </span>
    }
}

/// The infinitive of an action, for "tried to …".
fn kind_verb(action: ActionKind) -> &'static str {
    match action {
        ActionKind::Requeue => "re-queue",
        ActionKind::Compensate => "mark compensated",
        ActionKind::Uncompensate => "undo the compensation of",
        ActionKind::Acknowledge => "acknowledge",
    }
}
