// SPDX-License-Identifier: Apache-2.0
//! An owned memory mapping with bounds-checked raw-pointer access (unmapped on Drop):
//! creation and bounds here; copies, atomics and hints in the submodules.

mod atomic;
mod copy;
mod error;
mod hints;
mod send;

use std::ffi::c_void;
use std::os::fd::BorrowedFd;
use std::ptr::{self, NonNull};

use rustix::fs::{self, FileType};
use rustix::mm::{self, Advice, MapFlags, ProtFlags};

pub use error::MemError;
pub use send::{MAX_SEND_PIECES, SendPiece, SendPieces};

use crate::memfd::{os, page_size_of_stat, system_page_size};

/// What a mapping may be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// Read only.
    Read,
    /// Read and write.
    ReadWrite,
}

/// Where a mapping's pages come from; decides how `discard` gives them back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `MAP_SHARED` of an fd: the pages belong to the file.
    Shared,
    /// `MAP_PRIVATE | MAP_ANONYMOUS`: the pages belong to this mapping.
    Anonymous,
}

/// An owned mapping: `MAP_SHARED` of an fd, or private anonymous zero-filled memory.
///
/// The window `[0, len)` handed to callers may start inside the first mapped page (DMA maps
/// at an unaligned file offset); the whole page-aligned span is unmapped on Drop.
/// `Send + Sync`: all access goes through raw-pointer copies and atomics, never references.
#[derive(Debug)]
pub struct MmapRegion {
    /// Start of the page-aligned mapping, as mmap returned it.
    base: NonNull<u8>,
    /// Length of the page-aligned mapping, as passed to mmap.
    map_len: usize,
    /// Start of the caller's window: `base + (offset - aligned offset)`.
    window: NonNull<u8>,
    /// Length of the caller's window; `window + len <= base + map_len`.
    len: u64,
    /// Protection the mapping was created with.
    prot: Protection,
    /// Shared file pages or private anonymous pages.
    kind: Kind,
    /// Page size of the mapping (the fd's `page_size_of`, or the system page size).
    page_size: u64,
    /// Shared mappings: the registration that makes a SIGBUS inside them survivable
    /// (`fault.rs`); dropped before the munmap.
    fault: Option<crate::fault::Registration>,
}

// SAFETY: MmapRegion owns its mapping exclusively (nothing else unmaps it) and holds no
// thread-affine state. Every access from any thread goes through raw-pointer copies
// (ptr::copy, write_bytes, read_unaligned) or atomics, never through a Rust reference into
// the mapping, so concurrent use from several threads creates no aliasing `&`/`&mut`.
unsafe impl Send for MmapRegion {}
// SAFETY: as for Send: `&MmapRegion` only allows bounds-checked raw copies and atomics; the
// mapping is not freed while any `&MmapRegion` exists (munmap happens only in Drop).
unsafe impl Sync for MmapRegion {}

/// u64 -> usize; lossless because lib.rs only builds for 64-bit targets.
#[inline(always)]
#[allow(clippy::cast_possible_truncation)]
fn us(x: u64) -> usize {
    x as usize
}

/// An EINVAL / EOVERFLOW for a bad length passed to `op`.
fn bad_len(op: &'static str, overflow: bool) -> MemError {
    let errno = if overflow {
        rustix::io::Errno::OVERFLOW
    } else {
        rustix::io::Errno::INVAL
    };
    os(op, errno)
}

/// Anonymous mappings at least this large ask for transparent huge pages: a malloc
/// namespace read at random offsets otherwise spends most of each small copy in TLB misses.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

