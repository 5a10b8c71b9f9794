// SPDX-License-Identifier: Apache-2.0
//! The block device: geometry, storage and the byte-range operations on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nvmemu_mem::{MemError, MmapRegion, Progress};

use crate::fault::FaultSlot;
use crate::file::{FileBacking, FileEngine};
use crate::malloc::{
    MallocBacking, MemoryHold, MemoryReport, Storage, WRITE_ZEROES_DISCARD_THRESHOLD,
};
use crate::model::ModelSlot;
use crate::{BdevError, BdevOp, BdevStats, QosLimits};

/// Smallest and largest block sizes accepted (powers of two in between).
const MIN_BLOCK_SIZE: u32 = 512;
const MAX_BLOCK_SIZE: u32 = 65536;

/// Which backend a [`Bdev`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BdevKind {
    /// Anonymous memory, zero until written ([`MallocBacking`] says how it is backed).
    Malloc,
    /// No storage: reads return zeroes, writes are dropped.
    Null,
    /// SPDK's delay bdev: another bdev's storage, with a latency model of its own.
    Delay,
    /// SPDK's error bdev: another bdev's storage, where errors can be injected.
    Error,
    /// A file or block device (SPDK's aio or uring bdev, as created).
    File(FileEngine),
}

impl BdevKind {
    /// SPDK's `product_name` for this backend (`bdev_get_bdevs`).
    pub fn product_name(self) -> &'static str {
        match self {
            BdevKind::Malloc => "Malloc disk",
            BdevKind::Null => "Null disk",
            BdevKind::Delay => "delay",
            BdevKind::Error => "Error Injection Disk",
            BdevKind::File(FileEngine::Aio) => "AIO disk",
            BdevKind::File(FileEngine::Uring) => "URING bdev",
        }
    }
}

/// A block device backing one namespace. `Send + Sync`: pollers on several threads share it
/// through an `Arc`; operations take `&self` and never lock. I/O goes through a
/// [`BdevChannel`](crate::BdevChannel), which counts it.
///
/// Offsets and lengths are in bytes. The controller has already range-checked the LBAs, but
/// every method checks `[offset, offset + len)` again and returns
/// [`BdevError::OutOfRange`] rather than panicking. Operations need not be block aligned.
#[derive(Debug)]
pub struct Bdev {
    name: String,
    kind: BdevKind,
    block_size: u32,
    num_blocks: u64,
    /// `block_size * num_blocks`, checked at creation.
    size: u64,
    /// `Some` for Malloc (exactly `size` bytes), `None` for Null; a delay bdev shares its
    /// base's.
    storage: Option<Arc<Storage>>,
    /// `Some` for a file bdev (and the delay or error bdevs on one).
    file: Option<Arc<FileBacking>>,
    stats: BdevStats,
    qos: QosLimits,
    /// Operation latencies are measured (`set_timed`); off, no I/O reads the clock.
    timed: AtomicBool,
    model: ModelSlot,
    faults: FaultSlot,
}

impl Bdev {
    /// A malloc bdev: `num_blocks` blocks of `block_size` bytes of anonymous memory, zero
    /// until written, every page of it faulted in now ([`MallocBacking::Populated`]).
    /// `block_size` must be a power of two in 512..=65536 and `num_blocks` non-zero.
    pub fn malloc(name: &str, block_size: u32, num_blocks: u64) -> Result<Bdev, BdevError> {
        Self::malloc_with(
            name,
            block_size,
            num_blocks,
            MallocBacking::Populated,
            &|_| {},
        )
    }

    /// [`Bdev::malloc`] backed as `backing` says; `progress` is called every few seconds
    /// while a large one is populated. Memory the machine cannot give is `NoMemory` (the
    /// size asked and the memory available), a size that cannot even be mapped `Map`.
    pub fn malloc_with(
        name: &str,
        block_size: u32,
        num_blocks: u64,
        backing: MallocBacking,
        progress: &dyn Fn(Progress),
    ) -> Result<Bdev, BdevError> {
        Self::malloc_on_node(name, block_size, num_blocks, backing, None, progress)
    }

