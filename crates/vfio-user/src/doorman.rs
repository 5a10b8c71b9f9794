// SPDX-License-Identifier: Apache-2.0
//! The doorman: accepts every connection at once and decides, without ever waiting on one
//! client, who the control thread serves next.
//!
//! A connection is *pending* until its first message (VERSION) has fully arrived; the
//! doorman only peeks at it, so the control thread reads it as usual. A complete one is
//! handed over at once if the controller is free, or *waits* its turn in a FIFO queue, told
//! nothing (as SPDK's `nvmf_tgt` makes a second client wait). Bounds, so that no local
//! client can hide the controller from an honest one:
//!
//! * at most [`MAX_PENDING`] pending connections, each for at most the VERSION deadline; a
//!   newcomer beyond the bound displaces the oldest (an honest client sends VERSION at once,
//!   so only silent ones are displaced);
//! * at most [`MAX_WAITING`] waiting clients; the next complete VERSION gets an EBUSY error
//!   reply and a close; a waiting client that hangs up leaves the queue.
//!
//! A wait longer than a second is logged (a reconnecting client often arrives before its
//! old connection's end is seen, and waits a moment without news), as is each refusal; at
//! most one such line a second.

use std::collections::VecDeque;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::net::RecvFlags;
use tracing::{debug, info, warn};
use zerocopy::FromBytes;

use crate::Errno;
use crate::StopHandle;
use crate::frame::{Channel, Incoming, Limits};
use crate::listener::Listener;
use crate::server::Deadlines;
use crate::wire::{Command, HEADER_SIZE, Header, msg_flags};

/// Most connections that have not yet sent a complete VERSION.
pub const MAX_PENDING: usize = 64;
/// Most clients that sent VERSION and wait for the attached client to leave.
pub const MAX_WAITING: usize = 8;
/// Largest first message a pending connection may send (VERSION with its capabilities
/// JSON); a larger one is no VERSION and the connection is closed.
const MAX_FIRST_MESSAGE: usize = HEADER_SIZE + 4096;
/// How often a connection that sent part of its first message is looked at again (its
/// socket stays readable, so it is not polled for input).
const PARTIAL_RECHECK: Duration = Duration::from_millis(50);
/// How long a client waits before the server logs that it does: a client that reconnects
/// at once may arrive before its old connection's end has been seen, which is no news.
const LOG_WAIT_AFTER: Duration = Duration::from_secs(1);
/// Longest wait to read a refused client's (already complete) VERSION and send EBUSY.
const REFUSAL_WAIT: Duration = Duration::from_millis(200);

/// A connection whose VERSION has not fully arrived.
struct Pending {
    stream: UnixStream,
    deadline: Instant,
    /// Part of the first message is there: re-peeked on a timer, not polled for input.
    partial: bool,
}

/// A client whose VERSION has arrived, waiting for the controller.
struct Waiter {
    stream: UnixStream,
    since: Instant,
    /// Whether its wait has been logged.
    logged: bool,
}

/// What a peek at a pending connection's first message found.
enum FirstMessage {
    Complete,
    Partial,
    /// End of file, a socket error or a message too large to be VERSION.
    Unusable(&'static str),
}

/// The doorman of one listener (see the module docs).
pub(crate) struct Doorman<'a> {
    listener: &'a Listener,
    stop: &'a StopHandle,
    deadlines: &'a Deadlines,
    handover: SyncSender<UnixStream>,
    /// Readable once the control thread has finished with its client (one byte each).
    freed: UnixStream,
    controller_free: bool,
    pending: VecDeque<Pending>,
    waiting: VecDeque<Waiter>,
    throttle: Throttle,
}

impl<'a> Doorman<'a> {
    /// A doorman that hands clients over on `handover` (capacity 1) and learns from `freed`
    /// (non-blocking) that the control thread is free again.
    pub(crate) fn new(
        listener: &'a Listener,
        stop: &'a StopHandle,
        deadlines: &'a Deadlines,
        handover: SyncSender<UnixStream>,
        freed: UnixStream,
    ) -> Self {
        Self {
            listener,
            stop,
            deadlines,
            handover,
            freed,
            controller_free: true,
            pending: VecDeque::new(),
            waiting: VecDeque::new(),
            throttle: Throttle::default(),
        }
    }

    /// Runs until `stop` is stopped or the control thread is gone.
    pub(crate) fn run(mut self) {
        while !self.stop.is_stopped() {
            let Some(ready) = self.wait() else {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            };
            if self.stop.is_stopped() {
                return;
            }
            if ready.freed {
                let mut bytes = [0u8; 16];
                while matches!((&self.freed).read(&mut bytes), Ok(n) if n > 0) {}
                self.controller_free = true;
            }
            // The poll's flags follow the queues' current order: use them before
            // accepting changes it.
            self.drop_gone_waiters(&ready.waiting_gone);
            self.check_pending(&ready.pending_readable);
            if ready.listener {
                self.accept_all();
            }
            if !self.hand_over() {
                return;
            }
            self.log_long_waits();
        }
    }

