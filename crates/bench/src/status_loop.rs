// SPDX-License-Identifier: Apache-2.0
//! The live status line while jobs run: fio's `Jobs: ...` line on stderr about once
//! a second, and the moment every job has left `ramp_time`.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use crate::job_output::{JobState, Progress};
use crate::options::{BenchOptions, EtaMode, VerifyMode};
use crate::plan::JobPlan;
use crate::status::{StatusInput, format_status};

fn show_status(opts: &BenchOptions) -> bool {
    match opts.eta {
        EtaMode::Always => true,
        EtaMode::Never => false,
        EtaMode::Auto => rustix::termios::isatty(std::io::stderr()),
    }
}

/// Float to integer for display values; `as` saturates (NaN becomes 0).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn f2u(v: f64) -> u64 {
    v.max(0.0) as u64
}

/// Waits for the jobs, printing fio's status line to stderr about once a
/// second when enabled, and erases it at the end.
pub(crate) fn status_loop<T>(
    opts: &BenchOptions,
    plans: &[JobPlan],
    progress: &[Arc<Progress>],
    handles: &[thread::JoinHandle<T>],
    started: Instant,
    on_measuring: &mut dyn FnMut(),
) {
    let show = show_status(opts);
    let mut measuring = false;
    let mut last = Instant::now();
    let mut last_bytes = [0u64; 3];
    let mut last_ios = [0u64; 3];
    let mut last_len: usize = 0;
    let total_bytes: u64 = plans.iter().map(|p| p.size_bytes).sum();
    while !handles.iter().all(thread::JoinHandle::is_finished) {
        thread::sleep(Duration::from_millis(50));
        // Within 50 ms of the last job leaving ramp_time.
        if !measuring
            && progress
                .iter()
                .all(|p| p.state() as u8 >= JobState::Running as u8)
        {
            measuring = true;
            on_measuring();
        }
        if !show || last.elapsed() < Duration::from_millis(1000) {
            continue;
        }
        let dt = last.elapsed().as_secs_f64().max(1e-3);
        last = Instant::now();
        let mut bytes = [0u64; 3];
        let mut ios = [0u64; 3];
        for p in progress {
            for d in 0..3 {
                bytes[d] += p.bytes[d].load(Ordering::Relaxed);
                ios[d] += p.ios[d].load(Ordering::Relaxed);
            }
        }
        let rate = [0, 1, 2].map(|d| f2u((bytes[d] - last_bytes[d]) as f64 / dt));
        let iops = [0, 1, 2].map(|d| f2u((ios[d] - last_ios[d]) as f64 / dt));
        last_bytes = bytes;
        last_ios = ios;
        let elapsed = started.elapsed().as_secs();
        let ramp = opts.ramp_time.unwrap_or_default().as_secs();
        let by_time = opts
            .time_limit()
            .map(|r| (ramp + r.as_secs()).saturating_sub(elapsed));
        let done: u64 = bytes.iter().sum();
        let by_size =
            (!opts.time_based && done > 0 && total_bytes > 0 && opts.verify == VerifyMode::Off)
                .then(|| {
                    let frac = (done as f64 / total_bytes as f64).min(1.0);
                    f2u((elapsed as f64) * (1.0 - frac) / frac.max(1e-9))
                });
        let eta = match (by_time, by_size) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let states: Vec<JobState> = progress.iter().map(|p| p.state()).collect();
        let line = format_status(&StatusInput {
            states: &states,
            rw: opts.rw.mode,
            rate,
            iops,
            elapsed_s: elapsed,
            eta_s: eta,
        });
        let pad = last_len.saturating_sub(line.len());
        last_len = line.len();
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{line}{:pad$}\r", "");
        let _ = err.flush();
    }
    if show && last_len > 0 {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{:last_len$}\r", "");
        let _ = err.flush();
    }
}
