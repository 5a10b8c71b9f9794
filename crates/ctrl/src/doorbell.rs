// SPDX-License-Identifier: Apache-2.0
//! Where the controller reads its queues' doorbells: the doorbell page (the registers from
//! BAR0 offset 0x1000, which the client maps and writes with plain stores; CAP.DSTRD = 0) and,
//! once Doorbell Buffer Config is in effect, the host's shadow doorbell page for the I/O queues
//! (`admin/dbbuf.rs`).

use std::sync::Arc;

use nvmemu_mem::MmapRegion;
use nvmemu_spec::Qid;

use crate::admin::dbbuf::Dbbuf;

/// A controller's doorbells (see the module docs).
#[derive(Debug)]
pub(crate) struct Doorbells {
    page: Arc<MmapRegion>,
    /// The shadow doorbell and event index pages (Doorbell Buffer Config), if set.
    pub(crate) shadow: Option<Dbbuf>,
}

impl Doorbells {
    /// Doorbells in `page`, without shadow pages.
    pub(crate) fn new(page: Arc<MmapRegion>) -> Doorbells {
        Doorbells { page, shadow: None }
    }

    /// The doorbell page.
    pub(crate) fn page(&self) -> &Arc<MmapRegion> {
        &self.page
    }

    /// Poll `page` from now on; the page polled until now comes back. A page of another
    /// length is refused and handed back.
    pub(crate) fn replace_page(
        &mut self,
        page: Arc<MmapRegion>,
    ) -> Result<Arc<MmapRegion>, Arc<MmapRegion>> {
        if page.len() != self.page.len() {
            return Err(page);
        }
        Ok(std::mem::replace(&mut self.page, page))
    }

    /// The doorbell of queue `qid` at `off` (its SQ tail or CQ head offset in the page): the
    /// shadow doorbell for an I/O queue once Doorbell Buffer Config is in effect, else the
    /// register. Acquire pairs with the host's write barrier between writing its queue
    /// entries and storing the doorbell.
    #[inline(always)]
    pub(crate) fn load(&self, qid: Qid, off: u64) -> Option<u32> {
        match &self.shadow {
            Some(db) if qid != Qid::ADMIN => db.load_doorbell(off),
            _ => self.page.load_acquire_u32(off).ok(),
        }
    }

    /// A new queue starts empty: its doorbell at `off`, and its shadow doorbell, read 0.
    pub(crate) fn reset(&self, off: u64) {
        // Cannot fail: every allocatable queue id has its doorbells inside the page.
        let _ = self.page.store_release_u32(off, 0);
        if let Some(db) = &self.shadow {
            db.reset_shadow(off);
        }
    }

    /// Controller reset: every doorbell register back to 0 and the shadow pages dropped.
    pub(crate) fn clear(&mut self) {
        self.shadow = None;
        // Cannot fail: the range is the page's own length.
        let _ = self.page.fill(0, self.page.len(), 0);
    }
}
