// SPDX-License-Identifier: Apache-2.0
//! Create / Delete I/O Completion and Submission Queues (NVMe Base 1.4, 5.3-5.6).

use nvmemu_mem::Access;
use nvmemu_spec::{PAGE_SIZE, Qid, Status};

use crate::Controller;
use crate::queue::{CQE_SIZE, CompletionQueue, Ring, SQE_SIZE, SubmissionQueue};
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
        if let Some(db) = &self.dbbuf {
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
        if cqid == Qid::ADMIN || self.queues.cq(cqid).is_none() {
            return Err(Status::CQ_INVALID);
        }
        if Cc::decode(self.regs.cc()).iosqes != IOSQES {
            return Err(Status::INVALID_FIELD);
        }
        let ring = self.new_ring(base, u64::from(size) * SQE_SIZE, Access::Read)?;
        let sq = SubmissionQueue::new(size, cqid, ring);
        self.queues.insert_sq(qid, sq);
        if let Some(db) = &self.dbbuf {
            db.init_sq(qid);
        }
        Ok(0)
    }

    /// Delete I/O Submission Queue. Commands complete within the poll that takes them, so
    /// none is outstanding to be aborted.
    pub(crate) fn delete_io_sq(&mut self, qid: Qid) -> Result<u32, Status> {
        if qid == Qid::ADMIN {
            return Err(Status::INVALID_QID);
        }
        self.queues.remove_sq(qid).ok_or(Status::INVALID_QID)?;
        Ok(0)
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
