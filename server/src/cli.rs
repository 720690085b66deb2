//! The command line: `lastword serve`, `lastword migrate`, and what a newcomer sees in `--help`.

use crate::telemetry::LogFormat;
use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use lastword_core::Tokens;
use lastword_store::DbTarget;
use std::net::SocketAddr;
use std::path::PathBuf;

/// lastword: an on-call dashboard for lease-based task runners.
///
/// Shows every run's terminal state, lease holder and re-claims on a live timeline, and makes
/// lost-lease completions and empty-output failures impossible to miss.
///
/// With no DATABASE_URL, data lives in an embedded SQLite file (<data-dir>/lastword.db).
/// Point at PostgreSQL with DATABASE_URL=postgres://user@host:5432/lastword (the database is
/// created if it does not exist).
#[derive(Debug, Parser)]
#[command(name = "lastword", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// PostgreSQL (postgres://…) or SQLite (sqlite:path) URL. Unset: SQLite in --data-dir.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub database_url: Option<String>,

    /// Where the embedded SQLite database lives when DATABASE_URL is unset.
    #[arg(long, env = "LASTWORD_DATA_DIR", default_value = ".", global = true)]
    pub data_dir: PathBuf,

    /// Log format.
    #[arg(long, env = "LASTWORD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Human, global = true)]
    pub log_format: LogFormat,

    /// The output a healthy run ends with when a notification needed nothing.
    #[arg(long, env = "LASTWORD_NO_ACTION_TOKEN", default_value = "no action needed", global = true)]
    pub no_action_token: String,

    /// The output a healthy tick ends with when there was nothing to do.
    #[arg(long, env = "LASTWORD_SKIP_TOKEN", default_value = "skip", global = true)]
    pub skip_token: String,

    /// Failure causes a re-run cannot fix (comma-separated; `none` for none): re-queueing a task
    /// whose last run failed so needs --retry-deterministic (the page asks, the API wants
    /// `retry_deterministic`), and a bulk re-queue by filter leaves such tasks out.
    #[arg(long, env = "LASTWORD_DETERMINISTIC_CAUSES", default_value = "context_overflow", global = true,
          value_parser = lastword_core::RetryPolicy::parse)]
    pub deterministic_causes: lastword_core::RetryPolicy,
}

impl GlobalArgs {
    pub fn db_target(&self) -> anyhow::Result<DbTarget> {
        Ok(DbTarget::resolve(self.database_url.as_deref(), &self.data_dir)?)
    }

    pub fn tokens(&self) -> anyhow::Result<Tokens> {
        let tokens = Tokens { no_action: self.no_action_token.clone(), skip: self.skip_token.clone() };
        let blank = |s: &str| lastword_core::trim_token(s).is_empty();
        anyhow::ensure!(
            !blank(&tokens.no_action),
            "--no-action-token must not be blank: empty output is reserved for failure"
        );
        anyhow::ensure!(
            !blank(&tokens.skip),
            "--skip-token must not be blank: empty output is reserved for failure"
        );
        anyhow::ensure!(
            lastword_core::trim_token(&tokens.no_action) != lastword_core::trim_token(&tokens.skip),
            "--no-action-token and --skip-token must differ"
        );
        Ok(tokens)
    }
}

#[derive(Debug, Subcommand)]
// Parsed once at start-up: the size of `serve`'s options does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Serve the dashboard (runs migrations first).
    Serve(ServeArgs),
    /// Apply database migrations and exit.
    Migrate,
    /// Run the simulated fleet of agent workers against the database (no dashboard).
    ///
    /// Workers claim tasks under leases and finish with acted / no action needed / skip, and at
    /// the configured rates outlive their lease (lost-lease completions, double executions),
    /// fail with a cause, crash silently, or break the contract with empty output.
    Demo(DemoArgs),
    /// Read a password from stdin and print its argon2 hash, for a `[[user]]` entry of the
    /// users file (docs/auth.md).
    HashPassword,
    /// Print a fresh random API token (shown once) and the `[[token]]` entry to add to the
    /// users file, which holds only its SHA-256.
    NewToken(NewTokenArgs),
    /// Re-queue a task (fenced, checked against the epoch you saw, audited), or with --filter
    /// every task a run filter selects (prints a preview unless --expect gives its count).
    Requeue(crate::act::RequeueArgs),
    /// Record that a task's duplicate effect was compensated (or --undo it), audited.
    Compensate(crate::act::CompensateArgs),
    /// Take an attention item of a task (a double execution, an unsafe lost lease, a dead
    /// task) with a note, so everyone sees who has it; audited.
    Acknowledge(crate::act::AcknowledgeArgs),
    /// Print the audit trail of operator actions, newest first.
    Audit(crate::act::AuditArgs),
    /// Print a task's whole story (attempts, outputs, effects, audit) as Markdown for a ticket or
    /// postmortem, or as JSON.
    Export(ExportArgs),
    /// Delete settled history older than an age, in small batches the fleet does not notice
    /// (runs of tasks no worker holds, then tasks with nothing left; the audit trail is kept).
    Prune(PruneArgs),
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The task's id.
    pub task: i64,
    /// `md` (Markdown) or `json`.
    #[arg(long, default_value = "md", value_parser = ["md", "json"])]
    pub format: String,
    /// Link trace ids with this template, as `serve --trace-url-template` does.
    #[arg(long, env = "LASTWORD_TRACE_URL_TEMPLATE", value_parser = parse_trace_links)]
    pub trace_url_template: Option<lastword_core::TraceLinks>,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Delete runs claimed before this long ago (and tasks settled before it), e.g. 30d.
    #[arg(long, value_parser = parse_prune_age)]
    pub older_than: chrono::Duration,
    /// Rows per delete statement (each its own short transaction).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(i64).range(1..=100_000))]
    pub batch: i64,
    /// Pause between batches.
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub pause: std::time::Duration,
}

