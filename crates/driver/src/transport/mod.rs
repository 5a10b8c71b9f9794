// SPDX-License-Identifier: Apache-2.0
//! How the driver reaches a device: BAR0 registers, the doorbell mapping, DMA registration
//! and PCI config space. The NVMe logic above it never sees a socket.

use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nvmemu_mem::{Iova, MemError, MmapRegion};

pub mod pci;
mod vfio_user;

pub use vfio_user::VfioUserTransport;

use crate::dma::{DMA_POOL_IOVA, DmaPool};
use crate::error::DriverError;

/// Offset of the PCI Command register in config space.
pub const PCI_COMMAND: u64 = 0x04;
/// PCI Command: Bus Master Enable.
pub const PCI_COMMAND_MASTER: u16 = 1 << 2;
/// PCI Command: Memory Space Enable.
pub const PCI_COMMAND_MEMORY: u16 = 1 << 1;
/// PCI Command: INTx Disable.
pub const PCI_COMMAND_INTX_DISABLE: u16 = 1 << 10;

/// Why a transport operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The underlying link (socket, protocol) failed during `op`.
    #[error("{op} failed")]
    Link {
        /// The operation (e.g. "REGION_READ").
        op: &'static str,
        /// What the link reported.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The device does not expose what the driver needs (e.g. no mappable doorbell area).
    #[error("device unsupported: {0}")]
    Unsupported(String),
    /// A register access with a width other than 4 or 8 bytes, or at a bad offset.
    #[error("bad register access at {offset:#x}")]
    BadAccess {
        /// BAR0 offset.
        offset: u64,
    },
    /// A piece of the set-up is missing; the message says which and how to provide it.
    #[error("{0}")]
    Setup(String),
    /// A system call on a device file failed.
    #[error("{what}")]
    Io {
        /// What was being done, and the likely fix.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Mapping the doorbell area failed.
    #[error("mapping the doorbell area failed")]
    Mem(#[from] MemError),
}

/// A device the driver can bring up: NVMe BAR0 registers, the doorbell page, DMA and config
/// space. Register accesses are control-path only; doorbells go through the mapping returned
/// by `map_doorbells`, so the I/O path never calls into the transport.
pub trait Transport: Send {
    /// Read a 32-bit BAR0 register at `offset` (below the doorbells).
    fn read_reg32(&mut self, offset: u64) -> Result<u32, TransportError>;
    /// Read a 64-bit BAR0 register at `offset` (CAP, ASQ, ACQ).
    fn read_reg64(&mut self, offset: u64) -> Result<u64, TransportError>;
    /// Write a 32-bit BAR0 register.
    fn write_reg32(&mut self, offset: u64, value: u32) -> Result<(), TransportError>;
    /// Write a 64-bit BAR0 register.
    fn write_reg64(&mut self, offset: u64, value: u64) -> Result<(), TransportError>;
    /// Map the doorbell area: a mapping whose offset 0 is BAR0 offset 0x1000 and which is at
    /// least 0x1000 bytes long. Called once per attach.
    fn map_doorbells(&mut self) -> Result<Arc<MmapRegion>, TransportError>;
    /// Let the device reach `size` bytes of `fd` from `fd_offset` at `iova`, read and write.
    fn dma_map(
        &mut self,
        fd: BorrowedFd<'_>,
        fd_offset: u64,
        iova: Iova,
        size: u64,
    ) -> Result<(), TransportError>;
    /// Create the driver's DMA pool of `bytes` and make the device reach it. The default
    /// suits transports that register a memfd at an IOVA of our choosing (vfio-user).
    fn create_dma_pool(&mut self, bytes: u64) -> Result<DmaPool, DriverError> {
        let pool = DmaPool::new(bytes, nvmemu_mem::Iova(DMA_POOL_IOVA))?;
        self.dma_map(pool.fd(), 0, pool.iova(), pool.size())?;
        Ok(pool)
    }
    /// Undo a `dma_map` (or `create_dma_pool`) of exactly `[iova, iova + size)`.
    fn dma_unmap(&mut self, iova: Iova, size: u64) -> Result<(), TransportError>;
    /// Read a 16-bit PCI config space register.
    fn config_read16(&mut self, offset: u64) -> Result<u16, TransportError>;
    /// Write a 16-bit PCI config space register.
    fn config_write16(&mut self, offset: u64, value: u16) -> Result<(), TransportError>;
}

/// A transport shared with its owner: the driver uses it while the owner sends its own
/// messages on the same connection (extra DMA maps and unmaps, for soak and hostile tests).
impl<T: Transport> Transport for Arc<Mutex<T>> {
    fn read_reg32(&mut self, offset: u64) -> Result<u32, TransportError> {
        locked(self).read_reg32(offset)
    }
    fn read_reg64(&mut self, offset: u64) -> Result<u64, TransportError> {
        locked(self).read_reg64(offset)
    }
    fn write_reg32(&mut self, offset: u64, value: u32) -> Result<(), TransportError> {
        locked(self).write_reg32(offset, value)
    }
    fn write_reg64(&mut self, offset: u64, value: u64) -> Result<(), TransportError> {
        locked(self).write_reg64(offset, value)
    }
    fn map_doorbells(&mut self) -> Result<Arc<MmapRegion>, TransportError> {
        locked(self).map_doorbells()
    }
    fn dma_map(
        &mut self,
        fd: BorrowedFd<'_>,
        fd_offset: u64,
        iova: Iova,
        size: u64,
    ) -> Result<(), TransportError> {
        locked(self).dma_map(fd, fd_offset, iova, size)
    }
    // Forwarded, not the default: the inner transport may make its pool its own way.
    fn create_dma_pool(&mut self, bytes: u64) -> Result<DmaPool, DriverError> {
        locked(self).create_dma_pool(bytes)
    }
    fn dma_unmap(&mut self, iova: Iova, size: u64) -> Result<(), TransportError> {
        locked(self).dma_unmap(iova, size)
    }
    fn config_read16(&mut self, offset: u64) -> Result<u16, TransportError> {
        locked(self).config_read16(offset)
    }
    fn config_write16(&mut self, offset: u64, value: u16) -> Result<(), TransportError> {
        locked(self).config_write16(offset, value)
    }
}

/// The shared transport, whoever panicked while holding it last (a transport has no
/// invariant a panic could break halfway that the next request would not report).
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Turn on bus mastering and memory decoding and disable INTx, as SPDK's client does
/// before enabling the controller (it polls, and never takes interrupts).
pub fn enable_bus_master(t: &mut dyn Transport) -> Result<(), TransportError> {
    let cmd = t.config_read16(PCI_COMMAND)?;
    t.config_write16(
        PCI_COMMAND,
        cmd | PCI_COMMAND_MASTER | PCI_COMMAND_MEMORY | PCI_COMMAND_INTX_DISABLE,
    )
}
