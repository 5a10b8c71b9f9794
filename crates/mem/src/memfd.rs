// SPDX-License-Identifier: Apache-2.0
//! memfd creation (doorbell page, driver DMA buffers).

use std::os::fd::{BorrowedFd, OwnedFd};

use crate::MemError;

/// Create a memfd of `size` bytes named `name` (for /proc/PID/maps). With `hugetlb`, try
/// MFD_HUGETLB first (2 MiB pages; `size` is rounded up) and fall back to normal pages when
/// the kernel has none to give.
pub fn create_memfd(name: &str, size: u64, hugetlb: bool) -> Result<OwnedFd, MemError> {
    let _ = (name, size, hugetlb);
    todo!()
}

/// The page size backing `fd` (`fstat().st_blksize`: 4 KiB, or 2 MiB / 1 GiB on hugetlbfs).
pub fn page_size_of(fd: BorrowedFd<'_>) -> Result<u64, MemError> {
    let _ = fd;
    todo!()
}
