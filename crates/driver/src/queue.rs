// SPDX-License-Identifier: Apache-2.0
//! One submission/completion queue pair from the host side: the SQ and CQ rings in DMA
//! memory, the doorbells, and a fixed command table whose slot index is the CID.
//!
//! Used by both the admin queue and the I/O queue pairs. Plain state plus borrowed memory:
//! no locks, no allocation after construction.

use std::sync::Arc;

use nvmemu_mem::{Iova, MemError, MmapRegion};
use nvmemu_spec::{Cid, Cqe, Qid, Sqe, Status};

use crate::dma::{DmaAllocError, DmaBuf, DmaPool};
use crate::error::NvmeError;
use crate::prp::{self, PrpListSink, Prps};

/// SQE size (CC.IOSQES = 6).
pub(crate) const SQE_BYTES: u64 = 64;
/// CQE size (CC.IOCQES = 4).
pub(crate) const CQE_BYTES: u64 = 16;
/// Offset of the status/phase word inside a CQE.
const CQE_STATUS_OFFSET: u64 = 14;

/// A command slot: free, or in flight with the caller's token and a hold on its buffer.
#[derive(Debug)]
enum Slot {
    Free,
    InFlight {
        token: u64,
        /// Keeps the data pages allocated until the device is done with them.
        _buf: Option<DmaBuf>,
    },
}

/// The doorbell pair of one queue, inside the mapped doorbell area.
#[derive(Debug)]
pub(crate) struct Doorbells {
    /// The doorbell area (BAR0 offset 0x1000 is offset 0 here).
    pub region: Arc<MmapRegion>,
    /// Offset of the SQ tail doorbell in `region`.
    pub sq_tail: u64,
    /// Offset of the CQ head doorbell in `region`.
    pub cq_head: u64,
}

impl Doorbells {
    /// Doorbells of `qid` for stride `4 << dstrd`; fails if they lie outside the mapping.
    pub fn new(region: Arc<MmapRegion>, qid: Qid, dstrd: u32) -> Result<Doorbells, MemError> {
        let base = nvmemu_spec::regs::DOORBELL_BASE;
        let sq_tail = nvmemu_spec::regs::sq_tail_doorbell(qid.0, dstrd) - base;
        let cq_head = nvmemu_spec::regs::cq_head_doorbell(qid.0, dstrd) - base;
        if cq_head + 4 > region.len() {
            return Err(MemError::OutOfBounds {
                offset: cq_head,
                len: 4,
                size: region.len(),
            });
        }
        Ok(Doorbells {
            region,
            sq_tail,
            cq_head,
        })
    }
}

/// `count` PRP lists of `each` bytes, packed back to back in as few allocations as the pool
/// allows (one, unless its device addresses are contiguous only within each huge page).
fn alloc_lists(pool: &DmaPool, count: u16, each: u64) -> Result<Vec<DmaBuf>, DmaAllocError> {
    let count = u64::from(count);
    let per_alloc = pool
        .contiguous_limit()
        .map_or(count, |limit| (limit / each).max(1));
    let mut lists = Vec::new();
    let mut left = count;
    while left > 0 {
        let n = left.min(per_alloc);
        let chunk = pool.alloc(n * each)?;
        for i in 0..n {
            lists.push(chunk.slice(i * each, each)?);
        }
        left -= n;
    }
    Ok(lists)
}

/// Where one slot's PRP list goes.
struct SlotList<'a> {
    buf: &'a DmaBuf,
    len: u64,
}

impl PrpListSink for SlotList<'_> {
    fn iova(&self) -> u64 {
        self.buf.iova().0
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn write_entry(&mut self, offset: u64, value: u64) -> Result<(), MemError> {
        self.buf.write_obj(offset, &value)
    }
}

/// A host-side queue pair.
#[derive(Debug)]
pub(crate) struct Ring {
    qid: Qid,
    depth: u16,
    sq: DmaBuf,
    cq: DmaBuf,
    /// Next SQ slot the host writes.
    sq_tail: u16,
    /// Tail value last written to the doorbell.
    rung_tail: u16,
    /// Last SQ head the controller reported (SQHD).
    sq_head: u16,
    /// CQ entries (at least `depth`).
    cq_depth: u16,
    /// Next CQ slot the host reads.
    cq_head: u16,
    /// Entries consumed since the CQ head doorbell was last written.
    cq_unacked: u16,
    /// Phase tag expected for new entries on this pass of the CQ.
    phase: bool,
    db: Doorbells,
    /// Command table; index = CID. `depth - 1` slots, so the SQ can never overflow.
    slots: Vec<Slot>,
    /// Free slot indices (a stack).
    free: Vec<u16>,
    /// PRP list space: `list_bytes` per slot (none when `list_bytes` is 0), in as many
    /// allocations as needed: a pool of physical huge pages hands out at most 2 MiB at once,
    /// less than a deep queue's lists can take together.
    prp_lists: Vec<DmaBuf>,
    list_bytes: u64,
    /// Registered buffers commands can name by index (`push_fixed`).
    fixed: Vec<DmaBuf>,
}

