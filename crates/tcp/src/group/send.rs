// SPDX-License-Identifier: Apache-2.0
//! What a pass does for a connection on the way out: the completions its controller posted
//! become PDUs, the socket takes what it will with one `send`, and the connection's timers
//! (ICReq deadline, a stalled peer, the grace of a closing connection) end it when due.

use std::time::Instant;

use super::PollGroup;
use crate::conn::ConnState;

impl PollGroup {
    /// Queue completions and write what the socket takes; enforce the connection's timers.
    pub(super) fn send(&mut self, i: usize, now: Instant) -> usize {
        let Some(mut conn) = self.conns.get_mut(i).and_then(Option::take) else {
            return 0;
        };
        let mut work = 0;
        let mut ctrl = conn
            .queue_of()
            .and_then(|(cntlid, _)| self.ctrls.get_mut(&cntlid));
        if let ConnState::Queue { .. } = &conn.state
            && let Some(c) = ctrl.as_deref_mut()
        {
            work += conn.reap(&mut c.ctrl, &c.doorbells);
        }
        let (wrote, mut failed) = if conn.writable {
            match conn.flush(
                &mut self.counts.socket_writes,
                ctrl.as_deref_mut().map(|c| &mut c.ctrl),
            ) {
                Ok(n) => (n, false),
                Err(_) => (0, true),
            }
        } else {
            (0, false)
        };
        // What the socket did not take of a namespace's data moves to the slots before the
        // controllers run again (`sendq.rs`).
        failed |= !conn.settle(ctrl.map(|c| &mut c.ctrl));
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
}
