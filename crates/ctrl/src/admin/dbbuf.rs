// SPDX-License-Identifier: Apache-2.0
//! Doorbell Buffer Config (NVMe Base 1.4, 5.7): shadow doorbells and event indexes.
//!
//! After the command, I/O queue tails and heads are read from the host's shadow doorbell
//! page instead of the doorbell registers, and the controller writes an event index per
//! queue telling the host when an MMIO doorbell write is still wanted. The admin queue keeps
//! the real doorbells (Linux and SPDK never update its shadow entries). Dropped on
//! controller disable and reset.

use std::sync::Arc;

use nvmemu_mem::{Access, GuestMemory, Iova, MmapRegion};
use nvmemu_spec::{PAGE_SIZE, Psdt, Qid, Sqe, Status};

use crate::Controller;
use crate::queue::{cq_head_doorbell, sq_tail_doorbell};

/// The resolved shadow doorbell and event index pages.
#[derive(Debug)]
pub(crate) struct Dbbuf {
    shadow_iova: u64,
    event_iova: u64,
    shadow: (Arc<MmapRegion>, u64),
    event: (Arc<MmapRegion>, u64),
}

fn page(mem: &GuestMemory, iova: u64) -> Option<(Arc<MmapRegion>, u64)> {
    let (region, offset) = mem.translate(Iova(iova), PAGE_SIZE, Access::Write).ok()?;
    Some((Arc::clone(region), offset))
}

impl Dbbuf {
    fn resolve(mem: &GuestMemory, shadow_iova: u64, event_iova: u64) -> Option<Dbbuf> {
        Some(Dbbuf {
            shadow_iova,
            event_iova,
            shadow: page(mem, shadow_iova)?,
            event: page(mem, event_iova)?,
        })
    }

    /// Resolve both pages against a new DMA table; false if either is gone.
    pub(crate) fn re_resolve(&mut self, mem: &GuestMemory) -> bool {
        match Dbbuf::resolve(mem, self.shadow_iova, self.event_iova) {
            Some(new) => {
                *self = new;
                true
            }
            None => false,
        }
    }

    /// A shadow doorbell (`off` as in the doorbell page: 8*qid for SQ tails, +4 for CQ
    /// heads). Acquire pairs with the host's write barrier between its queue entry writes
    /// and the shadow doorbell store (Linux `nvme_dbbuf_update_and_check_event`).
    pub(crate) fn load_doorbell(&self, off: u64) -> Option<u32> {
        self.shadow.0.load_acquire_u32(self.shadow.1 + off).ok()
    }

    fn store(&self, (region, base): &(Arc<MmapRegion>, u64), off: u64, value: u32) {
        // Release pairs with the host's full barrier between its shadow doorbell store and
        // its event index load. A failure means the page vanished; set_guest_memory reports
        // that as controller fatal.
        let _ = region.store_release_u32(base + off, value);
    }

    /// Zero a shadow doorbell (a queue is created: it starts empty).
    pub(crate) fn reset_shadow(&self, off: u64) {
        self.store(&self.shadow, off, 0);
    }

    /// A new SQ: its event index starts at its (zero) tail.
    pub(crate) fn init_sq(&self, qid: Qid) {
        self.store(&self.event, sq_tail_doorbell(qid), 0);
    }

    /// A new CQ: the controller reads shadow CQ heads itself, so it never asks for MMIO
    /// head writes (0xFFFF_FFFF is never inside a host's 16-bit old..new window).
    pub(crate) fn init_cq(&self, qid: Qid) {
        self.store(&self.event, cq_head_doorbell(qid), u32::MAX);
    }
}

impl Controller {
    /// Doorbell Buffer Config: PRP1 = shadow doorbells, PRP2 = event indexes; both page
    /// aligned, distinct and mapped writable, else Invalid Field.
    pub(crate) fn doorbell_buffer_config(
        &mut self,
        sqe: &Sqe,
        shadow: u64,
        event: u64,
    ) -> Result<u32, Status> {
        if !self.config.shadow_doorbells {
            return Err(Status::INVALID_OPCODE);
        }
        if sqe.psdt() != Psdt::Prp
            || !shadow.is_multiple_of(PAGE_SIZE)
            || !event.is_multiple_of(PAGE_SIZE)
            || shadow == event
        {
            return Err(Status::INVALID_FIELD);
        }
        let db = Dbbuf::resolve(&self.mem, shadow, event).ok_or(Status::INVALID_FIELD)?;
        // Carry the current doorbell values of live I/O queues over to the shadow page.
        let mut i = 0;
        while let Some(qid) = self.queues.active_sq(i) {
            let off = sq_tail_doorbell(qid);
            let tail = self.doorbells.page().load_acquire_u32(off).unwrap_or(0);
            db.store(&db.shadow, off, tail);
            db.store(
                &db.event,
                off,
                self.queues.sq(qid).map_or(0, |sq| sq.head.get()),
            );
            i += 1;
        }
        let mut i = 0;
        while let Some(qid) = self.queues.active_cq(i) {
            let off = cq_head_doorbell(qid);
            let head = self.doorbells.page().load_acquire_u32(off).unwrap_or(0);
            db.store(&db.shadow, off, head);
            db.init_cq(qid);
            i += 1;
        }
        self.doorbells.shadow = Some(db);
        Ok(0)
    }

    /// Tell the host which SQ tail the controller has consumed up to, so it only rings the
    /// MMIO doorbell when the controller has caught up.
    pub(crate) fn publish_event_idx(&self, qid: Qid) {
        if let (Some(db), Some(sq)) = (&self.doorbells.shadow, self.queues.sq(qid)) {
            db.store(&db.event, sq_tail_doorbell(qid), sq.head.get());
        }
    }
}