    /// One poll of the stop signal, the listener, `freed` and every client; `None` if the
    /// poll failed.
    fn wait(&self) -> Option<Ready> {
        let now = Instant::now();
        let unlogged = self.waiting.iter().filter(|w| !w.logged);
        let mut timeout = self
            .pending
            .iter()
            .map(|p| p.deadline)
            .chain(unlogged.map(|w| w.since + LOG_WAIT_AFTER))
            .min();
        if self.pending.iter().any(|p| p.partial) {
            let recheck = now + PARTIAL_RECHECK;
            timeout = Some(timeout.map_or(recheck, |t| t.min(recheck)));
        }
        let mut fds = Vec::with_capacity(3 + self.pending.len() + self.waiting.len());
        fds.push(PollFd::new(self.stop, PollFlags::IN));
        fds.push(PollFd::new(self.listener, PollFlags::IN));
        fds.push(PollFd::new(&self.freed, PollFlags::IN));
        for p in &self.pending {
            let events = if p.partial {
                PollFlags::empty()
            } else {
                PollFlags::IN
            };
            fds.push(PollFd::new(&p.stream, events));
        }
        // A waiting client's VERSION keeps its socket readable: watch for a hang-up only.
        for w in &self.waiting {
            fds.push(PollFd::new(&w.stream, PollFlags::empty()));
        }
        let timeout = timeout.map(|t| {
            Timespec::try_from(t.saturating_duration_since(now)).unwrap_or(Timespec {
                tv_sec: i64::MAX,
                tv_nsec: 0,
            })
        });
        match poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => {
                tracing::error!("doorman of {}: poll failed: {e}", self.path());
                return None;
            }
        }
        let fired = |f: &PollFd<'_>| !f.revents().is_empty();
        let split = 3 + self.pending.len();
        Some(Ready {
            listener: fds.get(1).is_some_and(fired),
            freed: fds.get(2).is_some_and(fired),
            pending_readable: fds.get(3..split).unwrap_or(&[]).iter().map(fired).collect(),
            waiting_gone: fds.get(split..).unwrap_or(&[]).iter().map(fired).collect(),
        })
    }

    /// Accepts every queued connection; a full pending set gives up its oldest member.
    fn accept_all(&mut self) {
        loop {
            let stream = match self.listener.try_accept() {
                Ok(Some(stream)) => stream,
                Ok(None) => return,
                Err(e) => {
                    // Out of fds, most likely: the listener stays readable, so pause.
                    tracing::error!("accept on {} failed: {e}", self.path());
                    std::thread::sleep(Duration::from_millis(100));
                    return;
                }
            };
            if self.pending.len() >= MAX_PENDING {
                debug!(target: "guest", "{}: {MAX_PENDING} connections without VERSION; closing the oldest", self.path());
                self.pending.pop_front();
            }
            self.pending.push_back(Pending {
                stream,
                deadline: Instant::now() + self.deadlines.version,
                partial: false,
            });
        }
    }

    /// Moves pending connections whose VERSION is complete to the queue (or refuses them),
    /// and closes those that hung up, sent garbage or missed the VERSION deadline.
    fn check_pending(&mut self, readable: &[bool]) {
        let now = Instant::now();
        let mut still = VecDeque::with_capacity(self.pending.len());
        let pending = std::mem::take(&mut self.pending);
        for (i, mut p) in pending.into_iter().enumerate() {
            let look = p.partial || readable.get(i).copied().unwrap_or(false);
            let state = if look {
                peek_first_message(&p.stream)
            } else {
                FirstMessage::Partial
            };
            match state {
                FirstMessage::Complete => self.admit(p.stream),
                FirstMessage::Unusable(why) => {
                    debug!(target: "guest", "{}: connection closed before VERSION: {why}", self.path());
                }
                FirstMessage::Partial if now >= p.deadline => {
                    info!(
                        "client of {} dropped: no complete VERSION within {:?}",
                        self.path(),
                        self.deadlines.version
                    );
                }
                FirstMessage::Partial => {
                    p.partial |= look;
                    still.push_back(p);
                }
            }
        }
        self.pending = still;
    }

    /// Queues a client whose VERSION has arrived, or refuses it when the queue is full.
    fn admit(&mut self, stream: UnixStream) {
        if self.waiting.len() >= MAX_WAITING {
            if let Some(skipped) = self.throttle.allow() {
                warn!(
                    "client of {} refused: the controller is in use by another client and {MAX_WAITING} more wait{}",
                    self.path(),
                    skipped_note(skipped)
                );
            }
            refuse(stream, self.stop);
            return;
        }
        // Handed over at the end of this round if the controller is free.
        self.waiting.push_back(Waiter {
            stream,
            since: Instant::now(),
            logged: false,
        });
    }

    /// Logs the clients that have waited [`LOG_WAIT_AFTER`] (once each).
    fn log_long_waits(&mut self) {
        let now = Instant::now();
        for (i, w) in self.waiting.iter_mut().enumerate() {
            if w.logged || now.duration_since(w.since) < LOG_WAIT_AFTER {
                continue;
            }
            w.logged = true;
            if let Some(skipped) = self.throttle.allow() {
                warn!(
                    "client of {} waits: the controller is in use by another client (place {} in the queue){}",
                    self.listener.path().display(),
                    i + 1,
                    skipped_note(skipped)
                );
            }
        }
    }

    fn drop_gone_waiters(&mut self, gone: &[bool]) {
        let before = self.waiting.len();
        let mut i = 0;
        self.waiting.retain(|_| {
            let keep = !gone.get(i).copied().unwrap_or(false);
            i += 1;
            keep
        });
        if self.waiting.len() < before {
            debug!(target: "guest", "{}: a waiting client hung up", self.path());
        }
    }

    /// Gives the first waiting client still connected to the control thread if it is free;
    /// `false` once the control thread is gone.
    fn hand_over(&mut self) -> bool {
        while self.controller_free {
            let Some(waiter) = self.waiting.pop_front() else {
                return true;
            };
            if nvmemu_sockfile::peer_gone(&waiter.stream) {
                continue;
            }
            match self.handover.try_send(waiter.stream) {
                Ok(()) => self.controller_free = false,
                Err(TrySendError::Full(stream)) => {
                    // Not reached: the channel is empty while the controller is free.
                    self.waiting.push_front(Waiter { stream, ..waiter });
                    self.controller_free = false;
                }
                Err(TrySendError::Disconnected(_)) => return false,
            }
        }
        true
    }

    fn path(&self) -> std::path::Display<'_> {
        self.listener.path().display()
    }
}

