// SPDX-License-Identifier: Apache-2.0
//! The host side of one queue pair: the memory the TCP connection plays host with. A
//! private anonymous region holds the SQ ring, the CQ ring and one data buffer per command
//! slot; it is entered in the controller's DMA table at an IOVA of the queue's own, so the
//! controller's PRP walk reaches the buffers and nothing else. Each slot's PRP list is
//! written once, when the queue is made: a command only names its slot.

use std::sync::Arc;

use nvmemu_mem::{DmaBacking, DmaRegion, Iova, MemError, MmapRegion};
use nvmemu_spec::{Cid, Cqe, Psdt, Qid, Sqe};

const PAGE: u64 = 4096;
const SQE_BYTES: u64 = 64;
const CQE_BYTES: u64 = 16;

/// One queue pair's memory and ring positions.
#[derive(Debug)]
pub(crate) struct QueueMem {
    pub(crate) qid: Qid,
    region: Arc<MmapRegion>,
    iova: u64,
    /// Entries of each ring (the host's SQSIZE + 1).
    pub(crate) entries: u32,
    slot_bytes: u64,
    cq_off: u64,
    prp_off: u64,
    list_bytes: u64,
    data_off: u64,
    sq_tail: u32,
    cq_head: u32,
    phase: bool,
}

impl QueueMem {
    /// Memory for queue `qid` with `entries` entries and as many `slot_bytes` buffers;
    /// committed only as it is touched.
    pub(crate) fn new(qid: Qid, entries: u32, slot_bytes: u32) -> Result<QueueMem, MemError> {
        let n = u64::from(entries);
        let slot_bytes = u64::from(slot_bytes).next_multiple_of(PAGE);
        // One entry per page after the first; a power of two of at most 512 entries, so
        // no list crosses a page (the PRP rule) and none needs chaining.
        let list_bytes = (slot_bytes / PAGE * 8).next_power_of_two().min(PAGE);
        let cq_off = (n * SQE_BYTES).next_multiple_of(PAGE);
        let prp_off = cq_off + (n * CQE_BYTES).next_multiple_of(PAGE);
        let data_off = prp_off + (n * list_bytes).next_multiple_of(PAGE);
        let len = data_off + n * slot_bytes;
        let region = Arc::new(MmapRegion::anonymous(len)?);
        let iova = (u64::from(qid.0) + 1) << 36;
        for slot in 0..n {
            let base = iova + data_off + slot * slot_bytes;
            let pages = (slot_bytes / PAGE).min(list_bytes / 8 + 1);
            for k in 1..pages {
                region.write_obj(
                    prp_off + slot * list_bytes + (k - 1) * 8,
                    &(base + k * PAGE),
                )?;
            }
        }
        Ok(QueueMem {
            qid,
            region,
            // 64 GiB apart: a queue's buffers never border another queue's.
            iova,
            entries,
            slot_bytes,
            cq_off,
            prp_off,
            list_bytes,
            data_off,
            sq_tail: 0,
            cq_head: 0,
            phase: true,
        })
    }

    /// The DMA table entry the controller reaches this memory through.
    pub(crate) fn dma_region(&self) -> DmaRegion {
        DmaRegion {
            iova: Iova(self.iova),
            size: self.region.len(),
            writable: true,
            backing: DmaBacking::Mapped(Arc::clone(&self.region)),
        }
    }

    /// First IOVA and length, for the DMA table.
    pub(crate) fn span(&self) -> (u64, u64) {
        (self.iova, self.region.len())
    }

    pub(crate) fn sq_iova(&self) -> u64 {
        self.iova
    }

    pub(crate) fn cq_iova(&self) -> u64 {
        self.iova + self.cq_off
    }

    /// Largest transfer one command slot holds.
    pub(crate) fn slot_bytes(&self) -> u64 {
        self.slot_bytes
    }

    /// Where slot `slot`'s data starts in [`QueueMem::region`].
    pub(crate) fn slot_off(&self, slot: u16) -> u64 {
        self.data_off + u64::from(slot) * self.slot_bytes
    }

    /// The memory the rings and slots live in.
    pub(crate) fn region(&self) -> &MmapRegion {
        &self.region
    }

    /// Copy `data` into slot `slot` at `offset` (the caller checked the range).
    pub(crate) fn write_slot(&self, slot: u16, offset: u64, data: &[u8]) -> Result<(), MemError> {
        self.region.copy_from(self.slot_off(slot) + offset, data)
    }

    /// Copy slot `slot`'s first `dst.len()` bytes out.
    pub(crate) fn read_slot(&self, slot: u16, dst: &mut [u8]) -> Result<(), MemError> {
        self.region.copy_to(self.slot_off(slot), dst)
    }

    /// Put `sqe` on the SQ as command `slot`, its data pointer the PRPs of the slot's
    /// first `len` bytes, and ring the tail doorbell.
    #[inline]
    pub(crate) fn submit(
        &mut self,
        sqe: &Sqe,
        slot: u16,
        len: u32,
        doorbells: &MmapRegion,
    ) -> Result<(), MemError> {
        let base = self.iova + self.slot_off(slot);
        let prp2 = match u64::from(len) {
            l if l <= PAGE => 0,
            l if l <= 2 * PAGE => base + PAGE,
            _ => self.iova + self.prp_off + u64::from(slot) * self.list_bytes,
        };
        // The host's words as they are, but for CDW0, MPTR and the data pointer; the
        // host's FUSE bits stay (the controller refuses fused commands it cannot run).
        let cdw0 =
            Sqe::make_cdw0(sqe.opcode(), Psdt::Prp, Cid(slot)) | (u32::from(sqe.fuse()) << 8);
        let mut words = sqe.to_words();
        words[0] = (words[0] & !u64::from(u32::MAX)) | u64::from(cdw0);
        words[2] = 0;
        words[3] = base;
        words[4] = prp2;
        // Straight from registers into the ring: see `MmapRegion::store_u64s`.
        self.region
            .store_u64s(u64::from(self.sq_tail) * SQE_BYTES, words)?;
        self.sq_tail = if self.sq_tail + 1 == self.entries {
            0
        } else {
            self.sq_tail + 1
        };
        // Pairs with the controller's Acquire load of the tail: the SQE is written first.
        doorbells.store_release_u32(u64::from(self.qid.0) * 8, self.sq_tail)
    }

    /// The next completion if the controller has posted it (not yet consumed).
    pub(crate) fn peek_cqe(&self) -> Option<Cqe> {
        let cqe: Cqe = self
            .region
            .read_obj(self.cq_off + u64::from(self.cq_head) * CQE_BYTES)
            .ok()?;
        (cqe.phase() == self.phase).then_some(cqe)
    }

    /// Consume the completion [`QueueMem::peek_cqe`] returned.
    pub(crate) fn pop_cqe(&mut self) {
        self.cq_head += 1;
        if self.cq_head == self.entries {
            self.cq_head = 0;
            self.phase = !self.phase;
        }
    }

    /// Tell the controller how far completions were consumed.
    pub(crate) fn ring_cq_head(&self, doorbells: &MmapRegion) {
        let _ = doorbells.store_release_u32(u64::from(self.qid.0) * 8 + 4, self.cq_head);
    }
}
