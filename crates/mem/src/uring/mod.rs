// SPDX-License-Identifier: Apache-2.0
//! File I/O through io_uring (the `io-uring` crate), between a file and mappings of client
//! memory, for a poller that must never block: operations are queued without a system call,
//! [`FileRing::submit`] hands everything queued to the kernel with one `io_uring_enter`,
//! and [`FileRing::reap`] takes what has completed from the shared completion ring without
//! any.
//!
//! The kernel reads and writes the memory an operation names until the operation
//! completes, so everything it points at is kept alive by the ring itself, not by the
//! caller: each operation's iovec array lives in a fixed slot allocated with the ring, the
//! mappings its buffers lie in are held by `Arc` (a mapping is unmapped only when its last
//! handle goes) and the file by an `Arc` of its fd (a closed fd number could be reused by
//! another file). A slot is released only when its last operation has completed, and
//! dropping the ring first waits for every operation still in the kernel.
//!
//! Where io_uring is not allowed, [`FileRing::new_pool`] runs the same operations on a few
//! worker threads instead (`pool.rs`), with the same slots and the same guarantees.
//!
//! Client memory is shared with another process, so the kernel writing into it while the
//! client also does is a race only the client can lose: nothing in this process holds a
//! Rust reference into it (see the crate docs).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use io_uring::{IoUring, opcode, squeue, types};

use crate::{MemError, MmapRegion, Protection};

mod pool;
pub use pool::IoGate;
use pool::{Op, Pool};

/// Most buffer pieces one read or write may name: a 1 MiB transfer (MDTS 8) in 4 KiB pages
/// that are not contiguous is 257; a command with more goes another way.
pub const MAX_SEGMENTS: usize = 260;

/// One iovec, with plain integers so the ring stays `Send` (`libc::iovec` holds a pointer).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct IoVec {
    base: usize,
    len: usize,
}
const _: () = assert!(size_of::<IoVec>() == size_of::<libc::iovec>());
const _: () = assert!(align_of::<IoVec>() == align_of::<libc::iovec>());

/// Why a buffer could not be added to an operation.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    /// The piece lies outside its mapping.
    #[error("buffer outside its mapping")]
    Range(#[from] MemError),
    /// The kernel would write into a read-only mapping.
    #[error("the buffer's mapping is read-only")]
    ReadOnly,
    /// More than [`MAX_SEGMENTS`] pieces.
    #[error("more than {MAX_SEGMENTS} buffer pieces")]
    TooManySegments,
}

/// A slot taken by [`FileRing::begin`]: one command's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotId(u32);

impl SlotId {
    /// The slot's index, below the ring's slot count (callers keep per-slot state by it).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One command's operations and everything they point at.
#[derive(Debug)]
struct Slot {
    iov: Box<[IoVec]>,
    segs: usize,
    /// Every mapping a piece lies in (each once in a row; reserved for `MAX_SEGMENTS`).
    regions: Vec<Arc<MmapRegion>>,
    /// Every file an operation names.
    fds: Vec<Arc<OwnedFd>>,
    /// Operations queued and not completed yet.
    ops: u32,
    /// Bytes the read or write must move; a shorter result is an error.
    want: u64,
    /// The first error (errno), if any.
    error: Option<i32>,
    busy: bool,
}

/// What runs the operations (one per ring: the size difference does not matter).
#[allow(clippy::large_enum_variant)]
enum Backend {
    Kernel(IoUring),
    Pool(Pool),
}

/// An io_uring (or its worker-pool stand-in) with a fixed number of command slots. `Send`,
/// used by one thread.
pub struct FileRing {
    backend: Backend,
    slots: Box<[Slot]>,
    free: Vec<u32>,
    /// Queued since the last `submit`.
    queued: bool,
    /// An io_uring's completions are taken only while this is open (tests).
    #[cfg(feature = "test-utils")]
    gate: Option<Arc<IoGate>>,
}

impl FileRing {
    /// A ring for at most `slots` commands at once (each with up to [`MAX_SEGMENTS`]
    /// pieces). Fails where io_uring is not allowed (`EPERM`, `ENOSYS` in some containers).
    pub fn new(slots: u32) -> io::Result<FileRing> {
        let ring = IoUring::new(slots.saturating_mul(2).next_power_of_two().max(8))?;
        Ok(FileRing::with(Backend::Kernel(ring), slots))
    }

