// SPDX-License-Identifier: Apache-2.0
//! The client's DMA regions: IOVA -> mapping (vfio-user `VFIO_USER_DMA_MAP`).
//!
//! A `GuestMemory` is an immutable snapshot. The control thread builds a new one on each
//! DMA_MAP/DMA_UNMAP and hands it to the poller; the old snapshot (and with it the mmaps of
//! removed regions) is dropped only after the poller has let go of it.

use std::sync::Arc;

use crate::{MemError, MmapRegion};

/// An I/O virtual address as the client's DMA_MAP defined it (guest physical address for
/// QEMU, the process's own virtual address for SPDK's client).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Iova(pub u64);

/// Direction of a DMA access, checked against the region's protection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The device reads client memory (SQEs, write data, PRP lists).
    Read,
    /// The device writes client memory (CQEs, read data).
    Write,
}

/// How a DMA region is backed.
#[derive(Debug, Clone)]
pub enum DmaBacking {
    /// Mapped from the fd the client passed: usable zero-copy.
    Mapped(Arc<MmapRegion>),
    /// The client passed no fd (QEMU ROM/BIOS blocks, its own view of our BAR): recorded so
    /// the map succeeds, but any command that touches it fails with Data Transfer Error.
    NoFd,
}

/// One DMA region.
#[derive(Debug, Clone)]
pub struct DmaRegion {
    /// First IOVA.
    pub iova: Iova,
    /// Size in bytes (non-zero).
    pub size: u64,
    /// Whether the device may write it (DMA_MAP flag WRITE).
    pub writable: bool,
    /// Backing.
    pub backing: DmaBacking,
}

/// Why an IOVA could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DmaError {
    /// No region covers the whole `[iova, iova + len)` range.
    #[error("IOVA {iova:#x} + {len:#x} is not inside one DMA region")]
    NotMapped {
        /// First IOVA of the access.
        iova: u64,
        /// Length of the access.
        len: u64,
    },
    /// The region has no fd, so the device cannot reach it.
    #[error("IOVA {iova:#x} is in a region mapped without an fd")]
    NoFd {
        /// First IOVA of the access.
        iova: u64,
    },
    /// A device write to a read-only region.
    #[error("IOVA {iova:#x} is in a read-only region")]
    ReadOnly {
        /// First IOVA of the access.
        iova: u64,
    },
    /// A new region overlaps an existing one (vfio-user: EEXIST).
    #[error("region {iova:#x} + {size:#x} overlaps an existing region")]
    Overlap {
        /// First IOVA of the new region.
        iova: u64,
        /// Size of the new region.
        size: u64,
    },
    /// DMA_UNMAP named a range that is not exactly one existing region.
    #[error("no region is exactly {iova:#x} + {size:#x}")]
    NoSuchRegion {
        /// First IOVA named.
        iova: u64,
        /// Size named.
        size: u64,
    },
    /// Zero size or `iova + size` overflows.
    #[error("region {iova:#x} + {size:#x} is empty or wraps")]
    BadRange {
        /// First IOVA named.
        iova: u64,
        /// Size named.
        size: u64,
    },
}

/// A snapshot of the client's DMA regions, sorted by IOVA, none overlapping.
#[derive(Debug, Clone, Default)]
pub struct GuestMemory {
    regions: Vec<DmaRegion>,
}

impl GuestMemory {
    /// An empty table.
    pub fn new() -> GuestMemory {
        GuestMemory::default()
    }

    /// A copy of this table with `region` added; fails on overlap, zero size or wrap.
    pub fn with_region(&self, region: DmaRegion) -> Result<GuestMemory, DmaError> {
        let _ = region;
        todo!()
    }

    /// A copy of this table without the region that is exactly `[iova, iova + size)`.
    pub fn without_region(&self, iova: Iova, size: u64) -> Result<GuestMemory, DmaError> {
        let _ = (iova, size);
        todo!()
    }

    /// The regions, sorted by IOVA.
    pub fn regions(&self) -> &[DmaRegion] {
        &self.regions
    }

    /// Resolve `[iova, iova + len)` to a mapping and the offset inside it. The range must lie
    /// in one fd-backed region that allows `access`. Binary search: O(log regions).
    pub fn translate(
        &self,
        iova: Iova,
        len: u64,
        access: Access,
    ) -> Result<(&Arc<MmapRegion>, u64), DmaError> {
        let _ = (iova, len, access);
        todo!()
    }

    /// Copy a `T` out of client memory at `iova`.
    pub fn read_obj<T: zerocopy::FromBytes>(&self, iova: Iova) -> Result<T, DmaError> {
        let _ = iova;
        todo!()
    }

    /// Copy `src` into client memory at `iova`.
    pub fn write_bytes(&self, iova: Iova, src: &[u8]) -> Result<(), DmaError> {
        let _ = (iova, src);
        todo!()
    }

    /// Copy client memory at `iova` into `dst`.
    pub fn read_bytes(&self, iova: Iova, dst: &mut [u8]) -> Result<(), DmaError> {
        let _ = (iova, dst);
        todo!()
    }
}

impl From<MemError> for DmaError {
    fn from(_: MemError) -> DmaError {
        // translate() checks bounds first, so a MemError after it means a bug, reported as
        // unmapped memory rather than a panic.
        DmaError::NotMapped { iova: 0, len: 0 }
    }
}
