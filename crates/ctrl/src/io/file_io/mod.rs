// SPDX-License-Identifier: Apache-2.0
//! The I/O of file-backed namespaces, which the poller never waits for. Read and Write
//! (between the file and client memory, no copy in between), Compare (the file's data read
//! into a buffer of the controller's, then compared with the host's), Flush (`fdatasync`),
//! Write Zeroes and Deallocate (holes punched) are queued on the controller's io_uring when
//! the command is taken; one `io_uring_enter` per pass hands the pass's operations to the
//! kernel, and a later pass reaps what completed and posts the CQEs through the held
//! completions (`hold.rs`), so a latency model still applies on top, and the target-side
//! timing records the command when its CQE is posted (`clock.rs`).
//!
//! A ring slot holds one operation's buffer list, up to
//! [`MAX_SEGMENTS`](nvmemu_mem::uring::MAX_SEGMENTS) pieces: a transfer with more pieces
//! takes several slots, one `readv`/`writev` each at its own file offset, and completes
//! when the last one does (the first failure decides its status). A Bit Bucket's bytes
//! are read into a sink the controller never reads (`transfer.rs`). A Compare takes one
//! of [`COMPARE_BUFS`] buffers made with the ring and compares in rounds of its size
//! (`compare.rs`).
//!
//! In flight at once: at most [`FILE_SLOTS`] slots per controller. A command that finds
//! too few slots or no Compare buffer waits, taken from its SQ, until enough are free;
//! meanwhile no further command is taken (as with a full ring), so it cannot starve. The
//! ring is made when the first file command arrives; where io_uring is not allowed
//! (`EPERM`, `ENOSYS`: some containers), one log line says so and a few worker threads run
//! the same operations instead. Nothing is allocated per command.
//!
//! The kernel (or a worker) writes client memory until an operation completes, so what
//! must not happen meanwhile waits for the commands in flight (`drain_file_io`): a new DMA
//! table (after `DMA_UNMAP` the client may reuse the memory), a reset (their completions
//! are dropped) and the deletion of an SQ (they complete first).

mod clock;
mod compare;
mod delay;
mod transfer;

use std::sync::Arc;

use nvmemu_bdev::BdevOp;
use nvmemu_mem::MmapRegion;
use nvmemu_mem::uring::{FileRing, SlotId};
use nvmemu_spec::{IoCommand, Nsid, Qid, ReadWrite, Sqe, Status};

use self::clock::Clocked;
use super::zeroing::ByteRanges;
use super::{active_ns, io_failure};
use crate::Controller;
use crate::latency::Stage;
use crate::namespace::Namespace;
use delay::delayed;

/// Most ring slots (each one operation's buffers) one controller has in flight.
pub const FILE_SLOTS: u32 = 256;
/// Compare buffers per controller.
pub const COMPARE_BUFS: u32 = 4;
/// Bytes of one Compare buffer: a Compare compares at most this much per round.
pub const COMPARE_BUF: u64 = 1 << 20;
/// Bytes of the Bit Bucket sink (a longer bucket names it several times).
const SINK: u64 = 64 << 10;
/// Where the sink and the per-command bytes lie in the buffers' mapping.
const SINK_AT: u64 = COMPARE_BUF * COMPARE_BUFS as u64;
const BYTES_AT: u64 = SINK_AT + SINK;

/// What a command's completion does besides posting its CQE.
#[derive(Debug, Clone, Copy)]
enum Then {
    Post,
    /// A Read hit by a `corrupt` fault: XOR the byte at `offset` of the host's data.
    CorruptRead {
        offset: u64,
        value: u8,
    },
    /// A Compare's round has read the file (`compare.rs`).
    Compare(compare::Round),
}

/// A command in flight: what its completion needs.
#[derive(Debug, Clone, Copy)]
struct Pending {
    sqid: Qid,
    sqe: Sqe,
    nsid: Nsid,
    op: BdevOp,
    len: u64,
    /// Its SQ was deleted or the controller reset: drop the completion.
    orphan: bool,
    /// Its slots still in flight.
    parts: u32,
    /// The status of its first failed operation.
    failed: Option<Status>,
    then: Then,
    clocked: Clocked,
    /// A `delay` fault's wait (ns), counted from its completion (`fault.rs`); 0: none.
    delay_ns: u64,
}

/// A command taken from its SQ that waits for ring room.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    sqid: Qid,
    sqe: Sqe,
    need: Need,
    corrupt: Option<(u64, u8)>,
    /// Timed from when it was taken: the wait is part of its backend layer.
    clocked: Clocked,
    /// As [`Pending`]'s.
    delay_ns: u64,
}

