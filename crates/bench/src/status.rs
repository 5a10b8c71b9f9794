// SPDX-License-Identifier: Apache-2.0
//! fio's live status line (`eta.c`):
//! `Jobs: 1 (f=1): [r(1)][45.0%][r=1264MiB/s][r=2589k IOPS][eta 00m:11s]`.

use crate::job_output::JobState;
use crate::options::RwMode;
use crate::report::num::{Unit, num2str};

/// What one status line shows.
#[derive(Debug, Clone)]
pub struct StatusInput<'a> {
    /// State of every job.
    pub states: &'a [JobState],
    /// Workload (selects the run character).
    pub rw: RwMode,
    /// Bytes per second over the last interval, read / write.
    pub rate: [u64; 3],
    /// IOPS over the last interval, read / write.
    pub iops: [u64; 3],
    /// Seconds since start.
    pub elapsed_s: u64,
    /// Estimated seconds left, when known.
    pub eta_s: Option<u64>,
}

fn run_char(state: JobState, rw: RwMode) -> char {
    match state {
        JobState::Starting => 'P',
        JobState::Verifying => 'V',
        JobState::Done => '_',
        JobState::Ramping | JobState::Running => match rw {
            RwMode::Read => 'R',
            RwMode::Randread => 'r',
            RwMode::Write | RwMode::Trimwrite => 'W',
            RwMode::Randwrite | RwMode::Randtrimwrite => 'w',
            RwMode::Rw => 'M',
            RwMode::Randrw => 'm',
            RwMode::Trim => 'D',
            RwMode::Randtrim => 'd',
        },
    }
}

/// fio's ETA text: `00m:11s`, `01h:02m:03s`, `1d:02h:03m:04s`.
pub fn eta_to_str(s: u64) -> String {
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60);
    if d > 0 {
        format!("{d}d:{h:02}h:{m:02}m:{sec:02}s")
    } else if h > 0 {
        format!("{h:02}h:{m:02}m:{sec:02}s")
    } else {
        format!("{m:02}m:{sec:02}s")
    }
}

/// The status line (without `\r`).
pub fn format_status(i: &StatusInput<'_>) -> String {
    let running = i.states.iter().filter(|s| **s != JobState::Done).count();
    let mut runs = String::new();
    let mut iter = i.states.iter().map(|s| run_char(*s, i.rw)).peekable();
    while let Some(c) = iter.next() {
        let mut n = 1;
        while iter.peek() == Some(&c) {
            iter.next();
            n += 1;
        }
        runs.push_str(&format!("{c}({n})"));
    }
    let all_ramping = running > 0
        && i.states
            .iter()
            .all(|s| matches!(s, JobState::Ramping | JobState::Done));
    let perc = match i.eta_s {
        Some(eta) if !all_ramping && i.elapsed_s + eta > 0 => {
            format!(
                "{:3.1}%",
                i.elapsed_s as f64 * 100.0 / (i.elapsed_s + eta) as f64
            )
        }
        _ => "-.-%".to_string(),
    };
    let mut s = format!("Jobs: {running} (f={running}): [{runs}][{perc}]");
    let has: Vec<usize> = (0..3).filter(|&d| i.rate[d] > 0 || i.iops[d] > 0).collect();
    if !has.is_empty() {
        let c = ['r', 'w', 't'];
        let rates: Vec<String> = has
            .iter()
            .map(|&d| {
                format!(
                    "{}={}",
                    c[d],
                    num2str(i.rate[d] / 1024, 4, 1024, true, Unit::BytePerSec)
                )
            })
            .collect();
        let iops: Vec<String> = has
            .iter()
            .map(|&d| format!("{}={}", c[d], num2str(i.iops[d], 4, 1, false, Unit::None)))
            .collect();
        s.push_str(&format!("[{}][{} IOPS]", rates.join(","), iops.join(",")));
    }
    s.push_str(&format!(
        "[eta {}]",
        i.eta_s.map_or_else(|| "--m:--s".to_string(), eta_to_str)
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_line_looks_like_fio() {
        let states = [JobState::Running];
        let s = format_status(&StatusInput {
            states: &states,
            rw: RwMode::Randread,
            rate: [1_325_400_064, 0, 0],
            iops: [2_589_123, 0, 0],
            elapsed_s: 9,
            eta_s: Some(11),
        });
        assert_eq!(
            s,
            "Jobs: 1 (f=1): [r(1)][45.0%][r=1264MiB/s][r=2589k IOPS][eta 00m:11s]"
        );
    }

    #[test]
    fn condensed_runs_and_mixed_rates() {
        let states = [JobState::Running, JobState::Running, JobState::Done];
        let s = format_status(&StatusInput {
            states: &states,
            rw: RwMode::Randrw,
            rate: [4096 * 1000, 4096 * 1000, 0],
            iops: [1000, 1000, 0],
            elapsed_s: 0,
            eta_s: None,
        });
        assert!(
            s.starts_with(
                "Jobs: 2 (f=2): [m(2)_(1)][-.-%][r=4000KiB/s,w=4000KiB/s][r=1000,w=1000 IOPS]"
            ),
            "{s}"
        );
        assert_eq!(eta_to_str(3725), "01h:02m:05s");
    }

    #[test]
    fn trims_show_as_t() {
        let s = format_status(&StatusInput {
            states: &[JobState::Running],
            rw: RwMode::Randtrim,
            rate: [0, 0, 64 << 20],
            iops: [0, 0, 1024],
            elapsed_s: 1,
            eta_s: None,
        });
        assert!(
            s.starts_with("Jobs: 1 (f=1): [d(1)][-.-%][t=64.0MiB/s][t=1024 IOPS]"),
            "{s}"
        );
    }
}