/// The youngest history a prune may delete: the last day is what on-call reads.
const MIN_PRUNE_AGE: chrono::Duration = chrono::Duration::days(1);

fn parse_prune_age(s: &str) -> Result<chrono::Duration, String> {
    let age =
        lastword_core::query::parse_age(s).ok_or_else(|| format!("{s:?} is not an age like 30d or 12h"))?;
    if age < MIN_PRUNE_AGE {
        return Err(format!("{s:?} is less than a day: the last day of history is what on-call reads"));
    }
    Ok(age)
}

#[derive(Debug, Args)]
pub struct NewTokenArgs {
    /// Who the token acts as (recorded as the actor of its actions).
    #[arg(long)]
    pub name: String,
    /// viewer or operator.
    #[arg(long, value_parser = parse_role)]
    pub role: lastword_core::Role,
}

fn parse_role(s: &str) -> Result<lastword_core::Role, String> {
    lastword_core::Role::parse(s).ok_or_else(|| format!("{s:?} is not a role (viewer or operator)"))
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub fleet: lastword_sim::FleetConfig,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "LASTWORD_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,

    /// A read replica of DATABASE_URL (PostgreSQL) for the pages' and the API's reads.
    /// Operator actions, their previews, the audit trail and the live change feed stay on
    /// DATABASE_URL. A lagging replica shows as that much staleness.
    #[arg(long, env = "DATABASE_READ_URL", hide_env_values = true)]
    pub database_read_url: Option<String>,

    /// Links every run that has a trace id to its trace: an http(s) URL with `{trace_id}` in
    /// it, e.g. `https://tempo.example/trace/{trace_id}` (docs/contract.md, "Trace ids").
    #[arg(long, env = "LASTWORD_TRACE_URL_TEMPLATE", value_parser = parse_trace_links)]
    pub trace_url_template: Option<lastword_core::TraceLinks>,

    /// Sends alerts to this webhook (repeat for several; space-separated in the environment):
    /// `https://…` takes every kind (a Slack body for hooks.slack.com, JSON otherwise), or
    /// `kinds=dead,loop;format=slack;url=https://…` (kinds: double_execution,
    /// unsafe_lost_lease, loop, dead). One message per incident and a resolved one when it
    /// clears; with several servers on one database only one sends (README, "On call").
    // Parsed by `serve`, not clap: a refused value must not be echoed (it holds the secret).
    #[arg(long = "notify-url", env = "LASTWORD_NOTIFY_URL", value_delimiter = ' ', hide_env_values = true)]
    pub notify_url: Vec<String>,

    /// After a receiver was sent an alert of a kind, the next alerts of that kind wait this
    /// long and go to it together.
    #[arg(long, env = "LASTWORD_NOTIFY_COOLDOWN", default_value = "5m", value_parser = humantime::parse_duration)]
    pub notify_cooldown: std::time::Duration,

    /// Also run the simulated fleet in this process, so the dashboard has live data.
    #[arg(long, env = "LASTWORD_DEMO")]
    pub demo: bool,

    #[command(flatten, next_help_heading = "Simulated fleet (with --demo)")]
    pub fleet: lastword_sim::FleetConfig,

    #[command(flatten, next_help_heading = "Authentication (docs/auth.md)")]
    pub auth: crate::auth::config::AuthArgs,
}

fn parse_trace_links(template: &str) -> Result<lastword_core::TraceLinks, String> {
    lastword_core::TraceLinks::parse(template)
}

