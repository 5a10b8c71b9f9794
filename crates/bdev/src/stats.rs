// SPDX-License-Identifier: Apache-2.0
//! I/O counters of one bdev (SPDK `bdev_get_iostat`), Relaxed atomics read as snapshots.
//!
//! The bdev bumps them itself after each successful operation, with Relaxed `fetch_add`s:
//! controllers on different pollers can share a bdev, so a counter can have several writers.
//! On x86 that is a locked add per operation (see `bump`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Atomic increment. A bdev can be shared by controllers on different pollers, so the
/// single-writer load+store this used to be lost counts (caught by
/// `pollers_on_several_threads_share_one_bdev`); per-poller counter shards would make it
/// lock-free again.
#[inline]
fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Relaxed);
}

/// Live counters. Only successful operations are counted.
#[derive(Debug, Default)]
pub struct BdevStats {
    bytes_read: AtomicU64,
    num_read_ops: AtomicU64,
    bytes_written: AtomicU64,
    num_write_ops: AtomicU64,
    bytes_unmapped: AtomicU64,
    num_unmap_ops: AtomicU64,
    bytes_zeroed: AtomicU64,
    num_write_zeroes_ops: AtomicU64,
    bytes_compared: AtomicU64,
    num_compare_ops: AtomicU64,
    num_flush_ops: AtomicU64,
}

/// A copy of the counters at one moment (each field read on its own, Relaxed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BdevStatsSnapshot {
    /// Bytes read.
    pub bytes_read: u64,
    /// Read operations.
    pub num_read_ops: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Write operations.
    pub num_write_ops: u64,
    /// Bytes deallocated.
    pub bytes_unmapped: u64,
    /// Deallocate operations (one per range).
    pub num_unmap_ops: u64,
    /// Bytes zeroed by Write Zeroes.
    pub bytes_zeroed: u64,
    /// Write Zeroes operations.
    pub num_write_zeroes_ops: u64,
    /// Bytes compared.
    pub bytes_compared: u64,
    /// Compare operations.
    pub num_compare_ops: u64,
    /// Flush operations.
    pub num_flush_ops: u64,
}

impl BdevStats {
    /// Count a read of `bytes`.
    #[inline]
    pub fn record_read(&self, bytes: u64) {
        bump(&self.bytes_read, bytes);
        bump(&self.num_read_ops, 1);
    }

    /// Count a write of `bytes`.
    #[inline]
    pub fn record_write(&self, bytes: u64) {
        bump(&self.bytes_written, bytes);
        bump(&self.num_write_ops, 1);
    }

    /// Count a deallocate of `bytes`.
    #[inline]
    pub fn record_unmap(&self, bytes: u64) {
        bump(&self.bytes_unmapped, bytes);
        bump(&self.num_unmap_ops, 1);
    }

    /// Count a Write Zeroes of `bytes`.
    #[inline]
    pub fn record_write_zeroes(&self, bytes: u64) {
        bump(&self.bytes_zeroed, bytes);
        bump(&self.num_write_zeroes_ops, 1);
    }

    /// Count a compare of `bytes`.
    #[inline]
    pub fn record_compare(&self, bytes: u64) {
        bump(&self.bytes_compared, bytes);
        bump(&self.num_compare_ops, 1);
    }

    /// Count a flush.
    #[inline]
    pub fn record_flush(&self) {
        bump(&self.num_flush_ops, 1);
    }

    /// Read every counter.
    pub fn snapshot(&self) -> BdevStatsSnapshot {
        BdevStatsSnapshot {
            bytes_read: self.bytes_read.load(Relaxed),
            num_read_ops: self.num_read_ops.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            num_write_ops: self.num_write_ops.load(Relaxed),
            bytes_unmapped: self.bytes_unmapped.load(Relaxed),
            num_unmap_ops: self.num_unmap_ops.load(Relaxed),
            bytes_zeroed: self.bytes_zeroed.load(Relaxed),
            num_write_zeroes_ops: self.num_write_zeroes_ops.load(Relaxed),
            bytes_compared: self.bytes_compared.load(Relaxed),
            num_compare_ops: self.num_compare_ops.load(Relaxed),
            num_flush_ops: self.num_flush_ops.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_record_bumps_its_own_pair() {
        let s = BdevStats::default();
        s.record_read(512);
        s.record_read(4096);
        s.record_write(8);
        s.record_unmap(1 << 20);
        s.record_write_zeroes(3);
        s.record_compare(7);
        s.record_flush();
        assert_eq!(
            s.snapshot(),
            BdevStatsSnapshot {
                bytes_read: 4608,
                num_read_ops: 2,
                bytes_written: 8,
                num_write_ops: 1,
                bytes_unmapped: 1 << 20,
                num_unmap_ops: 1,
                bytes_zeroed: 3,
                num_write_zeroes_ops: 1,
                bytes_compared: 7,
                num_compare_ops: 1,
                num_flush_ops: 1,
            }
        );
    }
}
