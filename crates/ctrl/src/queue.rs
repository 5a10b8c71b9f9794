// SPDX-License-Identifier: Apache-2.0
//! Submission and completion queue rings (NVMe Base 1.4, 4.1 "Submission Queue and
//! Completion Queue Definition").
//!
//! A queue is plain state: its size, a wrap-at-size index, the phase tag, and the ring's
//! resolved mapping (`Arc<MmapRegion>` + offset, re-resolved when the DMA table changes).
//! The controller owns the table of queues and drives them from one poller thread.

use std::sync::Arc;

use nvmemu_mem::{Access, GuestMemory, Iova, MmapRegion};
use nvmemu_spec::{Cqe, Qid};

use crate::fetch::SqeCopies;
use crate::metrics::QueueCounters;

/// Bytes per SQE (CC.IOSQES = 6).
pub(crate) const SQE_SIZE: u64 = 64;
/// Bytes per CQE (CC.IOCQES = 4).
pub(crate) const CQE_SIZE: u64 = 16;
/// Cache line size the CQ hint works with.
const CACHE_LINE: u64 = 64;

/// Offset of SQ `qid`'s tail doorbell in the doorbell page (CAP.DSTRD = 0).
pub(crate) fn sq_tail_doorbell(qid: Qid) -> u64 {
    u64::from(qid.0) * 8
}

/// Offset of CQ `qid`'s head doorbell in the doorbell page.
pub(crate) fn cq_head_doorbell(qid: Qid) -> u64 {
    u64::from(qid.0) * 8 + 4
}

/// A ring index in `0..size`; advancing wraps at the size without a division.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RingIdx(u32);

impl RingIdx {
    /// The index as a number.
    pub(crate) fn get(self) -> u32 {
        self.0
    }

    /// The index as the 16-bit value doorbells and SQHD carry (sizes are at most 65536, so
    /// indexes fit).
    pub(crate) fn as_u16(self) -> u16 {
        u16::try_from(self.0).unwrap_or(u16::MAX)
    }

    /// Validate a doorbell value against the ring size.
    pub(crate) fn checked(value: u32, size: u32) -> Option<RingIdx> {
        (value < size).then_some(RingIdx(value))
    }

    /// The next index; `true` when it wrapped to 0.
    pub(crate) fn next(self, size: u32) -> (RingIdx, bool) {
        let n = self.0 + 1;
        if n >= size {
            (RingIdx(0), true)
        } else {
            (RingIdx(n), false)
        }
    }
}

/// A ring's place in client memory, resolved against the current DMA table.
#[derive(Debug, Clone)]
pub(crate) struct Ring {
    /// Base IOVA as the host gave it (kept to re-resolve after DMA_MAP/UNMAP).
    pub(crate) base: u64,
    /// Length in bytes (entries x entry size).
    pub(crate) bytes: u64,
    /// Direction the device uses the ring in.
    pub(crate) access: Access,
    /// The mapping holding the whole ring.
    pub(crate) region: Arc<MmapRegion>,
    /// Offset of the ring in `region`.
    pub(crate) offset: u64,
    /// The client unmapped the ring's memory: the queue is left alone until a later DMA
    /// table maps it again (QEMU remaps guest RAM while firmware has queues live).
    pub(crate) paused: bool,
}

impl Ring {
    /// Resolve a ring; `None` when it is not wholly inside one mapped region.
    pub(crate) fn resolve(
        mem: &GuestMemory,
        base: u64,
        bytes: u64,
        access: Access,
    ) -> Option<Ring> {
        let (region, offset) = mem.translate(Iova(base), bytes, access).ok()?;
        Some(Ring {
            base,
            bytes,
            access,
            region: Arc::clone(region),
            offset,
            paused: false,
        })
    }

    /// The same ring against a new DMA table.
    pub(crate) fn re_resolve(&self, mem: &GuestMemory) -> Option<Ring> {
        Ring::resolve(mem, self.base, self.bytes, self.access)
    }

    /// Zero the ring (queues start empty, with the host expecting phase 1).
    pub(crate) fn clear(&self) -> bool {
        self.region.fill(self.offset, self.bytes, 0).is_ok()
    }
}