/// Runs the command; the exit status is `SUCCESS` unless a command has its own (the actions
/// exit 3 when refused).
pub async fn run(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    let ok = std::process::ExitCode::SUCCESS;
    match &cli.command {
        Command::HashPassword => return hash_password().map(|()| ok),
        Command::NewToken(args) => {
            print!("{}", new_token(&args.name, args.role));
            return Ok(ok);
        }
        _ => {}
    }
    let target = cli.global.db_target()?;
    let tokens = cli.global.tokens()?;
    let retry = cli.global.deterministic_causes.clone();
    match cli.command {
        Command::Migrate => {
            tracing::info!(database = %target.redacted(), "applying migrations");
            let store = open(&target, tokens, retry).await?;
            let readiness = store.readiness().await;
            anyhow::ensure!(
                readiness.is_ready(),
                "migrations still pending: {:?}",
                readiness.pending_migrations
            );
            println!("migrations applied ({})", target.redacted());
            Ok(ok)
        }
        Command::Serve(args) => crate::serve::serve(target, tokens, retry, args).await.map(|()| ok),
        Command::Demo(args) => crate::serve::demo(target, tokens, args.fleet).await.map(|()| ok),
        Command::Requeue(args) => {
            crate::act::requeue(open(&target, tokens, retry).await?.as_ref(), args).await
        }
        Command::Compensate(args) => {
            crate::act::compensate(open(&target, tokens, retry).await?.as_ref(), args).await
        }
        Command::Acknowledge(args) => {
            crate::act::acknowledge(open(&target, tokens, retry).await?.as_ref(), args).await
        }
        Command::Audit(args) => crate::act::audit(open(&target, tokens, retry).await?.as_ref(), args).await,
        Command::Export(args) => export(open(&target, tokens, retry).await?.as_ref(), args).await,
        Command::Prune(args) => prune(open(&target, tokens, retry).await?.as_ref(), args).await.map(|()| ok),
        Command::HashPassword | Command::NewToken(_) => unreachable!("handled above"),
    }
}

/// `lastword export`: the task's story on stdout; exit 1 (a message on stderr) for no such task.
async fn export(
    store: &dyn lastword_store::Store,
    args: ExportArgs,
) -> anyhow::Result<std::process::ExitCode> {
    let Some(detail) =
        store.task_detail(args.task, lastword_core::read_now()).await.context("reading the task")?
    else {
        eprintln!("no task {}", args.task);
        return Ok(std::process::ExitCode::FAILURE);
    };
    if args.format == "json" {
        println!("{}", serde_json::to_string_pretty(&detail)?);
    } else {
        let links = args.trace_url_template.as_ref();
        print!("{}", lastword_core::export::task_markdown(&detail, links, lastword_core::write_now()));
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// `lastword prune`: batches until nothing older is left, with progress on stderr.
async fn prune(store: &dyn lastword_store::Store, args: PruneArgs) -> anyhow::Result<()> {
    use lastword_store::prune::{prune, PruneOptions};
    let cutoff = lastword_core::write_now() - args.older_than;
    eprintln!("pruning settled history claimed before {cutoff} (batches of {})", args.batch);
    let options = PruneOptions { batch: args.batch, pause: args.pause };
    let mut last_report = std::time::Instant::now();
    let report = prune(store.db(), cutoff, options, |r| {
        if last_report.elapsed() >= std::time::Duration::from_secs(5) {
            eprintln!("  … {} runs, {} tasks deleted so far", r.runs, r.tasks);
            last_report = std::time::Instant::now();
        }
    })
    .await
    .context("pruning")?;
    println!("pruned {} runs and {} tasks in {} batches", report.runs, report.tasks, report.batches);
    Ok(())
}

/// The store, migrated, for a one-shot command.
async fn open(
    target: &DbTarget,
    tokens: Tokens,
    retry: lastword_core::RetryPolicy,
) -> anyhow::Result<std::sync::Arc<dyn lastword_store::Store>> {
    lastword_store::open_with_policy(target, tokens, retry)
        .await
        .with_context(|| format!("opening {}", target.redacted()))
}

/// `lastword hash-password`: the first line of stdin (so `echo … |` and a typed password both
/// work), hashed.
fn hash_password() -> anyhow::Result<()> {
    use std::io::{BufRead, IsTerminal};
    if std::io::stdin().is_terminal() {
        eprintln!("password (echoed; end with Enter):");
    }
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).context("reading the password from stdin")?;
    let password = line.trim_end_matches(['\r', '\n']);
    anyhow::ensure!(!password.is_empty(), "empty password: type one, or pipe it in");
    println!("{}", crate::auth::users::hash_password(password));
    Ok(())
}

/// `lastword new-token`'s output: the token, then the TOML entry for it.
pub fn new_token(name: &str, role: lastword_core::Role) -> String {
    let (token, sha256) = crate::auth::users::new_token();
    format!(
        "# The token, shown only now; give it to {name}, who sends it as Authorization: Bearer <token>\n\
         {token}\n\n\
         # Add to the users file:\n\
         [[token]]\n\
         name = {name:?}\n\
         role = \"{role}\"\n\
         sha256 = \"{sha256}\"\n"
    )
}