    /// The same on a pool of worker threads making blocking system calls, for where
    /// io_uring is not allowed.
    pub fn new_pool(slots: u32) -> io::Result<FileRing> {
        FileRing::pool_with(slots, None)
    }

    /// A worker pool whose workers pass `gate` before each operation (tests of what must
    /// not wait for file I/O).
    #[cfg(feature = "test-utils")]
    pub fn new_pool_gated(slots: u32, gate: Arc<IoGate>) -> io::Result<FileRing> {
        FileRing::pool_with(slots, Some(gate))
    }

    /// An io_uring whose completions are taken only while `gate` is open: the kernel runs
    /// each operation, and its slot stays in flight until the gate opens (tests of what
    /// must wait for ring room).
    #[cfg(feature = "test-utils")]
    pub fn new_gated(slots: u32, gate: Arc<IoGate>) -> io::Result<FileRing> {
        let mut ring = FileRing::new(slots)?;
        ring.gate = Some(gate);
        Ok(ring)
    }

    fn pool_with(slots: u32, gate: Option<Arc<IoGate>>) -> io::Result<FileRing> {
        let bound = usize::try_from(slots).unwrap_or(1).saturating_mul(4).max(1);
        Ok(FileRing::with(
            Backend::Pool(Pool::new(bound, gate)?),
            slots,
        ))
    }

    /// What runs the operations: `"io_uring"` or `"worker threads"`.
    pub fn engine(&self) -> &'static str {
        match self.backend {
            Backend::Kernel(_) => "io_uring",
            Backend::Pool(_) => "worker threads",
        }
    }

    fn with(backend: Backend, slots: u32) -> FileRing {
        let slots: Box<[Slot]> = (0..slots)
            .map(|_| Slot {
                iov: vec![IoVec::default(); MAX_SEGMENTS].into_boxed_slice(),
                segs: 0,
                regions: Vec::with_capacity(MAX_SEGMENTS),
                fds: Vec::with_capacity(2),
                ops: 0,
                want: 0,
                error: None,
                busy: false,
            })
            .collect();
        let free = (0..u32::try_from(slots.len()).unwrap_or(0)).rev().collect();
        FileRing {
            backend,
            slots,
            free,
            queued: false,
            #[cfg(feature = "test-utils")]
            gate: None,
        }
    }

    /// A free slot, or None when every slot is in flight.
    pub fn begin(&mut self) -> Option<SlotId> {
        let id = self.free.pop()?;
        let slot = self.slots.get_mut(id as usize)?;
        slot.busy = true;
        Some(SlotId(id))
    }

    /// Whether no slot is free.
    pub fn is_full(&self) -> bool {
        self.free.is_empty()
    }

    /// Slots free to [`FileRing::begin`].
    pub fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Slots in flight (taken, not yet reaped).
    pub fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Add `len` bytes at `offset` of `region` to the slot's buffer; `device_writes`: the
    /// operation will write into it (a read from the file).
    pub fn add_buffer(
        &mut self,
        id: SlotId,
        region: &Arc<MmapRegion>,
        (offset, len): (u64, u64),
        device_writes: bool,
    ) -> Result<(), RingError> {
        region.check_range(offset, len)?;
        if device_writes && region.protection() != Protection::ReadWrite {
            return Err(RingError::ReadOnly);
        }
        let slot = self.slot(id);
        let Some(v) = slot.iov.get_mut(slot.segs) else {
            return Err(RingError::TooManySegments);
        };
        // check_range: offset + len lies inside the mapping, so neither overflows (and
        // u64 is usize: the crate builds only for 64-bit targets).
        *v = IoVec {
            base: region.addr() + usize::try_from(offset).unwrap_or(usize::MAX),
            len: usize::try_from(len).unwrap_or(usize::MAX),
        };
        slot.segs += 1;
        slot.want += len;
        if !slot.regions.last().is_some_and(|r| Arc::ptr_eq(r, region)) {
            slot.regions.push(Arc::clone(region));
        }
        Ok(())
    }

