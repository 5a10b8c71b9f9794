// SPDX-License-Identifier: Apache-2.0
//! QoS rate limits of a bdev (SPDK's `bdev_set_qos_limit`): set by the control plane, read
//! by the pollers once per pass, which enforce them with their own token buckets.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Bdevs with at least one limit set, process-wide. A poller reads it once per pass and
/// skips every QoS step while it is zero.
static LIMITED_BDEVS: AtomicUsize = AtomicUsize::new(0);

/// Whether any bdev in the process has a QoS limit.
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

    /// Replace the limits. Callers serialize calls (the control plane holds its lock).
    pub fn set(&self, v: QosValues) {
        let was = self.get().is_set();
        self.ios.store(v.rw_ios_per_sec, Ordering::Relaxed);
        self.rw_mb.store(v.rw_mbytes_per_sec, Ordering::Relaxed);
        self.r_mb.store(v.r_mbytes_per_sec, Ordering::Relaxed);
        self.w_mb.store(v.w_mbytes_per_sec, Ordering::Relaxed);
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