/// What a waiting command needs free.
#[derive(Debug, Clone, Copy)]
enum Need {
    Slots(usize),
    CompareBuf,
}

#[derive(Debug, Default)]
enum Engine {
    #[default]
    Untried,
    Ring(Box<FileRing>),
    Unavailable,
}

/// Everything made with the ring, sized once.
#[derive(Debug)]
struct Tables {
    /// Commands in flight by command index; a command's slots point at it.
    cmds: Vec<Option<Pending>>,
    free_cmds: Vec<u32>,
    /// The command of each slot in flight, by slot index.
    slot_cmd: Vec<u32>,
    /// The pass's completions, reaped before they are handled.
    done: Vec<(SlotId, Result<(), i32>)>,
    /// The slots of the command being queued (`transfer.rs`).
    parts: Vec<transfer::Part>,
    /// The Compare buffers, the Bit Bucket sink and one byte per command (the stored byte
    /// of a Write hit by `corrupt`).
    bufs: Arc<MmapRegion>,
    free_bufs: Vec<u32>,
    /// A command taken from its SQ that waits for room (one at most).
    waiting: Option<Waiting>,
}

impl Tables {
    fn new() -> std::io::Result<Tables> {
        let slots = FILE_SLOTS as usize;
        let bufs = MmapRegion::anonymous(BYTES_AT + u64::from(FILE_SLOTS))
            .map_err(std::io::Error::other)?;
        Ok(Tables {
            cmds: vec![None; slots],
            free_cmds: (0..FILE_SLOTS).rev().collect(),
            slot_cmd: vec![u32::MAX; slots],
            done: Vec::with_capacity(slots),
            parts: Vec::with_capacity(slots),
            bufs: Arc::new(bufs),
            free_bufs: (0..COMPARE_BUFS).rev().collect(),
            waiting: None,
        })
    }

    /// Record `p` as command `cmd`, in flight on slot `id`.
    fn start(&mut self, cmd: u32, p: Pending, id: SlotId) {
        if let Some(s) = self.slot_cmd.get_mut(id.index()) {
            *s = cmd;
        }
        self.record(cmd, p);
    }

    /// Record `p` as command `cmd` (its slots point at it already).
    fn record(&mut self, cmd: u32, p: Pending) {
        if let Some(c) = self.cmds.get_mut(cmd as usize) {
            *c = Some(p);
        }
    }
}

/// The controller's io_uring for file namespaces and its commands in flight.
#[derive(Debug, Default)]
pub(crate) struct FileIo {
    engine: Engine,
    /// Boxed: the controller stays small for the poller's other work.
    tables: Option<Box<Tables>>,
    /// The `corrupt` fault of the command `exec_io` is running (`fault.rs`).
    pub(crate) corrupt: Option<(u64, u8)>,
}

impl FileIo {
    /// The ring and its tables, made on first use; None where no engine could be made.
    fn live(&mut self) -> Option<(&mut FileRing, &mut Tables)> {
        if matches!(self.engine, Engine::Untried) {
            let ring = FileRing::new(FILE_SLOTS).or_else(|e| {
                tracing::warn!(error = %e, "io_uring is not allowed here; file namespaces use worker threads");
                FileRing::new_pool(FILE_SLOTS)
            });
            if let Err(e) = ring.and_then(|r| self.install(r)) {
                tracing::warn!(error = %e, "file namespaces: no worker threads either; their I/O blocks the poller");
                self.engine = Engine::Unavailable;
            }
        }
        match (&mut self.engine, &mut self.tables) {
            (Engine::Ring(r), Some(t)) => Some((&mut **r, &mut **t)),
            _ => None,
        }
    }

    fn install(&mut self, ring: FileRing) -> std::io::Result<()> {
        self.tables = Some(Box::new(Tables::new()?));
        tracing::info!(
            engine = ring.engine(),
            slots = FILE_SLOTS,
            "file namespaces: I/O started"
        );
        self.engine = Engine::Ring(Box::new(ring));
        Ok(())
    }

