// SPDX-License-Identifier: Apache-2.0
//! One TCP connection: its buffers, its place in the NVMe/TCP life cycle, and, once
//! connected, its queue pair's command slots. Parsing and answering live here, the
//! completions on the way out in `reap.rs`; what needs the poll group (Connect,
//! controllers) is in `group/`.

use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use nvmemu_spec::{Cqe, Sqe, Status};
use zerocopy::FromZeros;

use crate::buffers::ByteBuf;
use crate::pdu::{self, Negotiated, PduError};
use crate::queue::QueueMem;
use crate::sendq::SendQueue;
use crate::transfer::{Transfer, rw_bytes, transfer};

mod reap;

/// Where a connection is.
#[derive(Debug)]
pub(crate) enum ConnState {
    /// Accepted; ICReq must arrive by `deadline`.
    AwaitIcReq { deadline: Instant },
    /// ICResp sent; the first capsule must be a Connect.
    AwaitConnect,
    /// Connected to controller `cntlid` as queue `q.mem.qid`.
    Queue { cntlid: u16, q: Box<QueueIo> },
    /// Connected to the discovery controller.
    Discovery(Box<crate::discovery::Discovery>),
    /// Ending: what is queued for sending goes out until `deadline`, nothing is read. A
    /// connected queue stays until then, to be torn down with the connection.
    Closing {
        deadline: Instant,
        queue: Option<(u16, Box<QueueIo>)>,
    },
}

/// A command slot: its index is the CID the controller sees and the R2T transfer tag.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Slot {
    Free,
    /// Waiting for H2CData: `got` of `len` bytes are in the slot buffer.
    Receiving {
        sqe: Sqe,
        len: u32,
        got: u32,
    },
    /// On the SQ; `read` data goes back in C2HData before the response.
    Submitted {
        cccid: u16,
        len: u32,
        read: bool,
    },
    /// Answered; its read data is spliced into the send queue, not all sent yet.
    Sending,
}

/// A connected queue pair.
#[derive(Debug)]
pub(crate) struct QueueIo {
    pub(crate) mem: QueueMem,
    slots: Box<[Slot]>,
    free: Vec<u16>,
    /// SQHD of the last completion, for responses made here.
    sq_head: u16,
    /// A successful read's C2HData carries SUCCESS in place of a response capsule.
    c2h_success: bool,
    /// Read data waiting to go out from the slots, between the send buffer's PDUs.
    pub(crate) sendq: SendQueue,
}

impl QueueIo {
    pub(crate) fn new(mem: QueueMem, c2h_success: bool) -> QueueIo {
        let n = u16::try_from(mem.entries).unwrap_or(u16::MAX);
        QueueIo {
            mem,
            slots: vec![Slot::Free; usize::from(n)].into_boxed_slice(),
            free: (0..n).rev().collect(),
            sq_head: 0,
            c2h_success,
            sendq: SendQueue::with_capacity(usize::from(n)),
        }
    }

    fn take_slot(&mut self, slot: Slot) -> Option<u16> {
        let i = self.free.pop()?;
        if let Some(s) = self.slots.get_mut(usize::from(i)) {
            *s = slot;
        }
        Some(i)
    }

    /// Commands taken and not yet answered.
    pub(crate) fn outstanding(&self) -> bool {
        self.free.len() < self.slots.len()
    }

    fn release(&mut self, i: u16) {
        release_slot(&mut self.slots, &mut self.free, i);
    }
}

fn release_slot(slots: &mut [Slot], free: &mut Vec<u16>, i: u16) {
    if let Some(s) = slots.get_mut(usize::from(i))
        && !matches!(s, Slot::Free)
    {
        *s = Slot::Free;
        free.push(i);
    }
}

/// One accepted connection.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) sock: TcpStream,
    pub(crate) peer: SocketAddr,
    pub(crate) rx: ByteBuf,
    pub(crate) tx: ByteBuf,
    pub(crate) neg: Negotiated,
    pub(crate) state: ConnState,
    /// Since when a partial PDU sits in `rx` or unsent bytes in `tx` without progress.
    pub(crate) stalled_since: Option<Instant>,
    /// The qpair a Connect made of this connection, for the poll group's live counts:
    /// Some(true) an admin queue, Some(false) an I/O queue.
    pub(crate) qpair_admin: Option<bool>,
    /// The socket may have bytes (or end of stream) to read: set by a readiness event,
    /// cleared when a read comes back short.
    pub(crate) readable: bool,
    /// The socket may take bytes: set by a readiness event, cleared when a write stops short.
    pub(crate) writable: bool,
    /// On the poll group's list of connections to visit next pass.
    pub(crate) listed: bool,
}

