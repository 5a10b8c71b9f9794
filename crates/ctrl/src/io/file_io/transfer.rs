// SPDX-License-Identifier: Apache-2.0
//! Read and Write of a file namespace: the data pointer is walked once and each piece of
//! client memory becomes an iovec in a ring slot; a slot that fills up
//! ([`MAX_SEGMENTS`]) ends one `readv`/`writev` and the next piece starts another slot at
//! its own file offset. A Bit Bucket's bytes are read into the sink (never read back), so
//! the pieces after it still land at the right file offsets. A Write hit by a `corrupt`
//! fault writes the changed byte from the command's byte in the controller's buffers, so
//! the host's memory is never written.

use std::sync::Arc;

use nvmemu_bdev::BdevOp;
use nvmemu_mem::uring::{FileRing, MAX_SEGMENTS, SlotId};
use nvmemu_mem::{Access, GuestMemory, MmapRegion};
use nvmemu_spec::{Qid, ReadWrite, Sqe, Status};

use super::clock::Clocked;
use super::{BYTES_AT, FILE_SLOTS, Need, Pending, SINK, SINK_AT, Started, Then, aligned, pending};
use crate::Controller;
use crate::dptr::{Chunk, walk};
use crate::io::active_ns;

/// One slot of a command being queued: its operation's file offset and whether its
/// pieces allow `O_DIRECT`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Part {
    slot: SlotId,
    offset: u64,
    direct: bool,
}

/// Puts one command's pieces into slots, opening a new slot when one is full. Short of
/// slots, it stops taking them and only counts how many the command needs.
struct Split<'a> {
    ring: &'a mut FileRing,
    parts: &'a mut Vec<Part>,
    /// `O_DIRECT`'s alignment, None when the file has no `O_DIRECT` fd.
    align: Option<(u64, u64)>,
    device_writes: bool,
    /// Pieces in the current slot.
    segs: usize,
    /// Slots the command needs.
    need: usize,
    short: bool,
}

impl Split<'_> {
    fn open(&mut self, offset: u64) {
        self.need += 1;
        self.segs = 0;
        if self.short {
            return;
        }
        match self.ring.begin() {
            Some(slot) => self.parts.push(Part {
                slot,
                offset,
                direct: self.align.is_some_and(|(_, o)| offset.is_multiple_of(o)),
            }),
            None => self.short = true,
        }
    }

    /// Add `len` bytes at `offset` of `region`, which go to or come from the file at `pos`.
    fn add(
        &mut self,
        region: &Arc<MmapRegion>,
        (offset, len): (u64, u64),
        pos: u64,
    ) -> Result<(), Status> {
        if len == 0 {
            return Ok(());
        }
        if self.segs == MAX_SEGMENTS {
            self.open(pos);
        }
        self.segs += 1;
        let Some(part) = self.parts.last_mut().filter(|_| !self.short) else {
            return Ok(());
        };
        part.direct &= self
            .align
            .is_some_and(|a| aligned(region, (offset, len), a));
        self.ring
            .add_buffer(part.slot, region, (offset, len), self.device_writes)
            .map_err(|e| {
                tracing::debug!(target: "guest", error = %e, "file transfer buffer refused");
                Status::DATA_TRANSFER_ERROR
            })
    }

    /// Queue each slot's operation with `op`, in order, until one fails; the slots after
    /// a failure are released. How many were queued.
    fn queue(&mut self, mut op: impl FnMut(&mut FileRing, &Part) -> std::io::Result<()>) -> usize {
        let mut queued = 0;
        for p in self.parts.iter() {
            if op(self.ring, p).is_err() {
                break;
            }
            queued += 1;
        }
        for p in self.parts.iter().skip(queued) {
            self.ring.cancel(p.slot);
        }
        self.parts.truncate(queued);
        queued
    }

    /// Release every slot taken (nothing was queued on them).
    fn cancel(&mut self) {
        for p in self.parts.drain(..) {
            self.ring.cancel(p.slot);
        }
    }
}

impl Controller {
    /// Queue a Read or Write of a file namespace (or leave it waiting for slots), taken
    /// in the open batch.
    pub(in crate::io) fn file_read_write(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        c: &ReadWrite,
    ) -> Started {
        let op = if c.write { BdevOp::Write } else { BdevOp::Read };
        let clocked = self.clock_taken(sqe, op);
        let started = self.queue_read_write(sqid, sqe, c, clocked);
        self.clock_queued(clocked, &started);
        started
    }

