// SPDX-License-Identifier: Apache-2.0
//! The emulated NVMe controller (NVMe Base 1.4), transport-agnostic.
//!
//! Owns: the BAR0 register file and the CC/CSTS state machine, the submission and
//! completion queue rings in client memory, the PRP/SGL walk, the admin command set
//! (Identify, queues, features, log pages, AER, Doorbell Buffer Config) and the NVM I/O
//! commands on namespaces backed by [`nvmemu_bdev::Bdev`]s.
//! May depend on: nvmemu-spec, nvmemu-mem, nvmemu-bdev. Must never: see a socket, a
//! vfio-user message or a thread; the device crate owns those and drives a [`Controller`]
//! from one poller thread (`mmio_read`/`mmio_write` for BAR0 accesses, `poll` for the rings).
//!
//! Everything the host writes (registers, doorbells, SQEs, PRP lists, SGLs) is validated
//! on a private copy; mistakes become NVMe status codes or controller fatal status, logged at
//! `debug` under the `guest` target, never panics. The I/O path does no allocation, locking,
//! formatting or system call.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::indexing_slicing)]

mod admin;
#[cfg(any(test, feature = "test-utils"))]
#[doc(hidden)]
pub mod bench_hooks;
mod config;
mod controller;
mod ctrl_faults;
mod doorbell;
mod dptr;
mod fabrics;
mod fault;
mod fetch;
mod hold;
mod instruments;
mod io;
mod latency;
mod metrics;
mod model;
mod namespace;
mod poll;
mod qos;
mod queue;
mod regs;
mod reservation;
mod resv_notify;
mod state;
#[cfg(any(test, feature = "test-utils"))]
pub mod test_utils;
pub mod timing;

pub use admin::identify::ONCS;
pub use config::ControllerConfig;
pub use controller::{Controller, CtrlError, InterruptSink, MmioError};
pub use ctrl_faults::{FatalRecord, FatalRefused};
pub use fabrics::FabricsIdentity;
pub use hold::MAX_HELD;
pub use io::InPlaceRead;
pub use io::file_io::{COMPARE_BUF, COMPARE_BUFS, FILE_SLOTS};
pub use latency::{LatencyHook, LatencyTable, Stage};
pub use metrics::{ControllerStats, QueueCounters};
pub use namespace::Namespace;
pub use reservation::MAX_REGISTRANTS;
pub use state::CtrlState;