impl Ring {
    /// Allocate an SQ of `depth` entries, a CQ of `cq_depth` (raised to `depth` if smaller)
    /// and `list_bytes` of PRP list space per slot.
    pub fn new(
        pool: &DmaPool,
        qid: Qid,
        depth: u16,
        cq_depth: u16,
        list_bytes: u64,
        db: Doorbells,
    ) -> Result<Ring, crate::dma::DmaAllocError> {
        let depth = depth.max(2);
        let cq_depth = cq_depth.max(depth);
        let sq = pool.alloc(u64::from(depth) * SQE_BYTES)?;
        let cq = pool.alloc(u64::from(cq_depth) * CQE_BYTES)?;
        let nslots = depth - 1;
        let prp_lists = if list_bytes > 0 {
            alloc_lists(pool, nslots, list_bytes)?
        } else {
            Vec::new()
        };
        Ok(Ring {
            qid,
            depth,
            sq,
            cq,
            sq_tail: 0,
            rung_tail: 0,
            sq_head: 0,
            cq_depth,
            cq_head: 0,
            cq_unacked: 0,
            phase: true,
            db,
            slots: (0..nslots).map(|_| Slot::Free).collect(),
            free: (0..nslots).rev().collect(),
            prp_lists,
            list_bytes,
            fixed: Vec::new(),
        })
    }

    pub fn qid(&self) -> Qid {
        self.qid
    }

    pub fn depth(&self) -> u16 {
        self.depth
    }

    pub fn sq(&self) -> &DmaBuf {
        &self.sq
    }

    pub fn cq(&self) -> &DmaBuf {
        &self.cq
    }

    /// Number of command slots (`depth - 1`).
    pub fn slots(&self) -> u16 {
        // `slots.len() == depth - 1 <= u16::MAX`.
        u16::try_from(self.slots.len()).unwrap_or(u16::MAX)
    }

    /// Commands in flight.
    pub fn outstanding(&self) -> u16 {
        self.slots() - u16::try_from(self.free.len()).unwrap_or(0)
    }

    /// Largest transfer one slot's PRP space can describe at any dword-aligned start.
    pub fn list_capacity(&self) -> u64 {
        prp::max_transfer_for(self.list_bytes)
    }

    fn next(&self, i: u16) -> u16 {
        if i + 1 == self.depth { 0 } else { i + 1 }
    }

    /// CQ counterpart of `next`.
    fn next_cq(&self, i: u16) -> u16 {
        if i + 1 == self.cq_depth { 0 } else { i + 1 }
    }

    /// CQ entries.
    pub fn cq_depth(&self) -> u16 {
        self.cq_depth
    }

    /// Most entries that may stay consumed without a head doorbell (see `poll`); 0 with a CQ
    /// as deep as the SQ, i.e. a doorbell after every reap.
    fn cq_ack_slack(&self) -> u16 {
        self.cq_depth - self.depth
    }

    /// Write `sqe` to the SQ with its CID set to a free slot and PRPs for `data` (a buffer
    /// and the byte count to transfer), holding a clone of the buffer until completion.
    /// The doorbell is not rung: call `ring`.
    pub fn push(
        &mut self,
        sqe: Sqe,
        token: u64,
        data: Option<(&DmaBuf, u64)>,
    ) -> Result<Cid, NvmeError> {
        match data {
            Some((buf, bytes)) => {
                self.push_with(sqe, token, Some((buf.iova(), buf.len(), bytes)), Some(buf))
            }
            None => self.push_with(sqe, token, None, None),
        }
    }

    /// Make `bufs` the ring's fixed buffers, replacing any earlier set. Needs an idle ring:
    /// commands in flight may name the old ones.
    pub fn register_buffers(&mut self, bufs: Vec<DmaBuf>) -> Result<(), NvmeError> {
        match self.outstanding() {
            0 => {
                self.fixed = bufs;
                Ok(())
            }
            n => Err(NvmeError::Busy(n)),
        }
    }