impl MmapRegion {
    /// Map `len` bytes of `fd` starting at file `offset`, shared with every other mapping of
    /// the fd. The offset is rounded down and the length up to the fd's page size
    /// (`page_size_of`), as hugetlbfs requires.
    ///
    /// For a regular file (memfd, hugetlbfs, tmpfs) `offset + len` must lie inside the file
    /// (`OutOfBounds` with the file size otherwise): touching a mapped page past the end of
    /// the file would raise SIGBUS. A zero `len` fails with EINVAL, an overflowing
    /// `offset + len` with EOVERFLOW.
    pub fn map_shared(
        fd: BorrowedFd<'_>,
        offset: u64,
        len: u64,
        prot: Protection,
    ) -> Result<MmapRegion, MemError> {
        if len == 0 {
            return Err(bad_len("mmap", false));
        }
        let end = offset
            .checked_add(len)
            .ok_or_else(|| bad_len("mmap", true))?;
        let st = fs::fstat(fd).map_err(|e| os("fstat", e))?;
        if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
            let size = u64::try_from(st.st_size).unwrap_or(0);
            if end > size {
                return Err(MemError::OutOfBounds { offset, len, size });
            }
        }
        let page = page_size_of_stat(&st);
        let aligned = offset - offset % page;
        let delta = offset - aligned;
        let map_len = (delta + len)
            .checked_next_multiple_of(page)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| bad_len("mmap", true))?;
        let flags = match prot {
            Protection::Read => ProtFlags::READ,
            Protection::ReadWrite => ProtFlags::READ | ProtFlags::WRITE,
        };
        // SAFETY: a null hint without MAP_FIXED lets the kernel pick unused address space, so
        // no existing Rust allocation or mapping is replaced. `map_len` is non-zero and `fd`
        // is a live borrowed fd for the duration of the call.
        let base = unsafe {
            mm::mmap(
                ptr::null_mut(),
                map_len,
                flags,
                MapFlags::SHARED,
                fd,
                aligned,
            )
        }
        .map_err(|e| os("mmap", e))?;
        let mut region = Self::from_raw_parts(base, map_len, delta, len, prot, Kind::Shared, page)?;
        // A client may shrink the file later: register, so touching a vanished page is
        // recovered instead of killing the process (on failure `region` unmaps on drop).
        region.fault = Some(crate::fault::register(
            region.base.addr().get(),
            map_len,
            us(page),
        )?);
        Ok(region)
    }

    /// Private anonymous memory of `len` bytes: reads as zero until written, committed by the
    /// kernel only when touched (MAP_NORESERVE), so a large malloc namespace costs nothing
    /// until it is written. A zero `len` fails with EINVAL. See
    /// [`MmapRegion::anonymous_populated`] for memory that is backed from the start.
    pub fn anonymous(len: u64) -> Result<MmapRegion, MemError> {
        Self::map_anonymous(len, system_page_size(), MapFlags::NORESERVE)
    }

    /// Private anonymous memory of `len` bytes in pages of `page` bytes, mmap'ed with
    /// `MAP_PRIVATE | extra` (`NORESERVE` for lazy memory, `HUGETLB` for pool pages; the
    /// caller passes a `page` that matches). Base-page mappings of at least [`HUGE_PAGE`]
    /// are rounded up to a whole huge page, which lets the kernel align them for transparent
    /// huge pages, and advised MADV_HUGEPAGE.
    ///
    /// A base-page mapping sits between two inaccessible guard areas (a huge page each, or
    /// a page for small ones; address space only): the kernel merges neighbouring anonymous
    /// mappings with the same flags into one VMA, and the guards keep this one apart, so
    /// `/proc/self/smaps` reports its residency alone. Hugetlb mappings have a file each
    /// and never merge.
    pub(crate) fn map_anonymous(
        len: u64,
        page: u64,
        extra: MapFlags,
    ) -> Result<MmapRegion, MemError> {
        if len == 0 {
            return Err(bad_len("mmap", false));
        }
        let hugetlb = extra.contains(MapFlags::HUGETLB);
        let thp = !hugetlb && len >= HUGE_PAGE as u64;
        let round = if thp { HUGE_PAGE as u64 } else { page };
        let guard = match (hugetlb, thp) {
            (true, _) => 0,
            (false, true) => HUGE_PAGE,
            (false, false) => us(page),
        };
        let inner = len
            .checked_next_multiple_of(round)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| bad_len("mmap", true))?;
        let map_len = inner
            .checked_add(2 * guard)
            .ok_or_else(|| bad_len("mmap", true))?;
        // SAFETY: a null hint without MAP_FIXED lets the kernel pick unused address space, so
        // no existing Rust allocation or mapping is replaced; `map_len` is non-zero (and a
        // multiple of the huge page size for MAP_HUGETLB, as munmap will need).
        let base = unsafe {
            mm::mmap_anonymous(
                ptr::null_mut(),
                map_len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | extra,
            )
        }
        .map_err(|e| os("mmap", e))?;
        // From here on, Drop unmaps the whole [base, base + map_len) on any error.
        let region = Self::from_raw_parts(
            base,
            map_len,
            guard as u64,
            len,
            Protection::ReadWrite,
            Kind::Anonymous,
            page,
        )?;
        if guard > 0 {
            let tail = region.window.as_ptr().wrapping_add(inner);
            for at in [region.base.as_ptr(), tail] {
                // SAFETY: [at, at + guard) is the head or the tail guard of the mapping
                // region owns: page aligned, inside it, outside the window handed to
                // callers (window = base + guard, window + inner + guard = base + map_len),
                // so no access path of MmapRegion ever reaches it; PROT_NONE only makes it
                // inaccessible.
                unsafe { mm::mprotect(at.cast(), guard, mm::MprotectFlags::empty()) }
                    .map_err(|e| os("mprotect", e))?;
            }
        }
        if thp {
            // SAFETY: [window, window + inner) is the accessible part of the mapping region
            // owns, handed to nobody yet; MADV_HUGEPAGE only lets the kernel back it with
            // transparent huge pages (contents and address range unchanged). Failure (THP
            // off) is harmless.
            let _ =
                unsafe { mm::madvise(region.window.as_ptr().cast(), inner, Advice::LinuxHugepage) };
        }
        Ok(region)
    }

    /// The window rounded out to whole pages, `[window, window + len up to a page)`: for
    /// the population and residency code of this crate, which works on whole pages. Only
    /// meaningful for anonymous mappings, whose window starts on a page.
    pub(crate) fn mapping(&self) -> (NonNull<u8>, usize) {
        let len = self
            .len
            .checked_next_multiple_of(self.page_size)
            .map_or(self.map_len, |l| us(l).min(self.map_len));
        (self.window, len)
    }

    /// Wrap what mmap returned. `delta + len <= map_len` holds by construction at every
    /// call site (map_len is `delta + len` rounded up to a page, or the window plus two
    /// guards).
    fn from_raw_parts(
        base: *mut c_void,
        map_len: usize,
        delta: u64,
        len: u64,
        prot: Protection,
        kind: Kind,
        page_size: u64,
    ) -> Result<MmapRegion, MemError> {
        debug_assert!(delta + len <= map_len as u64);
        // mmap without MAP_FIXED never places a mapping at address 0; should it ever, refuse
        // it rather than hand out a null window (the mapping then leaks, which is harmless).
        let base =
            NonNull::new(base.cast::<u8>()).ok_or_else(|| os("mmap", rustix::io::Errno::FAULT))?;
        // SAFETY: `delta + len <= map_len` (see above), so base + delta lies inside the
        // mapping that mmap just returned.
        let window = unsafe { base.add(us(delta)) };
        Ok(MmapRegion {
            base,
            map_len,
            window,
            len,
            prot,
            kind,
            page_size,
            fault: None,
        })
    }

    /// Address of the page-aligned mapping (fault registration tests).
    #[cfg(test)]
    pub(crate) fn base_addr(&self) -> usize {
        self.base.addr().get()
    }

    /// Virtual address of the window's first byte: what VFIO's MAP_DMA and
    /// `/proc/self/pagemap` are told; never turned back into a pointer here.
    pub fn addr(&self) -> usize {
        self.window.addr().get()
    }

    /// Length of the window in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether writes are allowed.
    pub fn protection(&self) -> Protection {
        self.prot
    }

    /// The page size of the mapping: the fd's page size for `map_shared` (2 MiB on
    /// hugetlbfs), the system page size for `anonymous`. `discard` frees whole pages of it.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// Whether the client took this shared mapping's memory away under us: a fault in it was
    /// recovered (`fault.rs`), so it is private zero memory now and stays so. Always false
    /// for anonymous mappings. One Relaxed load.
    #[inline(always)]
    pub fn is_lost(&self) -> bool {
        self.fault.as_ref().is_some_and(|r| r.is_lost())
    }

    /// Check that `[offset, offset + len)` lies inside the window (`OutOfBounds` otherwise),
    /// without touching memory: for callers that validate a buffer they then ignore (a null
    /// namespace dropping a write).
    #[inline]
    pub fn check_range(&self, offset: u64, len: u64) -> Result<(), MemError> {
        self.span(offset, len).map(|_| ())
    }

    /// Pointer to `[offset, offset + len)` of the window, or `OutOfBounds`.
    #[inline(always)]
    fn span(&self, offset: u64, len: u64) -> Result<*mut u8, MemError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {
                // SAFETY: offset <= end <= self.len, and the window [window, window + len)
                // lies inside the live mapping, so the result is in bounds (or one past the
                // end for an empty access at offset == len).
                Ok(unsafe { self.window.as_ptr().add(us(offset)) })
            }
            _ => Err(MemError::OutOfBounds {
                offset,
                len,
                size: self.len,
            }),
        }
    }

    /// `span` for a write: also `ReadOnly` on a read-only mapping (a store would SIGSEGV).
    #[inline(always)]
    fn span_mut(&self, offset: u64, len: u64) -> Result<*mut u8, MemError> {
        if self.prot == Protection::Read {
            return Err(MemError::ReadOnly);
        }
        self.span(offset, len)
    }

    /// `span` of `N` bytes that must also be `N`-aligned in memory (atomics).
    #[inline(always)]
    fn span_aligned<const N: usize>(&self, offset: u64, write: bool) -> Result<*mut u8, MemError> {
        let p = if write {
            self.span_mut(offset, N as u64)?
        } else {
            self.span(offset, N as u64)?
        };
        if p.addr() & (N - 1) != 0 {
            return Err(MemError::Misaligned { offset });
        }
        Ok(p)
    }
}

