// SPDX-License-Identifier: Apache-2.0
//! The poll loop: doorbells, SQE fetch, dispatch, completion posting and interrupts
//! (NVMe Base 1.4, 4.1 and 7.2 "Command Processing").

use nvmemu_mem::thread_faults;
use nvmemu_spec::log_page::AsyncEvent;
use nvmemu_spec::{Cid, Cqe, Qid, Sqe, Status};

use crate::ctrl_faults::Injection;
use crate::fetch::RingUnreadable;
use crate::instruments::Stamps;
use crate::io::zeroing::may_need_slot;
use crate::latency::Stage;
use crate::queue::{RingIdx, cq_head_doorbell, sq_tail_doorbell};
use crate::state::CtrlEvent;
use crate::{Controller, InterruptSink};

/// Most admin commands taken per poll.
const ADMIN_BATCH: usize = 16;
/// Most I/O commands taken from one SQ per poll.
pub(crate) const IO_BATCH: usize = 32;

impl Controller {
    /// Process the admin SQ and every I/O SQ once (bounded batches), post completions and
    /// deliver pending asynchronous events, then raise each CQ's vector at most once.
    /// Returns the number of commands completed (0 = idle).
    ///
    /// Client memory can vanish under any access (the client shrank the file behind a DMA
    /// region; `nvmemu_mem` recovers the SIGBUS and counts it per thread): a command during
    /// which that happened completes with Data Transfer Error, and the controller enters
    /// Controller Fatal Status (see `memory_fault`). Checking costs one thread-local load
    /// per command.
    pub fn poll(&mut self, irq: &mut dyn InterruptSink) -> usize {
        if !self.state.is_ready() {
            self.instruments.idle();
            return 0;
        }
        self.instruments.pass_begins();
        // One load and one predictable branch when no bdev in the process has a limit.
        self.qos_on = nvmemu_bdev::any_qos_limit() && crate::qos::refill_all(&mut self.namespaces);
        // The same for latency models (`model.rs`).
        self.model_on =
            nvmemu_bdev::model::any_model() && crate::model::refresh_all(&mut self.namespaces);
        self.faults_on = nvmemu_bdev::fault::any_fault();
        let mark = thread_faults();
        let mut done = self.poll_sq::<true>(Qid::ADMIN, ADMIN_BATCH, mark);
        done += self.deliver_events();
        let mut i = 0;
        while let Some(qid) = self.queues.active_sq(i) {
            done += self.poll_sq::<false>(qid, IO_BATCH, mark);
            i += 1;
        }
        if self.zeroing.busy {
            done += self.advance_zeroing();
        }
        if self.file_on || self.file_io.in_flight() > 0 {
            self.pump_file_io();
        }
        if self.holds_completions() {
            done += self.post_due();
        }
        // Faults outside a command: doorbell shadows, CQ flushes, event delivery.
        if thread_faults() != mark {
            self.memory_fault(None);
        }
        // Every CQE posted inside this pass is counted in `done`, so an idle pass has no
        // interrupt to raise and skips the walk over the CQs (and with IEN=0 nothing is ever
        // pending: `stage` only marks a CQ when its interrupts are enabled).
        if done > 0 {
            self.raise_interrupts(irq);
        } else {
            self.instruments.idle();
        }
        self.instruments.pass_ends();
        done
    }

    fn raise_interrupts(&mut self, irq: &mut dyn InterruptSink) {
        let mut i = 0;
        let mut next = Some(Qid::ADMIN);
        while let Some(qid) = next {
            if let Some(cq) = self.queues.cq_mut(qid)
                && cq.irq_pending
            {
                cq.irq_pending = false;
                irq.raise(cq.iv);
            }
            next = self.queues.active_cq(i);
            i += 1;
        }
    }

    /// A client memory access failed while this controller was being served (`mark` is
    /// `thread_faults()` from before it): Controller Fatal Status (NVMe Base 1.4, 10.5
    /// "Controller Fatal Status Condition"); the host must reset the controller. Other
    /// controllers are not affected. `cid`: the command that was running, if any.
    #[cold]
    pub(crate) fn memory_fault(&mut self, cid: Option<(Qid, Cid)>) {
        if matches!(self.state, crate::CtrlState::Fatal { .. }) {
            return;
        }
        let (qid, cid) = cid.map_or((None, None), |(q, c)| (Some(q.0), Some(c.0)));
        tracing::warn!(target: "guest", ?qid, ?cid, "client memory vanished under an access (file shrunk after DMA_MAP?); controller fatal");
        self.counters.memory_faults += 1;
        self.apply(CtrlEvent::Fault, None);
    }

