// SPDX-License-Identifier: Apache-2.0
//! Errors of mapping and accessing memory.

use crate::meminfo::ByteSize;

/// Errors of mapping and accessing memory.
#[derive(Debug, thiserror::Error)]
pub enum MemError {
    /// `offset + len` lies outside the mapping.
    #[error("access at offset {offset:#x} of {len} bytes is outside a mapping of {size:#x} bytes")]
    OutOfBounds {
        /// Offset of the access.
        offset: u64,
        /// Length of the access.
        len: u64,
        /// Size of the mapping.
        size: u64,
    },
    /// An atomic access was not naturally aligned.
    #[error("atomic access at offset {offset:#x} is not aligned")]
    Misaligned {
        /// Offset of the access.
        offset: u64,
    },
    /// A write to a read-only mapping.
    #[error("write to a read-only mapping")]
    ReadOnly,
    /// A populated mapping larger than the memory the kernel can give
    /// (`/proc/meminfo` `MemAvailable`, less `MEMORY_HEADROOM` left to everything else).
    #[error("not enough memory: {asked} asked, {available} available (MemAvailable, of which {headroom} stays free)", headroom = ByteSize(crate::MEMORY_HEADROOM))]
    NotEnoughMemory {
        /// Bytes asked for.
        asked: ByteSize,
        /// `MemAvailable` when asked.
        available: ByteSize,
    },
    /// A hugetlbfs-backed mapping needs more pool pages than are free.
    #[error(
        "not enough huge pages: {asked} of {page_size} asked, {free} free (HugePages_Free less HugePages_Rsvd)"
    )]
    NoHugePages {
        /// Pool pages asked for.
        asked: u64,
        /// Pool pages free and unreserved.
        free: u64,
        /// The default huge page size (0 B: the kernel has no hugetlbfs pages).
        page_size: ByteSize,
    },
    /// MADV_POPULATE_WRITE failed part way (ENOMEM: the kernel ran out of memory; EFAULT:
    /// a page could not be had where a touch would have raised SIGBUS).
    #[error("populating {asked} stopped after {done}")]
    Populate {
        /// Bytes to populate.
        asked: ByteSize,
        /// Bytes populated before the failure (about: chunks run in parallel).
        done: ByteSize,
        /// The errno.
        #[source]
        source: std::io::Error,
    },
    /// mmap, memfd_create, ftruncate or madvise failed (also: a zero or overflowing length,
    /// reported as the EINVAL / EOVERFLOW the kernel would give).
    #[error("{op} failed")]
    Os {
        /// The operation that failed.
        op: &'static str,
        /// The errno.
        #[source]
        source: std::io::Error,
    },
}
