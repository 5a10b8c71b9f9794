// SPDX-License-Identifier: Apache-2.0
//! A poll group: one thread that owns its connections and every controller they made
//! (group 0 also owns the listeners; `handover.rs` places what it accepts and moves
//! connections between groups). Each pass asks the epoll set which sockets are ready,
//! reads what those connections have (one `recv` each, non-blocking), turns every whole
//! PDU into SQEs on the controllers' rings, polls the controllers, turns their completions
//! into PDUs and writes each connection's batch with one `send`. Only connections named by
//! an event or still busy are visited; the others' timers are swept every [`SLEEP`]. With
//! nothing to do it spins a while, then sleeps in `epoll_wait`.

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::buffers::ByteBuf;
use crate::config::{Subsystems, TcpOptions};
use crate::conn::{Conn, ConnState, Outcome};
use crate::controllers::{FabricsCtrl, NoInterrupts};
use crate::discovery::Answer;
use crate::fabrics::FabricsCommand;
use crate::handover::Groups;
use crate::pdu::{self, H2cPdu, Negotiated, Phase};
use crate::readiness::{Readiness, Ready};
use crate::stats::{SharedStats, TcpStats};

/// Passes without work before the group sleeps in `epoll_wait`.
const SPIN_PASSES: u32 = 2_000;
/// Longest sleep: timers (ICReq, stalls, Keep Alive) are checked at least this often.
const SLEEP: Duration = Duration::from_millis(10);
/// How long a connection being closed may take to send its last PDUs.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// In-capsule data every admin queue accepts.
const ADMIN_ICD: u32 = 8192;

/// Requests from the control plane.
#[derive(Debug)]
pub(crate) enum Control {
    Listen(TcpListener),
    Unlisten(SocketAddr),
    /// A connection placed on this group, or handed over for its controller.
    Adopt(Box<Conn>),
}

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

/// Everything one poller thread owns.
#[derive(Debug)]
pub(crate) struct PollGroup {
    /// This group's place in `groups`.
    pub(crate) index: usize,
    pub(crate) groups: Arc<Groups>,
    /// Where the search for the least loaded group starts next (`handover.rs`).
    pub(crate) next_placement: usize,
    pub(crate) opts: TcpOptions,
    pub(crate) subsystems: Subsystems,
    pub(crate) listeners: Vec<TcpListener>,
    pub(crate) conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    pub(crate) admission: crate::admission::Admission,
    pub(crate) ctrls: BTreeMap<u16, FabricsCtrl>,
    control: Receiver<Control>,
    stop: Arc<AtomicBool>,
    /// Which sockets have something to do.
    pub(crate) ready: Readiness,
    /// Connections the next pass visits: named by a readiness event, or still busy.
    visit: Vec<usize>,
    /// Counted here, published once per pass.
    pub(crate) counts: TcpStats,
    published: SharedStats,
}

impl PollGroup {
    /// Group `index` of `groups`, taking its control messages from `control` and its
    /// readiness events from `ready`.
    pub(crate) fn new(
        (index, groups): (usize, Arc<Groups>),
        (control, ready): (Receiver<Control>, Readiness),
        opts: TcpOptions,
        subsystems: Subsystems,
        stop: Arc<AtomicBool>,
        published: SharedStats,
    ) -> PollGroup {
        PollGroup {
            index,
            groups,
            next_placement: 0,
            opts,
            subsystems,
            listeners: Vec::new(),
            conns: Vec::new(),
            free: Vec::new(),
            admission: Default::default(),
            ctrls: BTreeMap::new(),
            control,
            stop,
            ready,
            visit: Vec::new(),
            counts: TcpStats::default(),
            published,
        }
    }