/// How the handling of one command capsule ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Answered or queued; nothing more to do.
    Done,
    /// The connection must end with a termination request.
    Fatal(PduError),
    /// A Connect for a controller of that poll group: the connection moves there, the
    /// Connect unread (`handover.rs`).
    HandOver(usize),
}

/// Admin opcodes a fabrics host may not send: queues come from Connect, and Doorbell
/// Buffer Config names host memory (NVMe over Fabrics 1.1, 3.3).
fn forbidden_admin(opcode: u8) -> bool {
    matches!(opcode, 0x00 | 0x01 | 0x04 | 0x05 | 0x7C)
}

impl Conn {
    /// A new connection: buffers for ICReq and its answer only (ICReq brings the full
    /// ones), so connections that never get that far cost little.
    pub(crate) fn new(
        sock: TcpStream,
        peer: SocketAddr,
        neg: Negotiated,
        deadline: Instant,
    ) -> Conn {
        Conn {
            sock,
            peer,
            rx: ByteBuf::new(pdu::IC_HLEN),
            tx: ByteBuf::new(pdu::IC_HLEN + 2 * pdu::MAX_SMALL_PDU),
            neg,
            state: ConnState::AwaitIcReq { deadline },
            stalled_since: None,
            qpair_admin: None,
            readable: true,
            writable: true,
            listed: false,
        }
    }

    /// Whether the next pass has something to do here without a new readiness event:
    /// bytes to read or send, commands in flight, or an ending to finish. Otherwise only
    /// an event (or the timer sweep) brings the connection back.
    pub(crate) fn busy(&self) -> bool {
        self.readable
            || self.unsent()
            || self.whole_pdu_waiting()
            || match &self.state {
                ConnState::Queue { q, .. } => q.outstanding(),
                ConnState::Closing { .. } => true,
                _ => false,
            }
    }

    /// Bytes queued for sending: in the send buffer, or read data in the command slots.
    pub(crate) fn unsent(&self) -> bool {
        !self.tx.is_empty() || self.queue_io().is_some_and(|q| !q.sendq.is_empty())
    }

    fn queue_io(&self) -> Option<&QueueIo> {
        match &self.state {
            ConnState::Queue { q, .. }
            | ConnState::Closing {
                queue: Some((_, q)),
                ..
            } => Some(q),
            _ => None,
        }
    }

    /// Write what the socket takes, read data straight from its slots; returns the bytes
    /// written. `calls` counts the system calls made; the records of reads sent in place
    /// go back to `ctrl`, the queue's controller (None: it is gone, they are dropped).
    pub(crate) fn flush(
        &mut self,
        calls: &mut u64,
        mut ctrl: Option<&mut nvmemu_ctrl::Controller>,
    ) -> std::io::Result<usize> {
        let q = match &mut self.state {
            ConnState::Queue { q, .. }
            | ConnState::Closing {
                queue: Some((_, q)),
                ..
            } if !q.sendq.is_empty() => q,
            _ => return self.tx.drain_to(&mut self.sock, calls),
        };
        let QueueIo {
            mem,
            slots,
            free,
            sendq,
            ..
        } = &mut **q;
        let fd = std::os::fd::AsFd::as_fd(&self.sock);
        let qid = mem.qid;
        sendq.drain(
            &mut self.tx,
            Some(mem.region()),
            |pieces| {
                *calls += 1;
                pieces.send(fd)
            },
            |slot, record| {
                if let (Some(c), Some(r)) = (ctrl.as_deref_mut(), record) {
                    c.give_back_read_in_place(qid, nvmemu_spec::Cid(slot), r);
                }
                release_slot(slots, free, slot);
            },
        )
    }

    /// `rx` holds a whole PDU (by its header's PLEN) that waits for send room.
    fn whole_pdu_waiting(&self) -> bool {
        let d = self.rx.data();
        d.get(4..pdu::CH_LEN)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .is_some_and(|b| u32::from_le_bytes(b) as usize <= d.len())
    }

    /// Queue a response capsule; false when the send buffer has no room.
    pub(crate) fn respond(&mut self, cqe: &Cqe) -> bool {
        let n = pdu::C2hLayout::new(pdu::RESP_HLEN, 0, &self.neg).plen;
        let neg = self.neg;
        match self.tx.reserve(n) {
            Some(out) => {
                pdu::encode_resp(out, cqe, &neg);
                self.tx.commit(n);
                true
            }
            None => false,
        }
    }

    /// Answer host command `cccid` with `status` and `dw0`.
    pub(crate) fn respond_status(&mut self, cccid: u16, status: Status, dw0: u32) {
        self.respond_status_dw1(cccid, status, dw0, 0);
    }

