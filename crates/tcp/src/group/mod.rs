// SPDX-License-Identifier: Apache-2.0
//! A poll group: one thread that owns its connections and every controller they made
//! (group 0 also owns the listeners; `handover.rs` places what it accepts and moves
//! connections between groups). Each pass asks the epoll set which sockets are ready,
//! reads what those connections have (one `recv` each, non-blocking), turns every whole
//! PDU into SQEs on the controllers' rings, polls the controllers, turns their completions
//! into PDUs and writes each connection's batch with one `send`. Only connections named by
//! an event or still busy are visited; the others' timers are swept every [`SLEEP`]. With
//! nothing to do it spins a while, then sleeps in `epoll_wait`.
//!
//! This file holds the group's state and its pass loop; `receive.rs` reads connections and
//! handles their PDUs, `send.rs` writes their answers and runs their timers, `teardown.rs`
//! ends connections and controllers.

mod receive;
mod send;
mod teardown;
mod timing;

pub use timing::{ControllerReport, QueueReport};

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use crate::config::{Subsystems, TcpOptions};
use crate::conn::Conn;
use crate::controllers::{FabricsCtrl, NoInterrupts};
use crate::handover::Groups;
use crate::pdu::Negotiated;
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
    /// `bdev_enable_histogram`: switch `bdev`'s timing on the group's controllers and on
    /// those made later, then answer on `done`.
    SetTiming {
        bdev: String,
        enable: bool,
        granularity: u32,
        done: Sender<()>,
    },
    /// Send a copy of every controller's counters and timing.
    Report(Sender<Vec<ControllerReport>>),
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
    /// Boxed: a pass takes each connection it visits out of its slot and puts it back,
    /// which moves a pointer, not the whole connection.
    pub(crate) conns: Vec<Option<Box<Conn>>>,
    free: Vec<usize>,
    pub(crate) admission: crate::admission::Admission,
    pub(crate) ctrls: BTreeMap<u16, FabricsCtrl>,
    /// Bdevs whose histograms are on (`timing.rs`).
    timed: timing::TimedBdevs,
    control: Receiver<Control>,
    stop: Arc<AtomicBool>,
    /// Which sockets have something to do.
    pub(crate) ready: Readiness,
    /// Connections the next pass visits: named by a readiness event, or still busy.
    visit: Vec<usize>,
    /// The waker fired (or the sweep ran): the next pass reads the control channel.
    woken: bool,
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
            timed: Default::default(),
            control,
            stop,
            ready,
            visit: Vec::new(),
            woken: true,
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
            // Every sender wakes the group after sending (`Groups::send`), so the channel is
            // looked at only after a wake-up, and at each timer sweep in case one was lost.
            if std::mem::take(&mut self.woken) {
                while let Ok(c) = self.control.try_recv() {
                    work += self.apply(c);
                }
            }
            let wait = (idle > SPIN_PASSES && work == 0).then_some(SLEEP);
            let listeners_ready = self.collect_ready(wait);
            let now = Instant::now();
            self.time_pass(pass_began, pass_busy, now);
            pass_began = now;
            let timed = self.timing_on();
            if timed {
                self.timing_pass_begins();
            }
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
            if timed {
                self.timing_pass_ends();
            }
            visit.clear();
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + SLEEP;
                self.woken = true;
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
        let (conns, visit, woken) = (&mut self.conns, &mut self.visit, &mut self.woken);
        self.ready.wait(wait, |r| match r {
            Ready::Listener => listeners = true,
            // The next pass takes what the control channel brought.
            Ready::Wake => *woken = true,
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
    pub(super) fn list(&mut self, i: usize) {
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
                self.adopt(conn);
                return 1;
            }
            Control::SetTiming {
                bdev,
                enable,
                granularity,
                done,
            } => {
                self.set_timing(&bdev, enable, granularity);
                // The caller may have given up waiting.
                let _ = done.send(());
            }
            Control::Report(to) => self.report(&to),
        }
        0
    }

    /// Give `conn` a slot, watch its socket and visit it next pass; false (the connection
    /// dropped, so closed) when its socket cannot be watched.
    pub(crate) fn install(&mut self, conn: Box<Conn>) -> bool {
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
}
