// SPDX-License-Identifier: Apache-2.0
//! Operation latencies of one bdev channel, as SPDK's `bdev_get_iostat` reports them
//! (`*_latency_ticks`: the sum, the smallest and the largest time one successful operation
//! took). While the bdev is timed ([`Bdev::set_timed`](crate::Bdev::set_timed)), each
//! operation is timed with two TSC reads around the backend call (no system call), unless
//! the channel's caller times it and hands the duration over
//! ([`BdevChannel::record_latency`](crate::BdevChannel::record_latency): the controller, for
//! the namespaces whose commands it times, so one reading serves both); off (the default),
//! no clock is read. The counters have one writer, like the rest of the channel's
//! (`stats.rs`), and are converted to nanoseconds only when read.
//!
//! Kept apart from the controller's per-layer timing (`nvmemu_ctrl::timing`), which the same
//! switch turns on: this one is per bdev channel, that one per queue and namespace.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use nvmemu_mem::{TscClock, global_clock};

/// Sum, minimum and maximum duration of one kind of operation, in raw TSC ticks.
#[derive(Debug, Default)]
pub(crate) struct LatencyCounter {
    sum: AtomicU64,
    /// 0: nothing recorded yet (a recorded duration is at least 1 tick).
    min: AtomicU64,
    max: AtomicU64,
}

impl LatencyCounter {
    /// Add one operation that started at TSC `start` and ends now. Single writer only (the
    /// channel's thread): plain loads and stores, no locked instruction.
    #[inline]
    pub(crate) fn record_since(&self, start: u64) {
        let ticks = TscClock::ticks().wrapping_sub(start);
        self.record_many(ticks, ticks, ticks);
    }

    /// Add operations whose durations sum to `sum` ticks, the shortest `min`, the longest
    /// `max` (a zero counted as 1 tick, so a recorded operation stays visible). Single
    /// writer only.
    #[inline]
    pub(crate) fn record_many(&self, sum: u64, min: u64, max: u64) {
        let (sum, min, max) = (sum.max(1), min.max(1), max.max(1));
        self.sum
            .store(self.sum.load(Relaxed).wrapping_add(sum), Relaxed);
        let lo = self.min.load(Relaxed);
        if lo == 0 || min < lo {
            self.min.store(min, Relaxed);
        }
        if max > self.max.load(Relaxed) {
            self.max.store(max, Relaxed);
        }
    }

    /// The counter in nanoseconds (each field read on its own, Relaxed).
    pub(crate) fn load(&self) -> Latency {
        // A recorded operation stays visible as at least 1 ns (a tick is a fraction of one).
        let ns = |t: u64| match t {
            0 => 0,
            t => global_clock().ticks_to_ns(t).max(1),
        };
        Latency {
            sum_ns: ns(self.sum.load(Relaxed)),
            min_ns: ns(self.min.load(Relaxed)),
            max_ns: ns(self.max.load(Relaxed)),
        }
    }
}

/// The TSC now: the start of an operation to time with [`LatencyCounter::record_since`].
#[inline(always)]
pub(crate) fn start() -> u64 {
    TscClock::ticks()
}

/// Latency of one kind of operation, in nanoseconds. All zero when nothing was recorded,
/// and on machines without an invariant TSC (where the clock cannot convert ticks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    /// Total time of every operation counted.
    pub sum_ns: u64,
    /// The shortest operation (0: none counted).
    pub min_ns: u64,
    /// The longest operation.
    pub max_ns: u64,
}

impl std::ops::AddAssign for Latency {
    /// Combine two channels' latencies: sums add, the extremes are the extremes of both
    /// (a zero minimum means "none counted", not a zero-length operation).
    fn add_assign(&mut self, o: Latency) {
        self.sum_ns = self.sum_ns.wrapping_add(o.sum_ns);
        self.min_ns = match (self.min_ns, o.min_ns) {
            (0, m) | (m, 0) => m,
            (a, b) => a.min(b),
        };
        self.max_ns = self.max_ns.max(o.max_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_sum_min_and_max_of_positive_durations() {
        let c = LatencyCounter::default();
        assert_eq!(c.load(), Latency::default());
        for spin in [2_000u32, 20_000, 200] {
            let t0 = start();
            for _ in 0..spin {
                std::hint::spin_loop();
            }
            c.record_since(t0);
        }
        let l = c.load();
        if global_clock().is_tsc() {
            assert!(l.min_ns > 0 && l.min_ns <= l.max_ns, "{l:?}");
            assert!(l.sum_ns >= 3 * l.min_ns && l.sum_ns >= l.max_ns, "{l:?}");
        }
    }

    #[test]
    fn combining_keeps_the_extremes_and_ignores_empty_minimums() {
        let mut a = Latency {
            sum_ns: 30,
            min_ns: 10,
            max_ns: 20,
        };
        a += Latency::default();
        assert_eq!(
            a,
            Latency {
                sum_ns: 30,
                min_ns: 10,
                max_ns: 20
            }
        );
        let mut empty = Latency::default();
        empty += a;
        assert_eq!(empty, a);
        a += Latency {
            sum_ns: 5,
            min_ns: 5,
            max_ns: 5,
        };
        assert_eq!(
            a,
            Latency {
                sum_ns: 35,
                min_ns: 5,
                max_ns: 20
            }
        );
    }
}
