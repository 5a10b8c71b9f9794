// SPDX-License-Identifier: Apache-2.0
//! What a pass does with a connection's incoming bytes: one non-blocking `recv` into its
//! receive buffer, then every whole PDU in it handled in turn (ICReq, command capsules,
//! H2CData), until the buffer holds only part of one, the send buffer has no room for an
//! answer, or the PDU is a Connect another group's controller must take.

use std::io;
use std::time::Instant;

use super::{CLOSE_GRACE, PollGroup};
use crate::buffers::ByteBuf;
use crate::conn::{Conn, ConnState, Outcome};
use crate::discovery::Answer;
use crate::fabrics::FabricsCommand;
use crate::pdu::{self, H2cPdu, Phase};

/// How handling the next PDU in a connection's receive buffer went.
enum Step {
    /// Handled (or the connection is ending with a termination request).
    Handled,
    /// The connection ends now.
    Close,
    /// No whole PDU yet, or no room to answer one.
    Wait,
    /// The PDU, left unread, is a Connect for a controller of that group.
    HandOver(usize),
}

impl PollGroup {
    /// Read and handle what connection `i` sent.
    pub(super) fn receive(&mut self, i: usize, now: Instant) -> usize {
        let Some(mut conn) = self.conns.get_mut(i).and_then(Option::take) else {
            return 0;
        };
        if matches!(conn.state, ConnState::Closing { .. }) {
            self.conns[i] = Some(conn);
            return 0;
        }
        let mut rx = std::mem::replace(&mut conn.rx, ByteBuf::new(0));
        let (mut work, mut closed, mut move_to) = (0, false, None);
        if conn.readable && rx.room() > 0 && conn.tx.room() >= 2 * pdu::MAX_SMALL_PDU {
            self.counts.socket_reads += 1;
            match rx.fill_from(&mut conn.sock) {
                Ok(0) => closed = true,
                Ok(n) => {
                    work += n;
                    conn.stalled_since = None;
                    // A short read emptied the socket; the next arrival is a new event.
                    conn.readable = rx.filled_to_end();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => conn.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => closed = true,
            }
        }
        while !closed && !matches!(conn.state, ConnState::Closing { .. }) {
            match self.next_pdu(&mut conn, &mut rx, now) {
                Step::Handled => work += 1,
                Step::Close => closed = true,
                Step::Wait => break,
                Step::HandOver(to) => {
                    move_to = Some(to);
                    break;
                }
            }
        }
        if conn.rx.capacity() == 0 {
            conn.rx = rx;
        } else {
            // ICReq gave the connection its full-size buffers: move what followed it.
            let left = rx.data();
            if let Some(out) = conn.rx.reserve(left.len()) {
                out.copy_from_slice(left);
                let n = left.len();
                conn.rx.commit(n);
            }
        }
        if closed {
            self.close(i, conn);
        } else if let Some(to) = move_to {
            self.hand_over(i, conn, to);
        } else {
            self.conns[i] = Some(conn);
        }
        work
    }

    /// Handle one whole PDU from `rx`.
    fn next_pdu(&mut self, conn: &mut Conn, rx: &mut ByteBuf, now: Instant) -> Step {
        // Room for whatever answer the PDU may need at once.
        let answer = match conn.state {
            ConnState::Discovery(_) => crate::discovery::MAX_DATA + pdu::DATA_HLEN + 64,
            _ => 0,
        };
        if conn.tx.room() < 2 * pdu::MAX_SMALL_PDU + answer {
            return Step::Wait;
        }
        // The common PDU on a connected queue skips the general decode (`plain_capsule`
        // takes only what that would accept, unchanged).
        if let ConnState::Queue { .. } = conn.state
            && let Some(sqe) = pdu::plain_capsule(rx.data(), &conn.neg)
        {
            let outcome = self.command(conn, &sqe, &[], now);
            return Self::settle(conn, rx, pdu::CMD_HLEN, outcome, now);
        }
        let head = rx.data().get(..pdu::CH_LEN).and_then(|h| h.try_into().ok());
        let Some(head): Option<[u8; pdu::CH_LEN]> = head else {
            return Step::Wait;
        };
        let ch = pdu::CommonHeader::parse(&head);
        let phase = match conn.state {
            ConnState::AwaitIcReq { .. } => Phase::Initializing,
            _ => Phase::Established,
        };
        let plen = match pdu::check_header(&ch, phase, &conn.neg) {
            // Before Connect the buffer takes a command capsule, not data (admission.rs).
            Ok(p) if p > rx.capacity() && matches!(conn.state, ConnState::AwaitConnect) => {
                let e = pdu::PduError {
                    fes: pdu::Fes::PduSequenceError,
                    fei: 0,
                    what: "data PDU before Connect",
                };
                conn.terminate(&e, rx.data(), now, CLOSE_GRACE);
                return Step::Handled;
            }
            Ok(p) => p,
            Err(e) => {
                conn.terminate(&e, rx.data(), now, CLOSE_GRACE);
                return Step::Handled;
            }
        };
        let Some(bytes) = rx.data().get(..plen) else {
            return Step::Wait;
        };
        let neg = conn.neg;
        let outcome = match pdu::decode(bytes, phase, &neg) {
            Err(e) => Outcome::Fatal(e),
            Ok(H2cPdu::TermReq { fes }) => {
                tracing::debug!(target: "guest", peer = %conn.peer, fes, "host terminated the connection");
                return Step::Close;
            }
            Ok(H2cPdu::IcReq(r)) => {
                self.initialize(conn, &r);
                Outcome::Done
            }
            Ok(H2cPdu::Command { sqe, data }) => self.command(conn, &sqe, data, now),
            Ok(H2cPdu::Data {
                cccid,
                ttag,
                datao,
                data,
                ..
            }) => match &conn.state {
                ConnState::Queue { cntlid, .. } => match self.ctrls.get(cntlid) {
                    Some(c) => conn.h2c_data(cccid, ttag, datao, data, &c.doorbells),
                    None => return Step::Close,
                },
                _ => Outcome::Fatal(pdu::PduError {
                    fes: pdu::Fes::PduSequenceError,
                    fei: 0,
                    what: "H2CData before Connect",
                }),
            },
        };
        Self::settle(conn, rx, plen, outcome, now)
    }

    /// Finish the PDU of `plen` bytes at the front of `rx` that ended in `outcome`.
    fn settle(
        conn: &mut Conn,
        rx: &mut ByteBuf,
        plen: usize,
        outcome: Outcome,
        now: Instant,
    ) -> Step {
        match outcome {
            Outcome::Done => {}
            Outcome::Fatal(e) => {
                let header = rx
                    .data()
                    .get(..plen.min(pdu::TERM_DATA_MAX))
                    .unwrap_or_default();
                conn.terminate(&e, header, now, CLOSE_GRACE);
            }
            // The Connect stays unread, for its controller's group.
            Outcome::HandOver(to) => return Step::HandOver(to),
        }
        rx.consume(plen);
        Step::Handled
    }

    /// ICReq: answer with our parameters and size the buffers for a Connect.
    fn initialize(&mut self, conn: &mut Conn, r: &pdu::IcReq) {
        conn.neg.hdgst = r.hdgst;
        conn.neg.ddgst = r.ddgst;
        conn.neg.hpda = r.hpda;
        let mut resp = [0u8; pdu::IC_HLEN];
        pdu::encode_icresp(&mut resp, &conn.neg);
        // `conn.rx` is an empty stand-in here (`receive` holds the bytes and moves what
        // follows ICReq into the new buffer).
        conn.size_for_connect();
        if let Some(out) = conn.tx.reserve(resp.len()) {
            out.copy_from_slice(&resp);
            conn.tx.commit(resp.len());
        }
        conn.state = ConnState::AwaitConnect;
    }

    /// A command capsule. On a connected queue (every I/O) it goes to its controller's SQ;
    /// Fabrics commands and capsules in other states are handled out of line, so the large
    /// frame Connect needs is not set up for every command.
    fn command(
        &mut self,
        conn: &mut Conn,
        sqe: &nvmemu_spec::Sqe,
        data: &[u8],
        now: Instant,
    ) -> Outcome {
        let ConnState::Queue { cntlid, .. } = conn.state else {
            return self.other_command(conn, sqe, data, now);
        };
        if sqe.opcode() == crate::fabrics::OPCODE {
            return self.other_command(conn, sqe, data, now);
        }
        let Some(c) = self.ctrls.get_mut(&cntlid) else {
            return Outcome::Done;
        };
        c.touch(now);
        self.counts.commands += 1;
        conn.queue_command(sqe, data, &c.doorbells, &c.block_shifts)
    }

    /// A Fabrics command, or a capsule on a connection that is not a connected queue.
    #[inline(never)]
    fn other_command(
        &mut self,
        conn: &mut Conn,
        sqe: &nvmemu_spec::Sqe,
        data: &[u8],
        now: Instant,
    ) -> Outcome {
        if sqe.opcode() == crate::fabrics::OPCODE {
            let cmd = FabricsCommand::decode(sqe);
            return self.fabrics(conn, sqe, cmd, data, now);
        }
        if let ConnState::Discovery(d) = &conn.state {
            let len = nvmemu_spec::SglDescriptor::from_dptr(sqe.dptr1, sqe.dptr2).len as usize;
            let cccid = sqe.cid().0;
            if len > crate::discovery::MAX_DATA {
                conn.respond_status(cccid, nvmemu_spec::Status::DATA_SGL_LENGTH_INVALID, 0);
                return Outcome::Done;
            }
            if let Answer::Complete(status, dw0, data) = d.admin(sqe, len, &self.subsystems) {
                conn.respond_data(cccid, status, dw0, &data);
            }
            return Outcome::Done;
        }
        conn.respond_status(sqe.cid().0, nvmemu_spec::Status::COMMAND_SEQUENCE_ERROR, 0);
        Outcome::Done
    }
}