    /// Stop reading; what is queued goes out (within a second), then the connection ends.
    pub(crate) fn state_closing(&mut self, now: Instant) {
        self.close_after(now + std::time::Duration::from_secs(1));
    }

    fn close_after(&mut self, deadline: Instant) {
        let old = std::mem::replace(
            &mut self.state,
            ConnState::Closing {
                deadline,
                queue: None,
            },
        );
        let queue = match old {
            ConnState::Queue { cntlid, q } => Some((cntlid, q)),
            ConnState::Closing { queue, .. } => queue,
            _ => None,
        };
        self.state = ConnState::Closing { deadline, queue };
    }

    /// The controller and queue this connection is (or was, while closing) connected to.
    pub(crate) fn queue_of(&self) -> Option<(u16, nvmemu_spec::Qid)> {
        match &self.state {
            ConnState::Queue { cntlid, q }
            | ConnState::Closing {
                queue: Some((cntlid, q)),
                ..
            } => Some((*cntlid, q.mem.qid)),
            _ => None,
        }
    }

    /// Answer host command `cccid` with `status`, `dw0` and `dw1`.
    pub(crate) fn respond_status_dw1(&mut self, cccid: u16, status: Status, dw0: u32, dw1: u32) {
        let sq_head = match &self.state {
            ConnState::Queue { q, .. } => q.sq_head,
            _ => 0,
        };
        let mut cqe = Cqe::new_zeroed();
        cqe.dw0 = dw0;
        cqe.dw1 = dw1;
        cqe.sq_head = sq_head;
        cqe.cid = cccid;
        cqe.status_phase = status.to_field() << 1;
        if !self.respond(&cqe) {
            // The caller checked for room before parsing; a full buffer here is a bug,
            // and the host would wait forever: end the connection instead.
            tracing::warn!(peer = %self.peer, "send buffer full for a response; closing");
            self.close_after(Instant::now());
        }
    }

    /// Answer host command `cccid` with `data` in one C2HData PDU (if any) and then a
    /// response capsule; false when the send buffer has no room for both.
    pub(crate) fn respond_data(
        &mut self,
        cccid: u16,
        status: Status,
        dw0: u32,
        data: &[u8],
    ) -> bool {
        let neg = self.neg;
        if !data.is_empty() {
            let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
            let l = pdu::C2hLayout::new(pdu::DATA_HLEN, data.len(), &neg);
            let resp = pdu::C2hLayout::new(pdu::RESP_HLEN, 0, &neg).plen;
            if self.tx.room() < l.plen + resp {
                return false;
            }
            let Some(out) = self.tx.reserve(l.plen) else {
                return false;
            };
            pdu::encode_c2h_data_header(out, cccid, 0, len, false, &neg);
            out[l.pdo..l.pdo + data.len()].copy_from_slice(data);
            pdu::finish_c2h_data(out, &l, &neg);
            self.tx.commit(l.plen);
        }
        self.respond_status(cccid, status, dw0);
        true
    }

    /// Queue a termination request for `err` and stop reading.
    pub(crate) fn terminate(
        &mut self,
        err: &PduError,
        header: &[u8],
        now: Instant,
        grace: std::time::Duration,
    ) {
        tracing::debug!(target: "guest", peer = %self.peer, %err, "NVMe/TCP connection terminated");
        let mut tmp = [0u8; pdu::MAX_SMALL_PDU];
        let n = pdu::encode_term_req(&mut tmp, err, header);
        if let Some(out) = self.tx.reserve(n) {
            out.copy_from_slice(&tmp[..n]);
            self.tx.commit(n);
        }
        self.close_after(now + grace);
    }