/// A submission queue.
#[derive(Debug)]
pub(crate) struct SubmissionQueue {
    /// Entries (one-based).
    pub(crate) size: u32,
    /// Next entry the controller consumes (SQHD).
    pub(crate) head: RingIdx,
    /// Completion queue it posts to.
    pub(crate) cqid: Qid,
    /// The ring.
    pub(crate) ring: Ring,
    /// An invalid tail doorbell value was seen and reported; cleared by the next valid one,
    /// so a host hammering a bad value logs once.
    pub(crate) bad_doorbell: bool,
    /// Counters.
    pub(crate) stats: QueueCounters,
    /// The entries copied out of the ring ahead of the head (`fetch.rs`).
    pub(crate) copies: SqeCopies,
    /// Where each CID's Read left its data, when the transport takes Reads in place
    /// (`io/in_place.rs`); None otherwise.
    pub(crate) in_place: Option<crate::io::InPlaceTable>,
}

impl SubmissionQueue {
    /// A new, empty queue.
    pub(crate) fn new(size: u32, cqid: Qid, ring: Ring) -> SubmissionQueue {
        SubmissionQueue {
            size,
            head: RingIdx::default(),
            cqid,
            ring,
            bad_doorbell: false,
            stats: QueueCounters::default(),
            copies: SqeCopies::default(),
            in_place: None,
        }
    }

    /// Entries from `from` forward to `to` (both inside the ring).
    pub(crate) fn distance(&self, from: RingIdx, to: RingIdx) -> u32 {
        if to.0 >= from.0 {
            to.0 - from.0
        } else {
            self.size - from.0 + to.0
        }
    }
}

/// A completion queue.
#[derive(Debug)]
pub(crate) struct CompletionQueue {
    /// Entries (one-based).
    pub(crate) size: u32,
    /// Next slot the controller fills.
    pub(crate) tail: RingIdx,
    /// Phase tag of the current pass (starts at 1).
    pub(crate) phase: bool,
    /// Last CQ head the host reported; re-read from the doorbell only when the queue looks
    /// full.
    pub(crate) head: RingIdx,
    /// Interrupts enabled.
    pub(crate) ien: bool,
    /// MSI-X vector.
    pub(crate) iv: u16,
    /// The ring.
    pub(crate) ring: Ring,
    /// Submission queues posting here (a CQ with any cannot be deleted).
    pub(crate) sq_count: u16,
    /// Entries were posted since the last interrupt was raised.
    pub(crate) irq_pending: bool,
    /// An invalid head doorbell value was seen and reported.
    pub(crate) bad_doorbell: bool,
    /// Entries posted but not yet written to the ring (phase-tagged words), ending at
    /// `tail`; never more than the rest of one cache line.
    staged: [[u64; 2]; 4],
    /// How many of `staged` are in use.
    staged_len: u8,
}

impl CompletionQueue {
    /// A new, empty queue.
    pub(crate) fn new(size: u32, ien: bool, iv: u16, ring: Ring) -> CompletionQueue {
        CompletionQueue {
            size,
            tail: RingIdx::default(),
            phase: true,
            head: RingIdx::default(),
            ien,
            iv,
            ring,
            sq_count: 0,
            irq_pending: false,
            bad_doorbell: false,
            staged: [[0; 2]; 4],
            staged_len: 0,
        }
    }

    /// True when posting one more entry would overwrite one the host has not consumed.
    pub(crate) fn looks_full(&self) -> bool {
        self.tail.next(self.size).0 == self.head
    }

    /// Post `cqe` and write it to the ring at once (one-off completions: AERs, tests).
    /// Returns false when the ring is no longer writable.
    pub(crate) fn post(&mut self, cqe: Cqe) -> bool {
        self.stage(cqe) && self.flush()
    }

    /// Post `cqe` (its phase is set here) at the tail and advance it; the entry reaches the
    /// ring together with the rest of its cache line, when the line is full, the ring
    /// wraps or `flush` is called. Whoever stages must flush before its poll pass ends.
    ///
    /// Why: the host polls the line holding its next entry, so the line sits in the host's
    /// cache and every CQE store needs the line back first. Written one command at a time,
    /// a line costs up to four such transfers, and each holds up every store behind it (the
    /// next commands' data copies) until it completes; written together, one (512 B
    /// randread QD16: malloc +12 %, null +9 %). A staged entry waits for at most three more
    /// commands of the same batch.
    /// Returns false when a line could not be written.
    #[inline(always)]
    pub(crate) fn stage(&mut self, mut cqe: Cqe) -> bool {
        cqe.status_phase = (cqe.status_phase & !1) | u16::from(self.phase);
        let at = self.ring.offset + u64::from(self.tail.get()) * CQE_SIZE;
        let Some(slot) = self.staged.get_mut(usize::from(self.staged_len)) else {
            return false; // unreachable: a full stage ends a line and is flushed below
        };
        *slot = cqe.to_words();
        self.staged_len += 1;
        let (next, wrapped) = self.tail.next(self.size);
        self.tail = next;
        if wrapped {
            self.phase = !self.phase;
        }
        self.irq_pending |= self.ien;
        let line_done = (at + CQE_SIZE).is_multiple_of(CACHE_LINE);
        if line_done || wrapped || usize::from(self.staged_len) == self.staged.len() {
            return self.flush();
        }
        true
    }