    /// Queue a read of the file at `offset` into the slot's buffer.
    pub fn read(&mut self, id: SlotId, fd: &Arc<OwnedFd>, offset: u64) -> io::Result<()> {
        self.queue_rw(id, fd, offset, false)
    }

    /// Queue a write of the slot's buffer to the file at `offset`.
    pub fn write(&mut self, id: SlotId, fd: &Arc<OwnedFd>, offset: u64) -> io::Result<()> {
        self.queue_rw(id, fd, offset, true)
    }

    fn queue_rw(
        &mut self,
        id: SlotId,
        fd: &Arc<OwnedFd>,
        offset: u64,
        write: bool,
    ) -> io::Result<()> {
        let slot = self.slot(id);
        let (iov, n) = (
            slot.iov.as_ptr() as usize,
            u32::try_from(slot.segs).unwrap_or(0),
        );
        let fd_raw = fd.as_raw_fd();
        let op = if write {
            Op::Writev {
                fd: fd_raw,
                iov,
                n,
                offset,
            }
        } else {
            Op::Readv {
                fd: fd_raw,
                iov,
                n,
                offset,
            }
        };
        self.queue(id, fd, op)
    }

    /// Queue an `fdatasync` of the file.
    pub fn fdatasync(&mut self, id: SlotId, fd: &Arc<OwnedFd>) -> io::Result<()> {
        self.queue(id, fd, Op::Fdatasync { fd: fd.as_raw_fd() })
    }

    /// Queue an `fallocate(PUNCH_HOLE | KEEP_SIZE)` of `len` bytes at `offset`: they read
    /// back as zeroes and give their blocks back to the file system.
    pub fn punch_hole(
        &mut self,
        id: SlotId,
        fd: &Arc<OwnedFd>,
        (offset, len): (u64, u64),
    ) -> io::Result<()> {
        let op = Op::Punch {
            fd: fd.as_raw_fd(),
            offset,
            len,
        };
        self.queue(id, fd, op)
    }

    /// Queue `op` for slot `id`, keeping `fd` open until it completes. A full submission
    /// ring is submitted first; a pool's worker gets it at once.
    fn queue(&mut self, id: SlotId, fd: &Arc<OwnedFd>, op: Op) -> io::Result<()> {
        let user_data = u64::from(id.0);
        let slot = self.slot(id);
        if !slot.fds.iter().any(|f| Arc::ptr_eq(f, fd)) {
            slot.fds.push(Arc::clone(fd));
        }
        let ring = match &mut self.backend {
            Backend::Kernel(ring) => ring,
            Backend::Pool(pool) => {
                pool.send(user_data, op)?;
                self.slot(id).ops += 1;
                return Ok(());
            }
        };
        let entry = entry(op).user_data(user_data);
        for _ in 0..2 {
            // SAFETY: the entry names only memory and fds this ring keeps alive until its
            // completion is reaped: the iovec array is the slot's own boxed array (never
            // moved or freed while the ring lives), every buffer piece was bounds-checked
            // against a mapping whose `Arc` the slot holds, and the fd's `Arc` is held by
            // the slot (just above). The slot is released only in `reap`, after its last
            // operation completed, and `Drop` waits for all operations.
            let pushed = unsafe { ring.submission().push(&entry) };
            if pushed.is_ok() {
                self.slot(id).ops += 1;
                self.queued = true;
                return Ok(());
            }
            ring.submit()?;
        }
        Err(io::Error::from_raw_os_error(libc::EBUSY))
    }

    /// Release a slot none of whose operations was queued (the command failed before);
    /// whether it was released (false: some operation is in flight and completes).
    pub fn cancel(&mut self, id: SlotId) -> bool {
        let unused = self.slot(id).ops == 0;
        if unused {
            self.release(id);
        }
        unused
    }

    /// Hand everything queued to the kernel: one `io_uring_enter`, only if something was
    /// queued (a pool's workers already have it). An error (EAGAIN, EBUSY: the kernel is
    /// short of room) leaves it queued for the next call.
    pub fn submit(&mut self) -> io::Result<()> {
        let Backend::Kernel(ring) = &mut self.backend else {
            return Ok(());
        };
        if !self.queued {
            return Ok(());
        }
        ring.submit()?;
        self.queued = !ring.submission().is_empty();
        Ok(())
    }

