// SPDX-License-Identifier: Apache-2.0
//! The admin command set (NVMe Base 1.4, 5): routing only; each family has its own file.

pub(crate) mod abort;
pub(crate) mod aer;
pub(crate) mod dbbuf;
pub(crate) mod features;
pub(crate) mod identify;
pub(crate) mod keep_alive;
pub(crate) mod limits;
pub(crate) mod log_page;
pub(crate) mod queue_mgmt;
pub(crate) mod resv_log;

use nvmemu_spec::{AdminCommand, Sqe, Status};

use crate::Controller;

impl Controller {
    /// Execute one admin command. `None`: the command is held and completes later
    /// (Asynchronous Event Request). Out of line: inlined, the whole admin command set
    /// sat inside `poll_sq`, the I/O queues' per-command loop.
    #[inline(never)]
    pub(crate) fn exec_admin(&mut self, sqe: &Sqe) -> Option<Result<u32, Status>> {
        let cmd = match AdminCommand::decode(sqe) {
            Ok(cmd) => cmd,
            Err(status) => return Some(Err(status)),
        };
        Some(match cmd {
            AdminCommand::AsyncEventRequest => return self.async_event_request(sqe.cid()),
            AdminCommand::Identify {
                cns,
                cntid,
                nsid,
                dptr,
            } => self.identify(cns, cntid, nsid, &dptr),
            AdminCommand::GetLogPage {
                lid,
                lsp,
                rae,
                dwords,
                offset,
                nsid,
                dptr,
            } => self.get_log_page(lid, lsp, rae, dwords, offset, nsid, &dptr),
            AdminCommand::SetFeatures {
                fid,
                save,
                nsid,
                value,
                dptr,
            } => self.set_features(fid, save, nsid, value, &dptr),
            AdminCommand::GetFeatures {
                fid,
                sel,
                nsid,
                value,
                dptr,
            } => self.get_features(fid, sel, nsid, value, &dptr),
            AdminCommand::CreateIoCq {
                qid,
                size,
                pc,
                ien,
                iv,
                base,
            } => self.create_io_cq(qid, size, pc, ien, iv, base),
            AdminCommand::CreateIoSq {
                qid,
                size,
                pc,
                prio: _,
                cqid,
                base,
            } => self.create_io_sq(qid, size, pc, cqid, base),
            AdminCommand::DeleteIoSq { qid } => self.delete_io_sq(qid),
            AdminCommand::DeleteIoCq { qid } => self.delete_io_cq(qid),
            AdminCommand::Abort { sqid, cid } => {
                if self.abort_held(sqid, cid) {
                    return Some(Ok(0));
                }
                abort::abort(sqid, cid)
            }
            // A fabrics transport keeps the timer (KAS set): any command restarts it, so
            // Keep Alive itself only has to succeed.
            AdminCommand::KeepAlive if self.config.fabrics.is_some_and(|f| f.kas != 0) => Ok(0),
            // KAS is 0: no keep alive timer (as QEMU's emulated NVMe; PCIe hosts never ask
            // for one), so the command is not supported and the Commands Supported log
            // does not list it.
            AdminCommand::KeepAlive => {
                tracing::debug!(target: "guest", "Keep Alive without keep alive support");
                Err(Status::INVALID_OPCODE)
            }
            AdminCommand::DoorbellBufferConfig { shadow, event_idx } => {
                self.doorbell_buffer_config(sqe, shadow, event_idx)
            }
            AdminCommand::Unknown(opcode) => {
                tracing::debug!(target: "guest", opcode, "unsupported admin opcode");
                Err(Status::INVALID_OPCODE)
            }
        })
    }
}
