// SPDX-License-Identifier: Apache-2.0
//! NVMe over TCP (NVMe over Fabrics 1.1 with the TCP Transport Binding 1.0): the target,
//! and the host side ([`initiator`]) that nvmemu's `identify` and `bench` use.
//!
//! Owns: the PDU codec ([`pdu`], pure and fuzzable), the Fabrics command decode
//! ([`fabrics`]), and a target ([`TcpTarget`]) whose poll group thread owns its listeners,
//! connections and controllers. Each admin Connect makes a new [`nvmemu_ctrl::Controller`];
//! each connection plays host to it through a private memory region (its queue rings and
//! one buffer per command), so everything NVMe (Identify, queues, I/O, reservations, QoS)
//! is the same code that serves vfio-user.
//! May depend on: nvmemu-spec, nvmemu-mem, nvmemu-ctrl.
//! Must never: trust a PDU field, block the poll group on a socket, or buffer without
//! bound (each connection has two buffers, sized by its stage: `admission.rs`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod admission;
mod buffers;
mod config;
mod conn;
mod connect;
mod controllers;
mod discovery;
pub mod fabrics;
mod group;
pub mod initiator;
pub mod pdu;
mod queue;
mod readiness;
mod sendq;
mod stats;
#[cfg(any(test, feature = "test-utils"))]
pub mod test_utils;
mod transfer;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

pub use config::{Subsystems, TcpOptions, TcpSubsystem};
pub use discovery::DISCOVERY_NQN;
pub use stats::TcpStats;

use group::{Control, PollGroup};

/// A running NVMe/TCP target: one poll group thread.
#[derive(Debug)]
pub struct TcpTarget {
    control: Sender<Control>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    subsystems: Subsystems,
    options: TcpOptions,
    stats: stats::SharedStats,
}

impl TcpTarget {
    /// Start the poll group (pinned to `core` if given) serving `subsystems`.
    pub fn start(
        options: TcpOptions,
        subsystems: Subsystems,
        core: Option<usize>,
    ) -> io::Result<TcpTarget> {
        let (control, rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = stats::SharedStats::default();
        let group = PollGroup::new(
            options.clone(),
            subsystems.clone(),
            rx,
            Arc::clone(&stop),
            Arc::clone(&stats),
        )?;
        let thread = std::thread::Builder::new()
            .name("nvmemu-tcp".into())
            .spawn(move || {
                if let Some(core) = core {
                    let mut set = rustix::thread::CpuSet::new();
                    set.set(core);
                    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
                        tracing::warn!(core, %e, "TCP poll group not pinned");
                    }
                }
                group.run();
            })?;
        Ok(TcpTarget {
            control,
            stop,
            thread: Some(thread),
            subsystems,
            options,
            stats,
        })
    }

    /// Listen on `addr` (port 0 picks one); returns the address bound.
    pub fn listen(&self, addr: SocketAddr) -> io::Result<SocketAddr> {
        let l = bind_listener(addr)?;
        l.set_nonblocking(true)?;
        let bound = l.local_addr()?;
        self.control
            .send(Control::Listen(l))
            .map_err(|_| io::Error::other("the TCP poll group has stopped"))?;
        tracing::info!(%bound, "NVMe/TCP listening");
        Ok(bound)
    }

    /// Stop listening on `addr` (connections made through it stay).
    pub fn unlisten(&self, addr: SocketAddr) {
        let _ = self.control.send(Control::Unlisten(addr));
    }

    /// The subsystems served (shared with the poll group).
    pub fn subsystems(&self) -> &Subsystems {
        &self.subsystems
    }

    /// The poll group's counters, as of its last pass.
    pub fn stats(&self) -> TcpStats {
        self.stats.read()
    }

    /// The transport options in effect.
    pub fn options(&self) -> &TcpOptions {
        &self.options
    }
}

/// Backlog of a listener: the kernel caps it at `net.core.somaxconn`. A deep one keeps a
/// burst of connections (hosts reconnecting at once, or a flood) from dropping SYNs, which
/// would cost a legitimate host a second per retry (std's listeners take 128).
const LISTEN_BACKLOG: i32 = 4096;

/// A listening socket on `addr`, with SO_REUSEADDR as std's.
fn bind_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    use rustix::net::{AddressFamily, SocketType, sockopt};
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = rustix::net::socket(family, SocketType::STREAM, None)?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    rustix::net::bind(&fd, &addr)?;
    rustix::net::listen(&fd, LISTEN_BACKLOG)?;
    Ok(TcpListener::from(fd))
}

impl Drop for TcpTarget {
    fn drop(&mut self) {
        // Pairs with the poll group's Acquire load at the top of each pass.
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