impl Drop for MmapRegion {
    fn drop(&mut self) {
        // Unregister first: once unmapped, the address range may be reused by another mapping.
        drop(self.fault.take());
        // SAFETY: base/map_len are exactly what mmap returned for this region, which owns the
        // mapping alone; no pointer or reference into it outlives self (every accessor copies).
        let _ = unsafe { mm::munmap(self.base.as_ptr().cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;
    use crate::create_memfd;

    /// Two read-write mappings of one fresh memfd of `size` bytes (the fd keeps it alive).
    pub(super) fn shared_pair(size: u64) -> (std::os::fd::OwnedFd, MmapRegion, MmapRegion) {
        let fd = create_memfd("mmap-test", size, false).unwrap();
        let a = MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite).unwrap();
        let b = MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite).unwrap();
        (fd, a, b)
    }

    #[test]
    fn region_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<MmapRegion>();
    }

    #[test]
    fn zero_and_overflowing_lengths_are_rejected() {
        assert!(matches!(
            MmapRegion::anonymous(0),
            Err(MemError::Os { op: "mmap", .. })
        ));
        let fd = create_memfd("z", 4096, false).unwrap();
        assert!(matches!(
            MmapRegion::map_shared(fd.as_fd(), 0, 0, Protection::Read),
            Err(MemError::Os { op: "mmap", .. })
        ));
        assert!(matches!(
            MmapRegion::map_shared(fd.as_fd(), u64::MAX - 10, 20, Protection::Read),
            Err(MemError::Os { op: "mmap", .. })
        ));
    }

