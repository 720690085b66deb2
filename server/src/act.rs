//! `lastword requeue`, `lastword compensate` and `lastword audit`: the operator actions for
//! scripts and for an on-call engineer with a shell on the database host. They go straight to
//! the database through the same store transaction the dashboard uses (same checks, same audit
//! row), so they work when the dashboard is down. The actor is `--actor` or `cli:$USER`. To
//! act on a remote dashboard instead, use the JSON API with a bearer token (docs/api.md).
//!
//! Exit status: 0 applied or replayed, 1 an error, 3 refused (the message says what changed).

use crate::terminal::Shown;
use anyhow::Context;
use clap::Args;
use lastword_core::action::{count_tasks, fmt_time, parse_audit_query};
use lastword_core::query::query_pairs;
use lastword_core::{
    ActionKind, ActionOutcome, ActionRequest, Actor, BulkOptions, BulkOutcome, BulkRequeueRequest,
    BulkSelection,
};
use lastword_store::Store;
use std::process::ExitCode;

/// Refused: the database said no, and said why.
const REFUSED: u8 = 3;

#[derive(Debug, Args)]
pub struct ActorArgs {
    /// Who is acting, as the audit trail records it. Default: cli:$USER (or $LOGNAME).
    #[arg(long, env = "LASTWORD_ACTOR")]
    pub actor: Option<String>,
    /// Print the outcome as JSON (the API's shape) instead of a sentence.
    #[arg(long)]
    pub json: bool,
}

impl ActorArgs {
    /// The actor, recorded with `via` `cli` (this command does not sign in: whoever can reach
    /// the database can act, and the audit says it came from a shell).
    fn actor(&self) -> Actor {
        Actor::cli(self.actor.clone().filter(|a| !a.trim().is_empty()).unwrap_or_else(|| {
            let user = std::env::var("USER").or_else(|_| std::env::var("LOGNAME"));
            format!("cli:{}", user.unwrap_or_else(|_| "unknown".to_string()))
        }))
    }
}

#[derive(Debug, Args)]
pub struct RequeueArgs {
    /// The task to re-queue. Omit it and give --filter to re-queue every task a run filter
    /// selects.
    pub task: Option<i64>,
    /// Why (required; written to the audit trail).
    #[arg(long)]
    pub reason: String,
    /// The lease epoch you saw (required with a task id): refused if the task moved on since.
    #[arg(long)]
    pub expected_epoch: Option<i64>,
    /// The status you saw (queued, leased, completed, failed, dead).
    #[arg(long)]
    pub expected_status: Option<String>,
    /// Take the task from a worker holding a live lease (that worker is fenced).
    #[arg(long)]
    pub fence: bool,
    /// Re-queue although the last run failed with a deterministic cause (context_overflow by
    /// default, `--deterministic-causes`): you fixed what made it fail. With --filter, include
    /// such tasks (left out otherwise).
    #[arg(long)]
    pub retry_deterministic: bool,
    /// Bulk: the failures page's query string, e.g. 'cause=timeout&since=1h'; as on the page,
    /// no state and no cause selects failures only.
    #[arg(long, conflicts_with_all = ["task", "expected_epoch", "expected_status"])]
    pub filter: Option<String>,
    /// Bulk: apply only if the filter still selects exactly the tasks of a previous preview
    /// (the token it printed: the same tasks at the same epochs, not merely as many). Without
    /// it, the preview is printed and nothing is done.
    #[arg(long, requires = "filter", value_name = "PREVIEW_TOKEN")]
    pub expect: Option<String>,
    /// Bulk: re-queue unsafe tasks too (their effects may run again); refused without it when
    /// the preview has any.
    #[arg(long, requires = "filter")]
    pub unsafe_ok: bool,
    /// An idempotency key: running the same command again applies once.
    #[arg(long)]
    pub request_id: Option<String>,
    #[command(flatten)]
    pub who: ActorArgs,
}

/// What `compensate` and `acknowledge` take beside their own flags: the task, the epoch the
/// operator saw, an idempotency key and who acts.
#[derive(Debug, Args)]
pub struct OneTask {
    /// The task.
    pub task: i64,
    /// The lease epoch you saw: refused if the task moved on since.
    #[arg(long)]
    pub expected_epoch: Option<i64>,
    /// An idempotency key: running the same command again applies once.
    #[arg(long)]
    pub request_id: Option<String>,
    #[command(flatten)]
    pub who: ActorArgs,
}

