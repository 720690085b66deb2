//! The failures page's bulk re-queue, drawn: the panel around the server's preview ("this will
//! re-queue 37 tasks", how many are unsafe, what is skipped and why) and the confirmation that
//! sends back the preview's token (naming exactly the tasks and epochs the operator reviewed)
//! with the unsafe acknowledgement. The page owns the preview and the apply (its
//! `pages::failures::bulk`); the server re-checks both in the applying transaction and refuses
//! if the set moved.

use crate::components::actions::Checkbox;
use crate::components::reason::ReasonField;
use lastword_core::action::count_tasks;
use lastword_core::{BulkOptions, BulkPreview};
use leptos::prelude::*;

/// What the panel re-queues.
#[derive(Clone, Debug, PartialEq)]
pub enum BulkScope {
    /// Every task with a run matching the failures page's query string.
    Filter(String),
    /// The ticked rows' tasks.
    Tasks(Vec<i64>),
}

impl BulkScope {
    /// The panel's title: "Re-queue …".
    pub fn describe(&self) -> String {
        match self {
            BulkScope::Filter(_) => "every task with a failure matching the current filter".to_string(),
            BulkScope::Tasks(ids) => format!("the {} selected tasks", ids.len()),
        }
    }
}

/// The confirmation's state: the choices that change the preview (fence, include the doomed)
/// and the answers the operator gives to it.
#[derive(Clone, Copy)]
pub struct BulkUi {
    pub fence: RwSignal<bool>,
    pub include_deterministic: RwSignal<bool>,
    pub reason: RwSignal<String>,
    pub unsafe_ack: RwSignal<bool>,
}

impl BulkUi {
    pub fn new() -> Self {
        BulkUi {
            fence: RwSignal::new(false),
            include_deterministic: RwSignal::new(false),
            reason: RwSignal::new(String::new()),
            unsafe_ack: RwSignal::new(false),
        }
    }

    /// The options the preview is computed with (tracked: the preview follows them).
    pub fn options(&self) -> BulkOptions {
        BulkOptions { fence: self.fence.get(), include_deterministic: self.include_deterministic.get() }
    }
}

impl Default for BulkUi {
    fn default() -> Self {
        Self::new()
    }
}

/// What the operator confirmed: the preview they read and their answers to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Confirmed {
    pub token: String,
    pub count: i64,
    pub reason: String,
    pub fence: bool,
    pub include_deterministic: bool,
    pub unsafe_ack: bool,
}

/// The panel's frame: what it re-queues, the last refusal, and the preview (`children`).
#[component]
pub fn BulkPanel(scope: BulkScope, refusal: Signal<Option<String>>, children: Children) -> impl IntoView {
    view! {
        <section class="confirm bulk" data-testid="bulk-panel" aria-label="Bulk re-queue">
            <h3>{format!("Re-queue {}", scope.describe())}</h3>
            {move || {
                refusal
                    .get()
                    .map(|m| {
                        view! {
                            <p class="banner banner-error" role="alert" data-testid="bulk-refused">
                                {m}
                            </p>
                        }
                    })
            }}
            {children()}
        </section>
    }
}

/// The preview and its confirmation. `apply` sends what the operator confirmed; `pending` is
/// true while it is on its way; `close` closes the panel.
#[component]
pub fn PreviewBody(
    preview: BulkPreview,
    ui: BulkUi,
    apply: Callback<Confirmed>,
    pending: Signal<bool>,
    close: Callback<()>,
) -> impl IntoView {
    let BulkUi { fence, include_deterministic, reason, unsafe_ack } = ui;
    let count = preview.tasks.len() as i64;
    let unsafe_count = preview.unsafe_count;
    let live = preview.live.clone();
    let deterministic = preview.deterministic.clone();
    if preview.too_many {
        return view! {
            <p class="banner banner-error" data-testid="bulk-too-many">
                {format!(
                    "More than {} tasks match: narrow the filter (a time window, a cause, a worker) first.",
                    lastword_core::action::BULK_MAX,
                )}
            </p>
            <button type="button" class="btn btn-quiet" on:click=move |_| close.run(())>
                "Close"
            </button>
        }
        .into_any();
    }
    let can_apply = move || {
        count > 0
            && !reason.get().trim().is_empty()
            && (unsafe_count == 0 || unsafe_ack.get())
            && !pending.get()
    };
    let token = preview.token.clone();
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        apply.run(Confirmed {
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
            <p class="preview-count" data-testid="bulk-count">
                {format!("This will re-queue {}.", count_tasks(count))}
            </p>
            <ul class="muted">
                <li>
                    "Each: status → queued, owner cleared, lease epoch + 1 (fencing any earlier holder), attempts → 0."
                </li>
                {(preview.skipped_completed > 0)
                    .then(|| {
                        view! {
                            <li>
                                {format!(
                                    "Skipped: {} completed since their failure (select them, or use the task page, to run them again).",
                                    preview.skipped_completed,
                                )}
                            </li>
                        }
                    })}
                {(preview.rerun_completed > 0)
                    .then(|| {
                        view! {
                            <li data-testid="bulk-rerun">
                                <strong>
                                    {format!(
                                        "{} of them completed since their failure and will run again.",
                                        preview.rerun_completed,
                                    )}
                                </strong>
                            </li>
                        }
                    })}
                {(preview.skipped_queued > 0)
                    .then(|| {
                        view! { <li>{format!("Skipped: {} already queued.", preview.skipped_queued)}</li> }
                    })}
            </ul>
            {(!live.is_empty())
                .then(|| {
                    let holders: Vec<String> = live
                        .iter()
                        .map(|t| format!("#{} ({})", t.id, t.owner.clone().unwrap_or_default()))
                        .collect();
                    view! {
                        <label class="fence" data-testid="bulk-fence">
                            <Checkbox checked=fence />
                            {format!(
                                " Also fence {} tasks held by a live lease: {}",
                                holders.len(),
                                holders.join(", "),
                            )}
                        </label>
                    }
                })}
            {(!deterministic.is_empty())
                .then(|| {
                    let doomed: Vec<String> = deterministic
                        .iter()
                        .map(|t| {
                            format!("#{} ({})", t.id, t.last_failure.map(|c| c.as_str()).unwrap_or("?"))
                        })
                        .collect();
                    view! {
                        <label class="fence" data-testid="bulk-deterministic">
                            <Checkbox checked=include_deterministic testid="bulk-include-deterministic" />
                            {format!(
                                " Also re-queue {} whose last run failed with a cause a re-run does not fix (the cause is fixed): {}",
                                count_tasks(doomed.len() as i64),
                                doomed.join(", "),
                            )}
                        </label>
                    }
                })}
            {(unsafe_count > 0)
                .then(|| {
                    view! {
                        <div class="banner banner-warn" data-testid="bulk-unsafe">
                            <strong>
                                {format!("{unsafe_count} of them are unsafe: their effects may run again.")}
                            </strong>
                            <label>
                                <Checkbox checked=unsafe_ack testid="bulk-unsafe-ack" />
                                " I understand"
                            </label>
                        </div>
                    }
                })}
            <ReasonField
                reason=reason
                label="Reason (required, goes to the audit trail)"
                testid="bulk-reason"
            />
            <div class="action-buttons">
                <button
                    type="submit"
                    class="btn btn-danger"
                    data-testid="bulk-confirm"
                    disabled=move || !can_apply()
                >
                    {format!("Re-queue {}", count_tasks(count))}
                </button>
                <button type="button" class="btn btn-quiet" on:click=move |_| close.run(())>
                    "Cancel"
                </button>
            </div>
        </form>
    }
    .into_any()
}
