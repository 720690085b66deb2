//! Where the machine's CPU went during a timed phase: the dashboard server, PostgreSQL's
//! processes, the benchmark itself (the runner's clients, and the live-stream reader) and the
//! machine as a whole, read from `/proc` before and after.
//!
//! Why: the runner's write throughput with lastword installed is measured on the same two cores
//! as the server watching it, so what the server's process spends there is taken from the
//! runner (docs/live.md). Throughput alone says *that* a phase was slower; this says which
//! process had the cores meanwhile.
//!
//! Figures are in cores (1.0 = one core busy for the whole phase), from the kernel's tick
//! counters: a process's `utime + stime` ÷ the phase's ticks per core, both in the same unit
//! (USER_HZ), so the tick rate never enters. A PostgreSQL process that both started and exited
//! inside the phase is not counted (its ticks go to the postmaster's children total, which is
//! not read); the runner's and the server's connections live for the whole phase.
//! On a system without `/proc` every figure is absent.

use std::collections::HashMap;

/// Tick counters at one moment.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Sum of every field of /proc/stat's `cpu` line (all cores), and the busy part of it.
    total: u64,
    busy: u64,
    cores: usize,
    server: u64,
    bench: u64,
    /// Per PostgreSQL process id, its ticks.
    postgres: HashMap<u32, u64>,
}

/// What a phase used, in cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Usage {
    pub machine: f64,
    pub server: f64,
    pub postgres: f64,
    pub bench: f64,
}

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cores busy {:.2}: server {:.2}, postgres {:.2}, bench {:.2}",
            self.machine, self.server, self.postgres, self.bench
        )
    }
}

/// A phase's measurement: started before it, finished after it. `None` throughout where there
/// is no `/proc`.
pub struct Meter {
    server: Option<u32>,
    start: Option<Snapshot>,
}

impl Meter {
    /// Takes the first snapshot now; `server` is the dashboard's process id when it runs.
    pub fn start(server: Option<u32>) -> Meter {
        Meter { server, start: Snapshot::take(server) }
    }

    /// What was used since [`Meter::start`].
    pub fn finish(self) -> Option<Usage> {
        let start = self.start?;
        Some(start.usage_until(&Snapshot::take(self.server)?))
    }
}

impl Snapshot {
    /// Reads the counters now; `server` is the dashboard's process id when it runs.
    pub fn take(server: Option<u32>) -> Option<Snapshot> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let (total, busy) = machine_ticks(&stat)?;
        let cores = stat.lines().filter(|l| l.starts_with("cpu") && !l.starts_with("cpu ")).count();
        let postgres = std::fs::read_dir("/proc")
            .ok()?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let (comm, ticks) = process_ticks(&stat)?;
                (comm == "postgres").then_some((pid, ticks))
            })
            .collect();
        let ticks_of = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|s| Some(process_ticks(&s)?.1))
        };
        Some(Snapshot {
            total,
            busy,
            cores: cores.max(1),
            server: server.and_then(ticks_of).unwrap_or(0),
            bench: ticks_of(std::process::id()).unwrap_or(0),
            postgres,
        })
    }

    /// What was used from `self` to `later`. A server that was not running at one of the two
    /// moments counts as zero.
    pub fn usage_until(&self, later: &Snapshot) -> Usage {
        let per_core = (later.total.saturating_sub(self.total)) as f64 / self.cores as f64;
        if per_core <= 0.0 {
            return Usage::default();
        }
        let cores = |ticks: u64| ticks as f64 / per_core;
        let postgres: u64 = later
            .postgres
            .iter()
            .map(|(pid, t)| t.saturating_sub(self.postgres.get(pid).copied().unwrap_or(0)))
            .sum();
        let server =
            if self.server > 0 && later.server > 0 { later.server.saturating_sub(self.server) } else { 0 };
        Usage {
            machine: cores(later.busy.saturating_sub(self.busy)),
            server: cores(server),
            postgres: cores(postgres),
            bench: cores(later.bench.saturating_sub(self.bench)),
        }
    }
}

/// All ticks and busy ticks from /proc/stat's first (`cpu`) line: idle and iowait are not busy.
fn machine_ticks(stat: &str) -> Option<(u64, u64)> {
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal guest guest_nice; guest time is already
    // counted in user (and guest_nice in nice), so it is left out of the total.
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    Some((total, total - idle))
}

/// A process's command name and `utime + stime` from its /proc/<pid>/stat line. The name is
/// in parentheses and may itself hold spaces and parentheses, so fields are counted from the
/// last `)`.
fn process_ticks(stat: &str) -> Option<(&str, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?;
    // After ") ": state(3) ppid(4) … utime(14) stime(15); index 0 here is field 3.
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_line_is_read_from_the_last_parenthesis() {
        // A command name with a space and a parenthesis in it (a thread may rename itself so).
        let line = "4242 (post gres) x) S 1 4242 4242 0 -1 4194560 120 0 0 0 731 69 0 0 20 0 1 0 99 0 0";
        assert_eq!(process_ticks(line), Some(("post gres) x", 800)));
        assert_eq!(process_ticks("4242 (cut"), None);
    }

    #[test]
    fn machine_ticks_leave_idle_iowait_and_guest_time_out_of_busy() {
        let stat = "cpu  100 10 50 800 40 5 5 0 30 0\ncpu0 50 5 25 400 20 2 3 0 15 0\n";
        // total 100+10+50+800+40+5+5+0 = 1010; idle 800 + iowait 40.
        assert_eq!(machine_ticks(stat), Some((1010, 170)));
    }

    #[test]
    fn usage_is_in_cores_of_the_phase() {
        let before = Snapshot {
            total: 1_000,
            busy: 200,
            cores: 2,
            server: 100,
            bench: 10,
            postgres: HashMap::from([(1, 50), (2, 70)]),
        };
        // 400 ticks over 2 cores: 200 ticks of wall time per core.
        let after = Snapshot {
            total: 1_400,
            busy: 500,
            cores: 2,
            server: 150,
            bench: 30,
            // Process 2 exited (not counted), process 3 started inside the phase.
            postgres: HashMap::from([(1, 150), (3, 100)]),
        };
        let u = before.usage_until(&after);
        assert_eq!(u, Usage { machine: 1.5, server: 0.25, postgres: 1.0, bench: 0.1 });
        // A server that was down at the start is not charged.
        let down = Snapshot { server: 0, ..before.clone() };
        assert_eq!(down.usage_until(&after).server, 0.0);
    }
}