    /// Use worker threads even where io_uring is allowed (tests of the fallback).
    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) fn force_worker_threads(&mut self) {
        if let Ok(ring) = FileRing::new_pool(FILE_SLOTS) {
            let _ = self.install(ring);
        }
    }

    /// Worker threads that pass `gate` before each operation (tests of what must not wait).
    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) fn gate_worker_threads(&mut self, gate: Arc<nvmemu_mem::uring::IoGate>) {
        if let Ok(ring) = FileRing::new_pool_gated(FILE_SLOTS, gate) {
            let _ = self.install(ring);
        }
    }

    /// An io_uring whose completions are taken only while `gate` is open (tests of what
    /// must wait for room); gated worker threads where io_uring is not allowed.
    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) fn gate_ring(&mut self, gate: Arc<nvmemu_mem::uring::IoGate>) {
        match FileRing::new_gated(FILE_SLOTS, Arc::clone(&gate)) {
            Ok(ring) => {
                let _ = self.install(ring);
            }
            Err(_) => self.gate_worker_threads(gate),
        }
    }

    /// Whether no more file commands can be taken now: the ring is full, or a command
    /// waits for room.
    pub(crate) fn is_full(&self) -> bool {
        let waits = self.tables.as_ref().is_some_and(|t| t.waiting.is_some());
        waits || matches!(&self.engine, Engine::Ring(r) if r.is_full())
    }

    /// Slots in flight.
    pub(crate) fn in_flight(&self) -> usize {
        match &self.engine {
            Engine::Ring(r) => r.in_flight(),
            _ => 0,
        }
    }

    /// Drop the completions of every command in flight, and the waiting one (a reset).
    pub(crate) fn orphan_all(&mut self) {
        if let Some(t) = &mut self.tables {
            t.waiting = None;
            for p in t.cmds.iter_mut().flatten() {
                p.orphan = true;
            }
        }
    }

    /// Whether a waiting command's needs are free now.
    fn fits(&self, need: Need) -> bool {
        let (Engine::Ring(r), Some(t)) = (&self.engine, &self.tables) else {
            return false;
        };
        let slots = match need {
            Need::Slots(n) => n,
            Need::CompareBuf if t.free_bufs.is_empty() => return false,
            Need::CompareBuf => 1,
        };
        r.free_slots() >= slots && !t.free_cmds.is_empty()
    }
}

/// What a file command's start came to.
pub(super) enum Started {
    /// Not a file namespace, or no engine: run it the blocking way.
    NotHere,
    /// Queued (or waiting for room): its CQE comes from a later pass.
    Queued,
    /// Failed before anything was queued.
    Failed(Status),
}

impl Controller {
    /// Queue the `fdatasync`s of a Flush of `nsid` (every file namespace for the
    /// broadcast NSID; the others have nothing to flush).
    pub(super) fn file_flush(&mut self, sqid: Qid, sqe: &Sqe, nsid: Nsid) -> Started {
        let namespaces = &self.namespaces;
        let file = |ns: &Namespace| ns.bdev().file().map(Arc::clone);
        let mut files = namespaces.iter().flatten().filter_map(|ns| {
            (nsid == Nsid::BROADCAST || ns.nsid() == nsid)
                .then(|| file(ns))
                .flatten()
        });
        let Some(first) = files.next() else {
            return Started::NotHere;
        };
        let clocked = self.clock_taken(sqe, BdevOp::Flush);
        let p = pending(sqid, sqe, nsid, BdevOp::Flush, 0, clocked);
        let started = queue_ops(&mut self.file_io, p, |ring, id| {
            ring.fdatasync(id, first.buffered_fd())?;
            files.try_for_each(|f| ring.fdatasync(id, f.buffered_fd()))
        });
        self.clock_queued(clocked, &started);
        started
    }

    /// Queue the hole punches of a Write Zeroes or Deallocate of a file namespace.
    pub(super) fn file_zero(
        &mut self,
        (sqid, sqe): (Qid, &Sqe),
        nsid: Nsid,
        op: BdevOp,
        ranges: &ByteRanges,
    ) -> Started {
        let Some(file) = active_ns(&self.namespaces, nsid)
            .ok()
            .and_then(|ns| ns.bdev().file().map(Arc::clone))
        else {
            return Started::NotHere;
        };
        if file.is_readonly() {
            return Started::Failed(Status::NAMESPACE_WRITE_PROTECTED);
        }
        let clocked = self.clock_taken(sqe, op);
        let p = pending(sqid, sqe, nsid, op, ranges.total(), clocked);
        let started = queue_ops(&mut self.file_io, p, |ring, id| {
            ranges.iter().try_for_each(|(start, end)| {
                ring.punch_hole(id, file.buffered_fd(), (start, end - start))
            })
        });
        self.clock_queued(clocked, &started);
        started
    }

