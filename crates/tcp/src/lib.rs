// SPDX-License-Identifier: Apache-2.0
//! NVMe over TCP (NVMe over Fabrics 1.1 with the TCP Transport Binding 1.0): the target,
//! and the host side ([`initiator`]) that nvmemu's `identify` and `bench` use.
//!
//! Owns: the PDU codec ([`pdu`], pure and fuzzable), the Fabrics command decode
//! ([`fabrics`]), and a target ([`TcpTarget`]) of one or more poll group threads, each
//! owning its connections and the controllers they made (a connection whose Connect names
//! another group's controller moves there: `handover.rs`). Each admin Connect makes a new
//! [`nvmemu_ctrl::Controller`]; each connection plays host to it through a private memory
//! region (its queue rings and one buffer per command), so everything NVMe (Identify,
//! queues, I/O, reservations, QoS) is the same code that serves vfio-user. The
//! controllers' per-layer timing is switched and read through the groups' control
//! channels ([`TcpTarget::set_timing`], [`TcpTarget::controllers`]); each group marks its
//! controllers' passes (`group/timing.rs`).
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
mod handover;
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
use std::sync::mpsc::{Receiver, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use config::{Subsystems, TcpOptions, TcpSubsystem};
pub use discovery::DISCOVERY_NQN;
pub use group::{ControllerReport, QueueReport};
pub use stats::TcpStats;

use group::{Control, PollGroup};
use handover::{Door, Groups};

/// A running NVMe/TCP target: one thread per poll group.
#[derive(Debug)]
pub struct TcpTarget {
    groups: Arc<Groups>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    subsystems: Subsystems,
    options: TcpOptions,
    stats: Vec<stats::SharedStats>,
}

impl TcpTarget {
    /// Start one poll group per entry of `cores` (pinned to that core if Some; no entry:
    /// one unpinned group) serving `subsystems`. Group 0 accepts the connections.
    pub fn start(
        options: TcpOptions,
        subsystems: Subsystems,
        cores: &[Option<usize>],
    ) -> io::Result<TcpTarget> {
        let cores = if cores.is_empty() { &[None][..] } else { cores };
        let stop = Arc::new(AtomicBool::new(false));
        let (mut doors, mut ends) = (Vec::new(), Vec::new());
        for _ in cores {
            let (control, rx) = channel();
            let ready = readiness::Readiness::new()?;
            doors.push(Door {
                control,
                waker: ready.waker(),
            });
            ends.push((rx, ready));
        }
        let groups = Arc::new(Groups::new(doors));
        let mut target = TcpTarget {
            groups: Arc::clone(&groups),
            stop: Arc::clone(&stop),
            threads: Vec::new(),
            subsystems: subsystems.clone(),
            options: options.clone(),
            stats: Vec::new(),
        };
        for (index, (end, &core)) in ends.into_iter().zip(cores).enumerate() {
            let published = stats::SharedStats::default();
            target.stats.push(Arc::clone(&published));
            let group = PollGroup::new(
                (index, Arc::clone(&groups)),
                end,
                options.clone(),
                subsystems.clone(),
                Arc::clone(&stop),
                published,
            );
            // On failure `target` drops: the groups started so far stop and are joined.
            let thread = std::thread::Builder::new()
                .name(format!("nvmemu-tcp{index}"))
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
            target.threads.push(thread);
        }
        Ok(target)
    }

    /// Listen on `addr` (port 0 picks one); returns the address bound.
    pub fn listen(&self, addr: SocketAddr) -> io::Result<SocketAddr> {
        let l = bind_listener(addr)?;
        l.set_nonblocking(true)?;
        let bound = l.local_addr()?;
        if !self.groups.send(0, Control::Listen(l)) {
            return Err(io::Error::other("the TCP poll group has stopped"));
        }
        tracing::info!(%bound, "NVMe/TCP listening");
        Ok(bound)
    }

    /// Stop listening on `addr` (connections made through it stay).
    pub fn unlisten(&self, addr: SocketAddr) {
        let _ = self.groups.send(0, Control::Unlisten(addr));
    }

    /// The subsystems served (shared with the poll groups).
    pub fn subsystems(&self) -> &Subsystems {
        &self.subsystems
    }

    /// All poll groups' counters together, as of each one's last pass.
    pub fn stats(&self) -> TcpStats {
        self.group_stats()
            .into_iter()
            .fold(TcpStats::default(), |a, b| a + b)
    }

    /// Each poll group's counters, in group order, as of its last pass.
    pub fn group_stats(&self) -> Vec<TcpStats> {
        self.stats.iter().map(|s| s.read()).collect()
    }

    /// The transport options in effect.
    pub fn options(&self) -> &TcpOptions {
        &self.options
    }

    /// Turn the per-layer timing of bdev `bdev` on or off (`bdev_enable_histogram`) on
    /// every controller that uses it, and on those later Connects make; returns once every
    /// poll group has applied it (or [`CONTROL_WAIT`] passed). Enabling an enabled bdev
    /// keeps its counts; `granularity` applies where timing starts.
    pub fn set_timing(&self, bdev: &str, enable: bool, granularity: u32) {
        let answers = self.ask_groups(|done| Control::SetTiming {
            bdev: bdev.to_owned(),
            enable,
            granularity,
            done,
        });
        let _ = collect(answers);
    }

    /// Every controller's counters and timing, copied on its poll group (a group that does
    /// not answer within [`CONTROL_WAIT`] is left out).
    pub fn controllers(&self) -> Vec<ControllerReport> {
        let answers = self.ask_groups(Control::Report);
        collect(answers).into_iter().flatten().collect()
    }

    /// Send every poll group the request `make` builds around a reply channel; the
    /// channels of those that took it.
    fn ask_groups<T>(
        &self,
        make: impl Fn(std::sync::mpsc::Sender<T>) -> Control,
    ) -> Vec<Receiver<T>> {
        (0..self.groups.len())
            .filter_map(|g| {
                let (tx, rx) = channel();
                self.groups.send(g, make(tx)).then_some(rx)
            })
            .collect()
    }
}

/// Longest the control plane waits for the poll groups' answers: a group answers at the
/// start of its next pass (it is woken if asleep), so only a stopped or stuck one takes it.
pub const CONTROL_WAIT: Duration = Duration::from_secs(5);

/// The answers that come within [`CONTROL_WAIT`] of now.
fn collect<T>(answers: Vec<Receiver<T>>) -> Vec<T> {
    let deadline = Instant::now() + CONTROL_WAIT;
    answers
        .into_iter()
        .filter_map(|rx| {
            rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .ok()
        })
        .collect()
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
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