    /// Fixed buffer `index`, if registered.
    pub fn fixed_buffer(&self, index: usize) -> Option<&DmaBuf> {
        self.fixed.get(index)
    }

    /// `push` for a transfer of `bytes` from fixed buffer `index`. The ring holds the fixed
    /// buffers for as long as they are registered, so no per-command hold is taken: a
    /// reference-count update is a locked instruction, which waits for the SQE stores ahead
    /// of it to leave the store buffer and so serializes the cross-core write of every SQE.
    #[inline(always)]
    pub fn push_fixed(
        &mut self,
        sqe: Sqe,
        token: u64,
        index: usize,
        bytes: u64,
    ) -> Result<Cid, NvmeError> {
        let Some(buf) = self.fixed.get(index) else {
            return Err(NvmeError::NoFixedBuffer {
                index,
                registered: self.fixed.len(),
            });
        };
        let data = (buf.iova(), buf.len(), bytes);
        self.push_with(sqe, token, Some(data), None)
    }

    /// The body of `push`: `data` is (buffer address, buffer length, bytes to transfer);
    /// `hold` is cloned into the slot until completion. Always inlined, so the SQE its
    /// caller built stays in registers up to the stores (see `MmapRegion::store_u64s`).
    #[inline(always)]
    fn push_with(
        &mut self,
        mut sqe: Sqe,
        token: u64,
        data: Option<(Iova, u64, u64)>,
        hold: Option<&DmaBuf>,
    ) -> Result<Cid, NvmeError> {
        let full = || NvmeError::QueueFull {
            qid: self.qid,
            slots: self.slots(),
        };
        if self.next(self.sq_tail) == self.sq_head {
            return Err(full());
        }
        let Some(&slot) = self.free.last() else {
            return Err(full());
        };
        if let Some((iova, len, bytes)) = data {
            if bytes > len {
                return Err(NvmeError::BufferTooSmall { needed: bytes, len });
            }
            let Prps { prp1, prp2 } = match self.prp_lists.get(usize::from(slot)) {
                Some(space) => {
                    let mut list = SlotList {
                        buf: space,
                        len: self.list_bytes,
                    };
                    prp::build(iova.0, bytes, &mut list)?
                }
                None => {
                    let mut none = NoList;
                    prp::build(iova.0, bytes, &mut none)?
                }
            };
            sqe.dptr1 = prp1;
            sqe.dptr2 = prp2;
        }
        let cid = Cid(slot);
        sqe.cdw0 = (sqe.cdw0 & 0xFFFF) | (u32::from(cid.0) << 16);
        // Word by word from registers: see `MmapRegion::store_u64s`.
        let at = u64::from(self.sq_tail) * SQE_BYTES;
        self.sq.store_u64s(at, sqe.to_words())?;
        // The controller reads this line next: leave it in the shared cache rather than
        // ours (with the controller's own demote after reading, 512 B QD16 null +11%,
        // iodepth 1 round trip -15%).
        self.sq.demote(at);
        self.free.pop();
        if let Some(s) = self.slots.get_mut(usize::from(slot)) {
            *s = Slot::InFlight {
                token,
                _buf: hold.cloned(),
            };
        }
        self.sq_tail = self.next(self.sq_tail);
        Ok(cid)
    }

    /// Publish every SQE pushed since the last call with one tail doorbell write.
    pub fn ring(&mut self) -> Result<(), NvmeError> {
        if self.sq_tail != self.rung_tail {
            // Release: the SQE copies above become visible before the new tail; pairs with
            // the controller's Acquire load of the SQ tail doorbell.
            self.db
                .region
                .store_release_u32(self.db.sq_tail, u32::from(self.sq_tail))?;
            // With earlier commands still in flight the controller is busy and reads this
            // line later: leave it in the shared cache for that read rather than in ours
            // (512 B QD16 malloc +8 %, 8 controllers +4 %). An idle controller is spinning
            // on the line and reads it at once; there the demote only races that read
            // (iodepth 1 round trip +70 ns).
            let published = match self.sq_tail.checked_sub(self.rung_tail) {
                Some(n) => n,
                None => self.depth - self.rung_tail + self.sq_tail,
            };
            if self.outstanding() > published {
                self.db.region.demote(self.db.sq_tail);
            }
            self.rung_tail = self.sq_tail;
        }
        Ok(())
    }