    /// What a connection may receive before ICReq (the sizes it gets once connected).
    pub(crate) fn negotiated(&self) -> Negotiated {
        Negotiated {
            hdgst: false,
            ddgst: false,
            hpda: 0,
            cpda: 0,
            // The admin queue takes 8 KiB of in-capsule data whatever IOCCSZ says (TCP
            // Transport 1.0, 3.6.2.4: Connect's data comes that way); the queue is not
            // known before Connect, so every connection may.
            icd_max: self.opts.in_capsule_data_size.max(ADMIN_ICD),
            maxh2cdata: self.opts.io_unit_size,
        }
    }

    /// Serve until stopped.
    pub(crate) fn run(mut self) {
        let mut idle = 0u32;
        let mut visit = Vec::new();
        let mut next_sweep = Instant::now();
        // When the previous pass began and whether it did work.
        let (mut pass_began, mut pass_busy) = (next_sweep, false);
        // Pairs with the Release store in `TcpTarget::drop`; nothing else is published.
        while !self.stop.load(Ordering::Acquire) {
            let mut work = 0;
            while let Ok(c) = self.control.try_recv() {
                work += self.apply(c);
            }
            let wait = (idle > SPIN_PASSES && work == 0).then_some(SLEEP);
            let listeners_ready = self.collect_ready(wait);
            let now = Instant::now();
            self.time_pass(pass_began, pass_busy, now);
            pass_began = now;
            if listeners_ready {
                work += self.accept(now);
            }
            // This pass visits the connections listed so far; `send` lists again those
            // still busy, for the next pass.
            std::mem::swap(&mut visit, &mut self.visit);
            for &i in &visit {
                work += self.receive(i, now);
            }
            for c in self.ctrls.values_mut() {
                work += c.ctrl.poll(&mut NoInterrupts);
            }
            for &i in &visit {
                work += self.send(i, now);
            }
            visit.clear();
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + SLEEP;
            }
            self.counts.polls += 1;
            self.account(now);
            self.published.publish(&self.counts);
            pass_busy = work > 0;
            idle = if pass_busy { 0 } else { idle.saturating_add(1) };
        }
    }

    /// Charge the previous pass, from when it `began` to `now` (this pass's start), to busy
    /// time if it did work and to idle time if not, as SPDK charges a poller iteration. The
    /// clock is the one each pass reads anyway; a sleep in `epoll_wait` follows only idle
    /// passes, so it counts as idle.
    fn time_pass(&mut self, began: Instant, busy: bool, now: Instant) {
        let ns = u64::try_from(now.saturating_duration_since(began).as_nanos()).unwrap_or(0);
        let total = if busy {
            &mut self.counts.busy_ns
        } else {
            &mut self.counts.idle_ns
        };
        *total = total.saturating_add(ns);
    }

    /// Ask the epoll set what is ready (waiting up to `wait`): the connections named get
    /// their flags and a place on the visit list. Returns whether a listener is ready.
    fn collect_ready(&mut self, wait: Option<Duration>) -> bool {
        let mut listeners = false;
        let (conns, visit) = (&mut self.conns, &mut self.visit);
        self.ready.wait(wait, |r| match r {
            Ready::Listener => listeners = true,
            // The next pass takes what the control channel brought.
            Ready::Wake => {}
            Ready::Conn { slot, read, write } => {
                if let Some(Some(c)) = conns.get_mut(slot) {
                    c.readable |= read;
                    c.writable |= write;
                    if !c.listed {
                        c.listed = true;
                        visit.push(slot);
                    }
                }
            }
        });
        listeners
    }

    /// Put connection `i` on the next pass's visit list (once).
    fn list(&mut self, i: usize) {
        if let Some(Some(c)) = self.conns.get_mut(i)
            && !c.listed
        {
            c.listed = true;
            self.visit.push(i);
        }
    }

    /// The timers of the connections no pass visits (ICReq, stalls, endings) and of the
    /// controllers (Keep Alive), every [`SLEEP`].
    fn sweep(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            if self.conns[i].as_ref().is_some_and(|c| !c.listed) {
                self.send(i, now);
            }
        }
        self.expire_controllers(now);
    }

    /// Apply a control message; returns 1 for a connection taken, else 0.
    fn apply(&mut self, c: Control) -> usize {
        match c {
            Control::Listen(l) => {
                if let Err(e) = self.ready.add_listener(&l) {
                    tracing::warn!(%e, "cannot watch a TCP listener");
                }
                self.listeners.push(l);
            }
            Control::Unlisten(addr) => self.listeners.retain(|l| l.local_addr().ok() != Some(addr)),
            Control::Adopt(conn) => {
                self.adopt(*conn);
                return 1;
            }
        }
        0
    }

    /// Give `conn` a slot, watch its socket and visit it next pass; false (the connection
    /// dropped, so closed) when its socket cannot be watched.
    pub(crate) fn install(&mut self, conn: Conn) -> bool {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        if let Err(e) = self.ready.add_conn(&conn.sock, i) {
            tracing::warn!(%e, peer = %conn.peer, "cannot watch a TCP connection; closed");
            self.free.push(i);
            return false;
        }
        self.conns[i] = Some(conn);
        self.list(i);
        true
    }

    /// Read and handle what connection `i` sent.
    fn receive(&mut self, i: usize, now: Instant) -> usize {
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
            Ok(H2cPdu::Command { sqe, data }) => self.command(conn, sqe, data, now),
            Ok(H2cPdu::Data {
                cccid,
                ttag,
                datao,
                data,
                ..
            }) => match &conn.state {
                ConnState::Queue { cntlid, .. } => match self.ctrls.get(cntlid) {
                    Some(c) => {
                        let db = Arc::clone(&c.doorbells);
                        conn.h2c_data(cccid, ttag, datao, data, &db)
                    }
                    None => return Step::Close,
                },
                _ => Outcome::Fatal(pdu::PduError {
                    fes: pdu::Fes::PduSequenceError,
                    fei: 0,
                    what: "H2CData before Connect",
                }),
            },
        };
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

    fn command(
        &mut self,
        conn: &mut Conn,
        sqe: nvmemu_spec::Sqe,
        data: &[u8],
        now: Instant,
    ) -> Outcome {
        if sqe.opcode() == crate::fabrics::OPCODE {
            let cmd = FabricsCommand::decode(&sqe);
            return self.fabrics(conn, &sqe, cmd, data, now);
        }
        if let ConnState::Discovery(d) = &conn.state {
            let len = nvmemu_spec::SglDescriptor::from_dptr(sqe.dptr1, sqe.dptr2).len as usize;
            let cccid = sqe.cid().0;
            if len > crate::discovery::MAX_DATA {
                conn.respond_status(cccid, nvmemu_spec::Status::DATA_SGL_LENGTH_INVALID, 0);
                return Outcome::Done;
            }
            if let Answer::Complete(status, dw0, data) = d.admin(&sqe, len, &self.subsystems) {
                conn.respond_data(cccid, status, dw0, &data);
            }
            return Outcome::Done;
        }
        let ConnState::Queue { cntlid, .. } = &conn.state else {
            conn.respond_status(sqe.cid().0, nvmemu_spec::Status::COMMAND_SEQUENCE_ERROR, 0);
            return Outcome::Done;
        };
        let Some(c) = self.ctrls.get_mut(cntlid) else {
            return Outcome::Done;
        };
        c.touch(now);
        self.counts.commands += 1;
        let db = Arc::clone(&c.doorbells);
        conn.queue_command(sqe, data, &db, &c.block_shifts)
    }

    /// Queue completions and write what the socket takes; enforce the connection's timers.
    fn send(&mut self, i: usize, now: Instant) -> usize {
        let Some(mut conn) = self.conns.get_mut(i).and_then(Option::take) else {
            return 0;
        };
        let mut work = 0;
        if let ConnState::Queue { cntlid, .. } = &conn.state
            && let Some(c) = self.ctrls.get(cntlid)
        {
            let db = Arc::clone(&c.doorbells);
            work += conn.reap(&db);
        }
        let (wrote, failed) = if conn.writable {
            match conn.flush(&mut self.counts.socket_writes) {
                Ok(n) => (n, false),
                Err(_) => (0, true),
            }
        } else {
            (0, false)
        };
        // Stopping short means the socket is full; its next send space is a new event.
        conn.writable = !conn.unsent();
        work += wrote;
        if wrote > 0 {
            conn.stalled_since = None;
        }
        let waiting = conn.unsent() || !conn.rx.is_empty();
        if !waiting {
            conn.stalled_since = None;
        } else if work == 0 {
            conn.stalled_since.get_or_insert(now);
        }
        let stalled = conn
            .stalled_since
            .is_some_and(|t| now.saturating_duration_since(t) > self.opts.stall_timeout);
        let done = match conn.state {
            ConnState::AwaitIcReq { deadline } => now > deadline,
            ConnState::Closing { deadline, .. } => !conn.unsent() || now > deadline,
            _ => false,
        };
        if failed || stalled || done {
            if stalled || matches!(conn.state, ConnState::AwaitIcReq { .. }) {
                tracing::debug!(target: "guest", peer = %conn.peer, "NVMe/TCP connection stalled; closed");
            }
            self.close(i, conn);
        } else {
            conn.listed = false;
            let busy = conn.busy();
            self.conns[i] = Some(conn);
            if busy {
                self.list(i);
            }
        }
        work
    }

    /// End connection `i` (already taken out of its slot): its queue goes; the admin queue
    /// takes its controller and every other connection of it along.
    pub(crate) fn close(&mut self, i: usize, conn: Conn) {
        self.groups.lose(self.index);
        self.free_slot(i, conn.listed);
        if let Some(admin) = conn.qpair_admin {
            self.counts.qpair_closed(admin);
        }
        let (cntlid, q) = match conn.state {
            ConnState::Queue { cntlid, q }
            | ConnState::Closing {
                queue: Some((cntlid, q)),
                ..
            } => (cntlid, q),
            _ => return,
        };
        if q.mem.qid.0 == 0 {
            self.remove_controller(cntlid);
            tracing::info!(cntlid, peer = %conn.peer, "NVMe/TCP controller removed");
            for j in 0..self.conns.len() {
                let of_ctrl = self.conns[j]
                    .as_ref()
                    .and_then(Conn::queue_of)
                    .is_some_and(|(c, _)| c == cntlid);
                if of_ctrl && let Some(other) = self.conns[j].take() {
                    self.close(j, other);
                }
            }
        } else if let Some(c) = self.ctrls.get_mut(&cntlid) {
            c.ctrl.disconnect_io_queue(q.mem.qid);
            let (iova, len) = q.mem.span();
            c.unmap(iova, len);
        }
    }

    fn expire_controllers(&mut self, now: Instant) {
        let expired: Vec<u16> = self
            .ctrls
            .iter()
            .filter(|(_, c)| c.expired(now))
            .map(|(id, _)| *id)
            .collect();
        for cntlid in expired {
            tracing::info!(cntlid, "NVMe/TCP keep alive timeout: controller removed");
            let admin = self.conns.iter().position(|c| {
                c.as_ref().and_then(Conn::queue_of) == Some((cntlid, nvmemu_spec::Qid::ADMIN))
            });
            match admin.and_then(|j| self.conns[j].take().map(|c| (j, c))) {
                Some((j, c)) => self.close(j, c),
                None => self.remove_controller(cntlid),
            }
        }
    }

    /// Slot `i` is free again (its connection taken out; `listed`: on the next visit list).
    pub(crate) fn free_slot(&mut self, i: usize, listed: bool) {
        self.free.push(i);
        if listed {
            // The slot may be reused before the next pass: it must not be visited twice.
            self.visit.retain(|&v| v != i);
        }
    }

    fn remove_controller(&mut self, cntlid: u16) {
        self.ctrls.remove(&cntlid);
        self.groups.release_cntlid(cntlid);
    }
}