    /// A command capsule on a connected queue (not a Fabrics command). `doorbells` is the
    /// controller's doorbell page.
    pub(crate) fn queue_command(
        &mut self,
        sqe: &Sqe,
        icd: &[u8],
        doorbells: &nvmemu_mem::MmapRegion,
        block_shifts: &[u8],
    ) -> Outcome {
        let cccid = sqe.cid().0;
        let ConnState::Queue { q, .. } = &mut self.state else {
            return Outcome::Done;
        };
        if q.mem.qid.0 == 0 && forbidden_admin(sqe.opcode()) {
            self.respond_status(cccid, Status::INVALID_OPCODE, 0);
            return Outcome::Done;
        }
        let t = match transfer(sqe, icd.len(), q.mem.slot_bytes()) {
            Ok(t) => t,
            Err(status) => {
                tracing::debug!(target: "guest", cccid, ?status, "bad data pointer in a capsule");
                self.respond_status(cccid, status, 0);
                return Outcome::Done;
            }
        };
        let (len, read) = match t {
            Transfer::None => (0, false),
            Transfer::InCapsule(l) | Transfer::Solicit(l) => (l, false),
            Transfer::Read(l) => (l, true),
        };
        let (len, t) = match (q.mem.qid.0, rw_bytes(sqe, block_shifts)) {
            (0, _) | (_, None) => (len, t),
            (_, Some(need)) if need <= len => {
                let t = match t {
                    Transfer::Solicit(_) => Transfer::Solicit(need),
                    Transfer::Read(_) => Transfer::Read(need),
                    other => other,
                };
                (need, t)
            }
            (_, Some(need)) => {
                tracing::debug!(target: "guest", cccid, need, len, "transfer longer than its SGL");
                self.respond_status(cccid, Status::DATA_SGL_LENGTH_INVALID, 0);
                return Outcome::Done;
            }
        };
        let slot = match t {
            Transfer::Solicit(_) => Slot::Receiving {
                sqe: *sqe,
                len,
                got: 0,
            },
            _ => Slot::Submitted { cccid, len, read },
        };
        let Some(i) = q.take_slot(slot) else {
            return Outcome::Fatal(PduError {
                fes: pdu::Fes::PduSequenceError,
                fei: 0,
                what: "more commands outstanding than the queue has entries",
            });
        };
        if let Transfer::InCapsule(_) = t
            && q.mem
                .write_slot(i, 0, icd.get(..len as usize).unwrap_or(icd))
                .is_err()
        {
            q.release(i);
            self.respond_status(cccid, Status::INTERNAL_ERROR, 0);
            return Outcome::Done;
        }
        if let Transfer::Solicit(l) = t {
            let neg = self.neg;
            let n = pdu::C2hLayout::new(pdu::DATA_HLEN, 0, &neg).plen;
            if let Some(out) = self.tx.reserve(n) {
                pdu::encode_r2t(out, cccid, i, 0, l, &neg);
                self.tx.commit(n);
            }
            return Outcome::Done;
        }
        if q.mem.submit(sqe, i, len, doorbells).is_err() {
            q.release(i);
            self.respond_status(cccid, Status::INTERNAL_ERROR, 0);
        }
        Outcome::Done
    }

    /// An H2CData PDU: into its slot's buffer; the command goes to the SQ once complete.
    pub(crate) fn h2c_data(
        &mut self,
        cccid: u16,
        ttag: u16,
        datao: u32,
        data: &[u8],
        doorbells: &nvmemu_mem::MmapRegion,
    ) -> Outcome {
        let fatal = |fes, fei, what| Outcome::Fatal(PduError { fes, fei, what });
        let ConnState::Queue { q, .. } = &mut self.state else {
            return fatal(pdu::Fes::PduSequenceError, 0, "H2CData before Connect");
        };
        let Some(Slot::Receiving { sqe, len, got }) = q.slots.get(usize::from(ttag)).copied()
        else {
            return fatal(
                pdu::Fes::InvalidHeaderField,
                10,
                "H2CData for no outstanding R2T",
            );
        };
        if sqe.cid().0 != cccid {
            return fatal(
                pdu::Fes::InvalidHeaderField,
                8,
                "H2CData CCCID does not match its R2T",
            );
        }
        let dlen = u32::try_from(data.len()).unwrap_or(u32::MAX);
        if datao != got {
            return fatal(
                pdu::Fes::DataTransferOutOfRange,
                12,
                "H2CData offset out of order",
            );
        }
        let end = match datao.checked_add(dlen) {
            Some(e) if e <= len => e,
            _ => {
                return fatal(
                    pdu::Fes::DataTransferOutOfRange,
                    16,
                    "H2CData beyond the R2T",
                );
            }
        };
        if q.mem.write_slot(ttag, u64::from(datao), data).is_err() {
            return fatal(
                pdu::Fes::DataTransferOutOfRange,
                12,
                "H2CData beyond the buffer",
            );
        }
        if end < len {
            if let Some(s) = q.slots.get_mut(usize::from(ttag)) {
                *s = Slot::Receiving { sqe, len, got: end };
            }
            return Outcome::Done;
        }
        if let Some(s) = q.slots.get_mut(usize::from(ttag)) {
            *s = Slot::Submitted {
                cccid,
                len,
                read: false,
            };
        }
        if q.mem.submit(&sqe, ttag, len, doorbells).is_err() {
            q.release(ttag);
            self.respond_status(cccid, Status::INTERNAL_ERROR, 0);
        }
        Outcome::Done
    }
}
