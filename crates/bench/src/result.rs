// SPDX-License-Identifier: Apache-2.0
//! The result of a run, the machine it ran on and the target's cost: plain
//! data that the report renderers turn into fio's text and JSON.

use crate::job_output::JobOutput;
use crate::options::BenchOptions;

/// errno fio reports for an I/O error.
pub const EIO: i32 = 5;
/// errno fio reports for a verify failure.
pub const EILSEQ: i32 = 84;

/// One finished job.
#[derive(Debug, Clone)]
pub struct JobResult {
    /// Job name (`--name`).
    pub name: String,
    /// fio group id (always 0: one group per run).
    pub groupid: u32,
    /// Job number, 0-based.
    pub job: u32,
    /// Process id (fio prints the job's pid).
    pub pid: u32,
    /// CPU the job thread was pinned to.
    pub cpu: Option<usize>,
    /// Unix time the job started, ms.
    pub job_start_ms: u64,
    /// The options the job ran with.
    pub options: BenchOptions,
    /// A job file's job: its section's own options as written (fio's `"job options"`
    /// then lists these, and the `[global]` ones once, in [`BenchResult::global_options`]).
    pub written_options: Option<Vec<(String, String)>>,
    /// Statistics and errors.
    pub output: JobOutput,
}

impl JobResult {
    /// fio's `err=`: 0, `EIO` after an engine error, `EILSEQ` after a verify failure.
    pub fn errno(&self) -> i32 {
        if self.output.error.is_some() {
            EIO
        } else if self.output.verify.errors > 0 {
            EILSEQ
        } else {
            0
        }
    }

    /// fio's `verror` text for a non-zero `errno`.
    pub fn error_text(&self) -> Option<String> {
        if let Some(e) = &self.output.error {
            Some(e.to_string())
        } else {
            self.output.verify.first.first().map(ToString::to_string)
        }
    }
}

/// Counters of one target poller core, as the target exposes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreCounters {
    /// CPU the poller is pinned to.
    pub cpu: Option<usize>,
    /// Nanoseconds the poller spent doing work.
    pub busy_ns: u64,
    /// Nanoseconds the poller ran in total (busy + idle polling).
    pub total_ns: u64,
    /// Commands the poller executed, all its controllers together.
    pub commands: u64,
}

/// One reading of all target pollers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetSnapshot {
    /// Per-poller counters.
    pub cores: Vec<CoreCounters>,
}

/// Where the bench reads the target's poller counters; implemented by the
/// caller on top of the target's metrics. `None` when there is no target in
/// reach (an external device).
pub trait TargetProbe: Sync {
    /// Current counters.
    fn snapshot(&self) -> Option<TargetSnapshot>;
}

/// A [`TargetProbe`] for runs without a target to observe.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTarget;

impl TargetProbe for NoTarget {
    fn snapshot(&self) -> Option<TargetSnapshot> {
        None
    }
}

/// One target core's share of the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetCore {
    /// CPU of the poller.
    pub cpu: Option<usize>,
    /// Busy percentage during the run.
    pub busy_pct: f64,
    /// Busy nanoseconds during the run.
    pub busy_ns: u64,
    /// Commands executed during the run.
    pub commands: u64,
}

/// The target's cost of the run: the `"target"` JSON section.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TargetReport {
    /// Busy share of all poller cores, percent.
    pub poller_busy_pct: f64,
    /// Busy target nanoseconds per completed I/O.
    pub target_ns_per_io: f64,
    /// Per-core details.
    pub cores: Vec<TargetCore>,
}

impl TargetReport {
    /// The difference of two snapshots, charged to `total_ios` I/Os.
    pub fn from_snapshots(
        before: &TargetSnapshot,
        after: &TargetSnapshot,
        total_ios: u64,
    ) -> TargetReport {
        let mut busy_sum = 0u64;
        let mut total_sum = 0u64;
        let mut cores = Vec::new();
        for a in &after.cores {
            let b = before.cores.iter().find(|b| b.cpu == a.cpu);
            let busy = a.busy_ns.saturating_sub(b.map_or(0, |b| b.busy_ns));
            let total = a.total_ns.saturating_sub(b.map_or(0, |b| b.total_ns));
            busy_sum += busy;
            total_sum += total;
            let busy_pct = if total == 0 {
                0.0
            } else {
                busy as f64 * 100.0 / total as f64
            };
            cores.push(TargetCore {
                cpu: a.cpu,
                busy_pct,
                busy_ns: busy,
                commands: a.commands.saturating_sub(b.map_or(0, |b| b.commands)),
            });
        }
        TargetReport {
            poller_busy_pct: if total_sum == 0 {
                0.0
            } else {
                busy_sum as f64 * 100.0 / total_sum as f64
            },
            target_ns_per_io: if total_ios == 0 {
                0.0
            } else {
                busy_sum as f64 / total_ios as f64
            },
            cores,
        }
    }
}

