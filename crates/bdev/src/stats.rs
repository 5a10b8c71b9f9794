// SPDX-License-Identifier: Apache-2.0
//! I/O counters of one bdev (SPDK `bdev_get_iostat`): one set per channel, summed when read.
//!
//! As in SPDK, where each thread's io_channel keeps its own stats, every
//! [`BdevChannel`](crate::BdevChannel) owns a cache-line-padded set of counters with a single
//! writer (the channel is `!Sync`). Counting is then a plain load and store, never a locked
//! add, and pollers that share a bdev never write to the same line. [`BdevStats::snapshot`]
//! sums the live channels and the totals left by channels already dropped; only channel
//! creation, drop and snapshots take the registry lock, never an I/O.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use crossbeam_utils::CachePadded;

use crate::latency::{Latency, LatencyCounter};

/// Add `by` to a counter that has exactly one writer: a load and a store, not a locked
/// add. Readers on other threads see each value whole (Relaxed 64-bit atomics), possibly a
/// little late.
#[inline]
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}

/// The counters of one channel. Only successful operations are counted.
#[derive(Debug, Default)]
pub(crate) struct ChannelCounters {
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
    /// Timed around the backend call of each successful Read, Write and Deallocate.
    pub(crate) read_latency: LatencyCounter,
    pub(crate) write_latency: LatencyCounter,
    pub(crate) unmap_latency: LatencyCounter,
    /// The channel's caller times its operations (`BdevChannel::set_timed_by_caller`); one
    /// writer, the channel's owner.
    timed_by_caller: AtomicBool,
}

/// Padded so that no two channels' counters share a cache line.
pub(crate) type SharedCounters = Arc<CachePadded<ChannelCounters>>;

/// Every method must be called by the counters' single writer (see the module docs).
impl ChannelCounters {
    /// Whether the channel's caller times its operations.
    #[inline]
    pub(crate) fn timed_by_caller(&self) -> bool {
        self.timed_by_caller.load(Relaxed)
    }

    /// Set by the channel's owner only.
    pub(crate) fn set_timed_by_caller(&self, on: bool) {
        self.timed_by_caller.store(on, Relaxed);
    }

    #[inline]
    pub(crate) fn record_read(&self, bytes: u64) {
        bump(&self.bytes_read, bytes);
        bump(&self.num_read_ops, 1);
    }

    #[inline]
    pub(crate) fn record_write(&self, bytes: u64) {
        bump(&self.bytes_written, bytes);
        bump(&self.num_write_ops, 1);
    }

    pub(crate) fn record_unmap(&self, bytes: u64) {
        self.record_unmap_piece(bytes, true);
    }

    pub(crate) fn record_write_zeroes(&self, bytes: u64) {
        self.record_write_zeroes_piece(bytes, true);
    }

    /// `bytes` of an unmap done in pieces; `last` ends the operation, which counts once.
    pub(crate) fn record_unmap_piece(&self, bytes: u64, last: bool) {
        bump(&self.bytes_unmapped, bytes);
        bump(&self.num_unmap_ops, u64::from(last));
    }

    /// `bytes` of a write zeroes done in pieces; `last` ends the operation.
    pub(crate) fn record_write_zeroes_piece(&self, bytes: u64, last: bool) {
        bump(&self.bytes_zeroed, bytes);
        bump(&self.num_write_zeroes_ops, u64::from(last));
    }

    pub(crate) fn record_compare(&self, bytes: u64) {
        bump(&self.bytes_compared, bytes);
        bump(&self.num_compare_ops, 1);
    }

    pub(crate) fn record_flush(&self) {
        bump(&self.num_flush_ops, 1);
    }

    /// Read every counter (each on its own, Relaxed).
    fn load(&self) -> BdevStatsSnapshot {
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
            read_latency: self.read_latency.load(),
            write_latency: self.write_latency.load(),
            unmap_latency: self.unmap_latency.load(),
        }
    }
}

