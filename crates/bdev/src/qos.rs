// SPDX-License-Identifier: Apache-2.0
//! QoS rate limits of a bdev (SPDK's `bdev_set_qos_limit`): set by the control plane, read
//! by the pollers once per pass, and the pool of tokens the pollers share so the limits
//! hold for the bdev's total, however many controllers serve it.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// Bdevs with at least one limit set, process-wide. A poller reads it once per pass and
/// skips every QoS step while it is zero.
static LIMITED_BDEVS: AtomicUsize = AtomicUsize::new(0);

/// Whether any bdev in the process has a QoS limit.
#[inline]
pub fn any_qos_limit() -> bool {
    LIMITED_BDEVS.load(Ordering::Relaxed) != 0
}

/// One set of limits, per second; 0 = unlimited (SPDK's units: I/Os and MiB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QosValues {
    /// Read and write I/Os (every I/O command counts).
    pub rw_ios_per_sec: u64,
    /// Read and write MiB.
    pub rw_mbytes_per_sec: u64,
    /// Read MiB.
    pub r_mbytes_per_sec: u64,
    /// Write MiB.
    pub w_mbytes_per_sec: u64,
}

impl QosValues {
    /// Whether any limit is set.
    pub fn is_set(&self) -> bool {
        *self != QosValues::default()
    }
}

/// A bdev's limits, shared by every poller serving it. Relaxed atomics: a poller picks up
/// a change at its next pass; the four values need not change together.
#[derive(Debug, Default)]
pub struct QosLimits {
    ios: AtomicU64,
    rw_mb: AtomicU64,
    r_mb: AtomicU64,
    w_mb: AtomicU64,
    /// On its own cache line: pollers write it per batch of tokens, and read the limits
    /// above every pass.
    pool: CachePadded<QosPool>,
}

/// Tokens for the current timeslice, per limit (I/Os, read+write bytes, read bytes, write
/// bytes), shared by every poller serving the bdev. A poller takes a batch with one
/// atomic into its own bucket and spends it there; the pool may go negative (a command may
/// overdraw, as SPDK allows) and later slices pay the debt.
#[derive(Debug, Default)]
pub struct QosPool {
    tokens: [AtomicI64; 4],
    /// The timeslice the tokens belong to; 0 until the first refill after a limit change.
    slice: AtomicU64,
}

impl QosPool {
    /// Bring the pool to timeslice `slice` (counted from 1): the first poller to see a new
    /// slice adds `per_slice` tokens for each slice gone by, keeping at most one slice's
    /// worth. Relaxed: the tokens are a budget, not a guard for other data.
    pub fn refill(&self, per_slice: [i64; 4], slice: u64) {
        let seen = self.slice.load(Ordering::Relaxed);
        if seen >= slice
            || self
                .slice
                .compare_exchange(seen, slice, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let gone = i64::try_from(slice - seen).unwrap_or(i64::MAX);
        for (t, per) in self.tokens.iter().zip(per_slice) {
            if seen == 0 {
                t.store(per, Ordering::Relaxed);
                continue;
            }
            // Never fails: the closure always returns Some.
            let _ = t.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_add(per.saturating_mul(gone)).min(per))
            });
        }
    }

    /// Take `n` tokens of limit `limit` (0-3, the order of [`QosPool`]'s fields) if the
    /// pool has any left: one load and one atomic subtraction.
    pub fn take(&self, limit: usize, n: i64) -> bool {
        match self.tokens.get(limit) {
            Some(t) if t.load(Ordering::Relaxed) > 0 => {
                t.fetch_sub(n, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// Forget the tokens (the limits changed): the next refill starts afresh.
    fn reset(&self) {
        self.slice.store(0, Ordering::Relaxed);
        for t in &self.tokens {
            t.store(0, Ordering::Relaxed);
        }
    }
}

impl QosLimits {
    /// The limits now.
    pub fn get(&self) -> QosValues {
        QosValues {
            rw_ios_per_sec: self.ios.load(Ordering::Relaxed),
            rw_mbytes_per_sec: self.rw_mb.load(Ordering::Relaxed),
            r_mbytes_per_sec: self.r_mb.load(Ordering::Relaxed),
            w_mbytes_per_sec: self.w_mb.load(Ordering::Relaxed),
        }
    }

    /// The tokens every poller serving this bdev shares.
    pub fn pool(&self) -> &QosPool {
        &self.pool
    }

    /// Replace the limits. Callers serialize calls (the control plane holds its lock).
    pub fn set(&self, v: QosValues) {
        let was = self.get().is_set();
        self.ios.store(v.rw_ios_per_sec, Ordering::Relaxed);
        self.rw_mb.store(v.rw_mbytes_per_sec, Ordering::Relaxed);
        self.r_mb.store(v.r_mbytes_per_sec, Ordering::Relaxed);
        self.w_mb.store(v.w_mbytes_per_sec, Ordering::Relaxed);
        self.pool.reset();
        match (was, v.is_set()) {
            (false, true) => {
                LIMITED_BDEVS.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                LIMITED_BDEVS.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

impl Drop for QosLimits {
    fn drop(&mut self) {
        self.set(QosValues::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_refills_once_per_slice_caps_at_one_slice_and_carries_debt() {
        let p = QosPool::default();
        let per = [10, 0, 0, 0];
        p.refill(per, 5);
        assert!(
            p.take(0, 4) && p.take(0, 4) && p.take(0, 4),
            "10 left, then 6, then 2"
        );
        assert!(!p.take(0, 1), "overdrawn to -2");
        p.refill(per, 5);
        assert!(!p.take(0, 1), "the same slice refills once");
        p.refill(per, 4);
        assert!(!p.take(0, 1), "an older slice changes nothing");
        p.refill(per, 6);
        assert_eq!(p.tokens[0].load(Ordering::Relaxed), 8, "the debt is paid");
        p.refill(per, 100);
        assert_eq!(p.tokens[0].load(Ordering::Relaxed), 10, "at most one slice");
        assert!(!p.take(1, 1), "an unlimited limit has no tokens to take");
        assert!(!p.take(9, 1));
    }
}
