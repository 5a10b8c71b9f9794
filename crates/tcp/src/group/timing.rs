// SPDX-License-Identifier: Apache-2.0
//! The per-layer timing of the group's controllers (`bdev_enable_histogram`), switched and
//! read through the control channel, and the two readings a pass takes for it; the report
//! of each controller (counters, timing, queue connections) the RPCs read.
//!
//! The group marks its controllers' passes (`PassMarks::Transport`, set when each is made): a command is *seen*
//! at the start of the pass whose `recv` brought its capsule (or the last of its H2CData),
//! before any PDU of the pass is parsed, and its *irq* is the end of the pass, once every
//! visited connection's completions were turned into PDUs and handed to its socket. So the
//! queued layer holds the parsing of the pass's PDUs, and the interrupt layer the response
//! PDUs' encoding and the `send`. Off (no bdev enabled), a pass tests one flag and reads no
//! clock.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::mpsc::Sender;

use nvmemu_ctrl::ControllerStats;
use nvmemu_ctrl::timing::TimingSnapshot;
use nvmemu_mem::TscClock;

use super::PollGroup;
use crate::conn::ConnState;
use crate::controllers::FabricsCtrl;

/// A copy of one TCP controller's counters and timing, taken on its poll group.
#[derive(Debug, Clone)]
pub struct ControllerReport {
    /// Its controller ID.
    pub cntlid: u16,
    /// The subsystem it belongs to.
    pub subnqn: String,
    /// The host NQN its Connect gave.
    pub hostnqn: String,
    /// The host identifier its Connect gave.
    pub hostid: [u8; 16],
    /// The host's address on the admin queue's connection.
    pub peer: Option<SocketAddr>,
    /// The poll group it lives on (its place in the target's groups).
    pub group: usize,
    /// Its queues' connections, admin queue first.
    pub queues: Vec<QueueReport>,
    /// Its counters.
    pub stats: ControllerStats,
    /// Its timing (None while no namespace of it is timed).
    pub timing: Option<TimingSnapshot>,
}

/// One connected queue of a TCP controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueReport {
    /// Its queue ID (0: admin).
    pub qid: u16,
    /// The host's end of its connection.
    pub peer: SocketAddr,
    /// The target's end (the listener's address as the host reached it), if the socket
    /// still says.
    pub local: Option<SocketAddr>,
}

/// Bdevs whose histograms are enabled, with their granularity: the group's copy of the
/// switch, applied to the controllers a later Connect makes.
#[derive(Debug, Default)]
pub(crate) struct TimedBdevs(BTreeMap<String, u32>);

impl PollGroup {
    /// Turn timing of `bdev` on or off on every controller of the group that uses it, and
    /// on the controllers made from now on.
    pub(super) fn set_timing(&mut self, bdev: &str, enable: bool, granularity: u32) {
        if enable {
            self.timed.0.entry(bdev.to_owned()).or_insert(granularity);
        } else {
            self.timed.0.remove(bdev);
        }
        for c in self.ctrls.values_mut() {
            switch(c, bdev, enable, granularity);
        }
    }

    /// A controller made by a Connect of this pass starts timed if its bdevs are; its first
    /// pass starts now.
    pub(crate) fn time_new_controller(&self, c: &mut FabricsCtrl) {
        for (bdev, &g) in &self.timed.0 {
            switch(c, bdev, true, g);
        }
        c.ctrl.transport_pass_begins(TscClock::ticks());
    }

    /// Whether some bdev's histogram is on (the pass then takes its two readings).
    #[inline(always)]
    pub(super) fn timing_on(&self) -> bool {
        !self.timed.0.is_empty()
    }

    /// The pass begins, before any connection is read.
    pub(super) fn timing_pass_begins(&mut self) {
        let now = TscClock::ticks();
        for c in self.ctrls.values_mut() {
            c.ctrl.transport_pass_begins(now);
        }
    }

    /// The pass's completions were handed to the sockets.
    pub(super) fn timing_pass_ends(&mut self) {
        let mut now = None;
        for c in self.ctrls.values_mut() {
            if c.ctrl.timing_awaits_pass_end() {
                let t = *now.get_or_insert_with(TscClock::ticks);
                c.ctrl.transport_pass_ends(t);
            }
        }
    }

    /// Send a copy of every controller's counters, timing and queue connections to `to`.
    pub(super) fn report(&self, to: &Sender<Vec<ControllerReport>>) {
        let mut queues: BTreeMap<u16, Vec<QueueReport>> = BTreeMap::new();
        for conn in self.conns.iter().flatten() {
            if let ConnState::Queue { cntlid, q } = &conn.state {
                queues.entry(*cntlid).or_default().push(QueueReport {
                    qid: q.mem.qid.0,
                    peer: conn.peer,
                    local: conn.sock.local_addr().ok(),
                });
            }
        }
        let list = self
            .ctrls
            .iter()
            .map(|(&cntlid, c)| ControllerReport {
                cntlid,
                subnqn: c.subnqn.clone(),
                hostnqn: c.hostnqn.clone(),
                hostid: c.hostid,
                peer: c.peer,
                group: self.index,
                queues: {
                    let mut q = queues.remove(&cntlid).unwrap_or_default();
                    q.sort_by_key(|q| q.qid);
                    q
                },
                stats: c.ctrl.stats(),
                timing: c.ctrl.timing(),
            })
            .collect();
        // The caller may have given up waiting.
        let _ = to.send(list);
    }
}

/// Switch `bdev` on `c`, if one of its namespaces uses it (a controller without it keeps
/// no timing state, so costs nothing).
fn switch(c: &mut FabricsCtrl, bdev: &str, enable: bool, granularity: u32) {
    let uses = c.ctrl.namespaces().any(|n| n.bdev().name() == bdev);
    if uses || !enable {
        c.ctrl.set_timing(bdev, enable, granularity);
    }
}
