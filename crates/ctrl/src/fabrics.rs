// SPDX-License-Identifier: Apache-2.0
//! What a fabrics transport needs of the controller: the NVMe over Fabrics fields of
//! Identify Controller, and I/O queues made by a Connect command instead of Create I/O
//! CQ/SQ (NVMe over Fabrics 1.1, 3.3: a fabrics host never sends the queue commands).

use nvmemu_spec::identify::{IdentifyController, ctrl_bits};
use nvmemu_spec::{Qid, Status};

use crate::Controller;

/// Identify Controller fields of a fabrics controller (NVMe Base 2.0, Figure 275, bytes
/// 1792-2047, and CNTRLTYPE, KAS, SGLS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FabricsIdentity {
    /// I/O Queue Command Capsule Supported Size, in 16-byte units (SQE plus in-capsule data).
    pub ioccsz: u32,
    /// I/O Queue Response Capsule Supported Size, in 16-byte units.
    pub iorcsz: u32,
    /// Keep Alive Support: granularity of the keep alive timer in 100 ms units.
    pub kas: u16,
}

impl FabricsIdentity {
    /// Write the fields into `id`. ICDOFF stays 0 (in-capsule data follows the SQE at
    /// once; Linux refuses any other value), MSDBD is 1 (one SGL descriptor per command),
    /// FCATT 0 (dynamic controllers). Linux's `nvme_init_identify` also checks CNTLID
    /// against Connect's, KAS non-zero, IOCCSZ >= 4, IORCSZ >= 1 and MAXCMD non-zero.
    pub(crate) fn fill(&self, id: &mut IdentifyController) {
        id.cntrltype = ctrl_bits::CNTRLTYPE_IO;
        id.kas = self.kas;
        // The transport restarts the Keep Alive Timer on every command it takes, so say
        // so: Linux then skips its Keep Alive while I/O completes.
        if self.kas != 0 {
            id.ctratt |= ctrl_bits::CTRATT_TBKAS;
        }
        id.sgls |= ctrl_bits::SGLS_KEYED | ctrl_bits::SGLS_OFFSET;
        let fields = [
            (0usize, self.ioccsz.to_le_bytes()),
            (4, self.iorcsz.to_le_bytes()),
        ];
        for (at, bytes) in fields {
            if let Some(dst) = id.nvmeof.get_mut(at..at + 4) {
                dst.copy_from_slice(&bytes);
            }
        }
        // MSDBD, byte 1803.
        if let Some(b) = id.nvmeof.get_mut(11) {
            *b = 1;
        }
        // OFCS, bytes 1804-1805: Disconnect of a single I/O queue is supported.
        if let Some(b) = id.nvmeof.get_mut(12) {
            *b = ctrl_bits::OFCS_DISCONNECT;
        }
    }
}

impl Controller {
    /// A fabrics I/O queue pair `qid` with `size` entries: CQ `qid` (no interrupts) and SQ
    /// `qid` posting to it, their rings at `sq_base` and `cq_base` (page aligned, mapped).
    /// The same checks as Create I/O CQ/SQ apply: the controller is enabled, `qid` lies
    /// within the Number of Queues the host set and is free, `size` is within CAP.MQES.
    pub fn connect_io_queue(
        &mut self,
        qid: Qid,
        size: u32,
        sq_base: u64,
        cq_base: u64,
    ) -> Result<(), Status> {
        if !self.state.is_ready() {
            return Err(Status::COMMAND_SEQUENCE_ERROR);
        }
        self.create_io_cq(qid, size, true, false, 0, cq_base)?;
        if let Err(status) = self.create_io_sq(qid, size, true, qid, sq_base) {
            let _ = self.delete_io_cq(qid);
            return Err(status);
        }
        Ok(())
    }

    /// Remove I/O queue pair `qid` (the transport's connection for it went away); commands
    /// still queued complete as aborted into a CQ nobody reads. A missing queue is no error.
    pub fn disconnect_io_queue(&mut self, qid: Qid) {
        if qid == Qid::ADMIN {
            return;
        }
        if self.queues.sq(qid).is_some() {
            let _ = self.delete_io_sq(qid);
        }
        if self.queues.cq(qid).is_some() {
            let _ = self.delete_io_cq(qid);
        }
    }
}