    #[test]
    fn map_past_end_of_file_is_out_of_bounds() {
        let fd = create_memfd("eof", 8192, false).unwrap();
        let err = MmapRegion::map_shared(fd.as_fd(), 4096, 4097, Protection::Read).unwrap_err();
        assert!(matches!(
            err,
            MemError::OutOfBounds {
                offset: 4096,
                len: 4097,
                size: 8192
            }
        ));
        // Exactly up to the end is fine.
        MmapRegion::map_shared(fd.as_fd(), 4096, 4096, Protection::Read).unwrap();
    }

    #[test]
    fn bounds_are_checked_at_the_exact_edge() {
        let m = MmapRegion::anonymous(4096).unwrap();
        m.write_obj(4092, &7u32).unwrap();
        assert_eq!(m.read_obj::<u32>(4092).unwrap(), 7);
        assert!(matches!(
            m.read_obj::<u32>(4093),
            Err(MemError::OutOfBounds {
                offset: 4093,
                len: 4,
                size: 4096
            })
        ));
        assert!(matches!(
            m.write_obj(4093, &7u32),
            Err(MemError::OutOfBounds { .. })
        ));
        // Empty accesses at the very end are in bounds, one past is not.
        m.copy_to(4096, &mut []).unwrap();
        m.fill(4096, 0, 1).unwrap();
        assert!(m.copy_to(4097, &mut []).is_err());
        // Overflowing offset + len.
        assert!(matches!(
            m.fill(u64::MAX, 2, 0),
            Err(MemError::OutOfBounds { .. })
        ));
        assert!(m.copy_from(4095, &[1, 2]).is_err());
        assert!(m.discard(1, 4096).is_err());
        assert!(m.is_zero(4000, 97).is_err());
        m.check_range(0, 4096).unwrap();
        m.check_range(4096, 0).unwrap();
        assert!(matches!(
            m.check_range(1, 4096),
            Err(MemError::OutOfBounds {
                offset: 1,
                len: 4096,
                size: 4096
            })
        ));
    }

