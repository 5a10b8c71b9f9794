// SPDX-License-Identifier: Apache-2.0
//! The server's open fds and resident memory, read from /proc, and the check that a phase of
//! connect or map cycles left them where they were.

use std::time::{Duration, Instant};

use anyhow::Context;

/// One look at the server process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Entries of /proc/PID/fd.
    pub fds: usize,
    /// VmRSS of /proc/PID/status, in KiB.
    pub rss_kib: u64,
}

/// Sample process `pid`.
pub fn sample(pid: u32) -> anyhow::Result<Sample> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("/proc/{pid}/fd"))?
        .count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("/proc/{pid}/status"))?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS line")?;
    Ok(Sample { fds, rss_kib })
}

/// Before and after a phase of `cycles` cycles, and the largest RSS seen in between.
#[derive(Debug, Clone, Copy)]
pub struct Flatness {
    /// What the phase was.
    pub what: &'static str,
    /// Cycles run.
    pub cycles: u64,
    /// After the warm-up cycles.
    pub before: Sample,
    /// After the last cycle, once the server closed the last client's fds.
    pub after: Sample,
    /// Largest VmRSS sampled during the phase.
    pub max_rss_kib: u64,
}

impl Flatness {
    /// Whether the fd count came back exactly and RSS grew by at most `rss_tolerance_kib`.
    pub fn is_flat(&self, rss_tolerance_kib: u64) -> bool {
        self.after.fds == self.before.fds
            && self.after.rss_kib <= self.before.rss_kib + rss_tolerance_kib
    }
}

/// Sample `pid` until its fd count is back to `fds` (the server closes a departed client's
/// fds on its own thread, a moment after the client sees the socket close), for at most
/// five seconds; returns the last sample.
pub fn settle(pid: u32, fds: usize) -> anyhow::Result<Sample> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let s = sample(pid)?;
        if s.fds == fds || Instant::now() >= deadline {
            return Ok(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
