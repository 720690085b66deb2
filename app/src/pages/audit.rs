//! Audit: every operator action — applied, or refused with its reason code — who (and how they
//! signed in), what, on which task and run, the epoch they saw and the epoch after, why; newest
//! first, filterable by actor, action, outcome, task and time. The URL holds the filters; the
//! form works with JavaScript off.

use crate::api::actions::{get_audit, AuditAnswer};
use crate::components::layout::PageHead;
use crate::components::since::SinceSelect;
use crate::components::table::{Column, DataTable};
use crate::components::time::Time;
use crate::pages::{bad_filter_view, live_version, loaded};
use lastword_core::{ActionKind, OperatorAction};
use leptos::prelude::*;
use leptos_router::components::Form;
use leptos_router::hooks::use_query_map;

const SINCE_CHOICES: [(&str, &str); 5] =
    [("", "any time"), ("1h", "1 hour"), ("24h", "24 hours"), ("7d", "7 days"), ("30d", "30 days")];

/// "applied", or "refused: <code>".
fn outcome_label(a: &OperatorAction) -> String {
    match a.refused() {
        Some(code) => format!("refused: {code}"),
        None => a.outcome.clone(),
    }
}

const AUDIT_COLUMNS: &[Column] = &[
    Column::text("When"),
    Column::text("Actor"),
    Column::text("Action"),
    Column::text("Task"),
    Column::text("Run"),
    Column::text("Epoch").titled("the lease epoch the operator saw → after the action"),
    Column::text("Status seen"),
    Column::text("Outcome"),
    Column::text("Reason"),
    Column::text("Reference"),
];

#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let live = live_version();
    let query_string = Memo::new(move |_| query.read().to_query_string());
    let live_key = move || if query.read().get("after").is_some() { 0 } else { live.get() };
    let answer = Resource::new(move || (query_string.get(), live_key()), |(q, _)| get_audit(q));
    let param = move |k: &str| query.read().get(k).unwrap_or_default();

    view! {
        <section class="page">
            <PageHead title="Audit">
                <span class="muted">
                    "Every operator action, newest first: what applied, and what was tried and refused (which changed nothing)."
                </span>
                <a class="muted" href="/audit">
                    "Clear filters"
                </a>
            </PageHead>
            <Form method="GET" action="/audit" attr:class="filters" attr:aria-label="Filter the audit trail">
                <label>
                    "Actor"
                    <input
                        type="text"
                        name="actor"
                        value=move || param("actor")
                        size="12"
                        data-testid="audit-actor"
                    />
                </label>
                <label>
                    "Action" <select name="action" data-testid="audit-action">
                        <option value="" selected=move || param("action").is_empty()>
                            "any"
                        </option>
                        {ActionKind::ALL
                            .into_iter()
                            .map(|k| {
                                view! {
                                    <option value=k.as_str() selected=move || param("action") == k.as_str()>
                                        {k.label()}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
                <label>
                    "Outcome" <select name="outcome" data-testid="audit-outcome-filter">
                        {[("", "any"), ("applied", "applied"), ("refused", "refused")]
                            .into_iter()
                            .map(|(v, label)| {
                                view! {
                                    <option value=v selected=move || param("outcome") == v>
                                        {label}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
                <label>
                    "Task"
                    <input type="text" name="task" value=move || param("task") size="8" inputmode="numeric" />
                </label>
                <SinceSelect choices=&SINCE_CHOICES current=Signal::derive(move || param("since")) />
                <button type="submit" class="btn">
                    "Apply"
                </button>
            </Form>
            {loaded(
                "Loading the audit trail…",
                "the audit trail",
                move || answer.get(),
                move |a| match a {
                    AuditAnswer::Page(page) => {
                        if page.actions.is_empty() {
                            return view! {
                                <p class="empty" data-testid="no-actions">
                                    "No operator actions match."
                                </p>
                            }
                                .into_any();
                        }
                        let next = page
                            .next
                            .clone()
                            .map(|cursor| {
                                let mut q = query.get_untracked();
                                q.remove("after");
                                q.insert("after", cursor);
                                format!("/audit{}", q.to_query_string())
                            });
                        view! {
                            <DataTable columns=AUDIT_COLUMNS testid="audit">
                                {page
                                    .actions
                                    .into_iter()
                                    .map(|a| {
                                        view! {
                                            <tr
                                                data-row=""
                                                data-action=a.action.as_str()
                                                data-outcome=a.outcome.clone()
                                                class:audit-refused=a.refused().is_some()
                                            >
                                                <td>
                                                    <Time t=a.created_at short=true />
                                                </td>
                                                <td>
                                                    <a href=format!(
                                                        "/audit?actor={}",
                                                        lastword_core::query::encode_component(&a.actor),
                                                    )>{a.actor.clone()}</a>
                                                    {a
                                                        .via
                                                        .clone()
                                                        .map(|v| {
                                                            view! {
                                                                " "
                                                                <span class="muted" data-testid="audit-via">
                                                                    {format!("via {v}")}
                                                                </span>
                                                            }
                                                        })}
                                                </td>
                                                <td>{a.action.label()}</td>
                                                <td>
                                                    <a href=format!(
                                                        "/tasks/{}",
                                                        a.task_id,
                                                    )>{format!("#{}", a.task_id)}</a>
                                                </td>
                                                <td class="num">
                                                    {a
                                                        .run_id
                                                        .map(|r| r.to_string())
                                                        .unwrap_or_else(|| "—".into())}
                                                </td>
                                                <td class="num">
                                                    {format!(
                                                        "{} → {}",
                                                        a
                                                            .epoch_seen
                                                            .map(|e| e.to_string())
                                                            .unwrap_or_else(|| "—".into()),
                                                        a
                                                            .epoch_after
                                                            .map(|e| e.to_string())
                                                            .unwrap_or_else(|| "—".into()),
                                                    )}
                                                </td>
                                                <td>{a.status_seen.map(|s| s.as_str())}</td>
                                                <td data-testid="audit-outcome">{outcome_label(&a)}</td>
                                                <td class="detail">{a.reason.clone()}</td>
                                                <td>{a.reference.clone().unwrap_or_default()}</td>
                                            </tr>
                                        }
                                    })
                                    .collect_view()}
                            </DataTable>
                            <nav class="pager" aria-label="Pages">
                                {next
                                    .map(|h| {
                                        view! {
                                            <a href=h rel="next">
                                                "Older →"
                                            </a>
                                        }
                                    })}
                            </nav>
                        }
                            .into_any()
                    }
                    AuditAnswer::BadFilter(e) => bad_filter_view(e),
                },
            )}
        </section>
    }
}
