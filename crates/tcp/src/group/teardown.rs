// SPDX-License-Identifier: Apache-2.0
//! Ending connections and controllers: a closed I/O queue detaches from its controller, a
//! closed admin queue removes the controller and every connection of it, and a controller
//! whose Keep Alive timer expired goes the same way.

use std::time::Instant;

use super::PollGroup;
use crate::conn::{Conn, ConnState};

impl PollGroup {
    /// End connection `i` (already taken out of its slot): its queue goes; the admin queue
    /// takes its controller and every other connection of it along.
    #[expect(clippy::boxed_local, reason = "connections live boxed in their slots")]
    pub(crate) fn close(&mut self, i: usize, conn: Box<Conn>) {
        let conn = *conn;
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
                    .and_then(|c| c.queue_of())
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

    pub(super) fn expire_controllers(&mut self, now: Instant) {
        let expired: Vec<u16> = self
            .ctrls
            .iter()
            .filter(|(_, c)| c.expired(now))
            .map(|(id, _)| *id)
            .collect();
        for cntlid in expired {
            tracing::info!(cntlid, "NVMe/TCP keep alive timeout: controller removed");
            let admin = self.conns.iter().position(|c| {
                c.as_ref().and_then(|c| c.queue_of()) == Some((cntlid, nvmemu_spec::Qid::ADMIN))
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