    /// Take every completion posted so far; for each slot whose last operation completed,
    /// release it and call `done(slot, result)`, where the result is the first errno of
    /// its operations (a read or write that moved fewer bytes than its buffer is `EIO`).
    /// No system call.
    pub fn reap(&mut self, mut done: impl FnMut(SlotId, Result<(), i32>)) {
        while let Some((user_data, res)) = self.next_completion(false) {
            self.complete(user_data, res, &mut done);
        }
    }

    /// Like [`FileRing::reap`], but first waits (blocking) until at least one completion
    /// is there, if anything is in flight.
    pub fn reap_waiting(&mut self, mut done: impl FnMut(SlotId, Result<(), i32>)) {
        if self.in_flight() == 0 {
            return;
        }
        if let Some((user_data, res)) = self.next_completion(true) {
            self.complete(user_data, res, &mut done);
        }
        self.reap(done);
    }

    fn next_completion(&mut self, wait: bool) -> Option<(u64, i32)> {
        #[cfg(feature = "test-utils")]
        if !self.gate_passes(wait) {
            return None;
        }
        match &mut self.backend {
            Backend::Kernel(ring) => {
                if wait && ring.submit_and_wait(1).is_err() {
                    std::thread::yield_now();
                }
                let cqe = ring.completion().next()?;
                Some((cqe.user_data(), cqe.result()))
            }
            Backend::Pool(pool) => pool.take(wait),
        }
    }

    /// Whether completions may be taken now: no gate, an open one, or (`wait`) once it
    /// opens.
    #[cfg(feature = "test-utils")]
    fn gate_passes(&self, wait: bool) -> bool {
        match &self.gate {
            Some(gate) if wait => {
                gate.pass();
                true
            }
            Some(gate) => !gate.is_closed(),
            None => true,
        }
    }

    fn complete(
        &mut self,
        user_data: u64,
        res: i32,
        done: &mut impl FnMut(SlotId, Result<(), i32>),
    ) {
        let Ok(index) = u32::try_from(user_data) else {
            return;
        };
        let id = SlotId(index);
        let Some(slot) = self.slots.get_mut(index as usize) else {
            return;
        };
        let short = slot.segs > 0 && res >= 0 && u64::try_from(res).ok() != Some(slot.want);
        if slot.error.is_none() && (res < 0 || short) {
            slot.error = Some(if res < 0 { -res } else { libc::EIO });
        }
        slot.ops = slot.ops.saturating_sub(1);
        if slot.ops == 0 && slot.busy {
            let result = slot.error.map_or(Ok(()), Err);
            self.release(id);
            done(id, result);
        }
    }

    fn slot(&mut self, id: SlotId) -> &mut Slot {
        // SlotIds come only from `begin`, which hands out indices of `slots`.
        &mut self.slots[id.index()]
    }

    fn release(&mut self, id: SlotId) {
        let slot = self.slot(id);
        slot.segs = 0;
        slot.want = 0;
        slot.error = None;
        slot.regions.clear();
        slot.fds.clear();
        slot.busy = false;
        self.free.push(id.0);
    }
}

impl std::fmt::Debug for FileRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileRing")
            .field("engine", &self.engine())
            .field("slots", &self.slots.len())
            .field("in_flight", &self.in_flight())
            .finish_non_exhaustive()
    }
}

impl Drop for FileRing {
    fn drop(&mut self) {
        // The kernel or a worker may still write into the slots' buffers: wait for every
        // operation before the mappings and fds the slots hold can go.
        while self.slots.iter().any(|s| s.ops > 0) {
            match self.next_completion(true) {
                Some((user_data, res)) => self.complete(user_data, res, &mut |_, _| {}),
                None if matches!(self.backend, Backend::Pool(_)) => break,
                None => {}
            }
        }
    }
}

