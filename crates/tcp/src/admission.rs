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
//! Idle connections cost no system call per pass either: the poll group visits only the
//! connections epoll names or that have work (`readiness.rs`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::conn::Conn;
use crate::group::PollGroup;
use crate::pdu;

/// How often the buffer bytes in the statistics are summed again.
const ACCOUNT_EVERY: Duration = Duration::from_millis(50);

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
    /// `max_connections` are open in all groups together (the caller drops it, which
    /// closes it).
    pub(crate) fn admit(&mut self, peer: SocketAddr) -> bool {
        let (open, max) = (self.groups.total(), self.opts.max_connections);
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

    /// Refresh the connection counts for the statistics; the buffer bytes at most every
    /// [`ACCOUNT_EVERY`] (a walk over every connection).
    pub(crate) fn account(&mut self, now: Instant) {
        self.counts.connections = self.groups.load(self.index) as u64;
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
}