    #[allow(
        clippy::too_many_lines,
        reason = "the I/O path's fetch-execute-complete loop: one function keeps its batch state \
                  (stamps, slot_busy, counts) in registers, and each gate is a short early break"
    )]
    fn poll_sq<const ADMIN: bool>(&mut self, qid: Qid, batch: usize, mark: u64) -> usize {
        // One copy of the loop per kind of queue: in each, every `qid != Qid::ADMIN` below
        // (and in what it inlines) is known at compile time (about 10 instructions per
        // command).
        let qid = if ADMIN { Qid::ADMIN } else { qid };
        if !ADMIN && qid == Qid::ADMIN {
            return 0;
        }
        if !self.state.is_ready() || self.queues.sq(qid).is_none_or(|sq| sq.ring.paused) {
            return 0;
        }
        let Some(tail) = self.load_sq_tail(qid) else {
            return 0;
        };
        // Nothing queued (most passes of an idle or iodepth-1 poller): no batch to open,
        // prefetch or flush. Every other path that stages a CQE flushes it itself.
        if self.queues.sq_mut(qid).is_none_or(|sq| sq.empty_at(tail)) {
            return 0;
        }
        let mut completed = 0;
        let mut taken = 0;
        // Decided once per batch; with every instrument off, one branch per command.
        let stamps = match self.queues.sq(qid) {
            Some(sq) if sq.head != tail => self
                .instruments
                .batch_begins(qid, sq.distance(sq.head, tail)),
            _ => Stamps::OFF,
        };
        if qid != Qid::ADMIN {
            self.prefetch_batch(qid, tail, batch);
        }
        self.instruments.busy();
        // Kept in a register: only a command set aside in this batch changes it.
        let mut slot_busy = self.zeroing.busy;
        // Whether some gate may leave an I/O command queued (`admits`): its switches change
        // between passes only (`poll`, namespace attach and detach), so one branch per
        // command stands for four.
        let gated =
            qid != Qid::ADMIN && (self.qos_on || self.model_on || self.faults_on || self.file_on);
        for _ in 0..batch {
            let Some(sq) = self.queues.sq(qid) else { break };
            if sq.head == tail {
                break;
            }
            let cqid = sq.cqid;
            if !self.cq_has_room(cqid) {
                break;
            }
            let Some(sqe) = self.fetch_sqe(qid, tail) else {
                break;
            };
            if slot_busy && qid != Qid::ADMIN && may_need_slot(&sqe) {
                // Taken when the command set aside is done (a later pass).
                break;
            }
            if gated && !self.admits(&sqe) {
                break;
            }
            // One load and one predictable branch when no bdev in the process has an
            // injection armed; per command, so an injection armed before the host rings a
            // doorbell hits the commands it rings in, even in a pass that began earlier.
            let fault = if qid != Qid::ADMIN && nvmemu_bdev::fault::any_fault() {
                self.injection(qid, &sqe, tail)
            } else {
                None
            };
            if fault.is_some_and(Injection::leaves_queued) {
                // Left in the SQ: taken again next pass (`fault.rs`), or after a reset.
                break;
            }
            let fetched = self.instruments.fetched(stamps, (qid, sqe.cid()));
            // SQHD in this command's CQE must already count it as consumed.
            if let Some(sq) = self.queues.sq_mut(qid) {
                sq.consume();
            }
            taken += 1;
            let result = if let Some(injection) = fault {
                self.apply_injection(qid, &sqe, injection)
            } else if qid == Qid::ADMIN {
                self.exec_admin(&sqe)
            } else {
                self.exec_io(qid, &sqe)
            };
            // None: held (Asynchronous Event Request, an injected `drop`, `delay` or
            // `reorder`) or set aside (see `io/zeroing.rs`).
            let Some(result) = result else {
                slot_busy = self.zeroing.busy;
                continue;
            };
            let done_at = self.instruments.done(stamps, (qid, sqe.cid()));
            // The SQE read or the command's data transfer touched a vanished page.
            let faulted = thread_faults() != mark;
            let result = if faulted {
                Err(Status::DATA_TRANSFER_ERROR)
            } else {
                result
            };
            // One predictable branch when no namespace has a model.
            if self.model_on
                && qid != Qid::ADMIN
                && self.hold_if_modelled(qid, &sqe, result, (stamps, (fetched, done_at)))
            {
                if faulted {
                    self.memory_fault(Some((qid, sqe.cid())));
                    break;
                }
                continue;
            }
            if self.complete(qid, &sqe, result, stamps) {
                completed += 1;
                self.instruments
                    .posted(stamps, &sqe, result.is_ok(), (fetched, done_at));
            }
            if faulted {
                self.memory_fault(Some((qid, sqe.cid())));
            }
            if !self.state.is_ready() {
                break;
            }
        }
        if let Some(cqid) = self.queues.sq(qid).map(|sq| sq.cqid) {
            self.flush_cq(cqid);
        }
        self.instruments.batch_flushed(stamps, &self.namespaces);
        if qid != Qid::ADMIN && taken > 0 {
            self.publish_event_idx(qid);
        }
        completed
    }

    /// Whether the gates of an I/O queue let `sqe` run in this pass; false leaves it in the
    /// SQ, fetched again in a later pass.
    #[inline(never)]
    fn admits(&mut self, sqe: &Sqe) -> bool {
        if self.qos_on && !crate::qos::admit(&mut self.namespaces, sqe) {
            // Taken once the namespace's tokens come back.
            return false;
        }
        // Taken once held completions are posted (`hold.rs`) or file commands complete
        // (`io/file_io.rs`).
        !((self.model_on || self.faults_on || self.file_on)
            && (self.held.is_full() || self.file_io.is_full()))
    }

    /// The SQE at the head of SQ `qid`, copied out of the ring once (`fetch.rs`); it stays
    /// queued until the caller consumes it. None: the queue is empty up to `tail`, or its ring
    /// is no longer readable, which makes the controller fatal.
    #[inline(always)]
    pub(crate) fn fetch_sqe(&mut self, qid: Qid, tail: RingIdx) -> Option<Sqe> {
        match self.queues.sq_mut(qid)?.fetch(tail) {
            Ok(sqe) => sqe,
            Err(RingUnreadable) => {
                self.apply(CtrlEvent::Fault, None);
                None
            }
        }
    }

    /// Copy the commands queued in `[head, tail)` (at most `batch` from head) that no earlier
    /// call copied, and prefetch the data of the Reads among them.
    fn prefetch_batch(&mut self, qid: Qid, tail: RingIdx, batch: usize) {
        let Some(sq) = self.queues.sq_mut(qid) else {
            return;
        };
        let namespaces = &self.namespaces;
        let max = u32::try_from(batch).unwrap_or(u32::MAX);
        sq.copy_ahead(tail, max, |sqe| crate::io::prefetch_read(namespaces, sqe));
    }

    /// Prefetch the data of the Reads waiting on every I/O SQ, without running anything.
    /// A poller serving several controllers calls this on each one while the controller
    /// before it is polled, so each controller's cache misses overlap with another's work
    /// instead of following it (with a few commands per controller, a batch's own prefetch
    /// is too late to help).
    pub fn prefetch_reads(&mut self) {
        if !self.state.is_ready() {
            return;
        }
        let mark = thread_faults();
        let mut i = 0;
        while let Some(qid) = self.queues.active_sq(i) {
            i += 1;
            if self.queues.sq(qid).is_none_or(|sq| sq.ring.paused) {
                continue;
            }
            if let Some(tail) = self.load_sq_tail(qid) {
                self.prefetch_batch(qid, tail, IO_BATCH);
            }
        }
        if thread_faults() != mark {
            self.memory_fault(None);
        }
    }

    /// Read and validate the SQ tail doorbell (shadow doorbell for I/O queues once Doorbell
    /// Buffer Config is in effect). Acquire pairs with the host's write barrier between
    /// writing SQEs and the doorbell store.
    pub(crate) fn load_sq_tail(&mut self, qid: Qid) -> Option<RingIdx> {
        let raw = self.doorbells.load(qid, sq_tail_doorbell(qid))?;
        let sq = self.queues.sq_mut(qid)?;
        match RingIdx::checked(raw & 0xFFFF, sq.size) {
            Some(t) => {
                sq.bad_doorbell = false;
                Some(t)
            }
            None => {
                if !sq.bad_doorbell {
                    sq.bad_doorbell = true;
                    tracing::debug!(target: "guest", qid = qid.0, raw, "SQ tail doorbell beyond queue size");
                    self.counters.bad_doorbells += 1;
                    self.raise_event(AsyncEvent::INVALID_DOORBELL_VALUE);
                }
                None
            }
        }
    }

    /// Whether CQ `cqid` can take one more entry; re-reads the head doorbell only when the
    /// cached head says full. Inlined into the per-command loop (a call, its frame and
    /// the lookup were about 30 instructions per command); the doorbell read is not.
    #[inline(always)]
    pub(crate) fn cq_has_room(&mut self, cqid: Qid) -> bool {
        match self.queues.cq(cqid) {
            Some(cq) if !cq.ring.paused => !cq.looks_full() || self.cq_head_frees_room(cqid),
            _ => false,
        }
    }

    /// The cached head of CQ `cqid` says full: read its head doorbell (validated) and say
    /// whether the host has freed an entry since.
    #[inline(never)]
    fn cq_head_frees_room(&mut self, cqid: Qid) -> bool {
        let raw = self.doorbells.load(cqid, cq_head_doorbell(cqid));
        let Some(cq) = self.queues.cq_mut(cqid) else {
            return false;
        };
        match raw.and_then(|r| RingIdx::checked(r & 0xFFFF, cq.size)) {
            Some(h) => {
                cq.head = h;
                cq.bad_doorbell = false;
            }
            None if !cq.bad_doorbell => {
                cq.bad_doorbell = true;
                tracing::debug!(target: "guest", qid = cqid.0, ?raw, "CQ head doorbell beyond queue size");
                self.counters.bad_doorbells += 1;
                self.raise_event(AsyncEvent::INVALID_DOORBELL_VALUE);
                return false;
            }
            None => return false,
        }
        !cq.looks_full()
    }

    /// Post the completion of `sqe` (taken from `sqid`; staged, see
    /// `CompletionQueue::stage`); false if nothing was posted. Always inlined with `stage`,
    /// so the CQE goes from registers to the ring: passed in memory, it is read back with
    /// loads that cannot be forwarded from the stores that built it and wait for the
    /// command's whole data copy to leave the store buffer.
    #[inline(always)]
    pub(crate) fn complete(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        result: Result<u32, Status>,
        stamps: Stamps,
    ) -> bool {
        match result {
            // A constant status: its CQE word is not assembled from `Status`'s fields at
            // run time (about 15 instructions per command).
            Ok(dw0) => self.post_status(sqid, sqe, Status::SUCCESS, dw0, stamps),
            Err(status) => self.complete_with_error(sqid, sqe, status, stamps),
        }
    }

    /// [`complete`](Self::complete) of a command that failed (out of line: the I/O path's
    /// commands succeed).
    #[inline(never)]
    fn complete_with_error(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        status: Status,
        stamps: Stamps,
    ) -> bool {
        self.post_status(sqid, sqe, status, 0, stamps)
    }

    /// Count and stage the CQE of `sqe` with `status` and DW0 `dw0`.
    #[inline(always)]
    fn post_status(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        status: Status,
        dw0: u32,
        stamps: Stamps,
    ) -> bool {
        let Some((cqid, sqhd)) = self.account(sqid, sqe, status) else {
            return false;
        };
        self.instruments.posting(stamps, (sqid, sqe.cid()));
        self.stage(cqid, Cqe::new(sqe.cid(), sqid, sqhd, status, dw0, false))
    }

    /// Count the completion of `sqe` from `sqid` with `status` (commands, errors, the Error
    /// Information log); its CQ and the SQ Head to report, None if the SQ is gone.
    #[inline(always)]
    pub(crate) fn account(&mut self, sqid: Qid, sqe: &Sqe, status: Status) -> Option<(Qid, u16)> {
        let sq = self.queues.sq_mut(sqid)?;
        let sqhd = sq.head.as_u16();
        let cqid = sq.cqid;
        sq.stats.commands += 1;
        if sqid == Qid::ADMIN {
            self.counters.admin_commands += 1;
        } else {
            self.counters.io_commands += 1;
        }
        if !status.is_success() {
            sq.stats.errors += 1;
            self.counters.errors += 1;
            if status.sct == nvmemu_spec::Sct::MediaDataIntegrity {
                self.counters.media_errors += 1;
            }
            self.error_log.record(sqid, sqe, status);
        }
        Some((cqid, sqhd))
    }

    /// Stage a CQE on `cqid` (room was checked by the caller); `flush_cq` writes the rest.
    #[inline(always)]
    pub(crate) fn stage(&mut self, cqid: Qid, cqe: Cqe) -> bool {
        let Some(cq) = self.queues.cq_mut(cqid) else {
            return false;
        };
        if cq.stage(cqe) {
            return true;
        }
        self.cq_unwritable(cqid);
        false
    }

    /// Write the entries staged on `cqid` to its ring.
    pub(crate) fn flush_cq(&mut self, cqid: Qid) {
        if self.queues.cq_mut(cqid).is_some_and(|cq| !cq.flush()) {
            self.cq_unwritable(cqid);
        }
    }

    #[cold]
    fn cq_unwritable(&mut self, cqid: Qid) {
        tracing::warn!(target: "guest", cqid = cqid.0, "CQ ring is no longer writable; controller fatal");
        self.apply(CtrlEvent::Fault, None);
    }

    /// Complete a held Asynchronous Event Request on the admin queue.
    pub(crate) fn post_admin(&mut self, cid: Cid, dw0: u32) -> bool {
        let Some(sq) = self.queues.sq(Qid::ADMIN) else {
            return false;
        };
        let sqhd = sq.head.as_u16();
        self.counters.admin_commands += 1;
        // Its backend is the wait for the event that completes it.
        self.instruments.trace_now((Qid::ADMIN, cid), Stage::Done);
        self.instruments.trace_now((Qid::ADMIN, cid), Stage::Post);
        let cqe = Cqe::new(cid, Qid::ADMIN, sqhd, Status::SUCCESS, dw0, false);
        let Some(cq) = self.queues.cq_mut(Qid::ADMIN) else {
            return false;
        };
        if cq.post(cqe) {
            return true;
        }
        self.cq_unwritable(Qid::ADMIN);
        false
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::sync::Arc;

    use crate::CtrlState;
    use crate::test_utils::{TestHost, layout, rw};
    use nvmemu_mem::{DmaBacking, DmaRegion, Iova, MmapRegion, Protection};
    use nvmemu_spec::{DataPtr, Status};

    #[test]
    fn a_command_whose_data_vanished_is_a_data_transfer_error_and_the_controller_fatal() {
        let mut h = TestHost::ready(16);
        // A second DMA region backed by a file the "client" then truncates.
        const IOVA: u64 = 0x9_0000_0000;
        let file = tempfile::tempfile().unwrap();
        file.set_len(8192).unwrap();
        let map = MmapRegion::map_shared(file.as_fd(), 0, 8192, Protection::ReadWrite).unwrap();
        let table = h
            .ctrl
            .mem
            .with_region(DmaRegion {
                iova: Iova(IOVA),
                size: 8192,
                writable: true,
                backing: DmaBacking::Mapped(Arc::new(map)),
            })
            .unwrap();
        h.ctrl.set_guest_memory(Arc::new(table));
        let dptr = DataPtr::Prp {
            prp1: IOVA + 4096,
            prp2: 0,
        };
        assert_eq!(h.cmd(1, rw(0x01, 1, 0, 8, dptr)).status(), Status::SUCCESS);
        file.set_len(0).unwrap();
        let faults = nvmemu_mem::thread_faults();
        h.submit(1, rw(0x01, 1, 0, 8, dptr));
        h.submit(1, rw(0x02, 1, 0, 8, h.prps(layout::DATA, 4096)));
        // The first command faults and ends the pass; the second is never taken.
        assert_eq!(h.poll(), 1);
        assert_eq!(nvmemu_mem::thread_faults(), faults + 1);
        assert_eq!(
            h.reap(1).map(|c| c.status()),
            Some(Status::DATA_TRANSFER_ERROR)
        );
        assert_eq!(h.ctrl.state(), CtrlState::Fatal { ready: true });
        assert_eq!(h.ctrl.stats().memory_faults, 1);
        assert_eq!(h.poll(), 0);
        assert_eq!(h.reap(1), None);
    }

    #[test]
    fn busy_stretches_open_on_work_and_close_on_the_first_idle_poll() {
        let mut h = TestHost::ready(16);
        // Bring-up's admin commands left a stretch open; an idle poll closes it.
        assert_eq!(h.poll(), 0);
        assert_eq!(h.ctrl.instruments.busy_since, 0);
        let before = h.ctrl.instruments.busy_nanos;
        // Two commands taken in separate polls: one stretch, still open after them.
        for slba in [1, 2] {
            h.submit(1, rw(0x02, 1, slba, 1, h.prps(layout::DATA, 512)));
            assert_eq!(h.poll(), 1);
            assert_ne!(h.ctrl.instruments.busy_since, 0);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(
            h.ctrl.instruments.busy_nanos, before,
            "no clock read while busy"
        );
        let open = h.ctrl.instruments.busy_nanos_now() - before;
        assert!(open >= 2_000_000, "the open stretch counts: {open} ns");
        assert_eq!(h.poll(), 0);
        assert_eq!(h.ctrl.instruments.busy_since, 0);
        let closed = h.ctrl.instruments.busy_nanos - before;
        assert!(closed >= open, "{closed} < {open}");
        // Idle polls add nothing.
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(h.poll(), 0);
        assert_eq!(h.ctrl.instruments.busy_nanos - before, closed);
        for q in 1..=2 {
            assert_eq!(
                h.reap(1).map(|c| c.status()),
                Some(Status::SUCCESS),
                "cqe {q}"
            );
        }
    }
}
