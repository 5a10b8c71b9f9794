// SPDX-License-Identifier: Apache-2.0
//! The block device: geometry, storage and the byte-range operations on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nvmemu_mem::{MemError, MmapRegion, Progress};

use crate::fault::FaultSlot;
use crate::malloc::{MallocBacking, MemoryReport, Storage, WRITE_ZEROES_DISCARD_THRESHOLD};
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
}

impl BdevKind {
    /// SPDK's `product_name` for this backend (`bdev_get_bdevs`).
    pub fn product_name(self) -> &'static str {
        match self {
            BdevKind::Malloc => "Malloc disk",
            BdevKind::Null => "Null disk",
            BdevKind::Delay => "delay",
            BdevKind::Error => "Error Injection Disk",
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
        let size = geometry(block_size, num_blocks)?;
        let storage = Storage::new(size, backing, progress)?;
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
        Bdev::new(
            name,
            kind,
            base.block_size,
            base.num_blocks,
            base.size,
            base.storage.clone(),
        )
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

    /// What backs a malloc bdev now (`None` for null).
    pub fn memory(&self) -> Option<MemoryReport> {
        self.storage.as_deref().map(Storage::report)
    }

    /// Measure the latency of each Read, Write and Deallocate from now on (`on`), or stop.
    /// The target turns it on with the bdev's histogram (`bdev_enable_histogram`): two clock
    /// reads per operation cost a 512 B read about a quarter of the controller's time.
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

    /// `OutOfRange` unless `[offset, offset + len)` lies inside the bdev.
    #[inline]
    fn check(&self, op: BdevOp, offset: u64, len: u64) -> Result<(), BdevError> {
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
        if let Some(s) = &self.storage {
            s.zero(op, offset, len, true)?;
        }
        Ok(())
    }

    /// One piece of a Deallocate or Write Zeroes (`op`) too large to run in one call: like
    /// `deallocate`, whatever `op` is (a large Write Zeroes discards on a lazy bdev too).
    pub(crate) fn zero_piece(&self, op: BdevOp, offset: u64, len: u64) -> Result<(), BdevError> {
        self.check(op, offset, len)?;
        if let Some(s) = &self.storage {
            s.zero(op, offset, len, true)?;
        }
        Ok(())
    }

    /// Make completed writes durable. Memory and null backends have nothing volatile to
    /// flush.
    pub(crate) fn flush(&self) -> Result<(), BdevError> {
        Ok(())
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
mod tests {
    use std::os::fd::{AsFd, OwnedFd};

    use nvmemu_mem::{Protection, create_memfd};

    use std::sync::Arc;

    use super::*;
    use crate::{BdevChannel, BdevErrorKind, BdevStatsSnapshot};

    /// A client-memory buffer: a memfd mapped twice, like the target and the driver see it.
    struct Buf {
        _fd: OwnedFd,
        target: MmapRegion,
        host: MmapRegion,
    }

    fn buf(size: u64) -> Buf {
        let fd = create_memfd("bdev-test", size, false).unwrap();
        let target = MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite).unwrap();
        let host = MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite).unwrap();
        Buf {
            _fd: fd,
            target,
            host,
        }
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| u8::try_from(i % 251).unwrap() ^ seed)
            .collect()
    }

    /// An I/O channel on a new malloc bdev.
    fn malloc(block_size: u32, num_blocks: u64) -> BdevChannel {
        Arc::new(Bdev::malloc("m", block_size, num_blocks).unwrap()).channel()
    }

    fn read_back(b: &BdevChannel, offset: u64, len: usize) -> Vec<u8> {
        let out = buf(len as u64);
        b.read(offset, &out.target, 0, len as u64).unwrap();
        let mut v = vec![0u8; len];
        out.host.copy_to(0, &mut v).unwrap();
        v
    }