    /// Submit the pass's file operations (one system call, only if any were queued), reap
    /// the completed ones and hold their CQEs to be posted (`post_due`, later in the
    /// pass, or when the namespace's model says); then start a waiting command if its
    /// room is free.
    pub(crate) fn pump_file_io(&mut self) {
        self.reap_file_io(false);
        let waiting = self.file_io.tables.as_mut().and_then(|t| t.waiting);
        if let Some(w) = waiting
            && self.file_io.fits(w.need)
        {
            if let Some(t) = self.file_io.tables.as_mut() {
                t.waiting = None;
            }
            self.retry_file_cmd(w);
        }
    }

    /// Wait until no file command is in flight, holding the CQEs of those that complete
    /// (orphans' are dropped). Blocks the poller: only for what may not happen while the
    /// kernel still reads or writes client memory (a DMA table change, a reset, an SQ
    /// deletion), never per command. A waiting command has touched nothing and waits on.
    pub(crate) fn drain_file_io(&mut self) {
        while self.file_io.in_flight() > 0 {
            self.reap_file_io(true);
        }
    }

    /// Complete the waiting command if it came from SQ `qid` (being deleted) with Command
    /// Aborted due to SQ Deletion.
    pub(crate) fn abort_waiting_file_cmd(&mut self, qid: Qid) {
        let Some(t) = self.file_io.tables.as_mut() else {
            return;
        };
        if let Some(w) = t.waiting.filter(|w| w.sqid == qid) {
            t.waiting = None;
            self.hold(qid, &w.sqe, Err(Status::ABORTED_SQ_DELETION), 0);
        }
    }

    fn reap_file_io(&mut self, wait: bool) {
        let FileIo { engine, tables, .. } = &mut self.file_io;
        let (Engine::Ring(ring), Some(t)) = (engine, tables) else {
            return;
        };
        if let Err(e) = ring.submit() {
            // EAGAIN / EBUSY: the kernel is short of room; the next pass tries again.
            tracing::debug!(error = %e, "io_uring submit deferred");
        }
        let done = &mut t.done;
        done.clear();
        if wait {
            ring.reap_waiting(|id, r| done.push((id, r)));
        } else {
            ring.reap(|id, r| done.push((id, r)));
        }
        let mut i = 0;
        while let Some(&(id, r)) = self.file_io.tables.as_ref().and_then(|t| t.done.get(i)) {
            i += 1;
            if let Some(cmd) = self.part_done(id, r) {
                self.file_cmd_done(cmd);
            }
        }
    }

    /// Count a slot's completion against its command; the command if it was the last.
    fn part_done(&mut self, id: SlotId, r: Result<(), i32>) -> Option<u32> {
        let t = self.file_io.tables.as_mut()?;
        let cmd = *t.slot_cmd.get(id.index())?;
        let p = t.cmds.get_mut(cmd as usize)?.as_mut()?;
        if let Err(errno) = r
            && p.failed.is_none()
        {
            tracing::debug!(op = ?p.op, nsid = p.nsid.0, errno, "file namespace I/O failed");
            p.failed = Some(io_failure(p.op));
        }
        p.parts = p.parts.saturating_sub(1);
        (p.parts == 0).then_some(cmd)
    }

    /// Every operation of command `cmd` is done: finish it (or start its next round).
    fn file_cmd_done(&mut self, cmd: u32) {
        let Some(p) = self
            .file_io
            .tables
            .as_ref()
            .and_then(|t| t.cmds.get(cmd as usize).copied().flatten())
        else {
            return;
        };
        let result = match (p.failed, p.then, p.orphan) {
            (_, _, true) => None,
            (Some(s), _, false) => Some(Err(s)),
            (None, Then::Post, false) => Some(Ok(0)),
            (None, Then::CorruptRead { offset, value }, false) => {
                if let Some(Ok(rw)) = ReadWrite::decode(&p.sqe) {
                    self.xor_data(&rw, (offset, value));
                }
                Some(Ok(0))
            }
            (None, Then::Compare(round), false) => match self.compare_round_done(cmd, &p, round) {
                // The next round is in flight.
                None => return,
                Some(r) => Some(r),
            },
        };
        if let Some(t) = self.file_io.tables.as_mut() {
            if let Then::Compare(round) = p.then {
                t.free_bufs.push(round.buf);
            }
            if let Some(c) = t.cmds.get_mut(cmd as usize) {
                *c = None;
            }
            t.free_cmds.push(cmd);
        }
        if let Some(result) = result {
            self.file_completed(&p, result);
        }
    }

