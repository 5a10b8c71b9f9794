// SPDX-License-Identifier: Apache-2.0
//! What the TCP target serves: its transport options (SPDK's `nvmf_create_transport -t TCP`
//! names) and the subsystems a Connect may name.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nvmemu_ctrl::Namespace;

/// Transport options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpOptions {
    /// Largest I/O queue (entries), SPDK's `max_queue_depth` (`-q`).
    pub max_queue_depth: u16,
    /// I/O queue pairs per controller, SPDK's `max_io_qpairs_per_ctrlr` (`-m`).
    pub max_io_qpairs: u16,
    /// Largest in-capsule data on I/O queues (IOCCSZ), SPDK's `in_capsule_data_size`
    /// (`-c`); at least the 1 KiB of Connect data, which an I/O queue's Connect carries.
    pub in_capsule_data_size: u32,
    /// Largest H2CData PDU (MAXH2CDATA), SPDK's `io_unit_size` (`-u`).
    pub io_unit_size: u32,
    /// Largest transfer of one command (sets MDTS), SPDK's `max_io_size`.
    pub max_io_size: u32,
    /// Largest admin queue (entries), SPDK's `max_aq_depth`.
    pub max_aq_depth: u16,
    /// Time a new connection has to complete its ICReq, and a started PDU or a pending
    /// send has to make progress.
    pub stall_timeout: Duration,
    /// Most connections open at once; more are accepted and closed at once.
    pub max_connections: usize,
    /// SPDK's `c2h_success` (on unless `-o`): a successful read's C2HData carries SUCCESS
    /// and no response capsule follows, whether or not the host disabled SQ flow control,
    /// as SPDK's target does. Off, SUCCESS is used only where TP 8000 allows it: on the
    /// queues of a host that disabled SQ flow control.
    pub c2h_success: bool,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            max_queue_depth: 128,
            max_io_qpairs: 127,
            in_capsule_data_size: 4096,
            io_unit_size: 131_072,
            max_io_size: 131_072,
            max_aq_depth: 128,
            stall_timeout: Duration::from_secs(5),
            max_connections: 16_384,
            c2h_success: true,
        }
    }
}

impl TcpOptions {
    /// MDTS for `max_io_size` (a power of two of 4 KiB pages, rounded down; at most 2 MiB,
    /// what one page of PRP list covers).
    pub fn mdts(&self) -> u8 {
        u8::try_from((self.max_io_size / 4096).max(1).ilog2().min(9)).unwrap_or(0)
    }

    /// The transfer size MDTS allows, the size of each command's buffer.
    pub fn slot_bytes(&self) -> u32 {
        4096u32 << self.mdts()
    }
}

/// A subsystem as the TCP target sees it.
#[derive(Debug, Clone)]
pub struct TcpSubsystem {
    /// Serial number its controllers report.
    pub serial: String,
    /// Model number.
    pub model: String,
    /// Any host may connect; otherwise only those in `hosts`.
    pub allow_any_host: bool,
    /// Allowed host NQNs.
    pub hosts: Vec<String>,
    /// Highest NSID.
    pub max_namespaces: u32,
    /// Its namespaces; each new controller attaches clones (same bdev, same reservations).
    pub namespaces: Vec<Namespace>,
    /// TCP addresses it is listened on (the discovery log page lists them).
    pub listeners: Vec<SocketAddr>,
}

impl TcpSubsystem {
    /// Whether `hostnqn` may connect.
    pub fn admits(&self, hostnqn: &str) -> bool {
        self.allow_any_host || self.hosts.iter().any(|h| h == hostnqn)
    }
}

/// The subsystems by NQN, shared by the control plane (which changes them) and the poll
/// group (which reads them on Connect only, never per I/O).
#[derive(Debug, Clone, Default)]
pub struct Subsystems(Arc<Mutex<BTreeMap<String, TcpSubsystem>>>);

impl Subsystems {
    /// The table, locked.
    pub fn lock(&self) -> MutexGuard<'_, BTreeMap<String, TcpSubsystem>> {
        // A panic while holding it is a bug; the table itself stays consistent.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