/// At most one warning a second: a local client can repeat what causes one at will.
#[derive(Default)]
struct Throttle {
    last: Option<Instant>,
    skipped: u64,
}

impl Throttle {
    /// `Some(lines skipped since the last one)` if a line may be logged now.
    fn allow(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < Duration::from_secs(1))
        {
            self.skipped = self.skipped.saturating_add(1);
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.skipped))
    }
}

fn skipped_note(skipped: u64) -> String {
    match skipped {
        0 => String::new(),
        n => format!(" ({n} more such lines skipped)"),
    }
}

/// Which fds a poll reported, in [`Doorman::wait`]'s order.
struct Ready {
    listener: bool,
    freed: bool,
    pending_readable: Vec<bool>,
    waiting_gone: Vec<bool>,
}

/// Peeks at a connection's first message without consuming it.
fn peek_first_message(stream: &UnixStream) -> FirstMessage {
    let mut buf = [0u8; MAX_FIRST_MESSAGE];
    let n = match rustix::net::recv(stream, &mut buf, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
        Ok((0, _)) => return FirstMessage::Unusable("end of file"),
        Ok((n, _)) => n,
        Err(Errno::AGAIN | Errno::INTR) => return FirstMessage::Partial,
        Err(_) => return FirstMessage::Unusable("socket error"),
    };
    let header = buf.get(..n).and_then(|b| Header::read_from_prefix(b).ok());
    let Some((header, _)) = header else {
        return FirstMessage::Partial;
    };
    match usize::try_from(header.msg_size) {
        // The framing layer rejects a size below the header's; the server answers it.
        Ok(size) if size <= n => FirstMessage::Complete,
        Ok(size) if size <= MAX_FIRST_MESSAGE => FirstMessage::Partial,
        _ => FirstMessage::Unusable("first message too large for VERSION"),
    }
}

/// Reads the refused client's complete VERSION, answers it with EBUSY, then closes.
fn refuse(stream: UnixStream, stop: &StopHandle) {
    let mut channel = Channel::new(stream, MAX_FIRST_MESSAGE).with_limits(Limits {
        idle_deadline: Some(Instant::now() + REFUSAL_WAIT),
        message: Some(REFUSAL_WAIT),
        send: Some((REFUSAL_WAIT, stop.clone())),
    });
    let header = match channel.recv(Some(stop)) {
        Ok(Incoming::Frame(f)) => f.header,
        Ok(Incoming::Rejected { header, .. }) => header,
        Ok(Incoming::Eof | Incoming::Stopped) | Err(_) => return,
    };
    if header.msg_type() != msg_flags::TYPE_COMMAND || header.no_reply() {
        return;
    }
    if header.command() != Command::Version {
        debug!(target: "guest", command = ?header.command(), "refused client's first message is not VERSION");
    }
    let reply = Header {
        msg_id: header.msg_id,
        command: header.command,
        msg_size: 0,
        flags: msg_flags::TYPE_REPLY | msg_flags::ERROR,
        error: Errno::BUSY.raw_os_error().unsigned_abs(),
    };
    let _ = channel.send(reply, &[], &[]);
}