    /// Write the staged entries to the ring, in order.
    ///
    /// Ordering: each entry's first half goes in with a plain store, then its status+phase
    /// word with a Release store. The host polls that word (Acquire, or a read barrier after
    /// it, as Linux's `nvme_cqe_pending` + `dma_rmb` do), so it never sees a new phase with
    /// stale fields. Returns false when the ring is no longer writable.
    #[inline(always)]
    pub(crate) fn flush(&mut self) -> bool {
        let n = u32::from(self.staged_len);
        if n == 0 {
            return true;
        }
        self.staged_len = 0;
        // The stage never spans a wrap (wrapping flushes), so the entries end at the tail
        // or, just after a wrap, at the ring's end.
        let end = match self.tail.get() {
            0 => self.size,
            t => t,
        };
        let mut off = self.ring.offset + u64::from(end.saturating_sub(n)) * CQE_SIZE;
        let mut ok = true;
        for [body, tagged] in self.staged.iter().take(n as usize).copied() {
            ok &= self.ring.region.store_u64s(off, [body]).is_ok()
                && self.ring.region.store_release_u64(off + 8, tagged).is_ok();
            off += CQE_SIZE;
        }
        // The line's last entry is written: hand the line to the shared cache, where the
        // host's next poll finds it, instead of leaving it in ours to be snooped (null
        // 512 B QD16 +6 %). Demoting after every entry took the line away while the next
        // three were still to be written (12.2 M -> 7-8.5 M).
        if ok && off.is_multiple_of(CACHE_LINE) {
            self.ring.region.demote(off - CQE_SIZE);
        }
        ok
    }
}

/// Every queue of a controller, indexed by queue id, plus compact lists of the live I/O
/// queue ids so polling does not scan empty slots.
#[derive(Debug)]
pub(crate) struct QueueTable {
    sqs: Vec<Option<SubmissionQueue>>,
    cqs: Vec<Option<CompletionQueue>>,
    active_sqs: Vec<Qid>,
    active_cqs: Vec<Qid>,
}

impl QueueTable {
    /// A table for queue ids `0..=max_qid` (allocated once, here).
    pub(crate) fn new(max_qid: u16) -> QueueTable {
        let n = usize::from(max_qid) + 1;
        QueueTable {
            sqs: (0..n).map(|_| None).collect(),
            cqs: (0..n).map(|_| None).collect(),
            active_sqs: Vec::with_capacity(n),
            active_cqs: Vec::with_capacity(n),
        }
    }

    /// The submission queue `qid`.
    pub(crate) fn sq(&self, qid: Qid) -> Option<&SubmissionQueue> {
        self.sqs.get(qid.index())?.as_ref()
    }

    /// The submission queue `qid`, mutably.
    pub(crate) fn sq_mut(&mut self, qid: Qid) -> Option<&mut SubmissionQueue> {
        self.sqs.get_mut(qid.index())?.as_mut()
    }

    /// Drop the holds on `memory` the SQs keep for Reads in place (`io/in_place.rs`).
    pub(crate) fn forget_in_place(&mut self, memory: &std::sync::Arc<nvmemu_bdev::MemoryHold>) {
        for t in self
            .sqs
            .iter_mut()
            .flatten()
            .filter_map(|sq| sq.in_place.as_mut())
        {
            t.forget(memory);
        }
    }

    /// The completion queue `qid`.
    pub(crate) fn cq(&self, qid: Qid) -> Option<&CompletionQueue> {
        self.cqs.get(qid.index())?.as_ref()
    }

