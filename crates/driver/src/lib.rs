// SPDX-License-Identifier: Apache-2.0
//! A userspace NVMe driver that attaches to any vfio-user NVMe server (nvmemu's own target,
//! SPDK's `nvmf_tgt` with the VFIOUSER transport), or to an NVMe PCI function of this machine
//! bound to `uio_pci_generic` or `vfio-pci` ([`AttachedController::attach_pci`],
//! `transport::pci`).
//!
//! Owns: controller bring-up and shutdown (NVMe Base 1.4, 7.6), the admin queue, I/O queue
//! pairs with PRP lists, the DMA memory pool, and the `Transport` seam to a device.
//! May depend on: `nvmemu-spec`, `nvmemu-mem`, `nvmemu-vfio-user`. Must never: depend on the
//! emulated controller (`ctrl`, `device`, `bdev`), use `unsafe`, or trust what the device
//! writes back (CQEs, identify data): bad values become errors, never panics.
//!
//! # Model
//!
//! [`AttachedController::attach`] connects to `<dir>/cntrl`, maps the BAR0 doorbell page,
//! registers one memfd-backed [`DmaPool`] with DMA_MAP, enables the controller, identifies it
//! and its namespaces and creates the I/O queues. Each [`IoQpair`] is then owned by one thread:
//!
//! ```no_run
//! # use nvmemu_driver::*;
//! # use nvmemu_spec::{Lba, Nsid};
//! # fn main() -> Result<(), DriverError> {
//! let mut ctrl = AttachedController::attach(
//!     std::path::Path::new("/var/run/nvmemu/0"),
//!     AttachOptions { io_queues: 1, queue_depth: 128, dma_pool_bytes: 16 << 20, ..Default::default() },
//! )?;
//! let buf = ctrl.alloc_dma(4096)?;
//! let mut qp = ctrl.take_qpair().expect("one queue pair");
//! buf.copy_from(0, &[0xA5; 4096])?;
//! qp.write_blocking(Nsid(1), Lba(0), 8, &buf)?; // 8 x 512-byte blocks
//! qp.submit_read(Nsid(1), Lba(0), 8, &buf, 42)?;
//! qp.ring()?;
//! let mut done = 0;
//! while done == 0 {
//!     done += qp.poll_completions(16, |token, res| assert_eq!((token, res.is_ok()), (42, true)))?;
//! }
//! drop(qp);
//! ctrl.shutdown()?;
//! # Ok(()) }
//! ```
//!
//! All device memory is reached through `nvmemu-mem` copies and atomics: the SQE copy
//! happens before the Release store of the SQ tail doorbell, and the CQE status/phase word
//! is loaded with Acquire before the rest of the CQE is read.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod commands;
mod controller;
mod dma;
mod dma_addrs;
mod error;
mod identify;
mod init;
mod namespace;
mod prp;
mod qpair;
mod queue;
mod transport;

#[cfg(test)]
mod e2e_tests;
#[cfg(any(test, feature = "test-utils"))]
pub mod test_utils;
#[cfg(test)]
mod vfio_e2e_tests;

pub use controller::{
    ADMIN_QUEUE_DEPTH, ADMIN_TIMEOUT, AttachOptions, AttachedController, IO_CQ_DEPTH_FACTOR,
    MAX_TRANSFER_CAP,
};
pub use dma::{DMA_PAGE, DMA_POOL_IOVA, DmaAllocError, DmaBuf, DmaPool};
pub use error::{DriverError, NvmeError};
pub use identify::{IDENTIFY_BYTES, IdentifyController, IdentifyNamespace, LbaFormat};
pub use init::{CC_ENABLE, Cap};
pub use namespace::ActiveNamespace;
pub use qpair::{BLOCKING_TIMEOUT, IoQpair};
pub use transport::pci::{BadPciAddress, PciAccess, PciAddress, PciTransport, sysfs};
pub use transport::{
    PCI_COMMAND, PCI_COMMAND_INTX_DISABLE, PCI_COMMAND_MASTER, PCI_COMMAND_MEMORY, Transport,
    TransportError, VfioUserTransport,
};

/// Raw SQE builders, for tests and tools that send commands by hand.
pub mod sqe {
    pub use crate::commands::{
        async_event_request, cns, create_io_cq, create_io_sq, deallocate, delete_io_cq,
        delete_io_sq, fid, flush, get_features, get_log_page, identify, rw, set_features,
        set_num_queues,
    };
}

/// Compile-time check that a queue pair can move to another thread.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<IoQpair>();
    send::<AttachedController>();
    send::<DmaBuf>();
};