/// The machine: the `"machine"` JSON section.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineInfo {
    /// `/proc/cpuinfo` model name.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: usize,
    /// CPU of each job thread, in job order (`None`: not pinned).
    pub jobs_cpus: Vec<Option<usize>>,
    /// CPUs of the target pollers.
    pub target_cpus: Vec<usize>,
    /// What was measured, as the caller describes it (`malloc 1 GiB, 512 B LBA`).
    pub namespace: String,
    /// NUMA placement, as the caller describes it (`jobs on node 0, target on node 0,
    /// namespace memory bound to node 0; 1 node`); empty when not known.
    pub numa: String,
}

/// A finished run; every report is a pure function of this.
#[derive(Debug, Clone)]
pub struct BenchResult {
    /// nvmemu's version, `nvmemu-<crate version>` (the JSON's `"nvmemu version"`).
    pub version: String,
    /// Unix time the run ended, ms.
    pub timestamp_ms: u64,
    /// The options the run used.
    pub options: BenchOptions,
    /// Jobs in job order.
    pub jobs: Vec<JobResult>,
    /// A job file run's `[global]` options as written (fio's `"global options"`).
    pub global_options: Option<Vec<(String, String)>>,
    /// Target cost, when a target was observed.
    pub target: Option<TargetReport>,
    /// The machine.
    pub machine: MachineInfo,
}

impl BenchResult {
    /// One result for stages run one after the other: their jobs in order, the target's
    /// cost weighted by each stage's I/Os, the time of the last. `None` without stages.
    pub fn merge_stages(stages: Vec<BenchResult>) -> Option<BenchResult> {
        let mut it = stages.into_iter();
        let mut all = it.next()?;
        let ios = |r: &BenchResult| -> u64 {
            r.jobs
                .iter()
                .flat_map(|j| j.output.stats.dirs.iter())
                .map(|d| d.total_ios)
                .sum()
        };
        let mut weight = ios(&all) as f64;
        for r in it {
            let w = ios(&r) as f64;
            if let (Some(a), Some(b)) = (&mut all.target, &r.target) {
                let total = (weight + w).max(1.0);
                a.poller_busy_pct = (a.poller_busy_pct * weight + b.poller_busy_pct * w) / total;
                a.target_ns_per_io = (a.target_ns_per_io * weight + b.target_ns_per_io * w) / total;
                for (ca, cb) in a.cores.iter_mut().zip(&b.cores) {
                    ca.busy_ns += cb.busy_ns;
                    ca.busy_pct = (ca.busy_pct * weight + cb.busy_pct * w) / total;
                }
            }
            weight += w;
            all.timestamp_ms = r.timestamp_ms;
            all.machine.jobs_cpus.extend(r.machine.jobs_cpus);
            all.jobs.extend(r.jobs);
        }
        Some(all)
    }
}

/// `ctime()`-style UTC time: `Fri Oct  6 05:21:27 2017`.
pub fn ctime_utc(unix_secs: u64) -> String {
    let days = unix_secs / 86_400;
    let secs = unix_secs % 86_400;
    let weekday =
        ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][usize::try_from(days % 7).unwrap_or(0)];
    // Civil-from-days (proleptic Gregorian), days since 1970-01-01.
    let z = i64::try_from(days).unwrap_or(0) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mname = months
        .get(usize::try_from(month - 1).unwrap_or(0))
        .copied()
        .unwrap_or("Jan");
    format!(
        "{weekday} {mname} {day:2} {:02}:{:02}:{:02} {year}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctime_matches_known_dates() {
        assert_eq!(ctime_utc(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(ctime_utc(1_507_267_287), "Fri Oct  6 05:21:27 2017");
    }

    #[test]
    fn target_report_from_two_snapshots() {
        let before = TargetSnapshot {
            cores: vec![CoreCounters {
                cpu: Some(2),
                busy_ns: 100,
                total_ns: 1000,
                commands: 5,
            }],
        };
        let after = TargetSnapshot {
            cores: vec![CoreCounters {
                cpu: Some(2),
                busy_ns: 600,
                total_ns: 2000,
                commands: 15,
            }],
        };
        let r = TargetReport::from_snapshots(&before, &after, 10);
        assert!((r.poller_busy_pct - 50.0).abs() < 1e-9);
        assert!((r.target_ns_per_io - 50.0).abs() < 1e-9);
        assert_eq!(r.cores.len(), 1);
        assert_eq!(r.cores[0].commands, 10);
    }
}
