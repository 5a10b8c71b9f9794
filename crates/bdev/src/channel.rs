// SPDX-License-Identifier: Apache-2.0
//! A bdev I/O channel (SPDK's `spdk_io_channel` on a bdev): one user's handle for I/O, with
//! its own counters.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;

use nvmemu_mem::MmapRegion;

use crate::latency::{self, LatencyCounter};
use crate::malloc::MemoryHold;
use crate::stats::SharedCounters;
use crate::{Bdev, BdevError, BdevOp};

/// I/O on a [`Bdev`] from one thread at a time. Every method checks its byte range and
/// counts what succeeded (Read, Write and Deallocate also their latency, while the bdev
/// [is timed](Bdev::set_timed)) in the channel's own counters (summed into the bdev's by
/// [`BdevStats::snapshot`](crate::BdevStats::snapshot)). An operation the caller runs
/// itself, in pieces (a command's data pointer: a `*_piece` call per piece) or outside the
/// channel (a file bdev's I/O on the controller's io_uring), opens with
/// [`begin`](BdevChannel::begin) and ends with one [`count`](BdevChannel::count): one
/// operation and one latency sample per command, as SPDK counts a bdev I/O, however many
/// pieces it took.
///
/// `Send` but not `Sync`: it may move to a poller thread, but only one thread uses it at a
/// time, which is what lets its counters be bumped without a locked add. Each namespace
/// holds its own; a clone is a new channel with fresh counters.
#[derive(Debug)]
pub struct BdevChannel {
    bdev: Arc<Bdev>,
    counters: SharedCounters,
    /// This channel's hold on a malloc bdev's memory (its own allocation, so its count is
    /// bumped by this channel's thread only).
    memory: Option<Arc<MemoryHold>>,
    /// Makes the type `!Sync` (see above).
    not_sync: PhantomData<Cell<()>>,
}

/// When an operation the caller runs began ([`BdevChannel::begin`]): a clock reading only
/// while the channel times that operation itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use]
pub struct Started(Option<u64>);

impl Started {
    /// No reading: [`count`](BdevChannel::count) records no latency.
    pub const UNTIMED: Started = Started(None);

    /// Whether the clock was read (the operation's latency will be recorded).
    pub fn is_timed(self) -> bool {
        self.0.is_some()
    }
}

impl Bdev {
    /// A new I/O channel on this bdev.
    pub fn channel(self: &Arc<Self>) -> BdevChannel {
        BdevChannel {
            bdev: Arc::clone(self),
            counters: self.stats().open(),
            memory: self.memory_hold().map(Arc::new),
            not_sync: PhantomData,
        }
    }
}

impl Clone for BdevChannel {
    fn clone(&self) -> BdevChannel {
        self.bdev.channel()
    }
}

impl Drop for BdevChannel {
    fn drop(&mut self) {
        self.bdev.stats().retire(&self.counters);
    }
}

impl BdevChannel {
    /// The block device.
    pub fn bdev(&self) -> &Arc<Bdev> {
        &self.bdev
    }

    /// Whether Read, Write and Deallocate read the clock around the backend call: the bdev
    /// is timed and the caller does not time them itself.
    #[inline(always)]
    fn times_itself(&self) -> bool {
        self.bdev.is_timed() && !self.counters.timed_by_caller()
    }

    /// The caller times this channel's operations and hands the durations over with
    /// [`record_latency`](Self::record_latency) (`on`), or stops doing so. The controller
    /// does while it times the namespace's commands, so one clock reading serves both.
    pub fn set_timed_by_caller(&self, on: bool) {
        self.counters.set_timed_by_caller(on);
    }

    /// Count a successful `op` that took `ticks` TSC ticks, timed by the caller (Read,
    /// Write and Deallocate have latency counters; other operations are ignored), while the
    /// bdev is timed.
    #[inline]
    pub fn record_latency(&self, op: BdevOp, ticks: u64) {
        self.record_latencies(op, (ticks, ticks, ticks));
    }

    /// [`record_latency`](Self::record_latency) for several operations of one kind at once:
    /// the sum, the smallest and the largest of their durations.
    #[inline]
    pub fn record_latencies(&self, op: BdevOp, (sum, min, max): (u64, u64, u64)) {
        if !self.bdev.is_timed() {
            return;
        }
        let counter = match op {
            BdevOp::Read => &self.counters.read_latency,
            BdevOp::Write => &self.counters.write_latency,
            BdevOp::Deallocate => &self.counters.unmap_latency,
            _ => return,
        };
        counter.record_many(sum, min, max);
    }

    /// Hint that `len` bytes at `offset` will be read soon (malloc only).
    #[inline]
    pub fn prefetch(&self, offset: u64, len: u64) {
        self.bdev.prefetch(offset, len);
    }

    /// Copy `len` bytes at `offset` into `dst` at `dst_offset` (null: zeroes): one Read.
    #[inline]
    pub fn read(
        &self,
        offset: u64,
        dst: &MmapRegion,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), BdevError> {
        let started = self.begin(BdevOp::Read);
        self.read_piece(offset, dst, dst_offset, len)?;
        self.count(BdevOp::Read, len, started);
        Ok(())
    }

    /// The clock reading that opens `op` run by the caller (in `*_piece` calls, or outside
    /// the channel), which [`count`](Self::count) takes back: read only for an operation
    /// with a latency counter (Read, Write, Deallocate) while the channel
    /// [times itself](Bdev::set_timed), not at all otherwise. Inlined: with `op` known at
    /// the call, only the test of the bdev's switch remains.
    #[inline(always)]
    pub fn begin(&self, op: BdevOp) -> Started {
        let has_latency = matches!(op, BdevOp::Read | BdevOp::Write | BdevOp::Deallocate);
        Started((has_latency && self.times_itself()).then(latency::start))
    }