    #[test]
    fn writes_to_a_read_only_mapping_fail() {
        let fd = create_memfd("ro", 4096, false).unwrap();
        let m = MmapRegion::map_shared(fd.as_fd(), 0, 4096, Protection::Read).unwrap();
        assert_eq!(m.protection(), Protection::Read);
        assert_eq!(m.read_obj::<u64>(0).unwrap(), 0);
        assert!(matches!(m.write_obj(0, &1u64), Err(MemError::ReadOnly)));
        assert!(matches!(m.copy_from(0, &[1]), Err(MemError::ReadOnly)));
        assert!(matches!(m.fill(0, 1, 1), Err(MemError::ReadOnly)));
        assert!(matches!(m.discard(0, 4096), Err(MemError::ReadOnly)));
        assert!(matches!(m.store_release_u32(0, 1), Err(MemError::ReadOnly)));
        assert!(matches!(m.store_release_u16(0, 1), Err(MemError::ReadOnly)));
        // Atomic loads are fine on a read-only mapping and see the other mapping's stores.
        let rw = MmapRegion::map_shared(fd.as_fd(), 0, 4096, Protection::ReadWrite).unwrap();
        rw.store_release_u32(8, 0x0bad_f00d).unwrap();
        assert_eq!(m.load_acquire_u32(8).unwrap(), 0x0bad_f00d);
        assert_eq!(m.load_acquire_u16(10).unwrap(), 0x0bad);
        let src = MmapRegion::anonymous(4096).unwrap();
        assert!(matches!(
            src.copy_to_region(0, &m, 0, 1),
            Err(MemError::ReadOnly)
        ));
        // Reading from it into a writable region is fine.
        m.copy_to_region(0, &src, 0, 4096).unwrap();
    }

    #[test]
    fn unaligned_file_offset_gives_the_right_window() {
        let fd = create_memfd("offset", 4 * 4096, false).unwrap();
        let whole = MmapRegion::map_shared(fd.as_fd(), 0, 4 * 4096, Protection::ReadWrite).unwrap();
        for i in 0..4 * 4096u64 {
            #[allow(clippy::cast_possible_truncation)]
            whole.write_obj(i, &((i % 251) as u8)).unwrap();
        }
        // Starts mid-page and crosses a page boundary.
        let win = MmapRegion::map_shared(fd.as_fd(), 4096 + 300, 5000, Protection::Read).unwrap();
        assert_eq!(win.len(), 5000);
        for i in [0u64, 1, 3795, 3796, 4999] {
            let expect = (4096 + 300 + i) % 251;
            assert_eq!(u64::from(win.read_obj::<u8>(i).unwrap()), expect, "at {i}");
        }
        assert!(win.read_obj::<u8>(5000).is_err());
    }

    #[test]
    fn concurrent_writers_on_disjoint_ranges() {
        let m = std::sync::Arc::new(MmapRegion::anonymous(8 * 4096).unwrap());
        let threads: Vec<_> = (0..8u8)
            .map(|t| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        m.fill(u64::from(t) * 4096, 4096, t + 1).unwrap();
                        m.store_release_u32(u64::from(t) * 4096, u32::from(t))
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for t in 0..8u8 {
            let base = u64::from(t) * 4096;
            assert_eq!(m.load_acquire_u32(base).unwrap(), u32::from(t));
            assert_eq!(m.read_obj::<u8>(base + 4095).unwrap(), t + 1);
        }
    }

    #[test]
    fn large_anonymous_mapping_is_lazy() {
        // 64 GiB: only possible without commit (NORESERVE) and without touching pages.
        let m = MmapRegion::anonymous(64 << 30).unwrap();
        m.write_obj((64 << 30) - 8, &u64::MAX).unwrap();
        assert_eq!(m.read_obj::<u64>((64 << 30) - 8).unwrap(), u64::MAX);
        assert_eq!(m.read_obj::<u64>(32 << 30).unwrap(), 0);
    }
}