    /// [`Bdev::malloc_with`] with its memory bound to NUMA node `numa_node` (`None`: the
    /// kernel's default policy, usually the node of the CPU that faults a page in).
    pub fn malloc_on_node(
        name: &str,
        block_size: u32,
        num_blocks: u64,
        backing: MallocBacking,
        numa_node: Option<u32>,
        progress: &dyn Fn(Progress),
    ) -> Result<Bdev, BdevError> {
        let size = geometry(block_size, num_blocks)?;
        let storage = Storage::new(size, backing, numa_node, progress)?;
        Ok(Bdev::new(
            name,
            BdevKind::Malloc,
            block_size,
            num_blocks,
            size,
            Some(Arc::new(storage)),
        ))
    }

    /// A null bdev of the given geometry (same rules as [`Bdev::malloc`]); costs no memory.
    pub fn null(name: &str, block_size: u32, num_blocks: u64) -> Result<Bdev, BdevError> {
        let size = geometry(block_size, num_blocks)?;
        Ok(Bdev::new(
            name,
            BdevKind::Null,
            block_size,
            num_blocks,
            size,
            None,
        ))
    }

    /// A bdev on the file or block device at `path`, read-write unless `readonly`: blocks of
    /// `block_size` bytes (default: a block device's logical block size, 512 for a file),
    /// as many as fit in the file. A missing file is not created (SPDK's behaviour).
    pub fn open_file(
        name: &str,
        path: &std::path::Path,
        block_size: Option<u32>,
        readonly: bool,
        engine: FileEngine,
    ) -> Result<Bdev, BdevError> {
        let file = FileBacking::open(path, readonly)?;
        let block_size = block_size
            .filter(|&b| b != 0)
            .or(file.device_block_size())
            .unwrap_or(MIN_BLOCK_SIZE);
        let num_blocks = file.size() / u64::from(block_size.max(1));
        let size = geometry(block_size, num_blocks)?;
        let mut bdev = Bdev::new(
            name,
            BdevKind::File(engine),
            block_size,
            num_blocks,
            size,
            None,
        );
        bdev.file = Some(Arc::new(file));
        Ok(bdev)
    }

    /// A delay bdev called `name` on `base`: the same blocks (what one writes the other
    /// reads), with its own counters, QoS limits and latency model (none until set).
    pub fn delay(name: &str, base: &Bdev) -> Bdev {
        Bdev::stacked(name, BdevKind::Delay, base)
    }

    /// An error bdev called `name` on `base`: the same blocks, with errors injected by
    /// [`Bdev::faults`] (the slot exists on every bdev; only error bdevs are armed over RPC).
    pub fn error(name: &str, base: &Bdev) -> Bdev {
        Bdev::stacked(name, BdevKind::Error, base)
    }

    fn stacked(name: &str, kind: BdevKind, base: &Bdev) -> Bdev {
        let mut bdev = Bdev::new(
            name,
            kind,
            base.block_size,
            base.num_blocks,
            base.size,
            base.storage.clone(),
        );
        bdev.file = base.file.clone();
        bdev
    }

    fn new(
        name: &str,
        kind: BdevKind,
        block_size: u32,
        num_blocks: u64,
        size: u64,
        storage: Option<Arc<Storage>>,
    ) -> Bdev {
        Bdev {
            name: name.to_owned(),
            kind,
            block_size,
            num_blocks,
            size,
            storage,
            file: None,
            stats: BdevStats::default(),
            qos: QosLimits::default(),
            timed: AtomicBool::new(false),
            model: ModelSlot::default(),
            faults: FaultSlot::default(),
        }
    }

    /// The bdev's name (unique within a target; the registry enforces that).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The QoS rate limits (`bdev_set_qos_limit`), enforced by the pollers.
    pub fn qos(&self) -> &QosLimits {
        &self.qos
    }

    /// The latency and throughput model (`bdev_delay_create`, `nvmemu_bdev_set_model`), applied
    /// by the pollers.
    pub fn model(&self) -> &ModelSlot {
        &self.model
    }

    /// The injected errors (`bdev_error_inject_error`), applied by the pollers.
    pub fn faults(&self) -> &FaultSlot {
        &self.faults
    }

