// SPDX-License-Identifier: Apache-2.0
//! The poll group's counters, as SPDK's `nvmf_get_stats` reports a poll group: qpairs made
//! (and live), commands taken, passes; and the connections open, refused at the limit and
//! the bytes their buffers hold; and, as SPDK's `thread_get_stats` reports a thread, the
//! time its passes spent busy (a pass that did work) and idle. The poll group counts in
//! plain integers and publishes them once per pass; the control plane reads a [`TcpStats`]
//! snapshot.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of the poll group's counters since the target started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Poll group passes.
    pub polls: u64,
    /// NVMe commands taken from the connections (Fabrics commands aside).
    pub commands: u64,
    /// Admin queues connected (discovery controllers' too).
    pub admin_qpairs: u64,
    /// I/O queues connected.
    pub io_qpairs: u64,
    /// Admin queues connected now.
    pub current_admin_qpairs: u64,
    /// I/O queues connected now.
    pub current_io_qpairs: u64,
    /// `recv` calls on connections (nvmemu's own: how well reads are batched).
    pub socket_reads: u64,
    /// `send` calls on connections.
    pub socket_writes: u64,
    /// TCP connections open now (whatever their stage: before ICReq, Connect, queues).
    pub connections: u64,
    /// Connections closed at once because `max_connections` were open.
    pub connections_refused: u64,
    /// Bytes of the open connections' receive and send buffers (refreshed every 50 ms).
    pub buffer_bytes: u64,
    /// Nanoseconds of passes that did work (accepted, read, completed or sent something),
    /// each timed from its start to the next one's, as SPDK times a poller iteration.
    pub busy_ns: u64,
    /// Nanoseconds of passes that found nothing to do, the sleeps between them included.
    pub idle_ns: u64,
}

impl TcpStats {
    /// A Connect made an admin (`admin`) or I/O queue.
    pub(crate) fn qpair_connected(&mut self, admin: bool) {
        if admin {
            self.admin_qpairs += 1;
            self.current_admin_qpairs += 1;
        } else {
            self.io_qpairs += 1;
            self.current_io_qpairs += 1;
        }
    }

    /// A connection that was an admin (`admin`) or I/O queue closed.
    pub(crate) fn qpair_closed(&mut self, admin: bool) {
        let live = if admin {
            &mut self.current_admin_qpairs
        } else {
            &mut self.current_io_qpairs
        };
        *live = live.saturating_sub(1);
    }
}

/// Where the poll group publishes its counters.
#[derive(Debug, Default)]
pub(crate) struct Published([AtomicU64; 13]);

impl Published {
    /// Called by the poll group only (the one writer), once per pass.
    pub(crate) fn publish(&self, s: &TcpStats) {
        let values = [
            s.polls,
            s.commands,
            s.admin_qpairs,
            s.io_qpairs,
            s.current_admin_qpairs,
            s.current_io_qpairs,
            s.socket_reads,
            s.socket_writes,
            s.connections,
            s.connections_refused,
            s.buffer_bytes,
            s.busy_ns,
            s.idle_ns,
        ];
        for (slot, v) in self.0.iter().zip(values) {
            slot.store(v, Ordering::Relaxed);
        }
    }

    pub(crate) fn read(&self) -> TcpStats {
        let [
            polls,
            commands,
            admin_qpairs,
            io_qpairs,
            current_admin_qpairs,
            current_io_qpairs,
            socket_reads,
            socket_writes,
            connections,
            connections_refused,
            buffer_bytes,
            busy_ns,
            idle_ns,
        ] = self.0.each_ref().map(|a| a.load(Ordering::Relaxed));
        TcpStats {
            polls,
            commands,
            admin_qpairs,
            io_qpairs,
            current_admin_qpairs,
            current_io_qpairs,
            socket_reads,
            socket_writes,
            connections,
            connections_refused,
            buffer_bytes,
            busy_ns,
            idle_ns,
        }
    }
}

/// The shared end the control plane keeps.
pub(crate) type SharedStats = Arc<Published>;