impl OneTask {
    /// `request` (the command's own fields) guarded by the epoch and the key, validated as the
    /// API validates it, applied, and printed.
    async fn act(
        self,
        store: &dyn Store,
        kind: ActionKind,
        request: ActionRequest,
    ) -> anyhow::Result<ExitCode> {
        let request =
            ActionRequest { expected_epoch: self.expected_epoch, request_id: self.request_id, ..request }
                .validate(kind)?;
        let outcome = store.act(self.task, kind, &request, &self.who.actor(), now()).await?;
        print_outcome(&outcome.with_context(|| format!("no task {}", self.task))?, self.who.json)
    }
}

#[derive(Debug, Args)]
pub struct CompensateArgs {
    #[command(flatten)]
    pub on: OneTask,
    /// What was done (required; shown on the task and in the audit trail).
    #[arg(long)]
    pub reason: String,
    /// A ticket, refund id, … (optional).
    #[arg(long)]
    pub reference: Option<String>,
    /// Remove the compensation mark instead (with --reason saying why).
    #[arg(long, conflicts_with = "reference")]
    pub undo: bool,
}

#[derive(Debug, Args)]
pub struct AcknowledgeArgs {
    #[command(flatten)]
    pub on: OneTask,
    /// The item you take: double_execution, unsafe_lost_lease, loop or dead.
    #[arg(long, value_parser = parse_attention)]
    pub item: lastword_core::AttentionKind,
    /// The note everyone sees ("investigating — refund team paged"); goes to the audit trail.
    #[arg(long)]
    pub note: String,
}

fn parse_attention(s: &str) -> Result<lastword_core::AttentionKind, String> {
    lastword_core::AttentionKind::parse(s)
        .ok_or_else(|| format!("{s:?}: expected double_execution, unsafe_lost_lease, loop or dead"))
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The audit page's query string, e.g. 'actor=alice&action=requeue&since=1d'.
    #[arg(default_value = "")]
    pub query: String,
    #[arg(long)]
    pub json: bool,
}

use lastword_core::write_now as now;

fn print_outcome(outcome: &ActionOutcome, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(outcome)?);
    }
    Ok(match outcome {
        ActionOutcome::Applied { task, action } | ActionOutcome::Replayed { task, action } => {
            if !json {
                let again = matches!(outcome, ActionOutcome::Replayed { .. });
                println!(
                    "task {}: {} by {} at {}{} (epoch {} → {}, now {})",
                    task.id,
                    action.action.label(),
                    Shown(&action.actor),
                    fmt_time(action.created_at),
                    if again { ", already applied for this request id" } else { "" },
                    action.epoch_seen.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
                    action.epoch_after.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
                    task.status
                );
            }
            ExitCode::SUCCESS
        }
        ActionOutcome::Refused(r) => {
            if !json {
                eprintln!("refused ({}): {}", r.code.as_str(), Shown(&r.message));
            }
            ExitCode::from(REFUSED)
        }
    })
}

