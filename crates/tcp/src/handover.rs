// SPDX-License-Identifier: Apache-2.0
//! Several poll groups: where an accepted connection goes, which group owns each controller,
//! and the hand-over of a connection to the group that owns its controller.
//!
//! Group 0 accepts; each connection goes to the group with the fewest connections (ties in
//! turn, so equal groups are filled round robin, as SPDK's default placement does). A
//! controller belongs to the group whose connection made it (its admin queue): its rings,
//! its DMA table and its queues' connections are that group's alone, so no lock or shared
//! cache line sits on the I/O path. An I/O queue's Connect names the controller (CNTLID);
//! when that controller is another group's, the connection moves there whole (its socket,
//! its negotiated parameters and every byte already read, the Connect first), through the
//! owner's control channel, and the owner's next pass handles the Connect as its own. The
//! socket leaves this group's epoll set before it is sent, so exactly one group reads it and
//! nothing read is lost or reordered. Neither side waits: the channel never blocks, and an
//! eventfd wakes the owner if it sleeps.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::conn::Conn;
use crate::fabrics::ConnectData;
use crate::group::{Control, PollGroup};
use crate::readiness::Waker;

/// Connections accepted per listener per pass.
const ACCEPT_BATCH: usize = 64;
/// Highest controller ID a dynamic controller gets (FFF0h and up are reserved).
const MAX_CNTLID: u16 = 0xFFEF;

/// How to reach one group from another thread.
#[derive(Debug)]
pub(crate) struct Door {
    pub(crate) control: Sender<Control>,
    pub(crate) waker: Waker,
}

/// What the groups of one target share. Touched on accept, Connect and close, never per
/// command.
#[derive(Debug)]
pub(crate) struct Groups {
    doors: Vec<Door>,
    /// Connections each group owns or has been sent (placement, the connection limit).
    loads: Box<[AtomicUsize]>,
    /// The group of each controller, by CNTLID (CNTLIDs are unique across the groups).
    owners: Mutex<BTreeMap<u16, usize>>,
}

impl Groups {
    pub(crate) fn new(doors: Vec<Door>) -> Groups {
        let loads = doors.iter().map(|_| AtomicUsize::new(0)).collect();
        Groups {
            doors,
            loads,
            owners: Mutex::new(BTreeMap::new()),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.doors.len()
    }

    /// Send `c` to group `to` and wake it; false when that group has stopped.
    pub(crate) fn send(&self, to: usize, c: Control) -> bool {
        let Some(door) = self.doors.get(to) else {
            return false;
        };
        if door.control.send(c).is_err() {
            return false;
        }
        door.waker.wake();
        true
    }

    /// Connections group `g` owns or is being sent. Relaxed: a placement hint and a limit
    /// that may be off by the connections in flight; nothing else is ordered by it.
    pub(crate) fn load(&self, g: usize) -> usize {
        self.loads.get(g).map_or(0, |l| l.load(Ordering::Relaxed))
    }

    /// Connections of all groups.
    pub(crate) fn total(&self) -> usize {
        (0..self.len()).map(|g| self.load(g)).sum()
    }

    /// Group `g` got a connection (or one is on its way to it).
    pub(crate) fn gain(&self, g: usize) {
        if let Some(l) = self.loads.get(g) {
            l.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Group `g` closed or gave away a connection.
    pub(crate) fn lose(&self, g: usize) {
        if let Some(l) = self.loads.get(g) {
            let _ = l.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
        }
    }

    fn owners(&self) -> MutexGuard<'_, BTreeMap<u16, usize>> {
        // Every change is one insert or remove: a panic elsewhere leaves the map whole.
        self.owners.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lowest free CNTLID, now group `g`'s; None when all are taken.
    pub(crate) fn claim_cntlid(&self, g: usize) -> Option<u16> {
        let mut owners = self.owners();
        let id = (1..=MAX_CNTLID).find(|id| !owners.contains_key(id))?;
        owners.insert(id, g);
        Some(id)
    }

    /// Controller `cntlid` is gone.
    pub(crate) fn release_cntlid(&self, cntlid: u16) {
        self.owners().remove(&cntlid);
    }

    /// The group that owns controller `cntlid`.
    pub(crate) fn owner(&self, cntlid: u16) -> Option<usize> {
        self.owners().get(&cntlid).copied()
    }
}

impl PollGroup {
    /// Accept what the listeners have and place each connection on a group.
    pub(crate) fn accept(&mut self, now: Instant) -> usize {
        let mut accepted = Vec::new();
        for l in &self.listeners {
            for _ in 0..ACCEPT_BATCH {
                match l.accept() {
                    Ok(pair) => accepted.push(pair),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        tracing::debug!(%e, "accept failed");
                        break;
                    }
                }
            }
        }
        let n = accepted.len();
        for (sock, peer) in accepted {
            if !self.admit(peer) {
                continue;
            }
            if sock.set_nonblocking(true).is_err() {
                continue;
            }
            let _ = sock.set_nodelay(true);
            let deadline = now + self.opts.stall_timeout;
            let conn = Box::new(Conn::new(sock, peer, self.negotiated(), deadline));
            let to = self.place();
            self.groups.gain(to);
            if to == self.index {
                self.adopt(conn);
            } else if !self.groups.send(to, Control::Adopt(conn)) {
                self.groups.lose(to);
            }
        }
        n
    }

    /// The group for a connection just accepted: the fewest connections, ties taken in turn.
    pub(crate) fn place(&mut self) -> usize {
        let n = self.groups.len().max(1);
        let first = self.next_placement % n;
        let best = (0..n)
            .map(|k| (first + k) % n)
            .min_by_key(|&g| self.groups.load(g))
            .unwrap_or(0);
        self.next_placement = best + 1;
        best
    }

    /// The group that owns the controller an I/O queue's Connect names, when that is not
    /// this one (None: this group handles the Connect, and refuses it if the controller is
    /// nobody's).
    pub(crate) fn owner_elsewhere(&self, qid: u16, data: &[u8]) -> Option<usize> {
        if qid == 0 || self.groups.len() < 2 {
            return None;
        }
        let cntlid = ConnectData::parse(data).ok()?.cntlid;
        self.groups.owner(cntlid).filter(|&g| g != self.index)
    }

    /// Move connection `i` (taken out of its slot, its Connect still unread in its receive
    /// buffer) to group `to`.
    pub(crate) fn hand_over(&mut self, i: usize, mut conn: Box<Conn>, to: usize) {
        if let Err(e) = self.ready.remove_conn(&conn.sock) {
            // Left in this set, its events would name a slot another connection may take.
            tracing::warn!(%e, peer = %conn.peer, "cannot move a TCP connection; closed");
            self.close(i, conn);
            return;
        }
        self.free_slot(i, conn.listed);
        self.groups.lose(self.index);
        self.counts.handed_over += 1;
        // The new owner reads the socket and parses what is buffered before any event.
        conn.listed = false;
        conn.readable = true;
        conn.writable = true;
        tracing::debug!(peer = %conn.peer, from = self.index, to, "NVMe/TCP connection moved to its controller's poll group");
        self.groups.gain(to);
        if !self.groups.send(to, Control::Adopt(conn)) {
            // The target is stopping: the connection closes with the dropped message.
            self.groups.lose(to);
        }
    }

    /// A connection another group handed over (already counted in this group's load).
    pub(crate) fn adopt(&mut self, conn: Box<Conn>) {
        if !self.install(conn) {
            self.groups.lose(self.index);
        }
    }
}