    /// [`file_read_write`](Self::file_read_write) of a command timed as `clocked` (also
    /// one that waited for room).
    pub(super) fn queue_read_write(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        c: &ReadWrite,
        clocked: Clocked,
    ) -> Started {
        let max = self.max_transfer();
        let corrupt = self.file_io.corrupt.take();
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
        let (offset, len) = match crate::io::rw::transfer(ns, c.slba, c.blocks, max) {
            Ok(r) => r,
            Err(s) => return Started::Failed(s),
        };
        let Some((ring, t)) = self.file_io.live() else {
            return Started::NotHere;
        };
        let Some(cmd) = t.free_cmds.pop() else {
            return Started::NotHere;
        };
        let bufs = Arc::clone(&t.bufs);
        let mut split = Split {
            ring,
            parts: &mut t.parts,
            align: file.dio_align(),
            device_writes: !c.write,
            segs: 0,
            need: 0,
            short: false,
        };
        split.parts.clear();
        split.open(offset);
        let hit = corrupt.filter(|_| c.write);
        let walked = fill_slots(&mut split, (&self.mem, c), (offset, len), (&bufs, cmd), hit);
        let (short, need) = (split.short, split.need);
        if walked.is_err() || short {
            split.cancel();
            t.free_cmds.push(cmd);
        }
        if let Err(s) = walked {
            return Started::Failed(s);
        }
        if short {
            if need > FILE_SLOTS as usize {
                tracing::debug!(target: "guest", need, "file transfer has more pieces than the ring holds");
                return Started::Failed(Status::INTERNAL_ERROR);
            }
            self.wait_for_room((sqid, sqe), Need::Slots(need), corrupt, clocked);
            return Started::Queued;
        }
        let op = if c.write { BdevOp::Write } else { BdevOp::Read };
        let total = split.parts.len();
        let queued = split.queue(|ring, p| {
            let fd = file.fd_for(p.direct);
            if c.write {
                ring.write(p.slot, fd, p.offset)
            } else {
                ring.read(p.slot, fd, p.offset)
            }
        });
        if queued == 0 {
            t.free_cmds.push(cmd);
            return Started::Failed(Status::INTERNAL_ERROR);
        }
        let then = match corrupt {
            Some((offset, value)) if !c.write => Then::CorruptRead { offset, value },
            _ => Then::Post,
        };
        let all = queued == total;
        let p = Pending {
            parts: u32::try_from(queued).unwrap_or(u32::MAX),
            failed: (!all).then_some(Status::INTERNAL_ERROR),
            then,
            ..pending(sqid, sqe, c.nsid, op, len, clocked)
        };
        for part in t.parts.iter().take(queued) {
            if let Some(s) = t.slot_cmd.get_mut(part.slot.index()) {
                *s = cmd;
            }
        }
        t.record(cmd, p);
        Started::Queued
    }
}

/// Walk `c`'s data pointer (`len` bytes for the file at `offset`) into `split`'s slots:
/// Bit Bucket bytes go to the sink in `bufs`; a Write's byte hit by `corrupt` goes
/// changed from command `cmd`'s byte in `bufs`.
fn fill_slots(
    split: &mut Split<'_>,
    (mem, c): (&GuestMemory, &ReadWrite),
    (offset, len): (u64, u64),
    (bufs, cmd): (&Arc<MmapRegion>, u32),
    hit: Option<(u64, u8)>,
) -> Result<(), Status> {
    let access = if c.write { Access::Read } else { Access::Write };
    let byte_at = BYTES_AT + u64::from(cmd);
    let mut pos = offset;
    walk(mem, &c.dptr, len, access, |chunk| {
        let n = chunk.len();
        let at_in_piece = hit.and_then(|(at, value)| {
            let from = pos - offset;
            (from..from + n).contains(&at).then_some((at - from, value))
        });
        match (chunk, at_in_piece) {
            (
                Chunk::Mem {
                    region,
                    offset: o,
                    len,
                },
                Some((before, value)),
            ) => {
                changed_byte(region, o + before, value, (bufs, byte_at))?;
                split.add(region, (o, before), pos)?;
                split.add(bufs, (byte_at, 1), pos + before)?;
                split.add(region, (o + before + 1, len - before - 1), pos + before + 1)?;
            }
            (
                Chunk::Mem {
                    region,
                    offset: o,
                    len,
                },
                None,
            ) => split.add(region, (o, len), pos)?,
            (Chunk::Skip(len), _) => {
                let mut done = 0;
                while done < len {
                    let k = (len - done).min(SINK);
                    split.add(bufs, (SINK_AT, k), pos + done)?;
                    done += k;
                }
            }
        }
        pos += n;
        Ok(())
    })
}

/// Copy the host's byte at `at` of `region`, XORed with `value`, to `to` in `bufs`.
fn changed_byte(
    region: &MmapRegion,
    at: u64,
    value: u8,
    (bufs, to): (&MmapRegion, u64),
) -> Result<(), Status> {
    let mut byte = [0u8];
    region
        .copy_to(at, &mut byte)
        .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
    let [b] = byte;
    bufs.copy_from(to, &[b ^ value])
        .map_err(|_| Status::INTERNAL_ERROR)
}
