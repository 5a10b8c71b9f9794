// SPDX-License-Identifier: Apache-2.0
//! The emulated NVMe device: PCI function, vfio-user glue, pollers.
//!
//! Owns: the PCI config space and BAR layout, MSI-X eventfds, the doorbell page, the control
//! thread that serves each controller's vfio-user socket, and the pinned poller threads that
//! own the controllers and run their queues, placed by core mask and NUMA node (`numa`: the
//! nodes as sysfs lists them). May depend on: spec, mem, vfio-user, bdev, ctrl.
//! Must never: touch a controller from a thread other than its poller (control threads send
//! the poller a closure instead), or make a syscall on the I/O path other than the MSI-X
//! eventfd write.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod admission;
pub mod affinity;
mod backoff;
mod budget;
mod function;
mod idle;
pub mod irq;
pub mod mailbox;
pub mod numa;
pub mod pci;
pub mod poller;
pub mod regions;
mod resync;
mod target;

pub use admission::Admission;
pub use affinity::{CoreMaskError, parse_core_mask, parse_cpu_list};
pub use budget::ClientBudget;
pub use mailbox::CALL_TIMEOUT;
pub use numa::{NumaNode, NumaTopology, PlacementError};
pub use nvmemu_vfio_user::Deadlines;
pub use poller::{Backoff, PollerStatsSnapshot};
pub use target::{ControllerSpec, Target, TargetConfig, TargetError, socket_path};

/// The PCI function without a [`Target`] around it, for a harness that serves one
/// connection in-process and runs the poller's mailbox itself (the fuzz target
/// `vfio_user_device`).
#[cfg(feature = "test-utils")]
pub use function::{NvmeFunction, create_doorbells};

/// Identifies a controller within a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ControllerId(pub u32);
