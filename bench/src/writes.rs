//! What lastword costs the runner it watches: the runner's own statements (exactly
//! `lastword_runner::sql`, one transaction per move) in three loops — heartbeat, claim, finish —
//! each with several concurrent clients on ~100 k leased/queued tasks, timed in alternating
//! phases on the same database:
//!
//! - **installed**: lastword's triggers present and the dashboard server running (with one
//!   open event stream, so its live feed is working);
//! - **triggers only**: the triggers present, no dashboard server (what the triggers alone cost,
//!   apart from the work a running server's followers give the database);
//! - **without**: every user trigger on the contract tables disabled and no server.
//!
//! The phases alternate (installed/triggers only/without, then the reverse, …) so drift in the
//! machine's load, which other builds share, falls on every side, and every phase starts from
//! the same state ([`prepare_phase`]). The ratio per loop is its median throughput installed ÷
//! its median without, over the alternations; the overall figure is their geometric mean. The
//! same for triggers only ÷ without says how much of the cost is the triggers' and how much the
//! running server's.
//!
//! Phases a few seconds long, minutes apart, also differ by whatever else the machine did
//! meanwhile (the triggers-only ÷ without ratio of the same loop moved by ±10 % from one
//! alternation to the next, more than the triggers cost; two *without* finish phases of one
//! small run gave 2 799 and 3 342 tx/s). So each loop also runs twice more with the mode
//! switched every [`SLICE`] within the run ([`interleave`]): once between *without* and
//! *triggers only*, once between *without* and *installed* — the server is paused
//! (`SIGSTOP`) in the slices without and resumed (`SIGCONT`) in the slices installed, so it
//! follows the changes of exactly the slices that wrote them. Each slice of the mode is
//! compared with the slices just before and after it, seconds apart ([`interleaved_ratio`]);
//! drift cancels, and the installed run's figure is the benchmark's `runner_write_ratio`
//! (the phases' is kept beside it).
//!
//! Every phase and slice also records where the machine's cores went ([`crate::cpu`]): the
//! server's own process, PostgreSQL's, the benchmark's.
//!
//! The server's share is the work it does for what the runner writes (following `change_log`,
//! recounting the rollups those changes touched). Inside the installed phase that work spills
//! from one loop into the next, as it would in a fleet; across phases it does not: the server
//! follows the changes of its own phase before it is stopped, and those written while it was
//! not running (triggers only) before its phase is timed.

use crate::cli::Args;
use crate::http::Client;
use crate::server::Server;
use anyhow::Context;
use lastword_runner::sql;
use sqlx::postgres::PgPool;
use sqlx::{Connection, Executor};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Installed,
    TriggersOnly,
    Without,
}

impl Mode {
    fn triggers(self) -> bool {
        self != Mode::Without
    }

