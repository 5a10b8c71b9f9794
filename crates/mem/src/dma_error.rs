// SPDX-License-Identifier: Apache-2.0
//! [`DmaError`]: why the DMA table refused an IOVA range or a change to itself.

use crate::MemError;

/// Why an IOVA could not be used.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
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
    /// The region's memory was taken away by the client (its file shrunk under a mapping,
    /// and the fault that revealed it was recovered): nothing there can be transferred.
    #[error("IOVA {iova:#x} is in a region whose memory the client took away")]
    Lost {
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
    /// DMA_UNMAP named a range that cuts through a region (only whole regions unmap).
    #[error("unmapping {iova:#x} + {size:#x} would split the region at {region:#x}")]
    SplitsRegion {
        /// First IOVA named.
        iova: u64,
        /// Size named.
        size: u64,
        /// The first IOVA of the region the range cuts through.
        region: u64,
    },
    /// Zero size, `iova + size` wraps past the end of the address space, or the region is
    /// larger than the mapping backing it.
    #[error("region {iova:#x} + {size:#x} is empty, wraps or exceeds its mapping")]
    BadRange {
        /// First IOVA named.
        iova: u64,
        /// Size named.
        size: u64,
    },
    /// [`GuestMemory::lookup`](crate::GuestMemory::lookup) refused a range that one region
    /// of the same snapshot maps for this access. A snapshot never changes and a lost
    /// mapping stays lost, so the lookup and the reason for its refusal disagree: a bug,
    /// named as one rather than reported as `NotMapped`.
    #[error(
        "IOVA {iova:#x} + {len:#x} was refused though a DMA region maps it for this access \
         (the table's lookup and its refusal disagree: a bug)"
    )]
    Inconsistent {
        /// First IOVA of the access.
        iova: u64,
        /// Length of the access.
        len: u64,
    },
    /// The access to a translated mapping failed (a bug: translate checks bounds and
    /// protection first). Carries the `MemError` rendered as text so `DmaError` stays `Eq`.
    #[error("memory access failed: {reason}")]
    Mem {
        /// The `MemError` message, with its source if any.
        reason: String,
    },
}

impl From<MemError> for DmaError {
    fn from(e: MemError) -> DmaError {
        let reason = match std::error::Error::source(&e) {
            Some(src) => format!("{e}: {src}"),
            None => e.to_string(),
        };
        DmaError::Mem { reason }
    }
}