/// A bdev's counters: the registry of its channels' counter sets.
#[derive(Debug, Default)]
pub struct BdevStats {
    registry: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    live: Vec<SharedCounters>,
    /// What dropped channels had counted, so totals never go backwards.
    retired: BdevStatsSnapshot,
}

impl BdevStats {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        // The registry stays consistent even if a holder panicked (every update is one step).
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new counter set for a new channel.
    pub(crate) fn open(&self) -> SharedCounters {
        let c = SharedCounters::default();
        self.registry().live.push(Arc::clone(&c));
        c
    }

    /// Fold a dropped channel's counts into the totals and forget its set.
    pub(crate) fn retire(&self, c: &SharedCounters) {
        let mut r = self.registry();
        if let Some(i) = r.live.iter().position(|l| Arc::ptr_eq(l, c)) {
            r.live.swap_remove(i);
            let counted = c.load();
            r.retired += counted;
        }
    }

    /// The totals over every channel the bdev has had.
    pub fn snapshot(&self) -> BdevStatsSnapshot {
        let r = self.registry();
        r.live.iter().fold(r.retired, |mut sum, c| {
            sum += c.load();
            sum
        })
    }
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
    /// Time the Reads counted in `num_read_ops` took.
    pub read_latency: Latency,
    /// Time the Writes counted in `num_write_ops` took.
    pub write_latency: Latency,
    /// Time the Deallocates counted in `num_unmap_ops` took.
    pub unmap_latency: Latency,
}

impl std::ops::AddAssign for BdevStatsSnapshot {
    fn add_assign(&mut self, o: BdevStatsSnapshot) {
        self.bytes_read = self.bytes_read.wrapping_add(o.bytes_read);
        self.num_read_ops = self.num_read_ops.wrapping_add(o.num_read_ops);
        self.bytes_written = self.bytes_written.wrapping_add(o.bytes_written);
        self.num_write_ops = self.num_write_ops.wrapping_add(o.num_write_ops);
        self.bytes_unmapped = self.bytes_unmapped.wrapping_add(o.bytes_unmapped);
        self.num_unmap_ops = self.num_unmap_ops.wrapping_add(o.num_unmap_ops);
        self.bytes_zeroed = self.bytes_zeroed.wrapping_add(o.bytes_zeroed);
        self.num_write_zeroes_ops = self
            .num_write_zeroes_ops
            .wrapping_add(o.num_write_zeroes_ops);
        self.bytes_compared = self.bytes_compared.wrapping_add(o.bytes_compared);
        self.num_compare_ops = self.num_compare_ops.wrapping_add(o.num_compare_ops);
        self.num_flush_ops = self.num_flush_ops.wrapping_add(o.num_flush_ops);
        self.read_latency += o.read_latency;
        self.write_latency += o.write_latency;
        self.unmap_latency += o.unmap_latency;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_record_bumps_its_own_pair() {
        let stats = BdevStats::default();
        let s = stats.open();
        s.record_read(512);
        s.record_read(4096);
        s.record_write(8);
        s.record_unmap(1 << 20);
        s.record_write_zeroes(3);
        s.record_compare(7);
        s.record_flush();
        assert_eq!(
            stats.snapshot(),
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
                ..BdevStatsSnapshot::default()
            }
        );
    }

    #[test]
    fn snapshot_sums_live_sets_and_keeps_retired_counts() {
        let stats = BdevStats::default();
        let (a, b) = (stats.open(), stats.open());
        a.record_write(100);
        b.record_write(20);
        b.record_flush();
        assert_eq!(stats.snapshot().bytes_written, 120);
        stats.retire(&a);
        // Retiring twice must not count twice.
        stats.retire(&a);
        b.record_write(3);
        let s = stats.snapshot();
        assert_eq!(
            (s.bytes_written, s.num_write_ops, s.num_flush_ops),
            (123, 3, 1)
        );
        assert_eq!(stats.registry().live.len(), 1);
    }
}
