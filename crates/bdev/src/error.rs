// SPDX-License-Identifier: Apache-2.0
//! Backend errors: a matchable kind plus the operation and byte range that failed.

use nvmemu_mem::{ByteSize, MemError};

/// The operation a [`BdevError`] happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BdevOp {
    /// Creating the bdev.
    Create,
    /// Read.
    Read,
    /// Write.
    Write,
    /// Compare.
    Compare,
    /// Write Zeroes.
    WriteZeroes,
    /// Deallocate (unmap / trim).
    Deallocate,
    /// Flush.
    Flush,
}

/// What went wrong, without context: what the controller maps to an NVMe status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BdevErrorKind {
    /// Bad block size or block count at creation (RPC: invalid parameters).
    InvalidGeometry,
    /// The byte range is outside the bdev (NVMe: LBA Out of Range).
    OutOfRange,
    /// The caller's data buffer could not be accessed: out of its bounds or read-only
    /// (NVMe: Data Transfer Error).
    Buffer,
    /// The backend itself failed: mmap or madvise (NVMe: Internal Error).
    Io,
    /// A malloc bdev's memory could not be mapped or backed at creation (RPC: ENOMEM).
    NoMemory,
    /// A file bdev's file could not be opened or used at creation (RPC: its errno).
    Open,
}

/// A failed bdev operation.
#[derive(Debug, thiserror::Error)]
pub enum BdevError {
    /// Block size not a power of two in 512..=65536, zero blocks, or a size that overflows.
    #[error("invalid geometry: {num_blocks} blocks of {block_size} bytes")]
    InvalidGeometry {
        /// Requested block size.
        block_size: u32,
        /// Requested number of blocks.
        num_blocks: u64,
    },
    /// The memory of a malloc bdev could not be mapped (address space, overcommit policy).
    #[error("cannot map {size} of memory")]
    Map {
        /// Bytes asked for.
        size: ByteSize,
        /// The mmap error.
        #[source]
        source: MemError,
    },
    /// The machine cannot back a malloc bdev with memory: too little available, too few
    /// huge pages, or the kernel ran out while populating.
    #[error("cannot back {size} with memory")]
    NoMemory {
        /// Bytes asked for.
        size: ByteSize,
        /// What was short, with the figures.
        #[source]
        source: MemError,
    },
    /// `[offset, offset + len)` is not inside the bdev.
    #[error("{op:?} of {len} bytes at offset {offset:#x} is outside a bdev of {size:#x} bytes")]
    OutOfRange {
        /// The operation.
        op: BdevOp,
        /// Byte offset in the bdev.
        offset: u64,
        /// Byte length.
        len: u64,
        /// Size of the bdev in bytes.
        size: u64,
    },
    /// The caller's buffer could not be read or written.
    #[error("{op:?} of {len} bytes at offset {offset:#x}: data buffer access failed")]
    Buffer {
        /// The operation.
        op: BdevOp,
        /// Byte offset in the bdev.
        offset: u64,
        /// Byte length.
        len: u64,
        /// The memory error on the buffer.
        #[source]
        source: MemError,
    },
    /// The backing storage failed.
    #[error("{op:?} of {len} bytes at offset {offset:#x} failed")]
    Io {
        /// The operation.
        op: BdevOp,
        /// Byte offset in the bdev.
        offset: u64,
        /// Byte length.
        len: u64,
        /// The memory error on the storage.
        #[source]
        source: MemError,
    },
    /// A file bdev's file could not be opened, or is neither a regular file nor a block
    /// device.
    #[error("cannot use {path} as a bdev")]
    Open {
        /// The path given.
        path: String,
        /// The system's error.
        #[source]
        source: rustix::io::Errno,
    },
    /// A file bdev's file failed an operation.
    #[error("{op:?} of {len} bytes at offset {offset:#x} in the backing file failed")]
    File {
        /// The operation.
        op: BdevOp,
        /// Byte offset in the bdev.
        offset: u64,
        /// Byte length.
        len: u64,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
}

impl BdevError {
    /// The system's errno behind an `Open` or `File` error (what SPDK's RPCs answer with,
    /// negated).
    pub fn errno(&self) -> Option<i32> {
        match self {
            BdevError::Open { source, .. } => Some(source.raw_os_error()),
            BdevError::File { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// The matchable kind of this error.
    pub fn kind(&self) -> BdevErrorKind {
        match self {
            BdevError::InvalidGeometry { .. } => BdevErrorKind::InvalidGeometry,
            BdevError::OutOfRange { .. } => BdevErrorKind::OutOfRange,
            BdevError::Buffer { .. } => BdevErrorKind::Buffer,
            BdevError::Io { .. } | BdevError::File { .. } => BdevErrorKind::Io,
            BdevError::Open { .. } => BdevErrorKind::Open,
            BdevError::Map { .. } | BdevError::NoMemory { .. } => BdevErrorKind::NoMemory,
        }
    }

    /// The operation that failed (`Create` for geometry and memory errors).
    pub fn op(&self) -> BdevOp {
        match self {
            BdevError::InvalidGeometry { .. }
            | BdevError::Map { .. }
            | BdevError::NoMemory { .. }
            | BdevError::Open { .. } => BdevOp::Create,
            BdevError::OutOfRange { op, .. }
            | BdevError::Buffer { op, .. }
            | BdevError::Io { op, .. }
            | BdevError::File { op, .. } => *op,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_and_op_follow_the_variant() {
        let e = BdevError::OutOfRange {
            op: BdevOp::Read,
            offset: 0x1000,
            len: 512,
            size: 0x1000,
        };
        assert_eq!(e.kind(), BdevErrorKind::OutOfRange);
        assert_eq!(e.op(), BdevOp::Read);
        assert_eq!(
            e.to_string(),
            "Read of 512 bytes at offset 0x1000 is outside a bdev of 0x1000 bytes"
        );
        let e = BdevError::Buffer {
            op: BdevOp::Write,
            offset: 0,
            len: 1,
            source: MemError::ReadOnly,
        };
        assert_eq!(e.kind(), BdevErrorKind::Buffer);
        // The source is not repeated in the message.
        assert!(!e.to_string().contains("read-only"));
        let e = BdevError::InvalidGeometry {
            block_size: 100,
            num_blocks: 1,
        };
        assert_eq!(
            (e.kind(), e.op()),
            (BdevErrorKind::InvalidGeometry, BdevOp::Create)
        );
    }
}
