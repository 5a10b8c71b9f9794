// SPDX-License-Identifier: Apache-2.0
//! The I/O of file-backed namespaces, which the poller must never wait for. Read and Write
//! (between the file and client memory, no copy in between), Flush (`fdatasync`), Write
//! Zeroes and Deallocate (holes punched) are queued on the controller's io_uring when the
//! command is taken; one `io_uring_enter` per pass hands the pass's operations to the
//! kernel, and a later pass reaps what completed and posts the CQEs through the held
//! completions (`hold.rs`), so a latency model still applies on top.
//!
//! In flight at once: at most [`FILE_SLOTS`] commands per controller (a full ring leaves
//! further commands in their SQs, as QoS does). The ring is made when the first file command
//! arrives; where io_uring is not allowed (`EPERM`, `ENOSYS`: some containers), one log line
//! says so and a few worker threads run the same operations instead. The few commands the
//! ring cannot take run with blocking calls in the poller: Compare, a transfer with a bit
//! bucket or more than [`MAX_SEGMENTS`](nvmemu_mem::uring::MAX_SEGMENTS) pieces.
//!
//! The kernel (or a worker) writes client memory until an operation completes, so what
//! must not happen meanwhile waits for the commands in flight (`drain_file_io`): a new DMA
//! table (after `DMA_UNMAP` the client may reuse the memory), a reset (their completions
//! are dropped) and the deletion of an SQ (they complete first).

use std::sync::Arc;

use nvmemu_bdev::BdevOp;
use nvmemu_mem::uring::{FileRing, RingError, SlotId};
use nvmemu_mem::{Access, MmapRegion};
use nvmemu_spec::{Nsid, Qid, ReadWrite, Sqe, Status};

use super::zeroing::ByteRanges;
use super::{active_ns, io_failure};
use crate::Controller;
use crate::dptr::{Chunk, walk};
use crate::namespace::Namespace;

/// Most file commands one controller has in flight.
pub const FILE_SLOTS: u32 = 256;

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
}

#[derive(Debug, Default)]
enum Engine {
    #[default]
    Untried,
    Ring(Box<FileRing>),
    Unavailable,
}

/// The controller's io_uring for file namespaces and its commands in flight.
#[derive(Debug, Default)]
pub(crate) struct FileIo {
    engine: Engine,
    /// By slot index; allocated with the ring.
    pending: Vec<Option<Pending>>,
    /// The pass's completions, reaped before they are posted (capacity: the slots).
    done: Vec<(SlotId, Result<(), i32>)>,
}

impl FileIo {
    /// The ring, made on first use; None where io_uring is unavailable.
    fn ring(&mut self) -> Option<&mut FileRing> {
        if matches!(self.engine, Engine::Untried) {
            let ring = FileRing::new(FILE_SLOTS).or_else(|e| {
                tracing::warn!(error = %e, "io_uring is not allowed here; file namespaces use worker threads");
                FileRing::new_pool(FILE_SLOTS)
            });
            self.engine = match ring {
                Ok(ring) => {
                    tracing::info!(
                        engine = ring.engine(),
                        slots = FILE_SLOTS,
                        "file namespaces: I/O started"
                    );
                    let slots = FILE_SLOTS as usize;
                    self.pending = vec![None; slots];
                    self.done = Vec::with_capacity(slots);
                    Engine::Ring(Box::new(ring))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "file namespaces: no worker threads either; their I/O blocks the poller");
                    Engine::Unavailable
                }
            };
        }
        match &mut self.engine {
            Engine::Ring(r) => Some(r),
            _ => None,
        }
    }

    /// Use worker threads even where io_uring is allowed (tests of the fallback).
    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) fn force_worker_threads(&mut self) {
        if let Ok(ring) = FileRing::new_pool(FILE_SLOTS) {
            let slots = FILE_SLOTS as usize;
            self.pending = vec![None; slots];
            self.done = Vec::with_capacity(slots);
            self.engine = Engine::Ring(Box::new(ring));
        }
    }

    /// Whether no more file commands can be taken now.
    pub(crate) fn is_full(&self) -> bool {
        matches!(&self.engine, Engine::Ring(r) if r.is_full())
    }

    /// Commands in flight.
    pub(crate) fn in_flight(&self) -> usize {
        match &self.engine {
            Engine::Ring(r) => r.in_flight(),
            _ => 0,
        }
    }

    /// Drop the completions of every command in flight (a reset).
    pub(crate) fn orphan_all(&mut self) {
        for p in self.pending.iter_mut().flatten() {
            p.orphan = true;
        }
    }

    fn start(&mut self, id: SlotId, p: Pending) {
        if let Some(slot) = self.pending.get_mut(id.index()) {
            *slot = Some(p);
        }
    }
}

