// SPDX-License-Identifier: Apache-2.0
//! Fabrics commands on a connection: Connect (a new controller for an admin queue, an I/O
//! queue of an existing one), Property Get/Set of the controller registers, Disconnect.

use std::time::Instant;

use nvmemu_spec::{Qid, Sqe, Status};

use crate::conn::{Conn, ConnState, Outcome, QueueIo};
use crate::controllers::FabricsCtrl;
use crate::discovery::{DISCOVERY_NQN, Discovery};
use crate::fabrics::{
    CONNECT_DATA_LEN, ConnectData, DYNAMIC_CNTLID, FabricsCommand, connect_offsets,
    connect_sqe_offsets, connect_status, invalid_param_dw0,
};
use crate::group::PollGroup;
use crate::queue::QueueMem;

/// CC, the one register a host sets (NVMe over Fabrics 1.1, 3.5).
const CC: u32 = 0x14;

/// The controller ID of every discovery controller (they share no state).
const DISCOVERY_CNTLID: u16 = 1;

/// A Connect refused: the status and DW0.
type Refusal = (Status, u32);

fn bad_sqe_field(offset: u16) -> Refusal {
    (
        connect_status::INVALID_PARAMETERS,
        invalid_param_dw0(false, offset),
    )
}

fn bad_data_field(offset: u16) -> Refusal {
    (
        connect_status::INVALID_PARAMETERS,
        invalid_param_dw0(true, offset),
    )
}

impl PollGroup {
    pub(crate) fn fabrics(
        &mut self,
        conn: &mut Conn,
        sqe: &Sqe,
        cmd: FabricsCommand,
        data: &[u8],
        now: Instant,
    ) -> Outcome {
        let cccid = sqe.cid().0;
        let queue = match &conn.state {
            ConnState::Queue { cntlid, q } => Some((*cntlid, q.mem.qid)),
            _ => None,
        };
        if let Some((cntlid, _)) = queue
            && let Some(c) = self.ctrls.get_mut(&cntlid)
        {
            c.touch(now);
        }
        if let ConnState::Discovery(disc) = &mut conn.state {
            let (status, v) = match cmd {
                FabricsCommand::PropertyGet { offset, .. } => match disc.property_get(offset) {
                    Ok(v) => (Status::SUCCESS, v),
                    Err(s) => (s, 0),
                },
                FabricsCommand::PropertySet { offset, value, .. } => {
                    (disc.property_set(offset, value), 0)
                }
                FabricsCommand::Disconnect => {
                    conn.respond_status(cccid, Status::SUCCESS, 0);
                    conn.state_closing(now);
                    return Outcome::Done;
                }
                _ => (Status::COMMAND_SEQUENCE_ERROR, 0),
            };
            conn.respond_status_dw1(cccid, status, low(v), low(v >> 32));
            return Outcome::Done;
        }
        let (status, dw0, dw1) = match (cmd, queue) {
            (
                FabricsCommand::Connect {
                    recfmt,
                    qid,
                    sqsize,
                    kato,
                },
                None,
            ) => {
                if let Some(to) = self.owner_elsewhere(qid, data) {
                    return Outcome::HandOver(to);
                }
                let sqfc_off = sqe.cdw11 & (1 << 18) != 0;
                match self.connect(conn, recfmt, qid, sqsize, kato, sqfc_off, data, now) {
                    Ok(cntlid) => {
                        conn.size_for_queue();
                        if conn.qpair_admin.is_none() {
                            conn.qpair_admin = Some(qid == 0);
                            self.counts.qpair_connected(qid == 0);
                        }
                        (Status::SUCCESS, u32::from(cntlid), 0)
                    }
                    Err((status, dw0)) => {
                        tracing::debug!(target: "guest", peer = %conn.peer, ?status, dw0, "Connect refused");
                        (status, dw0, 0)
                    }
                }
            }
            (FabricsCommand::PropertyGet { offset, wide }, Some((cntlid, Qid::ADMIN))) => {
                match self.property_get(cntlid, offset, wide) {
                    Ok(v) => (Status::SUCCESS, low(v), low(v >> 32)),
                    Err(s) => (s, 0, 0),
                }
            }
            (
                FabricsCommand::PropertySet {
                    offset,
                    wide,
                    value,
                },
                Some((cntlid, Qid::ADMIN)),
            ) => (self.property_set(cntlid, offset, wide, value), 0, 0),
            (FabricsCommand::Disconnect, Some(_)) => {
                conn.respond_status(cccid, Status::SUCCESS, 0);
                conn.state_closing(now);
                return Outcome::Done;
            }
            (FabricsCommand::Unknown(fctype), _) => {
                tracing::debug!(target: "guest", fctype, "unsupported Fabrics command type");
                (Status::INVALID_OPCODE, 0, 0)
            }
            (FabricsCommand::PropertyGet { .. } | FabricsCommand::PropertySet { .. }, Some(_)) => {
                (Status::INVALID_FIELD, 0, 0)
            }
            _ => (Status::COMMAND_SEQUENCE_ERROR, 0, 0),
        };
        conn.respond_status_dw1(cccid, status, dw0, dw1);
        Outcome::Done
    }

