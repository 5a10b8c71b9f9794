// SPDX-License-Identifier: Apache-2.0
//! memfd creation (doorbell page, driver DMA buffers).

use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::fs::{self, MemfdFlags, SealFlags, Stat};

use crate::MemError;

/// The huge page size MFD_HUGETLB gives by default (x86-64, aarch64 with 4 KiB base pages).
const HUGE_PAGE: u64 = 2 << 20;

/// Create a memfd of `size` bytes named `name` (for /proc/PID/maps). With `hugetlb`, try
/// MFD_HUGETLB first (2 MiB pages; `size` is rounded up) and fall back to normal pages when
/// the kernel has none to give.
///
/// The fd is close-on-exec and sealed against resizing (`F_SEAL_SHRINK | F_SEAL_GROW |
/// F_SEAL_SEAL`): whoever it is handed to (a vfio-user client gets the doorbell memfd from
/// REGION_INFO) cannot `ftruncate` it, so no mapping of it can fault (see `fault.rs`).
/// On the hugetlb path the pages are reserved up front (one probe
/// mapping), so a later `MmapRegion::map_shared` of the whole fd cannot fail for lack of
/// huge pages. Callers learn the page size actually used from [`page_size_of`].
pub fn create_memfd(name: &str, size: u64, hugetlb: bool) -> Result<OwnedFd, MemError> {
    if let Some(fd) = hugetlb.then(|| create_hugetlb(name, size)).flatten() {
        return Ok(fd);
    }
    let fd = fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
        .map_err(|e| os("memfd_create", e))?;
    fs::ftruncate(&fd, size).map_err(|e| os("ftruncate", e))?;
    seal_size(&fd).map_err(|e| os("fcntl(F_ADD_SEALS)", e))?;
    Ok(fd)
}

/// Fix the size of a memfd for good: no shrink, no grow, no change of seals.
fn seal_size(fd: &OwnedFd) -> rustix::io::Result<()> {
    fs::fcntl_add_seals(fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
}

/// The MFD_HUGETLB attempt: `None` on any failure (no hugetlbfs, no free huge pages, size
/// overflow), so the caller falls back to normal pages.
fn create_hugetlb(name: &str, size: u64) -> Option<OwnedFd> {
    let size = size.max(1).checked_next_multiple_of(HUGE_PAGE)?;
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::HUGETLB | MemfdFlags::ALLOW_SEALING;
    let fd = fs::memfd_create(name, flags).ok()?;
    fs::ftruncate(&fd, size).ok()?;
    seal_size(&fd).ok()?;
    // Huge pages of a shared hugetlbfs mapping are reserved at mmap time and stay reserved
    // for the file after munmap, so one probe mapping tells whether the pool can back it.
    crate::MmapRegion::map_shared(
        std::os::fd::AsFd::as_fd(&fd),
        0,
        size,
        crate::Protection::ReadWrite,
    )
    .ok()?;
    Some(fd)
}

/// The page size backing `fd` (`fstat().st_blksize`: 4 KiB, or 2 MiB / 1 GiB on hugetlbfs).
///
/// A block size that is not a power of two or is smaller than the system page size (some
/// filesystems report odd values) is replaced by the system page size, so the result is
/// always a valid mmap alignment.
pub fn page_size_of(fd: BorrowedFd<'_>) -> Result<u64, MemError> {
    let st = fs::fstat(fd).map_err(|e| os("fstat", e))?;
    Ok(page_size_of_stat(&st))
}

/// [`page_size_of`] for an already fetched `Stat`.
pub(crate) fn page_size_of_stat(st: &Stat) -> u64 {
    let sys = system_page_size();
    match u64::try_from(st.st_blksize) {
        Ok(bs) if bs.is_power_of_two() && bs >= sys => bs,
        _ => sys,
    }
}

/// The kernel's base page size.
pub(crate) fn system_page_size() -> u64 {
    // usize is 64 bits on every target this crate builds for (see lib.rs).
    rustix::param::page_size() as u64
}

/// Wrap an errno from `op`.
pub(crate) fn os(op: &'static str, e: rustix::io::Errno) -> MemError {
    MemError::Os {
        op,
        source: e.into(),
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn memfd_has_requested_size_and_page_size() {
        let fd = create_memfd("nvmemu-test", 12345, false).unwrap();
        let st = fs::fstat(&fd).unwrap();
        assert_eq!(st.st_size, 12345);
        assert_eq!(page_size_of(fd.as_fd()).unwrap(), system_page_size());
    }

    #[test]
    fn hugetlb_request_gives_a_usable_fd_either_way() {
        let fd = create_memfd("nvmemu-huge", 4096, true).unwrap();
        let st = fs::fstat(&fd).unwrap();
        let page = page_size_of(fd.as_fd()).unwrap();
        if page == HUGE_PAGE {
            assert_eq!(st.st_size, i64::try_from(HUGE_PAGE).unwrap());
        } else {
            // Fell back to normal pages: the size is as asked.
            assert_eq!(page, system_page_size());
            assert_eq!(st.st_size, 4096);
        }
    }

    #[test]
    fn memfd_cannot_be_resized_by_whoever_holds_it() {
        for hugetlb in [false, true] {
            let fd = create_memfd("nvmemu-sealed", 8192, hugetlb).unwrap();
            assert_eq!(fs::ftruncate(&fd, 0), Err(rustix::io::Errno::PERM));
            assert_eq!(fs::ftruncate(&fd, 1 << 30), Err(rustix::io::Errno::PERM));
            assert_eq!(
                fs::fcntl_add_seals(&fd, SealFlags::WRITE),
                Err(rustix::io::Errno::PERM)
            );
        }
    }

    #[test]
    fn name_with_nul_is_an_error_not_a_panic() {
        assert!(matches!(
            create_memfd("bad\0name", 4096, false),
            Err(MemError::Os {
                op: "memfd_create",
                ..
            })
        ));
    }
}