/// What a file command's start came to.
pub(super) enum Started {
    /// Not a file namespace, or the ring cannot take it: run it the blocking way.
    NotHere,
    /// Queued: its CQE comes from a later pass.
    Queued,
    /// Failed before anything was queued.
    Failed(Status),
}

impl Controller {
    /// Queue a Read or Write of a file namespace.
    pub(super) fn file_read_write(&mut self, sqid: Qid, sqe: &Sqe, c: &ReadWrite) -> Started {
        let max = self.max_transfer();
        let Ok(ns) = active_ns(&self.namespaces, c.nsid) else {
            return Started::NotHere;
        };
        let Some(file) = ns.bdev().file().map(Arc::clone) else {
            return Started::NotHere;
        };
        if let Err(s) = ns.reservations().check(c.write, || self.host()) {
            return Started::Failed(s);
        }
        if c.write && file.is_readonly() {
            return Started::Failed(Status::NAMESPACE_WRITE_PROTECTED);
        }
        let (offset, len) = match super::rw::transfer(ns, c.slba, c.blocks, max) {
            Ok(r) => r,
            Err(s) => return Started::Failed(s),
        };
        let Some(ring) = self.file_io.ring() else {
            return Started::NotHere;
        };
        let Some(id) = ring.begin() else {
            return Started::NotHere;
        };
        let access = if c.write { Access::Read } else { Access::Write };
        let align = file.dio_align();
        let mut direct = align.is_some_and(|(_, o)| offset % o == 0);
        let mut blocking = false;
        let walked = walk(&self.mem, &c.dptr, len, access, |chunk| {
            let Chunk::Mem {
                region,
                offset,
                len,
            } = chunk
            else {
                blocking = true;
                return Err(Status::INTERNAL_ERROR);
            };
            direct &= align.is_some_and(|a| aligned(region, (offset, len), a));
            ring.add_buffer(id, region, (offset, len), !c.write)
                .map_err(|e| {
                    blocking = matches!(e, RingError::TooManySegments);
                    Status::DATA_TRANSFER_ERROR
                })
        });
        let fd = file.fd_for(direct);
        let queued = walked.and_then(|()| {
            let r = if c.write {
                ring.write(id, fd, offset)
            } else {
                ring.read(id, fd, offset)
            };
            r.map_err(|_| Status::INTERNAL_ERROR)
        });
        if let Err(s) = queued {
            ring.cancel(id);
            return if blocking {
                Started::NotHere
            } else {
                Started::Failed(s)
            };
        }
        let op = if c.write { BdevOp::Write } else { BdevOp::Read };
        self.file_io.start(id, pending(sqid, sqe, c.nsid, op, len));
        Started::Queued
    }

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
        let p = pending(sqid, sqe, nsid, BdevOp::Flush, 0);
        queue_ops(&mut self.file_io, p, |ring, id| {
            ring.fdatasync(id, first.buffered_fd())?;
            files.try_for_each(|f| ring.fdatasync(id, f.buffered_fd()))
        })
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
        let p = pending(sqid, sqe, nsid, op, ranges.total());
        queue_ops(&mut self.file_io, p, |ring, id| {
            ranges.iter().try_for_each(|(start, end)| {
                ring.punch_hole(id, file.buffered_fd(), (start, end - start))
            })
        })
    }

    /// Submit the pass's file operations (one system call, only if any were queued), reap
    /// the completed ones and hold their CQEs to be posted (`post_due`, later in the
    /// pass, or when the namespace's model says).
    pub(crate) fn pump_file_io(&mut self) {
        self.reap_file_io(false);
    }

    /// Wait until no file command is in flight, holding the CQEs of those that complete
    /// (orphans' are dropped). Blocks the poller: only for what may not happen while the
    /// kernel still reads or writes client memory (a DMA table change, a reset, an SQ
    /// deletion), never per command.
    pub(crate) fn drain_file_io(&mut self) {
        while self.file_io.in_flight() > 0 {
            self.reap_file_io(true);
        }
    }

    fn reap_file_io(&mut self, wait: bool) {
        let FileIo { engine, done, .. } = &mut self.file_io;
        let Engine::Ring(ring) = engine else {
            return;
        };
        if let Err(e) = ring.submit() {
            // EAGAIN / EBUSY: the kernel is short of room; the next pass tries again.
            tracing::debug!(error = %e, "io_uring submit deferred");
        }
        done.clear();
        if wait {
            ring.reap_waiting(|id, r| done.push((id, r)));
        } else {
            ring.reap(|id, r| done.push((id, r)));
        }
        for i in 0..self.file_io.done.len() {
            let Some(&(id, r)) = self.file_io.done.get(i) else {
                break;
            };
            let Some(p) = self
                .file_io
                .pending
                .get_mut(id.index())
                .and_then(Option::take)
            else {
                continue;
            };
            if !p.orphan {
                self.file_completed(p, r);
            }
        }
    }

    fn file_completed(&mut self, p: Pending, r: Result<(), i32>) {
        let result = match r {
            Ok(()) => {
                if let Ok(ns) = active_ns(&self.namespaces, p.nsid) {
                    ns.io().count_completed(p.op, p.len);
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
                Ok(0)
            }
            Err(errno) => {
                tracing::debug!(op = ?p.op, nsid = p.nsid.0, errno, "file namespace I/O failed");
                Err(io_failure(p.op))
            }
        };
        let due = if self.model_on {
            crate::model::due(&mut self.namespaces, &p.sqe).unwrap_or(0)
        } else {
            0
        };
        self.hold(p.sqid, &p.sqe, result, due);
    }
}