/// The io_uring entry for `op`.
fn entry(op: Op) -> squeue::Entry {
    match op {
        Op::Readv { fd, iov, n, offset } => {
            opcode::Readv::new(types::Fd(fd), iov as *const libc::iovec, n)
                .offset(offset)
                .build()
        }
        Op::Writev { fd, iov, n, offset } => {
            opcode::Writev::new(types::Fd(fd), iov as *const libc::iovec, n)
                .offset(offset)
                .build()
        }
        Op::Fdatasync { fd } => opcode::Fsync::new(types::Fd(fd))
            .flags(types::FsyncFlags::DATASYNC)
            .build(),
        Op::Punch { fd, offset, len } => opcode::Fallocate::new(types::Fd(fd), len)
            .offset(offset)
            .mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE)
            .build(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};

    /// The io_uring ring (where allowed) and the worker pool.
    fn rings() -> Vec<FileRing> {
        let mut all = vec![FileRing::new_pool(4).unwrap()];
        match FileRing::new(4) {
            Ok(r) => all.push(r),
            Err(e) => eprintln!("io_uring unavailable here ({e}); the pool only"),
        }
        all
    }

    fn wait(ring: &mut FileRing) -> Result<(), i32> {
        ring.submit().unwrap();
        loop {
            let mut out = None;
            ring.reap(|_, r| out = Some(r));
            if let Some(r) = out {
                return r;
            }
            std::thread::yield_now();
        }
    }

    #[test]
    fn writes_and_reads_a_file_through_a_mapping() {
        for ring in rings() {
            writes_and_reads_through(ring);
        }
    }

    fn writes_and_reads_through(mut ring: FileRing) {
        let file = tempfile::tempfile().unwrap();
        file.set_len(8192).unwrap();
        let fd = Arc::new(OwnedFd::from(file.try_clone().unwrap()));
        let buf = Arc::new(MmapRegion::anonymous(8192).unwrap());
        buf.fill(0, 4096, 0xA5).unwrap();
        buf.fill(4096, 4096, 0x5A).unwrap();
        let id = ring.begin().unwrap();
        ring.add_buffer(id, &buf, (4096, 4096), false).unwrap();
        ring.add_buffer(id, &buf, (0, 4096), false).unwrap();
        ring.write(id, &fd, 0).unwrap();
        assert_eq!(wait(&mut ring), Ok(()));
        let mut back = vec![0u8; 8192];
        let mut f = file;
        f.rewind().unwrap();
        f.read_exact(&mut back).unwrap();
        assert!(back[..4096].iter().all(|&b| b == 0x5A));
        assert!(back[4096..].iter().all(|&b| b == 0xA5));
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.write_all(&[7u8; 512]).unwrap();
        let id = ring.begin().unwrap();
        ring.add_buffer(id, &buf, (0, 512), true).unwrap();
        ring.read(id, &fd, 0).unwrap();
        assert_eq!(wait(&mut ring), Ok(()));
        let mut got = [0u8; 512];
        buf.copy_to(0, &mut got).unwrap();
        assert_eq!(got, [7u8; 512]);
        assert_eq!(ring.in_flight(), 0);
    }

    #[test]
    fn a_short_read_past_the_end_is_eio_and_slots_run_out() {
        for ring in rings() {
            short_read_and_full(ring);
        }
    }

    fn short_read_and_full(mut ring: FileRing) {
        let file = tempfile::tempfile().unwrap();
        file.set_len(512).unwrap();
        let fd = Arc::new(OwnedFd::from(file));
        let buf = Arc::new(MmapRegion::anonymous(4096).unwrap());
        let id = ring.begin().unwrap();
        assert!(matches!(
            ring.add_buffer(id, &buf, (4000, 200), true),
            Err(RingError::Range(_))
        ));
        ring.add_buffer(id, &buf, (0, 1024), true).unwrap();
        ring.read(id, &fd, 0).unwrap();
        assert_eq!(wait(&mut ring), Err(libc::EIO));
        let ids: Vec<_> = (0..4).map_while(|_| ring.begin()).collect();
        assert_eq!(ids.len(), 4);
        assert!(ring.is_full());
        for id in ids {
            ring.cancel(id);
        }
        assert_eq!(ring.in_flight(), 0);
    }
}
