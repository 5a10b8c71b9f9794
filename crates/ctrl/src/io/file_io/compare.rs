// SPDX-License-Identifier: Apache-2.0
//! Compare of a file namespace (NVM Command Set 3.2.1): the file's blocks are read into
//! one of the controller's Compare buffers through the ring; when the read completes, the
//! host's data is compared with the buffer (a walk of the data pointer, no system call)
//! and the command completes with Compare Failure or success. A Compare longer than a
//! buffer ([`COMPARE_BUF`]) goes in rounds, each reading the next stretch into the same
//! buffer once the previous one compared equal.

use std::sync::Arc;

use nvmemu_bdev::{BdevOp, FileBacking};
use nvmemu_mem::Access;
use nvmemu_mem::uring::FileRing;
use nvmemu_spec::{IoCommand, Lba, Nsid, Qid, Sqe, Status};

use super::clock::Clocked;
use super::{COMPARE_BUF, Need, Pending, Started, Tables, Then, aligned, pending};
use crate::Controller;
use crate::dptr::{Chunk, walk};
use crate::io::active_ns;

/// Where a Compare is: the buffer it holds and how far it has compared.
#[derive(Debug, Clone, Copy)]
pub(super) struct Round {
    /// The Compare buffer it holds.
    pub(super) buf: u32,
    /// The file offset of the command's first byte.
    start: u64,
    /// Bytes compared equal in earlier rounds.
    done: u64,
}

impl Round {
    /// Bytes this round compares, of a command of `len` bytes.
    fn len(self, len: u64) -> u64 {
        (len - self.done).min(COMPARE_BUF)
    }

    fn buf_offset(self) -> u64 {
        u64::from(self.buf) * COMPARE_BUF
    }
}

impl Controller {
    /// Queue the first round of a Compare of a file namespace (or leave it waiting for
    /// a buffer), taken in the open batch.
    pub(in crate::io) fn file_compare(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        nsid: Nsid,
        range: (Lba, u32),
    ) -> Started {
        let clocked = self.clock_taken(sqe, BdevOp::Compare);
        let started = self.queue_compare((sqid, sqe), nsid, range, clocked);
        self.clock_queued(clocked, &started);
        started
    }

    /// [`file_compare`](Self::file_compare) of a command timed as `clocked` (also one
    /// that waited for a buffer).
    pub(super) fn queue_compare(
        &mut self,
        (sqid, sqe): (Qid, &Sqe),
        nsid: Nsid,
        (slba, blocks): (Lba, u32),
        clocked: Clocked,
    ) -> Started {
        let max = self.max_transfer();
        let Ok(ns) = active_ns(&self.namespaces, nsid) else {
            return Started::NotHere;
        };
        let Some(file) = ns.bdev().file().map(Arc::clone) else {
            return Started::NotHere;
        };
        if let Err(s) = ns.reservations().check(false, || self.host()) {
            return Started::Failed(s);
        }
        let (start, len) = match crate::io::rw::transfer(ns, slba, blocks, max) {
            Ok(r) => r,
            Err(s) => return Started::Failed(s),
        };
        if self.file_io.live().is_none() {
            return Started::NotHere;
        }
        if !self.file_io.fits(Need::CompareBuf) {
            self.wait_for_room((sqid, sqe), Need::CompareBuf, None, clocked);
            return Started::Queued;
        }
        let Some((ring, t)) = self.file_io.live() else {
            return Started::NotHere;
        };
        let (Some(cmd), Some(buf)) = (t.free_cmds.pop(), t.free_bufs.pop()) else {
            // `fits` said both are free.
            return Started::Failed(Status::INTERNAL_ERROR);
        };
        let round = Round {
            buf,
            start,
            done: 0,
        };
        let p = Pending {
            then: Then::Compare(round),
            ..pending(sqid, sqe, nsid, BdevOp::Compare, len, clocked)
        };
        if queue_round(ring, t, &file, cmd, p).is_err() {
            t.free_cmds.push(cmd);
            t.free_bufs.push(buf);
            return Started::Failed(Status::INTERNAL_ERROR);
        }
        Started::Queued
    }

    /// A round of Compare command `cmd` has read the file: compare it with the host's
    /// data. The command's result, or None when its next round is in flight.
    pub(super) fn compare_round_done(
        &mut self,
        cmd: u32,
        p: &Pending,
        round: Round,
    ) -> Option<Result<u32, Status>> {
        if let Err(s) = self.compare_with_host(p, round) {
            return Some(Err(s));
        }
        let next = Round {
            done: round.done + round.len(p.len),
            ..round
        };
        if next.done >= p.len {
            return Some(Ok(0));
        }
        let Some(file) = active_ns(&self.namespaces, p.nsid)
            .ok()
            .and_then(|ns| ns.bdev().file().map(Arc::clone))
        else {
            return Some(Err(Status::INVALID_NAMESPACE));
        };
        let Some((ring, t)) = self.file_io.live() else {
            return Some(Err(Status::INTERNAL_ERROR));
        };
        let p = Pending {
            then: Then::Compare(next),
            parts: 1,
            ..*p
        };
        match queue_round(ring, t, &file, cmd, p) {
            Ok(()) => None,
            Err(()) => Some(Err(Status::INTERNAL_ERROR)),
        }
    }

    /// Compare the host's bytes of `round` with its buffer: Compare Failure at the first
    /// piece that differs, the walk's status if the data pointer is bad.
    fn compare_with_host(&self, p: &Pending, round: Round) -> Result<(), Status> {
        let Ok(IoCommand::Compare { dptr, .. }) = IoCommand::decode(&p.sqe) else {
            return Err(Status::INTERNAL_ERROR);
        };
        let bufs = self
            .file_io
            .tables
            .as_ref()
            .map(|t| Arc::clone(&t.bufs))
            .ok_or(Status::INTERNAL_ERROR)?;
        let (from, to) = (round.done, round.done + round.len(p.len));
        let mut pos = 0u64;
        walk(&self.mem, &dptr, p.len, Access::Read, |chunk| {
            let n = chunk.len();
            if let Chunk::Mem {
                region,
                offset,
                len,
            } = chunk
            {
                let (s, e) = (pos.max(from), (pos + len).min(to));
                if s < e {
                    let at = round.buf_offset() + (s - from);
                    let equal = region
                        .compare_with(offset + (s - pos), &bufs, at, e - s)
                        .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
                    if !equal {
                        return Err(Status::COMPARE_FAILURE);
                    }
                }
            }
            pos += n;
            Ok(())
        })
    }
}

/// Queue the read of `p`'s round into its buffer, as command `cmd`.
fn queue_round(
    ring: &mut FileRing,
    t: &mut Tables,
    file: &FileBacking,
    cmd: u32,
    p: Pending,
) -> Result<(), ()> {
    let Then::Compare(round) = p.then else {
        return Err(());
    };
    let (offset, len) = (round.start + round.done, round.len(p.len));
    let piece = (round.buf_offset(), len);
    let direct = file
        .dio_align()
        .is_some_and(|a| offset.is_multiple_of(a.1) && aligned(&t.bufs, piece, a));
    let id = ring.begin().ok_or(())?;
    let queued = ring
        .add_buffer(id, &t.bufs, piece, true)
        .map_err(|_| ())
        .and_then(|()| ring.read(id, file.fd_for(direct), offset).map_err(|_| ()));
    if queued.is_err() {
        ring.cancel(id);
        return Err(());
    }
    t.start(cmd, p, id);
    Ok(())
}
