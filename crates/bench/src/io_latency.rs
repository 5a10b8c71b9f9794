// SPDX-License-Identifier: Apache-2.0
//! One completed I/O's latencies: what the job loop hands to the statistics and the
//! time-series logs.

/// The latencies of one completed I/O, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoLatency {
    /// Direction index (`Op::index`).
    pub dir: usize,
    /// Submission latency.
    pub slat: u64,
    /// Completion latency.
    pub clat: u64,
    /// Total latency.
    pub lat: u64,
    /// When it completed (the job's clock), for the time-series logs.
    pub at_ns: u64,
}