    /// One piece of a Read whose destination comes in pieces (a command's data pointer):
    /// the copy only; [`count`](Self::count) counts the Read once it is whole.
    #[inline(always)]
    pub fn read_piece(
        &self,
        offset: u64,
        dst: &MmapRegion,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), BdevError> {
        self.bdev.read(offset, dst, dst_offset, len)
    }

    /// Count one `op` of `bytes` the caller ran since `started` ([`begin`](Self::begin)):
    /// one operation and, if `started` holds a reading, one latency sample from then to
    /// now, however many pieces it took. Inlined: with `op` known at the call (the I/O
    /// path's Read), only its counters remain.
    #[inline(always)]
    pub fn count(&self, op: BdevOp, bytes: u64, started: Started) {
        match op {
            BdevOp::Read => self.counters.record_read(bytes),
            BdevOp::Write => self.counters.record_write(bytes),
            BdevOp::Deallocate => self.counters.record_unmap(bytes),
            BdevOp::WriteZeroes => self.counters.record_write_zeroes(bytes),
            BdevOp::Compare => self.counters.record_compare(bytes),
            BdevOp::Flush => self.counters.record_flush(),
            BdevOp::Create => {}
        }
        let counter = match op {
            BdevOp::Read => &self.counters.read_latency,
            BdevOp::Write => &self.counters.write_latency,
            BdevOp::Deallocate => &self.counters.unmap_latency,
            _ => return,
        };
        if let Started(Some(t0)) = started {
            record_since(counter, t0);
        }
    }

    /// The bdev's memory, for a Read whose data the caller sends from it instead of a copy
    /// ([`BdevChannel::count_read_in_place`] counts it): None for null and file bdevs.
    #[inline]
    pub fn memory(&self) -> Option<&Arc<MemoryHold>> {
        self.memory.as_ref()
    }

    /// Check and count a Read of `len` bytes at `offset` whose data the caller takes from
    /// [`BdevChannel::memory`] itself: what `read` counts, without the copy.
    #[inline]
    pub fn count_read_in_place(&self, offset: u64, len: u64) -> Result<(), BdevError> {
        self.bdev.check(BdevOp::Read, offset, len)?;
        self.counters.record_read(len);
        Ok(())
    }

    /// Copy `len` bytes of `src` at `src_offset` to `offset` (null: checks `src`, drops it):
    /// one Write.
    #[inline]
    pub fn write(
        &self,
        offset: u64,
        src: &MmapRegion,
        src_offset: u64,
        len: u64,
    ) -> Result<(), BdevError> {
        let started = self.begin(BdevOp::Write);
        self.write_piece(offset, src, src_offset, len)?;
        self.count(BdevOp::Write, len, started);
        Ok(())
    }

    /// One piece of a Write whose source comes in pieces (see
    /// [`read_piece`](Self::read_piece)).
    #[inline(always)]
    pub fn write_piece(
        &self,
        offset: u64,
        src: &MmapRegion,
        src_offset: u64,
        len: u64,
    ) -> Result<(), BdevError> {
        self.bdev.write(offset, src, src_offset, len)
    }

    /// Whether `len` bytes at `offset` equal `src` at `src_offset` (null: whether all zero):
    /// one Compare, counted whatever it finds.
    pub fn compare(
        &self,
        offset: u64,
        src: &MmapRegion,
        src_offset: u64,
        len: u64,
    ) -> Result<bool, BdevError> {
        let equal = self.compare_piece(offset, src, src_offset, len)?;
        self.counters.record_compare(len);
        Ok(equal)
    }

    /// One piece of a Compare whose source comes in pieces (see
    /// [`read_piece`](Self::read_piece)).
    pub fn compare_piece(
        &self,
        offset: u64,
        src: &MmapRegion,
        src_offset: u64,
        len: u64,
    ) -> Result<bool, BdevError> {
        self.bdev.compare(offset, src, src_offset, len)
    }

    /// Make `len` bytes at `offset` read as zero (large ranges are discarded).
    pub fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), BdevError> {
        self.bdev.write_zeroes(offset, len)?;
        self.counters.record_write_zeroes(len);
        Ok(())
    }

    /// Deallocate `len` bytes at `offset`; they read back as zeroes.
    pub fn deallocate(&self, offset: u64, len: u64) -> Result<(), BdevError> {
        let started = self.begin(BdevOp::Deallocate);
        self.bdev.deallocate(offset, len)?;
        self.count(BdevOp::Deallocate, len, started);
        Ok(())
    }

    /// One piece of a Deallocate or Write Zeroes (`op`) that the caller splits across
    /// calls to bound the time of each: `len` bytes at `offset` read back as zeroes. Bytes
    /// are counted with every piece, the operation once, with the piece that ends it
    /// (`last`); no latency is recorded (a piece's is not the operation's).
    pub fn zero_piece(
        &self,
        op: BdevOp,
        (offset, len): (u64, u64),
        last: bool,
    ) -> Result<(), BdevError> {
        self.bdev.zero_piece(op, offset, len)?;
        match op {
            BdevOp::Deallocate => self.counters.record_unmap_piece(len, last),
            _ => self.counters.record_write_zeroes_piece(len, last),
        }
        Ok(())
    }

    /// Make completed writes durable (nothing to do for memory and null; only counted).
    pub fn flush(&self) -> Result<(), BdevError> {
        self.bdev.flush()?;
        self.counters.record_flush();
        Ok(())
    }
}

/// Out of line: the untimed path stays small enough for the caller's data pointer walk to
/// inline around it.
#[cold]
#[inline(never)]
fn record_since(counter: &LatencyCounter, t0: u64) {
    counter.record_since(t0);
}