    #[allow(clippy::too_many_arguments)]
    fn connect(
        &mut self,
        conn: &mut Conn,
        recfmt: u16,
        qid: u16,
        sqsize: u16,
        kato: u32,
        sqfc_off: bool,
        data: &[u8],
        now: Instant,
    ) -> Result<u16, Refusal> {
        if recfmt != 0 {
            return Err((connect_status::INCOMPATIBLE_FORMAT, 0));
        }
        if data.len() != CONNECT_DATA_LEN {
            // The data must come in the capsule (TCP Transport 3.3.1: the admin and I/O
            // queues take at least 8 KiB and the advertised IOCCSZ of in-capsule data).
            return Err((Status::DATA_SGL_LENGTH_INVALID, 0));
        }
        let d = ConnectData::parse(data).map_err(|e| bad_data_field(e.offset))?;
        if d.subnqn == DISCOVERY_NQN {
            if qid != 0 {
                return Err(bad_sqe_field(connect_sqe_offsets::QID));
            }
            conn.state = ConnState::Discovery(Box::new(Discovery::new(d.hostnqn)));
            return Ok(DISCOVERY_CNTLID);
        }
        let sub = self
            .subsystems
            .lock()
            .get(&d.subnqn)
            .cloned()
            .ok_or_else(|| bad_data_field(connect_offsets::SUBNQN))?;
        if !sub.admits(&d.hostnqn) {
            tracing::info!(subnqn = %d.subnqn, hostnqn = %d.hostnqn, "Connect from a host not on the subsystem's allow list");
            return Err((connect_status::INVALID_HOST, 0));
        }
        let entries = u32::from(sqsize) + 1;
        let slot_bytes = self.opts.slot_bytes();
        let c2h_success = sqfc_off || self.opts.c2h_success;
        if qid == 0 {
            if d.cntlid != DYNAMIC_CNTLID {
                return Err(bad_data_field(connect_offsets::CNTLID));
            }
            if sqsize == 0 || entries > u32::from(self.opts.max_aq_depth) {
                return Err(bad_sqe_field(connect_sqe_offsets::SQSIZE));
            }
            let cntlid = self
                .groups
                .claim_cntlid(self.index)
                .ok_or((connect_status::CONTROLLER_BUSY, 0))?;
            let made = admin_controller(&d.subnqn, &sub, &self.opts, cntlid, sqsize);
            let Ok((mut c, mem)) = made else {
                self.groups.release_cntlid(cntlid);
                return Err((Status::INTERNAL_ERROR, 0));
            };
            c.ctrl.set_keep_alive_timeout(kato);
            c.hostnqn = d.hostnqn;
            c.hostid = d.hostid;
            c.peer = Some(conn.peer);
            c.touch(now);
            self.time_new_controller(&mut c);
            self.ctrls.insert(cntlid, c);
            tracing::info!(cntlid, subnqn = %d.subnqn, peer = %conn.peer, "NVMe/TCP controller created");
            conn.state = ConnState::Queue {
                cntlid,
                q: Box::new(QueueIo::new(mem, c2h_success)),
            };
            return Ok(cntlid);
        }
        let c = self
            .ctrls
            .get_mut(&d.cntlid)
            .filter(|c| c.subnqn == d.subnqn && c.hostnqn == d.hostnqn && c.hostid == d.hostid)
            .ok_or_else(|| bad_data_field(connect_offsets::CNTLID))?;
        if qid > self.opts.max_io_qpairs {
            return Err(bad_sqe_field(connect_sqe_offsets::QID));
        }
        if sqsize == 0 || entries > u32::from(self.opts.max_queue_depth) {
            return Err(bad_sqe_field(connect_sqe_offsets::SQSIZE));
        }
        let internal = (Status::INTERNAL_ERROR, 0);
        let mem = QueueMem::new(Qid(qid), entries, slot_bytes).map_err(|_| internal)?;
        c.map(mem.dma_region()).map_err(|_| internal)?;
        if let Err(status) =
            c.ctrl
                .connect_io_queue(Qid(qid), entries, mem.sq_iova(), mem.cq_iova())
        {
            tracing::debug!(target: "guest", qid, ?status, "I/O queue refused");
            let (iova, len) = mem.span();
            c.unmap(iova, len);
            return Err(bad_sqe_field(connect_sqe_offsets::QID));
        }
        // Reads are sent from the namespace's memory, unless the data is digested (the
        // digest is computed over a copy).
        if !conn.neg.ddgst {
            c.ctrl.enable_reads_in_place(Qid(qid));
        }
        c.touch(now);
        conn.state = ConnState::Queue {
            cntlid: d.cntlid,
            q: Box::new(QueueIo::new(mem, c2h_success)),
        };
        Ok(d.cntlid)
    }