    #[test]
    fn bdev_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Bdev>();
    }

    #[test]
    fn geometry_is_validated() {
        for bs in [512u32, 1024, 4096, 65536] {
            let b = Bdev::malloc("m", bs, 8).unwrap();
            assert_eq!(b.size_bytes(), u64::from(bs) * 8);
        }
        for (bs, n) in [
            (0u32, 8u64),
            (256, 8),
            (520, 8),
            (131_072, 8),
            (4096, 0),
            (65536, u64::MAX),
        ] {
            for r in [Bdev::malloc("m", bs, n), Bdev::null("n", bs, n)] {
                let e = r.unwrap_err();
                assert_eq!(e.kind(), BdevErrorKind::InvalidGeometry, "{bs} x {n}");
                assert!(matches!(
                    e,
                    BdevError::InvalidGeometry { block_size, num_blocks } if block_size == bs && num_blocks == n
                ));
            }
        }
    }

    #[test]
    fn accessors_report_creation_parameters() {
        let b = Bdev::malloc("Malloc0", 512, 100).unwrap();
        assert_eq!(
            (b.name(), b.kind(), b.block_size(), b.num_blocks()),
            ("Malloc0", BdevKind::Malloc, 512, 100)
        );
        assert_eq!(b.kind().product_name(), "Malloc disk");
        let n = Bdev::null("Null0", 4096, 1 << 40).unwrap();
        assert_eq!((n.kind(), n.size_bytes()), (BdevKind::Null, 1 << 52));
    }

    #[test]
    fn malloc_write_then_read_back() {
        let b = malloc(512, 64);
        let src = buf(8192);
        let data = pattern(4096, 0x11);
        src.host.copy_from(100, &data).unwrap();
        b.write(1024, &src.target, 100, 4096).unwrap();
        assert_eq!(read_back(&b, 1024, 4096), data);
        // Unaligned sub-range of what was written.
        assert_eq!(read_back(&b, 1025, 10), data[1..11]);
        // Unwritten blocks around it read zero.
        assert_eq!(read_back(&b, 0, 1024), vec![0u8; 1024]);
        assert_eq!(
            read_back(&b, 5120, 64 * 512 - 5120),
            vec![0u8; 64 * 512 - 5120]
        );
        let s = b.bdev().stats().snapshot();
        assert_eq!((s.bytes_written, s.num_write_ops), (4096, 1));
        assert_eq!(s.num_read_ops, 4);
    }

    /// An I/O channel on a new malloc bdev backed as asked.
    fn malloc_backed(block_size: u32, num_blocks: u64, backing: MallocBacking) -> BdevChannel {
        let b = Bdev::malloc_with("m", block_size, num_blocks, backing, &|_| {});
        Arc::new(b.unwrap()).channel()
    }

    const BACKINGS: [MallocBacking; 2] = [MallocBacking::Populated, MallocBacking::Lazy];

    #[test]
    fn write_zeroes_small_and_large_read_zero_in_both_modes() {
        for backing in BACKINGS {
            let b = malloc_backed(512, 512, backing);
            let size = b.bdev().size_bytes();
            let src = buf(size);
            src.host.fill(0, size, 0xee).unwrap();
            b.write(0, &src.target, 0, size).unwrap();
            // Small: fill.
            b.write_zeroes(512, 1024).unwrap();
            // Large, unaligned: lazy discards with partial pages zero-filled, backed fills.
            b.write_zeroes(10_240 + 100, WRITE_ZEROES_DISCARD_THRESHOLD + 4000)
                .unwrap();
            let all = read_back(&b, 0, usize::try_from(size).unwrap());
            for (i, &byte) in all.iter().enumerate() {
                let i = i as u64;
                let zero = (512..1536).contains(&i)
                    || (10_340..10_340 + WRITE_ZEROES_DISCARD_THRESHOLD + 4000).contains(&i);
                assert_eq!(byte, if zero { 0 } else { 0xee }, "{backing:?}: byte {i}");
            }
            assert_eq!(b.bdev().stats().snapshot().num_write_zeroes_ops, 2);
        }
    }

    #[test]
    fn deallocate_reads_zero_and_the_range_can_be_rewritten_in_both_modes() {
        for backing in BACKINGS {
            let b = malloc_backed(4096, 64, backing);
            let src = buf(64 * 4096);
            src.host.fill(0, 64 * 4096, 0x77).unwrap();
            b.write(0, &src.target, 0, 64 * 4096).unwrap();
            b.deallocate(4096, 16 * 4096).unwrap();
            assert_eq!(read_back(&b, 4096, 16 * 4096), vec![0u8; 16 * 4096]);
            assert_eq!(read_back(&b, 0, 4096), vec![0x77u8; 4096]);
            assert_eq!(read_back(&b, 17 * 4096, 4096), vec![0x77u8; 4096]);
            b.write(4096, &src.target, 0, 4096).unwrap();
            assert_eq!(read_back(&b, 4096, 4096), vec![0x77u8; 4096]);
            let s = b.bdev().stats().snapshot();
            assert_eq!((s.bytes_unmapped, s.num_unmap_ops), (16 * 4096, 1));
        }
    }

    #[test]
    fn a_backed_bdev_keeps_its_memory_through_deallocate_and_a_lazy_one_gives_it_back() {
        let size = 16u64 << 20;
        for backing in BACKINGS {
            let b = malloc_backed(4096, size / 4096, backing);
            let src = buf(size);
            src.host.fill(0, size, 0x33).unwrap();
            b.write(0, &src.target, 0, size).unwrap();
            b.deallocate(0, size).unwrap();
            b.write_zeroes(0, size).unwrap();
            assert_eq!(read_back(&b, 0, 4096), vec![0u8; 4096]);
            let m = b.bdev().memory().unwrap();
            assert_eq!(m.backing, backing);
            let resident = m.residency.unwrap().resident_bytes;
            match backing {
                MallocBacking::Lazy => assert!(resident < size / 4, "{m:?}"),
                _ => assert!(resident >= size, "{m:?}"),
            }
        }
        assert!(Bdev::null("n", 512, 8).unwrap().memory().is_none());
    }

    #[test]
    fn compare_true_and_false() {
        let b = malloc(512, 8);
        let src = buf(4096);
        let data = pattern(1024, 3);
        src.host.copy_from(0, &data).unwrap();
        b.write(512, &src.target, 0, 1024).unwrap();
        assert!(b.compare(512, &src.target, 0, 1024).unwrap());
        src.host.write_obj(1023, &(data[1023] ^ 1)).unwrap();
        assert!(!b.compare(512, &src.target, 0, 1024).unwrap());
        assert!(b.compare(512, &src.target, 0, 1023).unwrap());
        // Unwritten blocks compare equal to zeroes only.
        assert!(b.compare(2048, &src.target, 2048, 1024).unwrap());
        assert!(!b.compare(2048, &src.target, 0, 1024).unwrap());
        assert_eq!(b.bdev().stats().snapshot().num_compare_ops, 5);
    }

    #[test]
    fn an_untimed_bdev_counts_operations_but_not_their_latency() {
        let b = Arc::new(Bdev::null("n", 512, 1 << 20).unwrap()).channel();
        let io = buf(4096);
        let ops = |b: &BdevChannel| {
            b.read(0, &io.target, 0, 4096).unwrap();
            b.write(0, &io.target, 0, 4096).unwrap();
            b.deallocate(0, 4096).unwrap();
        };
        let lat = |b: &BdevChannel| {
            let s = b.bdev().stats().snapshot();
            [s.read_latency, s.write_latency, s.unmap_latency]
        };
        ops(&b);
        let s = b.bdev().stats().snapshot();
        assert_eq!(
            (s.num_read_ops, s.num_write_ops, s.num_unmap_ops),
            (1, 1, 1)
        );
        assert_eq!(lat(&b), [Default::default(); 3], "off by default");
        b.bdev().set_timed(true);
        ops(&b);
        let timed = lat(&b);
        if nvmemu_mem::global_clock().is_tsc() {
            assert!(timed.iter().all(|l| l.sum_ns > 0), "{timed:?}");
        }
        b.bdev().set_timed(false);
        ops(&b);
        assert_eq!(lat(&b), timed, "off again: nothing more recorded");
        assert_eq!(b.bdev().stats().snapshot().num_read_ops, 3);
    }

    #[test]
    fn null_reads_zeroes_drops_writes_and_compares_against_zero() {
        let b = Arc::new(Bdev::null("n", 512, 1 << 30).unwrap()).channel();
        b.bdev().set_timed(true);
        let io = buf(8192);
        io.host.fill(0, 8192, 0x5a).unwrap();
        b.write(0, &io.target, 0, 4096).unwrap();
        assert!(!b.compare(0, &io.target, 0, 4096).unwrap());
        b.read(0, &io.target, 0, 4096).unwrap();
        let mut v = vec![0xffu8; 8192];
        io.host.copy_to(0, &mut v).unwrap();
        assert_eq!(&v[..4096], &[0u8; 4096][..]);
        assert_eq!(
            &v[4096..],
            &[0x5au8; 4096][..],
            "only the read range is zeroed"
        );
        assert!(b.compare(0, &io.target, 0, 4096).unwrap());
        b.write_zeroes(0, 1 << 20).unwrap();
        b.deallocate(0, 1 << 20).unwrap();
        b.flush().unwrap();
        // The buffer range is still checked when the data is dropped.
        assert_eq!(
            b.write(0, &io.target, 4096, 8192).unwrap_err().kind(),
            BdevErrorKind::Buffer
        );
        let s = b.bdev().stats().snapshot();
        // Each timed operation took some time, and one of each kind was counted.
        for l in [s.read_latency, s.write_latency, s.unmap_latency] {
            if nvmemu_mem::global_clock().is_tsc() {
                assert!(
                    l.min_ns > 0 && l.min_ns == l.max_ns && l.sum_ns == l.min_ns,
                    "{l:?}"
                );
            }
        }
        assert_eq!(
            s,
            BdevStatsSnapshot {
                bytes_read: 4096,
                num_read_ops: 1,
                bytes_written: 4096,
                num_write_ops: 1,
                bytes_unmapped: 1 << 20,
                num_unmap_ops: 1,
                bytes_zeroed: 1 << 20,
                num_write_zeroes_ops: 1,
                bytes_compared: 8192,
                num_compare_ops: 2,
                num_flush_ops: 1,
                read_latency: s.read_latency,
                write_latency: s.write_latency,
                unmap_latency: s.unmap_latency,
            }
        );
    }

    #[test]
    fn out_of_range_is_an_error_for_every_operation() {
        for b in [
            malloc(512, 8),
            Arc::new(Bdev::null("n", 512, 8).unwrap()).channel(),
        ] {
            let io = buf(8192);
            // Exactly to the end is fine.
            b.read(3584, &io.target, 0, 512).unwrap();
            b.write(3584, &io.target, 0, 512).unwrap();
            let cases: [(u64, u64); 3] = [(3585, 512), (4096, 1), (u64::MAX, 2)];
            for (offset, len) in cases {
                let errs = [
                    b.read(offset, &io.target, 0, len).unwrap_err(),
                    b.write(offset, &io.target, 0, len).unwrap_err(),
                    b.compare(offset, &io.target, 0, len).unwrap_err(),
                    b.write_zeroes(offset, len).unwrap_err(),
                    b.deallocate(offset, len).unwrap_err(),
                ];
                for e in errs {
                    assert!(
                        matches!(e, BdevError::OutOfRange { offset: o, len: l, size: 4096, .. } if o == offset && l == len),
                        "{e:?}"
                    );
                }
            }
            // Nothing failed was counted.
            let s = b.bdev().stats().snapshot();
            assert_eq!(
                (s.num_read_ops, s.num_write_ops, s.num_unmap_ops),
                (1, 1, 0)
            );
        }
    }

    #[test]
    fn bad_buffers_are_buffer_errors() {
        let b = malloc(512, 8);
        let io = buf(4096);
        let e = b.read(0, &io.target, 4000, 512).unwrap_err();
        assert_eq!((e.kind(), e.op()), (BdevErrorKind::Buffer, BdevOp::Read));
        let fd = create_memfd("ro", 4096, false).unwrap();
        let ro = MmapRegion::map_shared(fd.as_fd(), 0, 4096, Protection::Read).unwrap();
        let e = b.read(0, &ro, 0, 512).unwrap_err();
        assert!(matches!(
            e,
            BdevError::Buffer {
                source: MemError::ReadOnly,
                ..
            }
        ));
        // Writing from a read-only buffer is fine.
        b.write(0, &ro, 0, 512).unwrap();
        assert!(b.compare(0, &ro, 0, 512).unwrap());
    }

    #[test]
    fn pollers_on_several_threads_share_one_bdev() {
        let b = Arc::new(Bdev::malloc("shared", 512, 64).unwrap());
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                // One channel per thread, as each poller's namespace has its own.
                let b = b.channel();
                std::thread::spawn(move || {
                    let io = buf(4096);
                    io.host.fill(0, 4096, t + 1).unwrap();
                    for _ in 0..50 {
                        b.write(u64::from(t) * 4096, &io.target, 0, 4096).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // The writers' channels are gone; their counts are not.
        let reader = b.channel();
        for t in 0..4u8 {
            assert_eq!(
                read_back(&reader, u64::from(t) * 4096, 4096),
                vec![t + 1; 4096]
            );
        }
        let s = b.stats().snapshot();
        assert_eq!((s.num_write_ops, s.bytes_written), (200, 200 * 4096));
        assert_eq!(s.num_read_ops, 4);
    }

    #[test]
    fn four_gib_lazy_malloc_costs_nothing_until_written() {
        let b = Bdev::malloc_with("big", 4096, 1 << 20, MallocBacking::Lazy, &|_| {});
        let b = Arc::new(b.unwrap()).channel();
        assert_eq!(b.bdev().size_bytes(), 4 << 30);
        let io = buf(4096);
        io.host.fill(0, 4096, 0x42).unwrap();
        let last = (4 << 30) - 4096;
        b.write(last, &io.target, 0, 4096).unwrap();
        assert_eq!(read_back(&b, last, 4096), vec![0x42u8; 4096]);
        assert_eq!(read_back(&b, 2 << 30, 4096), vec![0u8; 4096]);
        b.deallocate(0, 4 << 30).unwrap();
        assert_eq!(read_back(&b, last, 4096), vec![0u8; 4096]);
    }
}
