// SPDX-License-Identifier: Apache-2.0
//! What a job shows while it runs ([`Progress`], [`JobState`]) and hands back when it
//! ends ([`JobOutput`]): the types the job loop shares with the runner, the status
//! line and the reports.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use crate::engine::EngineError;
use crate::stats::JobStats;
use crate::sysinfo::ThreadUsage;
use crate::verify::VerifyFailure;

/// Failures kept with details per job.
pub const MAX_VERIFY_DETAILS: usize = 8;

/// Where a job is, for the status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum JobState {
    /// Setting up buffers.
    Starting = 0,
    /// In `ramp_time`: I/O runs, statistics are discarded.
    Ramping = 1,
    /// Measuring.
    Running = 2,
    /// Reading back and checking what was written.
    Verifying = 3,
    /// Finished.
    Done = 4,
}

/// Counters a job publishes for the live status line (Relaxed: display only).
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes completed per direction (read, write, trim) since the job started.
    pub bytes: [AtomicU64; 3],
    /// I/Os completed per direction since the job started.
    pub ios: [AtomicU64; 3],
    /// A [`JobState`] as `u8`.
    pub state: AtomicU8,
}

impl Progress {
    /// The published state.
    pub fn state(&self) -> JobState {
        match self.state.load(Ordering::Relaxed) {
            0 => JobState::Starting,
            1 => JobState::Ramping,
            2 => JobState::Running,
            3 => JobState::Verifying,
            _ => JobState::Done,
        }
    }

    pub(crate) fn set(&self, s: JobState) {
        self.state.store(s as u8, Ordering::Relaxed);
    }
}

/// Verify results of one job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifySummary {
    /// Reads whose data failed a check.
    pub errors: u64,
    /// Reads checked and found good.
    pub verified_ios: u64,
    /// Logical blocks checked and found good.
    pub verified_blocks: u64,
    /// Reads of a mixed job's main phase that touched no block this job wrote (as
    /// fio, they are not checked; a read-only job checks every block it reads).
    pub unverifiable_ios: u64,
    /// The first few failures.
    pub first: Vec<VerifyFailure>,
}

/// What a finished job hands back.
#[derive(Debug, Clone)]
pub struct JobOutput {
    /// Statistics since ramp end.
    pub stats: JobStats,
    /// Milliseconds from ramp end to the last completion.
    pub runtime_ms: u64,
    /// Per direction (read, write, trim), the milliseconds of the phases in which it
    /// completed I/O (fio's per-direction runtime): in a write job with verify, write
    /// counts the writing and read the read-back.
    pub dir_runtime_ms: [u64; 3],
    /// Milliseconds from job start to the last completion.
    pub elapsed_ms: u64,
    /// The first engine error; the job stops issuing after it.
    pub error: Option<EngineError>,
    /// Verify results.
    pub verify: VerifySummary,
    /// CPU time, context switches and faults of the job thread since ramp end.
    pub usage: ThreadUsage,
}