    /// The completion queue `qid`, mutably.
    pub(crate) fn cq_mut(&mut self, qid: Qid) -> Option<&mut CompletionQueue> {
        self.cqs.get_mut(qid.index())?.as_mut()
    }

    /// Whether `qid` can name a queue at all.
    pub(crate) fn in_range(&self, qid: Qid) -> bool {
        qid.index() < self.sqs.len()
    }

    /// Install a CQ in a free, in-range slot.
    pub(crate) fn insert_cq(&mut self, qid: Qid, cq: CompletionQueue) {
        if let Some(slot @ None) = self.cqs.get_mut(qid.index()) {
            *slot = Some(cq);
            if qid != Qid::ADMIN {
                self.active_cqs.push(qid);
            }
        }
    }

    /// Install an SQ in a free slot; its CQ must exist.
    pub(crate) fn insert_sq(&mut self, qid: Qid, sq: SubmissionQueue) {
        let cqid = sq.cqid;
        if let Some(slot @ None) = self.sqs.get_mut(qid.index()) {
            *slot = Some(sq);
            if qid != Qid::ADMIN {
                self.active_sqs.push(qid);
            }
            if let Some(cq) = self.cq_mut(cqid) {
                cq.sq_count += 1;
            }
        }
    }

    /// Remove an SQ.
    pub(crate) fn remove_sq(&mut self, qid: Qid) -> Option<SubmissionQueue> {
        let sq = self.sqs.get_mut(qid.index())?.take()?;
        self.active_sqs.retain(|&q| q != qid);
        if let Some(cq) = self.cq_mut(sq.cqid) {
            cq.sq_count = cq.sq_count.saturating_sub(1);
        }
        Some(sq)
    }

    /// Remove a CQ.
    pub(crate) fn remove_cq(&mut self, qid: Qid) -> Option<CompletionQueue> {
        let cq = self.cqs.get_mut(qid.index())?.take()?;
        self.active_cqs.retain(|&q| q != qid);
        Some(cq)
    }

    /// Remove every queue (controller disable/reset).
    pub(crate) fn clear(&mut self) {
        self.sqs.iter_mut().for_each(|s| *s = None);
        self.cqs.iter_mut().for_each(|c| *c = None);
        self.active_sqs.clear();
        self.active_cqs.clear();
    }

    /// The `i`-th live I/O SQ id.
    pub(crate) fn active_sq(&self, i: usize) -> Option<Qid> {
        self.active_sqs.get(i).copied()
    }

    /// The `i`-th live I/O CQ id.
    pub(crate) fn active_cq(&self, i: usize) -> Option<Qid> {
        self.active_cqs.get(i).copied()
    }

    /// Whether any I/O queue exists.
    pub(crate) fn has_io_queues(&self) -> bool {
        !self.active_sqs.is_empty() || !self.active_cqs.is_empty()
    }

    /// Every queue ring, for re-resolution after a DMA table change.
    pub(crate) fn rings_mut(&mut self) -> impl Iterator<Item = &mut Ring> {
        let sqs = self.sqs.iter_mut().flatten().map(|s| &mut s.ring);
        let cqs = self.cqs.iter_mut().flatten().map(|c| &mut c.ring);
        sqs.chain(cqs)
    }