/// `lastword requeue`.
pub async fn requeue(store: &dyn Store, args: RequeueArgs) -> anyhow::Result<ExitCode> {
    let actor = args.who.actor();
    if let Some(query) = &args.filter {
        let selection = BulkSelection::from_request(&query_pairs(query), None, now(), &[])
            .map_err(|e| anyhow::anyhow!("--filter: {e}"))?;
        let Some(expected) = args.expect else {
            let options = BulkOptions { fence: args.fence, include_deterministic: args.retry_deterministic };
            let preview = store.requeue_preview(&selection, options, now()).await?;
            if args.who.json {
                println!("{}", serde_json::to_string_pretty(&preview)?);
            } else {
                println!(
                    "this would re-queue {} ({} unsafe); skipped: {} completed since, {} already queued, {} held by a live lease{}",
                    count_tasks(preview.tasks.len() as i64),
                    preview.unsafe_count,
                    preview.skipped_completed,
                    preview.skipped_queued,
                    preview.live.len(),
                    if args.fence { " (fenced, included)" } else { " (add --fence to include)" }
                );
                if !preview.deterministic.is_empty() {
                    println!(
                        "{} whose last run failed with a cause a re-run does not fix{}",
                        count_tasks(preview.deterministic.len() as i64),
                        if args.retry_deterministic {
                            " (included)"
                        } else {
                            ": left out (add --retry-deterministic to include)"
                        }
                    );
                }
                if preview.too_many {
                    println!("more than {} tasks match: narrow the filter", lastword_core::action::BULK_MAX);
                } else {
                    let unsafe_ok = if preview.unsafe_count > 0 { " --unsafe-ok" } else { "" };
                    println!(
                        "nothing done; to apply exactly these, run again with --expect {}{unsafe_ok}",
                        preview.token
                    );
                }
            }
            return Ok(ExitCode::SUCCESS);
        };
        let request = BulkRequeueRequest {
            reason: args.reason,
            expected_count: None,
            preview_token: Some(expected),
            acknowledge_unsafe: args.unsafe_ok,
            fence: args.fence,
            include_deterministic: args.retry_deterministic,
            task_ids: None,
            request_id: args.request_id,
        }
        .validate()?;
        let outcome = store.bulk_requeue(&selection, &request, &actor, now()).await?;
        if args.who.json {
            println!("{}", serde_json::to_string_pretty(&outcome)?);
        }
        return Ok(match outcome {
            BulkOutcome::Applied { actions } | BulkOutcome::Replayed { actions } => {
                if !args.who.json {
                    let ids: Vec<String> = actions.iter().map(|a| a.task_id.to_string()).collect();
                    println!(
                        "re-queued {} by {actor}: {}",
                        count_tasks(actions.len() as i64),
                        ids.join(", ")
                    );
                }
                ExitCode::SUCCESS
            }
            BulkOutcome::Refused { code, message, .. } => {
                if !args.who.json {
                    eprintln!("refused ({}): {}", code.as_str(), Shown(&message));
                }
                ExitCode::from(REFUSED)
            }
        });
    }
    let task = args.task.context("give a task id, or --filter for a bulk re-queue")?;
    let request = ActionRequest {
        reason: args.reason,
        expected_epoch: args.expected_epoch,
        expected_status: args.expected_status,
        fence: args.fence,
        request_id: args.request_id,
        retry_deterministic: args.retry_deterministic,
        ..Default::default()
    }
    .validate(ActionKind::Requeue)?;
    let outcome = store.act(task, ActionKind::Requeue, &request, &actor, now()).await?;
    print_outcome(&outcome.with_context(|| format!("no task {task}"))?, args.who.json)
}

/// `lastword compensate` (and `--undo`).
pub async fn compensate(store: &dyn Store, args: CompensateArgs) -> anyhow::Result<ExitCode> {
    let kind = if args.undo { ActionKind::Uncompensate } else { ActionKind::Compensate };
    let request = ActionRequest { reason: args.reason, reference: args.reference, ..Default::default() };
    args.on.act(store, kind, request).await
}

/// `lastword acknowledge`: takes an attention item of a task, audited.
pub async fn acknowledge(store: &dyn Store, args: AcknowledgeArgs) -> anyhow::Result<ExitCode> {
    let request = ActionRequest { reason: args.note, attention: Some(args.item), ..Default::default() };
    args.on.act(store, ActionKind::Acknowledge, request).await
}

/// `lastword audit`: the newest entries first, one line each.
pub async fn audit(store: &dyn Store, args: AuditArgs) -> anyhow::Result<ExitCode> {
    let (filter, page) =
        parse_audit_query(&query_pairs(&args.query), now()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let page = store.audit(&filter, &page).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&page)?);
        return Ok(ExitCode::SUCCESS);
    }
    for a in &page.actions {
        println!(
            "{}  {:<12} {:<14} task {:<8} epoch {}→{}  {}{}",
            fmt_time(a.created_at),
            Shown(&a.actor).to_string(),
            a.action.as_str(),
            a.task_id,
            a.epoch_seen.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
            a.epoch_after.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
            Shown(&a.reason),
            a.reference.as_deref().map(|r| format!(" [{}]", Shown(r))).unwrap_or_default()
        );
    }
    if let Some(next) = page.next {
        println!("more: lastword audit '{}&after={next}'", args.query.trim_start_matches('?'));
    }
    Ok(ExitCode::SUCCESS)
}
