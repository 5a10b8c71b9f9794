// SPDX-License-Identifier: Apache-2.0
//! An owned memory mapping with bounds-checked volatile access (unmapped on Drop).

use std::os::fd::BorrowedFd;

use zerocopy::{FromBytes, Immutable, IntoBytes};

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
    /// mmap, memfd_create, ftruncate or madvise failed.
    #[error("{op} failed")]
    Os {
        /// The operation that failed.
        op: &'static str,
        /// The errno.
        #[source]
        source: std::io::Error,
    },
}

/// What a mapping may be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// Read only.
    Read,
    /// Read and write.
    ReadWrite,
}

/// An owned mapping: `MAP_SHARED` of an fd, or private anonymous zero-filled memory.
///
/// The window `[0, len)` handed to callers may start inside the first mapped page (DMA maps
/// at an unaligned file offset); the whole page-aligned span is unmapped on Drop.
/// `Send + Sync`: all access goes through raw-pointer copies and atomics, never references.
#[derive(Debug)]
pub struct MmapRegion {
    // Filled in by the implementation: base pointer of the page-aligned mapping, its length,
    // the offset of the caller's window inside it, the window length and the protection.
}

impl MmapRegion {
    /// Map `len` bytes of `fd` starting at file `offset`, shared with every other mapping of
    /// the fd. The offset is rounded down and the length up to the fd's page size
    /// (`page_size_of`), as hugetlbfs requires.
    pub fn map_shared(
        fd: BorrowedFd<'_>,
        offset: u64,
        len: u64,
        prot: Protection,
    ) -> Result<MmapRegion, MemError> {
        let _ = (fd, offset, len, prot);
        todo!()
    }

    /// Private anonymous memory of `len` bytes: reads as zero until written, committed by the
    /// kernel only when touched (MAP_NORESERVE), so a large malloc namespace costs nothing
    /// until it is written.
    pub fn anonymous(len: u64) -> Result<MmapRegion, MemError> {
        let _ = len;
        todo!()
    }

    /// Length of the window in bytes.
    pub fn len(&self) -> u64 {
        todo!()
    }

    /// True when the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether writes are allowed.
    pub fn protection(&self) -> Protection {
        todo!()
    }

    /// Copy a `T` out of the mapping (one volatile read of `size_of::<T>()` bytes).
    pub fn read_obj<T: FromBytes>(&self, offset: u64) -> Result<T, MemError> {
        let _ = offset;
        todo!()
    }

    /// Copy a `T` into the mapping.
    pub fn write_obj<T: IntoBytes + Immutable>(
        &self,
        offset: u64,
        value: &T,
    ) -> Result<(), MemError> {
        let _ = (offset, value);
        todo!()
    }

    /// Copy `dst.len()` bytes at `offset` out of the mapping.
    pub fn copy_to(&self, offset: u64, dst: &mut [u8]) -> Result<(), MemError> {
        let _ = (offset, dst);
        todo!()
    }

    /// Copy `src` into the mapping at `offset`.
    pub fn copy_from(&self, offset: u64, src: &[u8]) -> Result<(), MemError> {
        let _ = (offset, src);
        todo!()
    }

    /// Copy `len` bytes from this mapping at `offset` to `dst` at `dst_offset` (the data path:
    /// namespace storage <-> client memory, one memcpy). Overlap is allowed.
    pub fn copy_to_region(
        &self,
        offset: u64,
        dst: &MmapRegion,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), MemError> {
        let _ = (offset, dst, dst_offset, len);
        todo!()
    }

    /// Compare `len` bytes of this mapping at `offset` with `other` at `other_offset`.
    pub fn compare_with(
        &self,
        offset: u64,
        other: &MmapRegion,
        other_offset: u64,
        len: u64,
    ) -> Result<bool, MemError> {
        let _ = (offset, other, other_offset, len);
        todo!()
    }

    /// Set `len` bytes at `offset` to `byte`.
    pub fn fill(&self, offset: u64, len: u64, byte: u8) -> Result<(), MemError> {
        let _ = (offset, len, byte);
        todo!()
    }

    /// Give whole pages inside `[offset, offset + len)` back to the kernel (MADV_DONTNEED:
    /// they read as zero again on an anonymous mapping) and zero the partial pages at the ends.
    /// A control-path call (one syscall), used for Deallocate and large Write Zeroes.
    pub fn discard(&self, offset: u64, len: u64) -> Result<(), MemError> {
        let _ = (offset, len);
        todo!()
    }

    /// Atomic 32-bit load with Acquire ordering (doorbells; pairs with the peer's barrier
    /// before its doorbell store). `offset` must be 4-byte aligned.
    pub fn load_acquire_u32(&self, offset: u64) -> Result<u32, MemError> {
        let _ = offset;
        todo!()
    }

    /// Atomic 32-bit store with Release ordering (event indexes, doorbells on the host side).
    pub fn store_release_u32(&self, offset: u64, value: u32) -> Result<(), MemError> {
        let _ = (offset, value);
        todo!()
    }

    /// Atomic 16-bit store with Release ordering: the CQE status+phase word, written after
    /// the rest of the CQE so the host never sees a new phase with stale fields.
    pub fn store_release_u16(&self, offset: u64, value: u16) -> Result<(), MemError> {
        let _ = (offset, value);
        todo!()
    }

    /// Atomic 16-bit load with Acquire ordering (host side: a CQE's phase word before its body).
    pub fn load_acquire_u16(&self, offset: u64) -> Result<u16, MemError> {
        let _ = offset;
        todo!()
    }
}