    /// Every live SQ with its id.
    pub(crate) fn sqs(&self) -> impl Iterator<Item = (Qid, &SubmissionQueue)> {
        self.sqs
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((Qid(u16::try_from(i).ok()?), s.as_ref()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_utils::HostMemory;
    use nvmemu_spec::{Cid, Status};

    #[test]
    fn ring_index_wraps_at_size() {
        let (i, w) = RingIdx(2).next(3);
        assert_eq!((i, w), (RingIdx(0), true));
        assert_eq!(RingIdx(0).next(3), (RingIdx(1), false));
        assert_eq!(RingIdx::checked(3, 3), None);
        assert_eq!(RingIdx::checked(65535, 65536), Some(RingIdx(65535)));
    }

    #[test]
    fn cq_phase_flips_on_wrap_and_full_is_detected() {
        let host = HostMemory::new(1 << 16);
        let ring = Ring::resolve(&host.guest(), host.iova(0), 2 * CQE_SIZE, Access::Write).unwrap();
        let mut cq = CompletionQueue::new(2, true, 0, ring);
        let cqe = Cqe::new(Cid(1), Qid(1), 0, Status::SUCCESS, 0, false);
        assert!(!cq.looks_full());
        assert!(cq.post(cqe));
        assert!(cq.looks_full());
        cq.head = RingIdx(1);
        assert!(cq.post(cqe));
        assert!(!cq.phase);
        let first: Cqe = host.read_obj(0);
        let second: Cqe = host.read_obj(16);
        assert!(first.phase() && second.phase());
        assert!(cq.post(Cqe { cid: 7, ..cqe }));
        let again: Cqe = host.read_obj(0);
        assert!(!again.phase());
        assert_eq!(again.cid, 7);
        assert!(cq.irq_pending);
    }

    /// A CQ of `entries` whose ring starts `at` bytes into host memory.
    fn cq_at(host: &HostMemory, at: u64, entries: u32) -> CompletionQueue {
        let bytes = u64::from(entries) * CQE_SIZE;
        let ring = Ring::resolve(&host.guest(), host.iova(at), bytes, Access::Write).unwrap();
        CompletionQueue::new(entries, false, 0, ring)
    }

    /// The cids of the entries the host would see as new (phase 1) from slot 0 on.
    fn visible(host: &HostMemory, at: u64, entries: u64) -> Vec<u16> {
        (0..entries)
            .map(|i| host.read_obj::<Cqe>(at + i * CQE_SIZE))
            .take_while(Cqe::phase)
            .map(|c| c.cid)
            .collect()
    }

    fn cqe(cid: u16) -> Cqe {
        Cqe::new(Cid(cid), Qid(1), 0, Status::SUCCESS, 0, false)
    }

    #[test]
    fn staged_entries_reach_the_ring_a_line_at_a_time_or_on_flush() {
        let host = HostMemory::new(1 << 16);
        let mut cq = cq_at(&host, 0x1000, 16);
        for cid in 0..3 {
            assert!(cq.stage(cqe(cid)));
        }
        assert_eq!(cq.tail, RingIdx(3), "staged entries count as posted");
        assert!(
            visible(&host, 0x1000, 16).is_empty(),
            "nothing written before the line ends"
        );
        assert!(cq.stage(cqe(3)));
        assert_eq!(visible(&host, 0x1000, 16), [0, 1, 2, 3]);
        assert!(cq.stage(cqe(4)) && cq.stage(cqe(5)));
        assert_eq!(visible(&host, 0x1000, 16).len(), 4);
        assert!(cq.flush());
        assert_eq!(visible(&host, 0x1000, 16), [0, 1, 2, 3, 4, 5]);
        assert!(cq.flush(), "an empty flush writes nothing and succeeds");
        assert_eq!(visible(&host, 0x1000, 16), [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_wrap_writes_the_stage_and_a_ring_off_the_line_grid_flushes_at_line_ends() {
        // Six entries starting 16 bytes into a line: lines end after entries 2 and 5
        // (offsets 48 and 96), and entry 5 is also the wrap.
        let host = HostMemory::new(1 << 16);
        let mut cq = cq_at(&host, 0x1010, 6);
        for cid in 0..3 {
            assert!(cq.stage(cqe(cid)));
        }
        assert_eq!(visible(&host, 0x1010, 6), [0, 1, 2]);
        assert!(cq.stage(cqe(3)) && cq.stage(cqe(4)));
        assert_eq!(visible(&host, 0x1010, 6).len(), 3);
        assert!(cq.stage(cqe(5)));
        assert_eq!(visible(&host, 0x1010, 6), [0, 1, 2, 3, 4, 5]);
        assert!(!cq.phase, "the wrap flipped the phase");
        // The next pass's first entry carries phase 0 and lands in slot 0 on flush.
        cq.head = RingIdx(3);
        assert!(cq.stage(cqe(6)));
        assert!(host.read_obj::<Cqe>(0x1010).phase(), "still the old entry");
        assert!(cq.flush());
        let first: Cqe = host.read_obj(0x1010);
        assert_eq!((first.cid, first.phase()), (6, false));
        // A ring smaller than a line: the wrap alone flushes.
        let mut tiny = cq_at(&host, 0x2000, 2);
        assert!(tiny.stage(cqe(7)));
        assert!(visible(&host, 0x2000, 2).is_empty());
        tiny.head = RingIdx(1);
        assert!(tiny.stage(cqe(8)));
        assert_eq!(visible(&host, 0x2000, 2), [7, 8]);
    }
}
