// SPDX-License-Identifier: Apache-2.0
//! A poll group's counters, as SPDK's `nvmf_get_stats` reports a poll group: qpairs made
//! (and live), commands taken, passes; and the connections open, refused at the limit,
//! handed to another group and the bytes their buffers hold; and, as SPDK's
//! `thread_get_stats` reports a thread, the time its passes spent busy (a pass that did
//! work) and idle. Each poll group counts in plain integers and publishes them once per
//! pass; the control plane reads [`TcpStats`] snapshots, one per group or their sum.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a poll group's counters (or of all groups' together) since the target
/// started.
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
    /// Connections moved to the group of the controller their Connect named.
    pub handed_over: u64,
}

/// The fields in publishing order.
macro_rules! fields {
    ($m:ident) => {
        $m!(
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
            handed_over,
            busy_ns,
            idle_ns
        )
    };
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

/// Where a poll group publishes its counters.
#[derive(Debug, Default)]
pub(crate) struct Published([AtomicU64; 14]);

impl Published {
    /// Called by the poll group only (the one writer), once per pass.
    pub(crate) fn publish(&self, s: &TcpStats) {
        macro_rules! values {
            ($($f:ident),*) => { [$(s.$f),*] };
        }
        for (slot, v) in self.0.iter().zip(fields!(values)) {
            slot.store(v, Ordering::Relaxed);
        }
    }

    pub(crate) fn read(&self) -> TcpStats {
        let v = self.0.each_ref().map(|a| a.load(Ordering::Relaxed));
        let mut s = TcpStats::default();
        macro_rules! assign {
            ($($f:ident),*) => {
                for (dst, v) in [$(&mut s.$f),*].into_iter().zip(v) {
                    *dst = v;
                }
            };
        }
        fields!(assign);
        s
    }
}

impl std::ops::Add for TcpStats {
    type Output = TcpStats;

    /// The counters of two groups together.
    fn add(mut self, o: TcpStats) -> TcpStats {
        macro_rules! sum {
            ($($f:ident),*) => { $(self.$f += o.$f;)* };
        }
        fields!(sum);
        self
    }
}

/// The shared end the control plane keeps.
pub(crate) type SharedStats = Arc<Published>;