/// Queue the operations of a command that moves no data, for `p`.
fn queue_ops(
    file_io: &mut FileIo,
    p: Pending,
    queue: impl FnOnce(&mut FileRing, SlotId) -> std::io::Result<()>,
) -> Started {
    let Some(ring) = file_io.ring() else {
        return Started::NotHere;
    };
    let Some(id) = ring.begin() else {
        return Started::NotHere;
    };
    if queue(ring, id).is_err() {
        // What was queued before the failure completes as an orphan's.
        ring.cancel(id);
        file_io.start(id, Pending { orphan: true, ..p });
        return Started::Failed(Status::INTERNAL_ERROR);
    }
    file_io.start(id, p);
    Started::Queued
}

fn pending(sqid: Qid, sqe: &Sqe, nsid: Nsid, op: BdevOp, len: u64) -> Pending {
    Pending {
        sqid,
        sqe: *sqe,
        nsid,
        op,
        len,
        orphan: false,
    }
}

/// Whether a piece meets `O_DIRECT`'s (memory, length) alignment.
fn aligned(region: &MmapRegion, (offset, len): (u64, u64), (mem, off): (u64, u64)) -> bool {
    let addr = (region.addr() as u64).wrapping_add(offset);
    addr % mem == 0 && len % off == 0
}