    fn file_completed(&mut self, p: &Pending, result: Result<u32, Status>) {
        self.instruments
            .trace_now((p.sqid, p.sqe.cid()), Stage::Done);
        let stamps = p.clocked.finished(result.is_ok());
        // A Compare that found a difference ran too (as the blocking path counts it).
        if result.is_ok() || result == Err(Status::COMPARE_FAILURE) {
            if let Ok(ns) = active_ns(&self.namespaces, p.nsid) {
                ns.io().count(p.op, p.len, p.clocked.bdev_start());
            }
            match p.op {
                BdevOp::Read => {
                    self.counters.host_read_commands += 1;
                    self.count_bytes(p.sqid, p.len, 0);
                }
                BdevOp::Write => {
                    self.counters.host_write_commands += 1;
                    self.count_bytes(p.sqid, 0, p.len);
                }
                _ => {}
            }
        }
        let due = if self.model_on {
            crate::model::due(&mut self.namespaces, &p.sqe).unwrap_or(0)
        } else {
            0
        };
        let due = due.max(delayed(p.delay_ns));
        self.hold_timed(p.sqid, &p.sqe, result, due, stamps);
    }

    /// Start a command that waited for room (it was taken from its SQ already).
    fn retry_file_cmd(&mut self, w: Waiting) {
        self.file_io.corrupt = w.corrupt;
        let started = match (ReadWrite::decode(&w.sqe), IoCommand::decode(&w.sqe)) {
            (Some(Ok(c)), _) => self.queue_read_write(w.sqid, &w.sqe, &c, w.clocked),
            (
                _,
                Ok(IoCommand::Compare {
                    nsid, slba, blocks, ..
                }),
            ) => self.queue_compare((w.sqid, &w.sqe), nsid, (slba, blocks), w.clocked),
            _ => Started::NotHere,
        };
        self.file_io.corrupt = None;
        let failed = match started {
            Started::Queued => {
                self.file_io.delay(w.sqid, w.sqe.cid(), w.delay_ns);
                return;
            }
            Started::Failed(s) => s,
            // Its namespace was detached meanwhile.
            Started::NotHere => Status::INVALID_NAMESPACE,
        };
        self.instruments
            .trace_now((w.sqid, w.sqe.cid()), Stage::Done);
        let stamps = w.clocked.finished(false);
        let due = delayed(w.delay_ns);
        self.hold_timed(w.sqid, &w.sqe, Err(failed), due, stamps);
    }

    /// Leave `sqe` waiting for `need`, taken from `sqid` (with `corrupt` and timed as
    /// `clocked`).
    fn wait_for_room(
        &mut self,
        (sqid, sqe): (Qid, &Sqe),
        need: Need,
        corrupt: Option<(u64, u8)>,
        clocked: Clocked,
    ) {
        if let Some(t) = self.file_io.tables.as_mut() {
            t.waiting = Some(Waiting {
                sqid,
                sqe: *sqe,
                need,
                corrupt,
                clocked,
                delay_ns: 0,
            });
        }
    }
}

/// Queue the operations of a command that moves no data, for `p`, in one slot.
fn queue_ops(
    file_io: &mut FileIo,
    p: Pending,
    queue: impl FnOnce(&mut FileRing, SlotId) -> std::io::Result<()>,
) -> Started {
    let Some((ring, t)) = file_io.live() else {
        return Started::NotHere;
    };
    let Some(cmd) = t.free_cmds.pop() else {
        return Started::NotHere;
    };
    let Some(id) = ring.begin() else {
        t.free_cmds.push(cmd);
        return Started::NotHere;
    };
    if queue(ring, id).is_err() {
        // What was queued before the failure completes as an orphan's.
        if ring.cancel(id) {
            t.free_cmds.push(cmd);
        } else {
            t.start(cmd, Pending { orphan: true, ..p }, id);
        }
        return Started::Failed(Status::INTERNAL_ERROR);
    }
    t.start(cmd, p, id);
    Started::Queued
}

fn pending(sqid: Qid, sqe: &Sqe, nsid: Nsid, op: BdevOp, len: u64, clocked: Clocked) -> Pending {
    Pending {
        sqid,
        sqe: *sqe,
        nsid,
        op,
        len,
        orphan: false,
        parts: 1,
        failed: None,
        then: Then::Post,
        clocked,
        delay_ns: 0,
    }
}

/// Whether a piece meets `O_DIRECT`'s (memory, length) alignment.
fn aligned(region: &MmapRegion, (offset, len): (u64, u64), (mem, off): (u64, u64)) -> bool {
    let addr = (region.addr() as u64).wrapping_add(offset);
    addr.is_multiple_of(mem) && len.is_multiple_of(off)
}
