// SPDX-License-Identifier: Apache-2.0
//! Create / Delete I/O Completion and Submission Queues (NVMe Base 1.4, 5.3-5.6).

use nvmemu_mem::Access;
use nvmemu_spec::{PAGE_SIZE, Qid, Status};

use crate::Controller;
use crate::instruments::Stamps;
use crate::queue::{
    CQE_SIZE, CompletionQueue, Ring, SQE_SIZE, SubmissionQueue, cq_head_doorbell, sq_tail_doorbell,
};
use crate::regs::Cc;

/// CC.IOSQES / CC.IOCQES this controller supports (64- and 16-byte entries).
const IOSQES: u32 = 6;
const IOCQES: u32 = 4;

impl Controller {
    /// Check an I/O queue id for creation: not 0, within the allocated count, free.
    fn new_qid_ok(&self, qid: Qid, allocated: u32, exists: bool) -> Result<(), Status> {
        if qid == Qid::ADMIN || u32::from(qid.0) > allocated || !self.queues.in_range(qid) || exists
        {
            return Err(Status::INVALID_QID);
        }
        Ok(())
    }

    fn check_size(&self, size: u32) -> Result<(), Status> {
        if size < 2 || size > self.regs.max_queue_entries() {
            return Err(Status::INVALID_QUEUE_SIZE);
        }
        Ok(())
    }

    /// Resolve a new ring: page aligned (PC = 1, so PRP1 is the whole ring) and mapped.
    fn new_ring(&self, base: u64, bytes: u64, access: Access) -> Result<Ring, Status> {
        if !base.is_multiple_of(PAGE_SIZE) {
            return Err(Status::INVALID_FIELD);
        }
        Ring::resolve(&self.mem, base, bytes, access).ok_or_else(|| {
            tracing::debug!(target: "guest", base, bytes, "queue ring is not in mapped memory");
            Status::INVALID_FIELD
        })
    }

    /// A new queue starts empty: its doorbell (and shadow doorbell) reads 0 whatever an
    /// earlier queue with the same id left there. The host cannot ring the new queue before
    /// this command completes, so nothing it writes is lost; without the reset, a stale SQ
    /// tail makes the controller run entries the host never submitted, and a stale CQ head
    /// lets it overwrite completions the host has not consumed.
    fn reset_doorbell(&self, off: u64) {
        self.doorbells.reset(off);
    }

    /// Create I/O Completion Queue.
    pub(crate) fn create_io_cq(
        &mut self,
        qid: Qid,
        size: u32,
        pc: bool,
        ien: bool,
        iv: u16,
        base: u64,
    ) -> Result<u32, Status> {
        self.new_qid_ok(qid, self.features.queues.cq, self.queues.cq(qid).is_some())?;
        self.check_size(size)?;
        if !pc {
            // CAP.CQR = 1: queues must be physically contiguous.
            return Err(Status::INVALID_FIELD);
        }
        if iv >= self.config.msix_vectors {
            return Err(Status::INVALID_INTERRUPT_VECTOR);
        }
        if Cc::decode(self.regs.cc()).iocqes != IOCQES {
            return Err(Status::INVALID_FIELD);
        }
        let ring = self.new_ring(base, u64::from(size) * CQE_SIZE, Access::Write)?;
        if !ring.clear() {
            return Err(Status::DATA_TRANSFER_ERROR);
        }
        self.queues
            .insert_cq(qid, CompletionQueue::new(size, ien, iv, ring));
        self.reset_doorbell(cq_head_doorbell(qid));
        if let Some(db) = &self.doorbells.shadow {
            db.init_cq(qid);
        }
        Ok(0)
    }

    /// Create I/O Submission Queue.
    pub(crate) fn create_io_sq(
        &mut self,
        qid: Qid,
        size: u32,
        pc: bool,
        cqid: Qid,
        base: u64,
    ) -> Result<u32, Status> {
        self.new_qid_ok(qid, self.features.queues.sq, self.queues.sq(qid).is_some())?;
        self.check_size(size)?;
        if !pc {
            return Err(Status::INVALID_FIELD);
        }
        // As SPDK's target and compliance suite have it: an id that can never name an I/O
        // CQ (0, or beyond the allocated count) is an invalid identifier; one that could
        // but has no queue is an invalid CQ.
        if cqid == Qid::ADMIN || u32::from(cqid.0) > self.features.queues.cq {
            return Err(Status::INVALID_QID);
        }
        if self.queues.cq(cqid).is_none() {
            return Err(Status::CQ_INVALID);
        }
        if Cc::decode(self.regs.cc()).iosqes != IOSQES {
            return Err(Status::INVALID_FIELD);
        }
        let ring = self.new_ring(base, u64::from(size) * SQE_SIZE, Access::Read)?;
        let sq = SubmissionQueue::new(size, cqid, ring);
        self.queues.insert_sq(qid, sq);
        self.counters.io_qpairs_created += 1;
        self.reset_doorbell(sq_tail_doorbell(qid));
        if let Some(db) = &self.doorbells.shadow {
            db.init_sq(qid);
        }
        Ok(0)
    }

    /// Delete I/O Submission Queue. Commands run within the poll that takes them, except a
    /// file namespace's, which are waited for; those the host queued but the controller
    /// has not fetched yet complete with Command Aborted due to SQ Deletion, and CQEs held
    /// (by a model, or of file commands) are posted, before the queue goes (NVMe Base 1.4,
    /// 5.6).
    pub(crate) fn delete_io_sq(&mut self, qid: Qid) -> Result<u32, Status> {
        if qid == Qid::ADMIN || self.queues.sq(qid).is_none() {
            return Err(Status::INVALID_QID);
        }
        self.abort_queued(qid);
        self.abort_zeroing_on(qid);
        self.drain_file_io();
        self.abort_waiting_file_cmd(qid);
        self.release_held_on(qid);
        self.queues.remove_sq(qid).ok_or(Status::INVALID_QID)?;
        Ok(0)
    }

    /// Complete every command queued on SQ `qid` with Command Aborted due to SQ Deletion,
    /// as far as its CQ has room (a host that stopped reaping gets what fits).
    fn abort_queued(&mut self, qid: Qid) {
        if self.queues.sq(qid).is_none_or(|sq| sq.ring.paused) {
            return;
        }
        let Some(tail) = self.load_sq_tail(qid) else {
            return;
        };
        while let Some(sq) = self.queues.sq(qid)
            && sq.head != tail
            && self.cq_has_room(sq.cqid)
        {
            let Some(sqe) = self.fetch_sqe(qid, tail) else {
                break;
            };
            if let Some(sq) = self.queues.sq_mut(qid) {
                sq.consume();
            }
            self.complete(qid, &sqe, Err(Status::ABORTED_SQ_DELETION), Stamps::OFF);
        }
        if let Some(cqid) = self.queues.sq(qid).map(|sq| sq.cqid) {
            self.flush_cq(cqid);
        }
    }

    /// Delete I/O Completion Queue; refused while an SQ still posts to it.
    pub(crate) fn delete_io_cq(&mut self, qid: Qid) -> Result<u32, Status> {
        if qid == Qid::ADMIN {
            return Err(Status::INVALID_QID);
        }
        let cq = self.queues.cq(qid).ok_or(Status::INVALID_QID)?;
        if cq.sq_count > 0 {
            return Err(Status::INVALID_QUEUE_DELETION);
        }
        self.queues.remove_cq(qid);
        Ok(0)
    }
}
