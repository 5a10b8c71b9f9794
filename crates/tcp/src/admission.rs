// SPDX-License-Identifier: Apache-2.0
//! What a connection may cost before it has proven anything: the connection limit (one
//! log line when it is reached and one when there is room again, not one per refusal),
//! and buffers that grow with the connection's stage, so a flood of idle connections
//! holds little memory:
//!
//! | stage | receive buffer | send buffer |
//! |---|---|---|
//! | accepted, before ICReq | 128 B (ICReq) | ICResp and a termination request |
//! | ICReq done, before Connect | one command capsule (8 KiB in-capsule data) | the same |
//! | Connect done (a queue or discovery) | the largest PDU the host may send | two of them |
//!
//! A pass reads every connection's socket, one system call each; with thousands of idle
//! connections that would make every pass slow for the busy ones. So a connection that
//! has sent nothing for [`QUIET_AFTER`] is read once every [`QUIET_EVERY`] passes
//! (staggered by slot) while the group spins, and at once when poll(2) reports it readable
//! after a sleep; its first bytes make it a talking one again. A host waiting more than
//! [`QUIET_AFTER`] between commands is not one whose latency is counted in microseconds.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::buffers::ByteBuf;
use crate::conn::{Conn, ConnState};
use crate::group::PollGroup;
use crate::pdu;

/// How often the buffer bytes in the statistics are summed again.
const ACCOUNT_EVERY: Duration = Duration::from_millis(50);
/// Silence after which a connection counts as quiet.
const QUIET_AFTER: Duration = Duration::from_millis(10);
/// A quiet connection is read in one pass of this many.
const QUIET_EVERY: u64 = 128;

/// The poll group's admission state.
#[derive(Debug)]
pub(crate) struct Admission {
    /// Connections are being refused (the limit was reached and has not eased since).
    refusing: bool,
    /// When the buffer bytes were last summed.
    accounted: Instant,
}

impl Default for Admission {
    fn default() -> Self {
        Admission {
            refusing: false,
            accounted: Instant::now(),
        }
    }
}

impl PollGroup {
    /// Whether a connection just accepted from `peer` may stay: false when
    /// `max_connections` are open (the caller drops it, which closes it).
    pub(crate) fn admit(&mut self, peer: SocketAddr) -> bool {
        let (open, max) = (self.open, self.opts.max_connections);
        if open < max {
            if self.admission.refusing {
                self.admission.refusing = false;
                tracing::info!(open, max, "NVMe/TCP connections accepted again");
            }
            return true;
        }
        self.counts.connections_refused += 1;
        if !self.admission.refusing {
            self.admission.refusing = true;
            tracing::warn!(
                max,
                %peer,
                "NVMe/TCP connection limit reached: new connections are closed at once until \
                 some end (raise max_connections if the hosts are legitimate)"
            );
        }
        false
    }

    /// Whether connection `i` is quiet and not due this pass, so its receive (`sending`
    /// false) or send step has nothing to do. Bytes already received are always parsed and
    /// a connected queue is always sent for (its completions go out whether or not its
    /// host is talking); the others only have timers, which 128 passes do not delay much.
    pub(crate) fn quiet_now(&self, i: usize, now: Instant, sending: bool) -> bool {
        let Some(c) = self.conns.get(i).and_then(Option::as_ref) else {
            return false;
        };
        if c.read_due(now, self.counts.polls, i) {
            return false;
        }
        if sending {
            c.tx.is_empty() && !matches!(c.state, ConnState::Queue { .. } | ConnState::Discovery(_))
        } else {
            // PDUs already read (waiting for room to answer them) are parsed every pass.
            c.rx.is_empty()
        }
    }

    /// Refresh the connection counts for the statistics; the buffer bytes at most every
    /// [`ACCOUNT_EVERY`] (a walk over every connection).
    pub(crate) fn account(&mut self, now: Instant) {
        self.counts.connections = self.open as u64;
        if now.saturating_duration_since(self.admission.accounted) < ACCOUNT_EVERY {
            return;
        }
        self.admission.accounted = now;
        self.counts.buffer_bytes = (self.conns.iter().flatten())
            .map(|c| (c.rx.capacity() + c.tx.capacity()) as u64)
            .sum();
    }
}

impl Conn {
    /// ICReq done: room for one command capsule (Connect, or any the negotiated sizes
    /// allow) and for the answers a connection that is not yet a queue may get.
    pub(crate) fn size_for_connect(&mut self) {
        self.rx.resize(self.neg.max_capsule());
        self.tx.resize(pdu::IC_HLEN + 2 * pdu::MAX_SMALL_PDU);
    }

    /// Connect done: room for the largest PDU the host may send, and for two of the
    /// largest answers (a read's data, the discovery log).
    pub(crate) fn size_for_queue(&mut self) {
        let max = self.neg.max_h2c_pdu();
        self.rx.resize(max);
        self.tx.resize(2 * (max + pdu::MAX_SMALL_PDU));
    }

    /// Whether the socket is read in pass `pass`: always while the host talks, one pass
    /// in [`QUIET_EVERY`] (staggered by `slot`) once it is quiet.
    fn read_due(&self, now: Instant, pass: u64, slot: usize) -> bool {
        now.saturating_duration_since(self.last_heard) < QUIET_AFTER
            || pass.wrapping_add(slot as u64).is_multiple_of(QUIET_EVERY)
    }

    /// Read what the socket has into `rx` (the connection's receive buffer, held by the
    /// caller) at `now`, in pass `pass`, if it is due (`slot` staggers the quiet ones); a
    /// skipped read is WouldBlock.
    pub(crate) fn read_into(
        &mut self,
        rx: &mut ByteBuf,
        now: Instant,
        pass: u64,
        slot: usize,
    ) -> io::Result<usize> {
        if !self.read_due(now, pass, slot) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let got = rx.fill_from(&mut self.sock);
        if got.as_ref().is_ok_and(|&n| n > 0) {
            self.last_heard = now;
        }
        got
    }
}