    /// The backend kind.
    pub fn kind(&self) -> BdevKind {
        self.kind
    }

    /// Bytes per block (the namespace's LBA data size).
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Number of blocks (the namespace's NSZE/NCAP).
    pub fn num_blocks(&self) -> u64 {
        self.num_blocks
    }

    /// Size in bytes: `block_size * num_blocks`.
    pub fn size_bytes(&self) -> u64 {
        self.size
    }

    /// The backing file of a file bdev (and of a delay or error bdev on one).
    pub fn file(&self) -> Option<&Arc<FileBacking>> {
        self.file.as_ref()
    }

    /// What backs a malloc bdev now (`None` for null).
    pub fn memory(&self) -> Option<MemoryReport> {
        self.storage.as_deref().map(Storage::report)
    }

    /// Measure the latency of each Read, Write and Deallocate from now on (`on`), or stop.
    /// The target turns it on with the bdev's histogram (`bdev_enable_histogram`); a channel
    /// whose caller times the operations itself reads no clock for it
    /// ([`BdevChannel::set_timed_by_caller`](crate::BdevChannel::set_timed_by_caller)).
    pub fn set_timed(&self, on: bool) {
        // Read by the channels on any poller; nothing else is published with it.
        self.timed.store(on, Ordering::Relaxed);
    }

    /// Whether operation latencies are measured.
    #[inline]
    pub fn is_timed(&self) -> bool {
        self.timed.load(Ordering::Relaxed)
    }

    /// The live I/O counters (`snapshot()` them to report).
    pub fn stats(&self) -> &BdevStats {
        &self.stats
    }

    /// A new hold on the memory of a malloc bdev (and of a delay or error bdev on one);
    /// None for null and file bdevs.
    pub(crate) fn memory_hold(&self) -> Option<MemoryHold> {
        match (&self.storage, &self.file) {
            (Some(s), None) => Some(MemoryHold::new(Arc::clone(s))),
            _ => None,
        }
    }

    /// `OutOfRange` unless `[offset, offset + len)` lies inside the bdev.
    #[inline]
    pub(crate) fn check(&self, op: BdevOp, offset: u64, len: u64) -> Result<(), BdevError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(BdevError::OutOfRange {
                op,
                offset,
                len,
                size: self.size,
            }),
        }
    }

    /// Hint that `len` bytes at `offset` will be read soon (malloc only; a no-op otherwise).
    #[inline]
    pub(crate) fn prefetch(&self, offset: u64, len: u64) {
        if let Some(s) = &self.storage {
            s.mem.prefetch(offset, len);
        }
    }

    /// Copy `len` bytes at `offset` into `dst` at `dst_offset`. Null: fills `dst` with zeroes.
    #[inline]
    pub(crate) fn read(
        &self,
        offset: u64,
        dst: &MmapRegion,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), BdevError> {
        let op = BdevOp::Read;
        self.check(op, offset, len)?;
        if let Some(f) = &self.file {
            return f.read(offset, dst, dst_offset, len);
        }
        match &self.storage {
            Some(s) => s.mem.copy_to_region(offset, dst, dst_offset, len),
            None => dst.fill(dst_offset, len, 0),
        }
        .map_err(buffer(op, offset, len))?;
        Ok(())
    }

    /// Copy `len` bytes of `src` at `src_offset` to `offset`. Null: checks the buffer range
    /// and drops the data.
    #[inline]
    pub(crate) fn write(
        &self,
        offset: u64,
        src: &MmapRegion,
        src_offset: u64,
        len: u64,
    ) -> Result<(), BdevError> {
        let op = BdevOp::Write;
        self.check(op, offset, len)?;
        if let Some(f) = &self.file {
            return f.write(offset, src, src_offset, len);
        }
        match &self.storage {
            // Streaming: written blocks are not read again soon (see the method's docs).
            Some(s) => src.copy_to_region_streaming(src_offset, &s.mem, offset, len),
            None => src.check_range(src_offset, len),
        }
        .map_err(buffer(op, offset, len))?;
        Ok(())
    }

    /// Whether `len` bytes at `offset` equal `src` at `src_offset`. Null: whether `src` is
    /// all zeroes.
    pub(crate) fn compare(
        &self,
        offset: u64,
        src: &MmapRegion,
        src_offset: u64,
        len: u64,
    ) -> Result<bool, BdevError> {
        let op = BdevOp::Compare;
        self.check(op, offset, len)?;
        if let Some(f) = &self.file {
            return f.compare(offset, src, src_offset, len);
        }
        let equal = match &self.storage {
            Some(s) => s.mem.compare_with(offset, src, src_offset, len),
            None => src.is_zero(src_offset, len),
        }
        .map_err(buffer(op, offset, len))?;
        Ok(equal)
    }

    /// Make `len` bytes at `offset` read as zero: a fill, or on a lazy bdev a discard
    /// (pages returned to the kernel) at [`WRITE_ZEROES_DISCARD_THRESHOLD`] and above.
    /// Null: nothing to do.
    pub(crate) fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), BdevError> {
        let op = BdevOp::WriteZeroes;
        self.check(op, offset, len)?;
        if let Some(f) = &self.file {
            return f.punch(op, offset, len);
        }
        if let Some(s) = &self.storage {
            s.zero(op, offset, len, len >= WRITE_ZEROES_DISCARD_THRESHOLD)?;
        }
        Ok(())
    }

    /// Deallocate `len` bytes at `offset`; they read back as zeroes afterwards (the
    /// namespace reports DLFEAT "reads zeroes"): a discard on a lazy bdev, a fill on a
    /// backed one, which keeps its pages. Null: nothing to do.
    pub(crate) fn deallocate(&self, offset: u64, len: u64) -> Result<(), BdevError> {
        let op = BdevOp::Deallocate;
        self.check(op, offset, len)?;
        if let Some(f) = &self.file {
            return f.punch(op, offset, len);
        }
        if let Some(s) = &self.storage {
            s.zero(op, offset, len, true)?;
        }
        Ok(())
    }

    /// One piece of a Deallocate or Write Zeroes (`op`) too large to run in one call: like
    /// `deallocate`, whatever `op` is (a large Write Zeroes discards on a lazy bdev too).
    pub(crate) fn zero_piece(&self, op: BdevOp, offset: u64, len: u64) -> Result<(), BdevError> {
        self.check(op, offset, len)?;
        if let Some(f) = &self.file {
            return f.punch(op, offset, len);
        }
        if let Some(s) = &self.storage {
            s.zero(op, offset, len, true)?;
        }
        Ok(())
    }

    /// XOR the stored byte at `offset` with `value`: the error bdev's `corrupt_data` on a
    /// Write, applied after the write, so what is stored differs from what the host sent
    /// while the host's buffer is never touched. Null: nothing is stored, nothing changes.
    pub fn corrupt_byte(&self, offset: u64, value: u8) -> Result<(), BdevError> {
        let op = BdevOp::Write;
        self.check(op, offset, 1)?;
        if let Some(s) = &self.storage {
            let mut byte = [0u8];
            s.mem
                .copy_to(offset, &mut byte)
                .map_err(buffer(op, offset, 1))?;
            byte[0] ^= value;
            s.mem
                .copy_from(offset, &byte)
                .map_err(buffer(op, offset, 1))?;
        }
        Ok(())
    }

    /// Make completed writes durable: `fdatasync` for a file. Memory and null backends
    /// have nothing volatile to flush.
    pub(crate) fn flush(&self) -> Result<(), BdevError> {
        match &self.file {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

/// The byte size of a valid geometry, or `InvalidGeometry`.
fn geometry(block_size: u32, num_blocks: u64) -> Result<u64, BdevError> {
    let valid_bs =
        block_size.is_power_of_two() && (MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size);
    valid_bs
        .then(|| u64::from(block_size).checked_mul(num_blocks))
        .flatten()
        .filter(|&size| size > 0)
        .ok_or(BdevError::InvalidGeometry {
            block_size,
            num_blocks,
        })
}

/// Wrap a buffer-side memory error.
fn buffer(op: BdevOp, offset: u64, len: u64) -> impl FnOnce(MemError) -> BdevError {
    move |source| BdevError::Buffer {
        op,
        offset,
        len,
        source,
    }
}

#[cfg(test)]
mod tests;