    fn server(self) -> bool {
        self == Mode::Installed
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Loop {
    Heartbeat,
    Claim,
    Finish,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Sample {
    pub alternation: usize,
    pub mode: Mode,
    pub lp: Loop,
    pub transactions: u64,
    pub secs: f64,
    pub tx_per_s: f64,
    /// Where the machine's cores went meanwhile (absent without `/proc`).
    pub cpu: Option<crate::cpu::Usage>,
}

/// One counted slice of an interleaved run ([`interleave`]).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Slice {
    pub lp: Loop,
    /// The mode the run switched to and from (triggers only or installed).
    pub run: Mode,
    /// This slice's: `run` or without.
    pub mode: Mode,
    pub tx_per_s: f64,
    pub cpu: Option<crate::cpu::Usage>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Writes {
    pub clients: usize,
    pub leased_tasks: usize,
    pub samples: Vec<Sample>,
    /// (loop, installed tx/s, without tx/s, ratio)
    pub loops: Vec<(Loop, f64, f64, f64)>,
    pub ratio: f64,
    /// (loop, triggers-only tx/s, ratio to without)
    pub triggers_only: Vec<(Loop, f64, f64)>,
    /// Geometric mean of the triggers-only ratios.
    pub triggers_only_ratio: f64,
    /// (loop, installed ÷ without, triggers only ÷ without), each the median over the
    /// alternations of that alternation's own ratio: drift between alternations cancels.
    pub paired: Vec<(Loop, f64, f64)>,
    /// Geometric means of the paired ratios (installed, triggers only).
    pub paired_ratio: f64,
    pub paired_triggers_only_ratio: f64,
    /// The interleaved runs' slices, in order, per loop.
    pub slices: Vec<Slice>,
    /// (loop, slices with triggers compared, the median of their ratios: [`interleaved_ratio`]),
    /// triggers only.
    pub interleaved: Vec<(Loop, usize, f64)>,
    /// Geometric mean of the interleaved ratios (NaN when not measured).
    pub interleaved_ratio: f64,
    /// The same, installed (triggers and the running server) ÷ without.
    pub interleaved_installed: Vec<(Loop, usize, f64)>,
    pub interleaved_installed_ratio: f64,
}

/// The three loops, in the order every phase runs them.
const LOOPS: [Loop; 3] = [Loop::Heartbeat, Loop::Claim, Loop::Finish];

/// The contract tables whose user triggers are lastword's.
const TRIGGER_TABLES: [&str; 4] = ["tasks", "runs", "effects", "operator_actions"];

/// How long an interleaved slice is counted.
const SLICE: Duration = Duration::from_secs(2);
/// How long after a switch a slice's counting starts: the switch waits for the writers' open
/// transactions and holds their next ones back until it commits.
const SETTLE: Duration = Duration::from_millis(250);

/// A lease one client holds and writes under.
#[derive(Clone, Debug)]
struct Lease {
    task_id: i64,
    run_id: i64,
    epoch: i64,
    owner: String,
}

/// Per client: leases to heartbeat (never used up) and leases to finish (used up, refilled by
/// that client's claims).
struct Pools {
    heartbeat: Vec<Vec<Lease>>,
    finish: Vec<Arc<Mutex<VecDeque<Lease>>>>,
}

pub async fn measure(
    pool: &PgPool,
    url: &str,
    server: &mut Server,
    http: &Client,
    args: &Args,
) -> anyhow::Result<Writes> {
    let clients = args.write_clients;
    // Enough leases that the finish loops rarely run dry (their pool is refilled by the claims),
    // and enough queued tasks for every claim phase at a couple of thousand claims a second.
    let leased = ((50_000.0 * args.scale).round() as usize).max(40_000);
    let queued = leased
        .max(2_500 * (args.write_secs as usize * 3 * args.alternations + args.interleave_secs as usize));
    let pools = prepare(url, clients, leased, queued).await.context("leasing the write-loop tasks")?;
    let writers = crate::db::connect(url, clients as u32).await?;
    let setup = setup_pool(url).await?;
    let secs = Duration::from_secs(args.write_secs);
    let mut mode = Mode::Installed;
    let mut stream = open_stream(http).await?;
    let mut samples = Vec::new();
    for alternation in 0..args.alternations {
        let mut order = [Mode::Installed, Mode::TriggersOnly, Mode::Without];
        if alternation % 2 == 1 {
            order.reverse();
        }
        for want in order {
            if want != mode {
                if let Some(s) = stream.take() {
                    s.abort();
                }
                switch(pool, server, mode, want).await?;
                if want.server() {
                    stream = open_stream(http).await?;
                }
                mode = want;
            }
            for lp in LOOPS {
                prepare_phase(pool, &setup, lp, &pools, args.write_secs).await?;
                let meter = crate::cpu::Meter::start(server.pid());
                let (transactions, took) = run_loop(&writers, lp, &pools, secs).await?;
                let cpu = meter.finish();
                let s = Sample {
                    alternation,
                    mode,
                    lp,
                    transactions,
                    secs: took,
                    tx_per_s: transactions as f64 / took,
                    cpu,
                };
                println!(
                    "writes: #{alternation} {mode:?} {lp:?}: {:.0} tx/s ({transactions} in {took:.1} s); {}",
                    s.tx_per_s,
                    cpu.map_or_else(|| "CPU not read".to_string(), |c| c.to_string())
                );
                samples.push(s);
            }
        }
    }
    if let Some(s) = stream.take() {
        s.abort();
    }
    let mut slices = Vec::new();
    if args.interleave_secs > 0 {
        for run in [Mode::TriggersOnly, Mode::Installed] {
            // Every run starts without: triggers off, and no server (triggers only) or a paused
            // one that has followed every change so far (installed).
            switch(pool, server, mode, Mode::Without).await?;
            mode = Mode::Without;
            if run.server() {
                server.spawn().await?;
                caught_up(pool).await?;
                stream = open_stream(http).await?;
                server.pause().await?;
            }
            let each = Duration::from_secs(args.interleave_secs);
            for lp in LOOPS {
                prepare_phase(pool, &setup, lp, &pools, args.interleave_secs).await?;
                let run_slices = interleave(pool, &setup, server, &writers, lp, &pools, each, run).await;
                if run.server() {
                    // Resumed whatever happened, so nothing later waits on a stopped process.
                    server.resume().await?;
                }
                slices.extend(run_slices?);
                if run.server() && lp != Loop::Finish {
                    server.pause().await?;
                }
            }
            if run.server() {
                // Running, triggers off: put the triggers back and it is installed again.
                set_triggers(pool, true).await?;
                mode = Mode::Installed;
            }
        }
    }
    if let Some(s) = stream.take() {
        s.abort();
    }
    if mode != Mode::Installed {
        switch(pool, server, mode, Mode::Installed).await?;
    }
    writers.close().await;
    setup.close().await;
    release(url).await.context("releasing the write-loop leases")?;
    // A loop's rate in a mode is the median over the alternations: one phase that a burst of
    // other work on the machine slowed does not move it, as it would a sum.
    let rate = |lp: Loop, mode: Mode| {
        let mut rates: Vec<f64> =
            samples.iter().filter(|s| s.lp == lp && s.mode == mode).map(|s| s.tx_per_s).collect();
        crate::stats::Summary::of_ms(&mut rates).p50_ms
    };
    let loops: Vec<(Loop, f64, f64, f64)> = LOOPS
        .into_iter()
        .map(|lp| {
            let (with, without) = (rate(lp, Mode::Installed), rate(lp, Mode::Without));
            (lp, with, without, with / without)
        })
        .collect();
    let triggers_only: Vec<(Loop, f64, f64)> = loops
        .iter()
        .map(|(lp, _, without, _)| {
            let t = rate(*lp, Mode::TriggersOnly);
            (*lp, t, t / without)
        })
        .collect();
    let ratio = geometric_mean(loops.iter().map(|l| l.3));
    let triggers_only_ratio = geometric_mean(triggers_only.iter().map(|l| l.2));
    let paired: Vec<(Loop, f64, f64)> = LOOPS
        .into_iter()
        .map(|lp| {
            (
                lp,
                paired_median(&samples, lp, Mode::Installed),
                paired_median(&samples, lp, Mode::TriggersOnly),
            )
        })
        .collect();
    let paired_ratio = geometric_mean(paired.iter().map(|p| p.1));
    let paired_triggers_only_ratio = geometric_mean(paired.iter().map(|p| p.2));
    for ((lp, with, without, r), (_, t, tr)) in loops.iter().zip(&triggers_only) {
        println!(
            "writes: {lp:?}: installed {with:.0} tx/s, triggers only {t:.0}, without {without:.0}; \
             ratios {r:.3} and {tr:.3}"
        );
    }
    println!("writes: overall ratio (geometric mean) {ratio:.3}; triggers only {triggers_only_ratio:.3}");
    for (lp, installed, triggers) in &paired {
        println!(
            "writes: {lp:?} paired per alternation: installed {installed:.3}, triggers only {triggers:.3}"
        );
    }
    println!("writes: paired overall {paired_ratio:.3}; triggers only {paired_triggers_only_ratio:.3}");
    let interleaved_of = |run: Mode| -> (Vec<(Loop, usize, f64)>, f64) {
        if !slices.iter().any(|s| s.run == run) {
            return (Vec::new(), f64::NAN);
        }
        let per_loop: Vec<(Loop, usize, f64)> = LOOPS
            .into_iter()
            .map(|lp| {
                let (n, r) = interleaved_ratio(&slices, lp, run);
                (lp, n, r)
            })
            .collect();
        let overall = geometric_mean(per_loop.iter().map(|i| i.2));
        for (lp, n, r) in &per_loop {
            println!("writes: {lp:?} interleaved: {run:?} ÷ without {r:.3} (median of {n} slices)");
        }
        (per_loop, overall)
    };
    let (interleaved, interleaved_ratio) = interleaved_of(Mode::TriggersOnly);
    let (interleaved_installed, interleaved_installed_ratio) = interleaved_of(Mode::Installed);
    Ok(Writes {
        clients,
        leased_tasks: leased,
        samples,
        loops,
        ratio,
        triggers_only,
        triggers_only_ratio,
        paired,
        paired_ratio,
        paired_triggers_only_ratio,
        slices,
        interleaved,
        interleaved_ratio,
        interleaved_installed,
        interleaved_installed_ratio,
    })
}

impl Writes {
    /// The judged figure: installed ÷ without from the interleaved run when it was measured
    /// (drift cancels within seconds), else from the alternating phases.
    pub fn headline_ratio(&self) -> f64 {
        if self.interleaved_installed_ratio.is_finite() {
            self.interleaved_installed_ratio
        } else {
            self.ratio
        }
    }

    /// The median over the interleaved installed slices of loop `lp` of the server's cores.
    pub fn median_server_cores(&self, lp: Loop) -> Option<f64> {
        let mut cores: Vec<f64> = self
            .slices
            .iter()
            .filter(|s| s.lp == lp && s.mode == Mode::Installed)
            .filter_map(|s| Some(s.cpu?.server))
            .collect();
        (!cores.is_empty()).then(|| crate::stats::Summary::of_ms(&mut cores).p50_ms)
    }
}

/// For each slice of the interleaved run `run` in that mode that has a slice without on both
/// sides, its rate ÷ the geometric mean of those two; how many there were and their median (NaN
/// for none). The geometric mean cancels a drift that changes the rate by the same factor from
/// slice to slice (the claim loop slows so: each claim walks past the leases earlier claims
/// took), and a steady linear drift all but exactly.
fn interleaved_ratio(slices: &[Slice], lp: Loop, run: Mode) -> (usize, f64) {
    let of_run: Vec<&Slice> = slices.iter().filter(|s| s.lp == lp && s.run == run).collect();
    let mut ratios: Vec<f64> = of_run
        .windows(3)
        .filter(|w| w[1].mode == run && w[0].mode == Mode::Without && w[2].mode == Mode::Without)
        .map(|w| w[1].tx_per_s / (w[0].tx_per_s * w[2].tx_per_s).sqrt())
        .filter(|r| r.is_finite())
        .collect();
    if ratios.is_empty() {
        return (0, f64::NAN);
    }
    (ratios.len(), crate::stats::Summary::of_ms(&mut ratios).p50_ms)
}

/// One run of `lp` for about `total`, switched between without and `run` every [`SLICE`]
/// (starting and ending without, so every slice of `run` lies between two without): the user
/// triggers off and on, and for `run` installed the server paused and resumed (it must be
/// running and paused when called). A trigger switch is one transaction over the four tables,
/// so every writer's transaction runs whole under one setting; a slice is counted from
/// [`SETTLE`] after its switch.
// Three connections (admin, setup, writers) and the run's shape; a struct would only name them again.
#[allow(clippy::too_many_arguments)]
async fn interleave(
    pool: &PgPool,
    setup: &PgPool,
    server: &mut Server,
    writers: &PgPool,
    lp: Loop,
    pools: &Pools,
    total: Duration,
    run: Mode,
) -> anyhow::Result<Vec<Slice>> {
    let per_slice = (SLICE + SETTLE).as_secs_f64();
    let count = ((total.as_secs_f64() / per_slice) as usize).max(3) | 1;
    let progress = Arc::new(Progress::default());
    // The writers stop when told; the deadline only bounds a switch that never returns.
    let deadline = Instant::now() + total * 3 + Duration::from_secs(30);
    let clients = spawn_clients(writers, lp, pools, deadline, &progress);
    let mut slices = Vec::with_capacity(count);
    let mut failed = None;
    for i in 0..count {
        let mode = if i % 2 == 1 { run } else { Mode::Without };
        if let Err(e) = switch_slice(pool, server, run, mode).await {
            failed = Some(e);
            break;
        }
        // Every slice of a claim run starts with only its own claims ahead of the queue, as
        // every claim phase does: without this the run slowed from about 1 100 to 150 claims a
        // second over its two minutes, walking past the tasks it had leased (the 10 M run of
        // 37b722e). Inside the settling time, so no slice counts it.
        let settle_from = Instant::now();
        if lp == Loop::Claim {
            if let Err(e) = requeue_claimed(setup, pools).await {
                failed = Some(e.context("re-queueing within an interleaved claim run"));
                break;
            }
        }
        tokio::time::sleep(SETTLE.saturating_sub(settle_from.elapsed())).await;
        let meter = crate::cpu::Meter::start(server.pid());
        let (from, started) = (progress.committed.load(Ordering::Relaxed), Instant::now());
        tokio::time::sleep(SLICE).await;
        let done = progress.committed.load(Ordering::Relaxed) - from;
        let tx_per_s = done as f64 / started.elapsed().as_secs_f64();
        let cpu = meter.finish();
        slices.push(Slice { lp, run, mode, tx_per_s, cpu });
    }
    progress.stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.context("write client")??;
    }
    switch_slice(pool, server, run, Mode::Without).await?;
    if let Some(e) = failed {
        return Err(e.context("switching modes within a loop"));
    }
    let rates: Vec<String> = slices
        .iter()
        .map(|s| format!("{}{:.0}", if s.mode == Mode::Without { "" } else { "+" }, s.tx_per_s))
        .collect();
    println!("writes: {lp:?} interleaved (+ {run:?}): {}", rates.join(" "));
    let server_cores: Vec<String> = slices
        .iter()
        .filter(|s| s.mode == Mode::Installed)
        .filter_map(|s| s.cpu.map(|c| format!("{:.2}", c.server)))
        .collect();
    if !server_cores.is_empty() {
        println!("writes: {lp:?} interleaved: the server's cores in its slices: {}", server_cores.join(" "));
    }
    Ok(slices)
}

/// Puts the database and the server in `mode` for the next slice of the interleaved run `run`:
/// the triggers on or off, and in the installed run the server resumed or paused. Pausing comes
/// before the triggers go off and resuming after they come on, so the server never runs in a
/// slice without. (The triggers-only run has no server.)
async fn switch_slice(pool: &PgPool, server: &mut Server, run: Mode, mode: Mode) -> anyhow::Result<()> {
    if run.server() && !mode.server() {
        server.pause().await?;
    }
    set_triggers(pool, mode.triggers()).await?;
    if run.server() && mode.server() {
        server.resume().await?;
    }
    Ok(())
}

/// Turns every user trigger of the contract tables on or off, in one transaction.
async fn set_triggers(pool: &PgPool, on: bool) -> anyhow::Result<()> {
    let verb = if on { "ENABLE" } else { "DISABLE" };
    let statements: String =
        TRIGGER_TABLES.iter().map(|t| format!("ALTER TABLE {t} {verb} TRIGGER USER; ")).collect();
    sqlx::raw_sql(&format!("BEGIN; {statements}COMMIT;")).execute(pool).await?;
    Ok(())
}

/// What a loop's clients share: transactions committed so far, and when to stop.
#[derive(Default)]
struct Progress {
    committed: AtomicU64,
    stop: AtomicBool,
}

/// The median over the alternations of `mode`'s rate ÷ without's rate in the same alternation,
/// for loop `lp` (an alternation missing either is left out).
fn paired_median(samples: &[Sample], lp: Loop, mode: Mode) -> f64 {
    let rate = |alternation: usize, m: Mode| {
        samples.iter().find(|s| s.alternation == alternation && s.lp == lp && s.mode == m).map(|s| s.tx_per_s)
    };
    let alternations = samples.iter().map(|s| s.alternation).max().map_or(0, |a| a + 1);
    let mut ratios: Vec<f64> = (0..alternations)
        .filter_map(|a| Some(rate(a, mode)? / rate(a, Mode::Without)?))
        .filter(|r| r.is_finite())
        .collect();
    crate::stats::Summary::of_ms(&mut ratios).p50_ms
}

fn geometric_mean(xs: impl ExactSizeIterator<Item = f64>) -> f64 {
    let n = xs.len().max(1) as f64;
    (xs.map(f64::ln).sum::<f64>() / n).exp()
}

/// Leases `leased` fresh tasks (half to heartbeat, half to finish) with a running run each,
/// and tops the queue up to `queued` tasks for the claims, written with triggers off: setting
/// up the experiment is not part of it.
async fn prepare(url: &str, clients: usize, leased: usize, queued: usize) -> anyhow::Result<Pools> {
    let setup = setup_pool(url).await?;
    // Enough queued tasks for the claim loops (a reused database had some claimed already),
    // written first: the claim takes the lowest claimable id, and queued tasks behind tens of
    // thousands of held leases would measure a walk past them (a fleet holds one per worker).
    sqlx::query(
        "INSERT INTO tasks (kind, source, safety, status, payload, created_at, updated_at) \
         SELECT 'triage_issue', 'notification', 'idempotent', 'queued', '{}'::jsonb, now(), now() \
         FROM generate_series(1, GREATEST(0, $1 - (SELECT count(*) FROM tasks WHERE status = 'queued')))",
    )
    .bind(queued as i64)
    .execute(&setup)
    .await?;
    let mut pools = Pools {
        heartbeat: vec![Vec::new(); clients],
        finish: (0..clients).map(|_| Arc::new(Mutex::new(VecDeque::new()))).collect(),
    };
    let heartbeat = lease(&setup, "bench-heartbeat-", clients, leased / 2).await?;
    for (client, leases) in heartbeat.into_iter().enumerate() {
        pools.heartbeat[client] = leases;
    }
    top_up_finish(&setup, &pools, leased - leased / 2).await?;
    sqlx::raw_sql("ANALYZE tasks, runs").execute(&setup).await?;
    setup.close().await;
    println!("writes: leased {leased} tasks for {clients} clients");
    Ok(pools)
}

/// Leases `n` fresh tasks, each with a running run, to owners `{prefix}1` … `{prefix}{clients}`
/// in turn; the leases per client.
async fn lease(setup: &PgPool, prefix: &str, clients: usize, n: usize) -> anyhow::Result<Vec<Vec<Lease>>> {
    let mut tx = setup.begin().await?;
    let owners: Vec<(i64, String)> = sqlx::query_as(
        "INSERT INTO tasks (kind, source, safety, status, payload, owner, lease_epoch, lease_expires_at, attempts, \
           max_attempts, created_at, updated_at) \
         SELECT 'send_digest', 'tick', 'idempotent', 'leased', '{\"bench\": \"write-loop\"}'::jsonb, \
           $3 || (g % $2 + 1), 1, now() + interval '1 day', 1, 3, now(), now() \
         FROM generate_series(0, $1 - 1) g RETURNING id, owner",
    )
    .bind(n as i64)
    .bind(clients as i64)
    .bind(prefix)
    .fetch_all(&mut *tx)
    .await?;
    let ids: Vec<i64> = owners.iter().map(|(id, _)| *id).collect();
    let runs: Vec<(i64, i64, String)> = sqlx::query_as(
        "INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at) \
         SELECT id, owner, 1, now(), now() + interval '1 day' FROM tasks \
         WHERE id = ANY($1) ORDER BY id RETURNING id, task_id, worker",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    anyhow::ensure!(
        runs.len() == owners.len(),
        "leased {} tasks but wrote {} runs",
        owners.len(),
        runs.len()
    );
    let mut per_client = vec![Vec::new(); clients];
    for (run_id, task_id, owner) in runs {
        let client = owner.rsplit('-').next().and_then(|n| n.parse::<usize>().ok()).unwrap_or(1) - 1;
        per_client[client % clients].push(Lease { task_id, run_id, epoch: 1, owner });
    }
    Ok(per_client)
}

/// Gives the finish loops at least `total` leases between them.
async fn top_up_finish(setup: &PgPool, pools: &Pools, total: usize) -> anyhow::Result<()> {
    let clients = pools.finish.len();
    let held: usize = pools.finish.iter().map(|q| q.lock().map(|q| q.len()).unwrap_or(0)).sum();
    if held >= total {
        return Ok(());
    }
    let fresh = lease(setup, "bench-finish-", clients, total - held).await?;
    for (queue, leases) in pools.finish.iter().zip(fresh) {
        if let Ok(mut q) = queue.lock() {
            q.extend(leases);
        }
    }
    Ok(())
}

/// Removes what the write loops wrote (triggers off): their runs, the tasks they leased, and
/// the leases their claims still hold (those tasks are queued again). A kept database then
/// shows only its history and the live fleet — not tens of thousands of runs that all
/// finished a minute ago on the timeline — and a later run can lease afresh.
async fn release(url: &str) -> anyhow::Result<()> {
    let setup = setup_pool(url).await?;
    let mut tx = setup.begin().await?;
    sqlx::query("DELETE FROM runs WHERE worker LIKE 'bench-%'").execute(&mut *tx).await?;
    sqlx::query("DELETE FROM tasks WHERE payload @> '{\"bench\": \"write-loop\"}'::jsonb")
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE tasks SET status = 'queued', owner = NULL, lease_expires_at = NULL \
         WHERE status = 'leased' AND owner LIKE 'bench-%'",
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    setup.close().await;
    Ok(())
}

/// One connection with triggers off: preparing and cleaning up is not part of the experiment.
async fn setup_pool(url: &str) -> anyhow::Result<PgPool> {
    let options = <sqlx::postgres::PgConnectOptions as std::str::FromStr>::from_str(url)?
        .application_name("lastword-bench-setup")
        .options([("session_replication_role", "replica")]);
    Ok(sqlx::postgres::PgPoolOptions::new().max_connections(1).connect_with(options).await?)
}

async fn open_stream(http: &Client) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let stream = crate::live::connect(http, tx).await?;
    crate::live::wait_open(&mut rx).await?;
    // Drain whatever arrives: the viewer is there, it does not refetch.
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    Ok(Some(tokio::spawn(async move {
        let _ = stream.await;
        drain.abort();
    })))
}

/// Installed: triggers on, server up. Triggers only: server down. Without: server down, every
/// user trigger off.
async fn switch(pool: &PgPool, server: &mut Server, from: Mode, to: Mode) -> anyhow::Result<()> {
    if from.server() && !to.server() {
        // The changes its own loops wrote are the installed server's work: let it finish them
        // rather than leave them to its next start.
        caught_up(pool).await?;
        server.stop().await;
    }
    if from.triggers() != to.triggers() {
        set_triggers(pool, to.triggers()).await?;
    }
    if to.server() && !from.server() {
        server.spawn().await?;
        // The changes written while no server ran (the triggers-only phase's) are not the
        // installed phase's to pay for: measuring starts once the server has followed them.
        caught_up(pool).await?;
    }
    Ok(())
}

/// Waits (at most [`CATCH_UP_LIMIT`]) until the server's rollups have followed every change
/// in `change_log` — the work a running server does for what the runner writes; prints how
/// long that took.
async fn caught_up(pool: &PgPool) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let (cursor, newest): (Option<i64>, Option<i64>) = sqlx::query_as(
            "SELECT (SELECT change_cursor FROM rollup_state WHERE id = 1), (SELECT MAX(id) FROM change_log)",
        )
        .fetch_one(pool)
        .await?;
        let behind = newest.unwrap_or(0) - cursor.unwrap_or(0);
        if behind <= 0 || started.elapsed() > CATCH_UP_LIMIT {
            println!(
                "writes: server caught up with the change log in {:.1} s ({behind} behind)",
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What every timed loop starts from, so that phases of different modes start equal:
/// - a finish phase holds enough leases for its whole time (the claims alone refill a few
///   seconds' worth, so only the first finish phase ran 10 s and the others about 2 s);
/// - a claim phase starts with no task leased by an earlier claim phase ([`requeue_claimed`]),
///   then `VACUUM tasks`: the claimable index's dead entries (tasks claimed and finished since
///   the last vacuum) are otherwise walked past by every candidate query until autovacuum, at a
///   moment of its own, removes them;
/// - every loop starts right after a `CHECKPOINT`: otherwise a checkpoint (every 5 min by
///   default, spread over 4.5 of them) lands on whichever phases it happens to, and the first
///   write to each page after it logs the whole page (one alternation's three modes ran at a
///   third of the next one's speed).
async fn prepare_phase(
    pool: &PgPool,
    setup: &PgPool,
    lp: Loop,
    pools: &Pools,
    secs: u64,
) -> anyhow::Result<()> {
    match lp {
        Loop::Finish => top_up_finish(setup, pools, FINISH_PER_SEC * secs as usize)
            .await
            .context("leasing tasks for a finish phase")?,
        Loop::Claim => {
            requeue_claimed(setup, pools).await.context("re-queueing the last claim phase's tasks")?;
            sqlx::raw_sql("VACUUM tasks").execute(pool).await.context("VACUUM before a claim loop")?;
        }
        Loop::Heartbeat => {}
    }
    pool.execute("CHECKPOINT").await.context("CHECKPOINT before a write loop")?;
    Ok(())
}

/// Puts the tasks that earlier claim phases took, and no finish phase has finished, back in the
/// queue (triggers off), and takes their leases out of the finish pools.
///
/// Why: a claim takes the lowest claimable id, and a task it leased stays in the claimable index
/// (status `leased`) ahead of every queued one until it is finished. The finish loops take the
/// oldest leases first, so how many of those a claim phase had to walk past depended on how far
/// the finish phases before it had got: thousands more in one phase than in the next (claim
/// phases of one mode ran from 304 to 945 tx/s at full scale, 8d9f2d0). A fleet holds one
/// lease per worker, not thousands.
///
/// Also called between the slices of an interleaved claim run, with its claims running: the
/// tasks go back first and the pools lose their leases after, so a claim that commits in
/// between leaves a leased task without a pool entry (re-queued by the next call), never a pool
/// entry for a task that is queued again.
async fn requeue_claimed(setup: &PgPool, pools: &Pools) -> anyhow::Result<()> {
    sqlx::query(
        "UPDATE tasks SET status = 'queued', owner = NULL, lease_expires_at = NULL, attempts = 0 \
         WHERE status = 'leased' AND owner LIKE $1 || '%'",
    )
    .bind(CLAIM_OWNER_PREFIX)
    .execute(setup)
    .await?;
    for queue in &pools.finish {
        if let Ok(mut q) = queue.lock() {
            q.retain(|l| !l.owner.starts_with(CLAIM_OWNER_PREFIX));
        }
    }
    Ok(())
}

/// The claim loops' worker names: `bench-claim-1`, … (released at the end like every `bench-` owner).
const CLAIM_OWNER_PREFIX: &str = "bench-claim-";

/// Leases a finish phase is given per second of it: more than the fastest finish loop measured
/// (5 355 tx/s, BENCHMARKS.md of 31e9722).
const FINISH_PER_SEC: usize = 8_000;

/// How long [`caught_up`] waits at the most (a refresh every 2 s follows 20 000 changes).
const CATCH_UP_LIMIT: Duration = Duration::from_secs(60);

/// One loop with every client on its own connection for `secs`; committed transactions and
/// the time they took.
async fn run_loop(writers: &PgPool, lp: Loop, pools: &Pools, secs: Duration) -> anyhow::Result<(u64, f64)> {
    let started = Instant::now();
    let progress = Arc::new(Progress::default());
    let mut total = 0;
    for h in spawn_clients(writers, lp, pools, started + secs, &progress) {
        total += h.await.context("write client")??;
    }
    Ok((total, started.elapsed().as_secs_f64()))
}

/// Every client of a loop on its own task, until `deadline` or `progress.stop`.
fn spawn_clients(
    writers: &PgPool,
    lp: Loop,
    pools: &Pools,
    deadline: Instant,
    progress: &Arc<Progress>,
) -> Vec<tokio::task::JoinHandle<anyhow::Result<u64>>> {
    (0..pools.finish.len())
        .map(|c| {
            let writers = writers.clone();
            let heartbeat = pools.heartbeat[c].clone();
            let finish = pools.finish[c].clone();
            let progress = progress.clone();
            tokio::spawn(
                async move { client_loop(writers, lp, c, heartbeat, finish, deadline, progress).await },
            )
        })
        .collect()
}

async fn client_loop(
    writers: PgPool,
    lp: Loop,
    client: usize,
    heartbeat: Vec<Lease>,
    finish: Arc<Mutex<VecDeque<Lease>>>,
    deadline: Instant,
    progress: Arc<Progress>,
) -> anyhow::Result<u64> {
    let mut conn = writers.acquire().await?;
    let worker = format!("{CLAIM_OWNER_PREFIX}{}", client + 1);
    let lease_len = chrono::Duration::hours(1);
    let mut done = 0u64;
    let mut i = 0usize;
    while Instant::now() < deadline && !progress.stop.load(Ordering::Relaxed) {
        let now = chrono::Utc::now();
        let mut tx = conn.begin().await?;
        match lp {
            Loop::Heartbeat => {
                let Some(l) = heartbeat.get(i % heartbeat.len().max(1)) else { break };
                i += 1;
                let matched = sqlx::query(sql::HEARTBEAT_TASK)
                    .bind(l.task_id)
                    .bind(&l.owner)
                    .bind(l.epoch)
                    .bind(now + lease_len)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if matched == 0 {
                    sqlx::query(sql::CURRENT_HOLDER).bind(l.task_id).execute(&mut *tx).await?;
                } else {
                    sqlx::query(sql::HEARTBEAT_RUN)
                        .bind(l.run_id)
                        .bind(now)
                        .bind(now + lease_len)
                        .execute(&mut *tx)
                        .await?;
                }
            }
            Loop::Claim => {
                let claimed = claim(&mut tx, &worker, now, lease_len).await?;
                match claimed {
                    Some(l) => {
                        if let Ok(mut q) = finish.lock() {
                            q.push_back(l);
                        }
                    }
                    None => {
                        // The queue ran dry: count nothing more for this client.
                        tx.commit().await?;
                        break;
                    }
                }
            }
            Loop::Finish => {
                let next = finish.lock().ok().and_then(|mut q| q.pop_front());
                let Some(l) = next else { break };
                let output = "no action needed";
                let status: Option<String> = sqlx::query_scalar(sql::FINISH_SUCCESS_TASK)
                    .bind(l.task_id)
                    .bind(&l.owner)
                    .bind(l.epoch)
                    .bind(output)
                    .bind(now)
                    .fetch_optional(&mut *tx)
                    .await?;
                if status.is_none() {
                    sqlx::query(sql::CURRENT_HOLDER).bind(l.task_id).execute(&mut *tx).await?;
                }
                sqlx::query(sql::FINISH_RUN)
                    .bind(l.run_id)
                    .bind(now)
                    .bind(output)
                    .bind(None::<String>)
                    .bind(None::<String>)
                    .bind(i32::from(status.is_some()))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        done += 1;
        progress.committed.fetch_add(1, Ordering::Relaxed);
    }
    Ok(done)
}

/// The claim transaction's statements (after BEGIN), as `Runner::claim` issues them.
async fn claim(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    worker: &str,
    now: chrono::DateTime<chrono::Utc>,
    lease_len: chrono::Duration,
) -> anyhow::Result<Option<Lease>> {
    let expires = now + lease_len;
    loop {
        let candidate: Option<(i64, String, i32, i32)> = sqlx::query_as(sql::postgres::CLAIM_CANDIDATE)
            .bind(now)
            .bind(None::<Vec<String>>)
            .fetch_optional(&mut **tx)
            .await?;
        let Some((task_id, status, attempts, max_attempts)) = candidate else { return Ok(None) };
        if status == "leased" && attempts >= max_attempts {
            sqlx::query(sql::CLAIM_EXHAUSTED).bind(task_id).bind(now).execute(&mut **tx).await?;
            continue;
        }
        let (epoch,): (i64,) = sqlx::query_as(sql::CLAIM_TAKE)
            .bind(task_id)
            .bind(worker)
            .bind(expires)
            .bind(now)
            .fetch_one(&mut **tx)
            .await?;
        let run_id: i64 = sqlx::query_scalar(sql::CLAIM_RUN)
            .bind(task_id)
            .bind(worker)
            .bind(epoch)
            .bind(now)
            .bind(expires)
            .fetch_one(&mut **tx)
            .await?;
        return Ok(Some(Lease { task_id, run_id, epoch, owner: worker.to_string() }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(alternation: usize, mode: Mode, tx_per_s: f64) -> Sample {
        Sample {
            alternation,
            mode,
            lp: Loop::Finish,
            transactions: tx_per_s as u64,
            secs: 1.0,
            tx_per_s,
            cpu: None,
        }
    }

    #[test]
    fn a_paired_ratio_compares_each_alternation_with_its_own_without_phase() {
        // Alternation 1 ran everything twice as fast (the machine was quieter): the medians per
        // mode mix the two speeds (95 ÷ 100), the pairs do not (0.9 in two of three).
        let samples = vec![
            sample(0, Mode::Installed, 90.0),
            sample(0, Mode::Without, 100.0),
            sample(1, Mode::Installed, 180.0),
            sample(1, Mode::Without, 200.0),
            sample(2, Mode::Installed, 95.0),
            sample(2, Mode::Without, 100.0),
        ];
        assert!((paired_median(&samples, Loop::Finish, Mode::Installed) - 0.9).abs() < 1e-9);
        // A mode with no phases has no pairs.
        assert_eq!(paired_median(&samples, Loop::Finish, Mode::TriggersOnly), 0.0);
    }

    fn slice(lp: Loop, triggers: bool, tx_per_s: f64) -> Slice {
        let mode = if triggers { Mode::TriggersOnly } else { Mode::Without };
        Slice { lp, run: Mode::TriggersOnly, mode, tx_per_s, cpu: None }
    }

    #[test]
    fn an_interleaved_ratio_compares_each_slice_with_triggers_with_its_neighbours() {
        // The loop slows by a tenth from slice to slice (as the claim loop does): each slice with
        // triggers is 0.9 of what the slices around it say it would be without, whatever the
        // drift; the median over them per loop.
        let mut slices = Vec::new();
        for i in 0..7 {
            let base = 1000.0 * 0.9f64.powi(i);
            let triggers = i % 2 == 1;
            slices.push(slice(Loop::Finish, triggers, if triggers { base * 0.9 } else { base }));
        }
        // Another loop's slices in between change nothing.
        slices.insert(3, slice(Loop::Claim, true, 1.0));
        let (n, r) = interleaved_ratio(&slices, Loop::Finish, Mode::TriggersOnly);
        assert_eq!(n, 3);
        assert!((r - 0.9).abs() < 1e-9, "{r}");
        // The installed run of the same loop is its own: none of these slices count for it,
        // and its slices do not count for triggers only.
        assert_eq!(interleaved_ratio(&slices, Loop::Finish, Mode::Installed).0, 0);
        let installed =
            |mode, tx_per_s| Slice { lp: Loop::Finish, run: Mode::Installed, mode, tx_per_s, cpu: None };
        slices.extend([
            installed(Mode::Without, 100.0),
            installed(Mode::Installed, 50.0),
            installed(Mode::Without, 100.0),
        ]);
        let (n, r) = interleaved_ratio(&slices, Loop::Finish, Mode::Installed);
        assert_eq!((n, r), (1, 0.5));
        let (n, r) = interleaved_ratio(&slices, Loop::Finish, Mode::TriggersOnly);
        assert_eq!(n, 3);
        assert!((r - 0.9).abs() < 1e-9, "{r}");
        // A slice with triggers at an end, or none at all, is not compared.
        let edge = [slice(Loop::Heartbeat, true, 90.0), slice(Loop::Heartbeat, false, 100.0)];
        let (n, r) = interleaved_ratio(&edge, Loop::Heartbeat, Mode::TriggersOnly);
        assert_eq!(n, 0);
        assert!(r.is_nan());
    }
}