    fn property_get(&mut self, cntlid: u16, offset: u32, wide: bool) -> Result<u64, Status> {
        let c = self.ctrls.get_mut(&cntlid).ok_or(Status::INTERNAL_ERROR)?;
        if offset >= 0x1000 {
            return Err(Status::INVALID_FIELD);
        }
        let mut b = [0u8; 8];
        let len = if wide { 8 } else { 4 };
        c.ctrl
            .mmio_read(u64::from(offset), &mut b[..len])
            .map_err(|_| Status::INVALID_FIELD)?;
        Ok(u64::from_le_bytes(b))
    }

    fn property_set(&mut self, cntlid: u16, offset: u32, wide: bool, value: u64) -> Status {
        let Some(c) = self.ctrls.get_mut(&cntlid) else {
            return Status::INTERNAL_ERROR;
        };
        if offset != CC || wide {
            return Status::INVALID_FIELD;
        }
        let v = low(value).to_le_bytes();
        match c.ctrl.mmio_write(u64::from(offset), &v) {
            Ok(()) => Status::SUCCESS,
            Err(_) => Status::INVALID_FIELD,
        }
    }
}

/// A new controller `cntlid` of `sub`, its admin queue of `sqsize` + 1 entries set up
/// (AQA, ASQ, ACQ) in the queue memory returned with it.
fn admin_controller(
    nqn: &str,
    sub: &crate::config::TcpSubsystem,
    opts: &crate::config::TcpOptions,
    cntlid: u16,
    sqsize: u16,
) -> Result<(FabricsCtrl, QueueMem), ()> {
    let entries = u32::from(sqsize) + 1;
    let mut c = FabricsCtrl::new(nqn, sub, opts, cntlid).map_err(drop)?;
    let mem = QueueMem::new(Qid::ADMIN, entries, opts.slot_bytes()).map_err(drop)?;
    c.map(mem.dma_region()).map_err(drop)?;
    let aqa = u32::from(sqsize) | (u32::from(sqsize) << 16);
    let regs = [
        (0x24u64, u64::from(aqa), 4usize),
        (0x28, mem.sq_iova(), 8),
        (0x30, mem.cq_iova(), 8),
    ];
    for (off, v, len) in regs {
        c.ctrl
            .mmio_write(off, &v.to_le_bytes()[..len])
            .map_err(drop)?;
    }
    Ok((c, mem))
}

/// The low 32 bits.
fn low(v: u64) -> u32 {
    u32::try_from(v & 0xFFFF_FFFF).unwrap_or(0)
}