    /// Reap up to `max` completions, calling `f(token, &cqe)` for each, then write the CQ head
    /// doorbell once if more than `cq_ack_slack()` entries are consumed and unacknowledged.
    /// A completion for a CID that is not in flight, or for another SQ, stops the batch with
    /// an error (the entry is consumed and counted like the others).
    ///
    /// Why the slack is safe: the controller may post while fewer than `cq_depth - 1`
    /// entries lie between our last head doorbell and its tail. Those are the `u` consumed
    /// but unacknowledged entries plus the posted and unread ones; the latter and the
    /// commands in flight hold distinct CIDs, at most `depth - 1`, and one of those is the
    /// command being completed. So a post finds at most `u + depth - 2` entries, below
    /// `cq_depth - 1` while `u <= cq_depth - depth`. Within one call `u` grows only by
    /// entries whose CIDs cannot be reused before it returns, so checking at the end keeps
    /// the bound. The gain: the doorbell line the controller polls for the SQ tail is
    /// written once per `cq_ack_slack()` completions rather than once per reap.
    pub fn poll(&mut self, max: usize, mut f: impl FnMut(u64, &Cqe)) -> Result<usize, NvmeError> {
        let mut reaped = 0;
        let mut failure = None;
        while reaped < max {
            let off = u64::from(self.cq_head) * CQE_BYTES;
            // Acquire: pairs with the controller's Release store of this word after the rest
            // of the CQE, so the body read below is not older than the phase tag.
            let status_phase = self.cq.load_acquire_u16(off + CQE_STATUS_OFFSET)?;
            if (status_phase & 1 != 0) != self.phase {
                break;
            }
            let mut cqe: Cqe = self.cq.read_obj(off)?;
            cqe.status_phase = status_phase;
            self.cq_head = self.next_cq(self.cq_head);
            if self.cq_head == 0 {
                self.phase = !self.phase;
            }
            reaped += 1;
            if let Err(e) = self.complete(&cqe, &mut f) {
                failure = Some(e);
                break;
            }
        }
        self.cq_unacked = self
            .cq_unacked
            .saturating_add(u16::try_from(reaped).unwrap_or(u16::MAX));
        if self.cq_unacked > self.cq_ack_slack() {
            // Release: our reads of the consumed CQEs happen before the controller may reuse
            // their slots; pairs with its Acquire load of the CQ head doorbell.
            self.db
                .region
                .store_release_u32(self.db.cq_head, u32::from(self.cq_head))?;
            self.cq_unacked = 0;
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(reaped),
        }
    }

    fn complete(&mut self, cqe: &Cqe, f: &mut impl FnMut(u64, &Cqe)) -> Result<(), NvmeError> {
        if cqe.sq_id != self.qid.0 {
            return Err(NvmeError::WrongSqid {
                qid: self.qid,
                sqid: cqe.sq_id,
            });
        }
        if cqe.sq_head >= self.depth {
            return Err(NvmeError::BadSqHead {
                qid: self.qid,
                sqhd: cqe.sq_head,
                depth: self.depth,
            });
        }
        let unknown = NvmeError::UnknownCid {
            qid: self.qid,
            cid: Cid(cqe.cid),
        };
        let Some(slot) = self.slots.get_mut(usize::from(cqe.cid)) else {
            return Err(unknown);
        };
        let Slot::InFlight { token, .. } = std::mem::replace(slot, Slot::Free) else {
            return Err(unknown);
        };
        self.free.push(cqe.cid);
        self.sq_head = cqe.sq_head;
        f(token, cqe);
        Ok(())
    }
}

/// The sink for rings without PRP list space: any write means the transfer needs a list.
struct NoList;

impl PrpListSink for NoList {
    fn iova(&self) -> u64 {
        0
    }
    fn len(&self) -> u64 {
        0
    }
    fn write_entry(&mut self, offset: u64, _value: u64) -> Result<(), MemError> {
        Err(MemError::OutOfBounds {
            offset,
            len: 8,
            size: 0,
        })
    }
}

/// A completion's result: DW0 on success, the status otherwise.
pub(crate) fn result_of(cqe: &Cqe) -> Result<u32, NvmeError> {
    let status: Status = cqe.status();
    if status.is_success() {
        Ok(cqe.dw0)
    } else {
        Err(NvmeError::Status(status))
    }
}

#[cfg(test)]
mod tests;
