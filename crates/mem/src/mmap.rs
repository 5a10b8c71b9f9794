// SPDX-License-Identifier: Apache-2.0
//! An owned memory mapping with bounds-checked raw-pointer access (unmapped on Drop).

use std::ffi::c_void;
use std::os::fd::BorrowedFd;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering, fence};

use rustix::fs::{self, FileType};
use rustix::mm::{self, Advice, MapFlags, ProtFlags};
use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::memfd::{os, page_size_of_stat, system_page_size};
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

    /// Copy a `T` out of the mapping (one raw unaligned copy of `size_of::<T>()` bytes into
    /// a local; validate the copy, never re-read the mapping).
    #[inline]
    pub fn read_obj<T: FromBytes>(&self, offset: u64) -> Result<T, MemError> {
        let src = self.span(offset, size_of::<T>() as u64)?;
        // SAFETY: `src` points at size_of::<T>() in-bounds bytes of the live mapping
        // (checked by span); read_unaligned has no alignment requirement and copies the bytes
        // without creating a reference into the shared memory; `T: FromBytes` makes every
        // bit pattern a valid T.
        Ok(unsafe { ptr::read_unaligned(src.cast::<T>()) })
    }

    /// Copy a `T` into the mapping.
    #[inline]
    pub fn write_obj<T: IntoBytes + Immutable>(
        &self,
        offset: u64,
        value: &T,
    ) -> Result<(), MemError> {
        self.copy_from(offset, value.as_bytes())
    }

    /// Copy `dst.len()` bytes at `offset` out of the mapping.
    #[inline]
    pub fn copy_to(&self, offset: u64, dst: &mut [u8]) -> Result<(), MemError> {
        let src = self.span(offset, dst.len() as u64)?;
        // SAFETY: `src` is dst.len() in-bounds bytes of the live mapping (span); `dst` is a
        // distinct Rust buffer (it cannot live inside a mapping this crate never hands out as
        // a slice), so the ranges do not overlap; u8 has alignment 1.
        unsafe { ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Copy `src` into the mapping at `offset`.
    #[inline]
    pub fn copy_from(&self, offset: u64, src: &[u8]) -> Result<(), MemError> {
        let dst = self.span_mut(offset, src.len() as u64)?;
        // SAFETY: `dst` is src.len() in-bounds bytes of a live writable mapping (span_mut);
        // `src` is a Rust slice, never memory of a mapping, so no overlap; alignment 1.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
        Ok(())
    }

    /// Copy `len` bytes from this mapping at `offset` to `dst` at `dst_offset` (the data path:
    /// namespace storage <-> client memory, one memcpy). Overlap is allowed.
    #[inline]
    pub fn copy_to_region(
        &self,
        offset: u64,
        dst: &MmapRegion,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), MemError> {
        let s = self.span(offset, len)?;
        let d = dst.span_mut(dst_offset, len)?;
        // SAFETY: both ranges are `len` in-bounds bytes of live mappings (span/span_mut, the
        // destination writable); they may overlap (same region, or two mappings of one fd),
        // which ptr::copy (memmove) allows; alignment 1; no reference is created.
        unsafe { ptr::copy(s, d, us(len)) };
        Ok(())
    }

    /// `copy_to_region` for a destination that will not be read soon (a namespace's
    /// backing store): non-temporal stores, then SFENCE, so the data is globally visible
    /// when this returns. Ordinary stores to lines that are not cached each wait for a read
    /// for ownership from DRAM, and while they sit in the store buffer, any later load that
    /// cannot be forwarded (the compiler makes them) waits for all of them: a 4 KiB write
    /// then costs the poller a full copy's worth of misses in series. Streaming stores skip
    /// the read. Falls back to `copy_to_region` for overlapping ranges, a destination not
    /// 16-byte aligned, a length not a multiple of 64, or non-x86-64 targets. Overlap is
    /// judged by address, so the two regions must not be mappings of the same pages (the
    /// namespace's private anonymous storage never is).
    #[inline]
    pub fn copy_to_region_streaming(
        &self,
        offset: u64,
        dst: &MmapRegion,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), MemError> {
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{_mm_loadu_si128, _mm_sfence, _mm_stream_si128};
            let s = self.span(offset, len)?;
            let d = dst.span_mut(dst_offset, len)?;
            let n = us(len);
            let overlap =
                s.addr() < d.addr().wrapping_add(n) && d.addr() < s.addr().wrapping_add(n);
            if !overlap && d.addr() & 15 == 0 && n.is_multiple_of(64) {
                let mut i = 0;
                while i < n {
                    // SAFETY: `s + i .. s + i + 64` and `d + i .. d + i + 64` lie inside the
                    // `n` in-bounds bytes of live mappings (span/span_mut, i + 64 <= n, the
                    // destination writable); loadu has no alignment requirement, `d + i` is
                    // 16-aligned as MOVNTDQ needs (d is, i is a multiple of 64); the ranges
                    // do not overlap; SSE2 is part of the x86-64 baseline. No reference is
                    // created.
                    unsafe {
                        for k in [0, 16, 32, 48] {
                            let v = _mm_loadu_si128(s.add(i + k).cast());
                            _mm_stream_si128(d.add(i + k).cast(), v);
                        }
                    }
                    i += 64;
                }
                // SAFETY: SFENCE only orders stores; it has no memory operands.
                unsafe { _mm_sfence() };
                return Ok(());
            }
        }
        self.copy_to_region(offset, dst, dst_offset, len)
    }

    /// Hint that `len` bytes at `offset` (at most 4 KiB) will be read soon: one prefetch per
    /// cache line, so the misses of several queued commands overlap instead of being taken one
    /// after the other. Out-of-range requests are ignored; it never faults (a prefetch of an
    /// unmapped page is dropped by the CPU) and reads nothing architecturally.
    #[inline]
    pub fn prefetch(&self, offset: u64, len: u64) {
        #[cfg(target_arch = "x86_64")]
        if let Ok(p) = self.span(offset, len.min(4096)) {
            let mut line = 0;
            while line < len.min(4096) {
                let a = p.wrapping_add(us(line));
                // SAFETY: SSE is part of the x86_64 baseline, so the target feature is always
                // present; PREFETCHT0 only hints the cache, has no architectural effect, never
                // faults, and `a` lies inside this live mapping (span checked the range).
                unsafe {
                    core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                        a.cast(),
                    );
                }
                line += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (offset, len);
    }

    /// Hint that this core is done with the cache line holding `offset` (CLDEMOTE): the
    /// line moves toward the cache the cores share, so the other side of a queue finds it
    /// there instead of taking it from this core's private cache. Out-of-range offsets are
    /// ignored; a CPU without CLDEMOTE runs it as a NOP.
    #[inline]
    pub fn demote(&self, offset: u64) {
        #[cfg(target_arch = "x86_64")]
        if let Ok(p) = self.span(offset, 1) {
            // SAFETY: CLDEMOTE only hints the cache hierarchy: it has no architectural
            // effect, never faults, is a NOP where unsupported, touches no stack or flags,
            // and `p` lies inside this live mapping (span checked it).
            unsafe {
                core::arch::asm!("cldemote [{0}]", in(reg) p, options(nostack, preserves_flags));
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = offset;
    }

    /// Compare `len` bytes of this mapping at `offset` with `other` at `other_offset`.
    pub fn compare_with(
        &self,
        offset: u64,
        other: &MmapRegion,
        other_offset: u64,
        len: u64,
    ) -> Result<bool, MemError> {
        let a = self.span(offset, len)?;
        let b = other.span(other_offset, len)?;
        // SAFETY: both ranges are `len` in-bounds bytes of live mappings (span); bytes_equal
        // only reads them with unaligned raw loads.
        Ok(unsafe { bytes_equal(a, b, us(len)) })
    }

    /// True when `len` bytes at `offset` are all zero (Compare against a null namespace,
    /// verifying a deallocated range).
    pub fn is_zero(&self, offset: u64, len: u64) -> Result<bool, MemError> {
        let a = self.span(offset, len)?;
        // SAFETY: `len` in-bounds bytes of the live mapping (span), read with raw loads only.
        Ok(unsafe { bytes_zero(a, us(len)) })
    }

    /// Set `len` bytes at `offset` to `byte`.
    #[inline]
    pub fn fill(&self, offset: u64, len: u64, byte: u8) -> Result<(), MemError> {
        let d = self.span_mut(offset, len)?;
        // SAFETY: `len` in-bounds bytes of a live writable mapping (span_mut); alignment 1.
        unsafe { ptr::write_bytes(d, byte, us(len)) };
        Ok(())
    }

    /// Give whole pages inside `[offset, offset + len)` back to the kernel (MADV_DONTNEED:
    /// they read as zero again on an anonymous mapping) and zero the partial pages at the ends.
    /// A control-path call (one syscall), used for Deallocate and large Write Zeroes.
    ///
    /// On a shared mapping the whole pages are punched out of the file (MADV_REMOVE), which
    /// every other mapping of the fd sees as zeroes; if the filesystem cannot do that, the
    /// range is zero-filled instead. Either way the range reads as zero afterwards.
    pub fn discard(&self, offset: u64, len: u64) -> Result<(), MemError> {
        let start = self.span_mut(offset, len)?;
        let page = us(self.page_size);
        let start_addr = start.addr();
        // Both stay inside the page-aligned mapping: its start and end are page aligned, so
        // rounding an inner address toward the range's inside cannot leave it.
        let first = start_addr.next_multiple_of(page);
        let end_addr = start_addr + us(len);
        let last = end_addr - end_addr % page;
        if first >= last {
            return self.fill(offset, len, 0);
        }
        let head = (first - start_addr) as u64;
        let whole = last - first;
        let tail = (end_addr - last) as u64;
        self.fill(offset, head, 0)?;
        let advice = match self.kind {
            Kind::Anonymous => Advice::LinuxDontNeed,
            Kind::Shared => Advice::LinuxRemove,
        };
        // SAFETY: [start + head, start + head + whole) is a page-aligned run of whole pages
        // inside the checked range of this live, writable mapping that self owns. Dropping
        // them only changes their contents to zero (anonymous) or to a hole (shared file);
        // the address range stays mapped, and no Rust reference into it exists.
        let advised = unsafe { mm::madvise(start.add(us(head)).cast(), whole, advice) };
        if advised.is_err() {
            self.fill(offset + head, whole as u64, 0)?;
        }
        self.fill(offset + head + whole as u64, tail, 0)
    }

    /// Atomic 32-bit load with Acquire ordering (doorbells; pairs with the peer's barrier
    /// before its doorbell store). `offset` must be 4-byte aligned.
    ///
    /// Done as a Relaxed load followed by an Acquire fence (the same ordering): only
    /// register-sized Relaxed loads are defined on read-only memory, and a `Protection::Read`
    /// mapping is read-only.
    #[inline]
    pub fn load_acquire_u32(&self, offset: u64) -> Result<u32, MemError> {
        let p = self.span_aligned::<4>(offset, false)?;
        // SAFETY: `p` is 4 in-bounds (span), 4-byte-aligned (span_aligned) bytes of the
        // mapping, which stays mapped while self is borrowed; the &AtomicU32 lives only for
        // this one load and is the only Rust reference made, to a type with interior
        // mutability, so it asserts nothing about the bytes another process may change. The
        // load is Relaxed and 32-bit, which the atomic docs allow on read-only memory.
        let v = unsafe { AtomicU32::from_ptr(p.cast()) }.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        Ok(v)
    }

    /// Atomic 32-bit store with Release ordering (event indexes, doorbells on the host side).
    #[inline]
    pub fn store_release_u32(&self, offset: u64, value: u32) -> Result<(), MemError> {
        let p = self.span_aligned::<4>(offset, true)?;
        // SAFETY: `p` is 4 in-bounds, 4-byte-aligned bytes of a live writable mapping; the
        // &AtomicU32 lives only for this one store while self is borrowed.
        unsafe { AtomicU32::from_ptr(p.cast()) }.store(value, Ordering::Release);
        Ok(())
    }

    /// Store `words` at `offset` (8-byte aligned), in order, straight from registers: a
    /// queue entry. On x86-64 as 16-byte stores of word pairs (an odd last word as one
    /// 8-byte store), elsewhere as 8-byte stores; each word is written whole. A `write_obj` of an entry built on the stack
    /// copies it with wide loads that span several narrower stores; such a load cannot be
    /// forwarded from the store buffer and waits until every older store has reached the
    /// cache, including stores to lines another core holds (the previous SQE or CQE, the
    /// data just copied), which serializes the cross-core writes the queues are made of.
    #[inline(always)]
    pub fn store_u64s<const N: usize>(&self, offset: u64, words: [u64; N]) -> Result<(), MemError> {
        let p = self.span_mut(offset, 8 * N as u64)?;
        if p.addr() & 7 != 0 {
            return Err(MemError::Misaligned { offset });
        }
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{_mm_set_epi64x, _mm_storeu_si128};
            // Pairs of words as one 16-byte SSE2 store each: half the store-buffer entries
            // of 8-byte stores, which matters when a batch of entries waits on ownership of
            // lines the other side last read.
            let mut i = 0;
            while i + 1 < N {
                #[expect(clippy::cast_possible_wrap, reason = "bit pattern moved as is")]
                // SAFETY: `p + 8 * i .. p + 8 * i + 16` lies inside the `8 * N` in-bounds
                // bytes of a live writable mapping (span_mut, i + 1 < N); storeu has no
                // alignment requirement; SSE2 is part of the x86-64 baseline.
                unsafe {
                    let v = _mm_set_epi64x(words[i + 1] as i64, words[i] as i64);
                    _mm_storeu_si128(p.add(8 * i).cast(), v);
                }
                i += 2;
            }
            if i < N {
                // SAFETY: `i == N - 1`, so `p + 8 * i` starts the last 8 of the `8 * N`
                // in-bounds bytes of a live writable mapping (span_mut); `p` is 8-aligned
                // (checked above), so this u64 is too; the &AtomicU64 lives only for this
                // one store.
                unsafe { AtomicU64::from_ptr(p.add(8 * i).cast()) }
                    .store(words[i], Ordering::Relaxed);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        for (i, w) in words.into_iter().enumerate() {
            // SAFETY: `p` starts `8 * N` in-bounds bytes of a live writable mapping (span_mut)
            // and is 8-aligned (checked above), so `p + 8 * i` for `i < N` is an in-bounds,
            // aligned u64; the &AtomicU64 lives only for this one store.
            unsafe { AtomicU64::from_ptr(p.add(8 * i).cast()) }.store(w, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Atomic 64-bit store with Release ordering: the second half of a CQE (SQ head, SQ id,
    /// CID, status and phase) in one store, after the first half.
    #[inline]
    pub fn store_release_u64(&self, offset: u64, value: u64) -> Result<(), MemError> {
        let p = self.span_aligned::<8>(offset, true)?;
        // SAFETY: `p` is 8 in-bounds, 8-byte-aligned bytes of a live writable mapping; the
        // &AtomicU64 lives only for this one store while self is borrowed.
        unsafe { AtomicU64::from_ptr(p.cast()) }.store(value, Ordering::Release);
        Ok(())
    }

    /// Atomic 16-bit store with Release ordering: the CQE status+phase word, written after
    /// the rest of the CQE so the host never sees a new phase with stale fields.
    #[inline]
    pub fn store_release_u16(&self, offset: u64, value: u16) -> Result<(), MemError> {
        let p = self.span_aligned::<2>(offset, true)?;
        // SAFETY: `p` is 2 in-bounds, 2-byte-aligned bytes of a live writable mapping; the
        // &AtomicU16 lives only for this one store while self is borrowed.
        unsafe { AtomicU16::from_ptr(p.cast()) }.store(value, Ordering::Release);
        Ok(())
    }

    /// Atomic 16-bit load with Acquire ordering (host side: a CQE's phase word before its body).
    /// Relaxed load + Acquire fence, as in `load_acquire_u32`, so read-only mappings are fine.
    #[inline]
    pub fn load_acquire_u16(&self, offset: u64) -> Result<u16, MemError> {
        let p = self.span_aligned::<2>(offset, false)?;
        // SAFETY: `p` is 2 in-bounds (span), 2-byte-aligned (span_aligned) bytes of the
        // mapping, which stays mapped while self is borrowed; the &AtomicU16 lives only for
        // this one Relaxed 16-bit load (allowed on read-only memory) and has interior
        // mutability, so it asserts nothing about bytes another process may change.
        let v = unsafe { AtomicU16::from_ptr(p.cast()) }.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        Ok(v)
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

/// Byte-compare two raw ranges of `len` bytes, 8 bytes at a time.
///
/// # Safety
/// `a` and `b` must each be valid for reads of `len` bytes for the whole call.
#[inline]
unsafe fn bytes_equal(a: *const u8, b: *const u8, len: usize) -> bool {
    let words = len / 8;
    for i in 0..words {
        // SAFETY: i * 8 + 8 <= len, so both 8-byte loads are inside the ranges the caller
        // vouched for; read_unaligned has no alignment requirement.
        let (x, y) = unsafe {
            (
                ptr::read_unaligned(a.add(i * 8).cast::<u64>()),
                ptr::read_unaligned(b.add(i * 8).cast::<u64>()),
            )
        };
        if x != y {
            return false;
        }
    }
    for i in words * 8..len {
        // SAFETY: i < len, inside both ranges.
        if unsafe { a.add(i).read() != b.add(i).read() } {
            return false;
        }
    }
    true
}

/// True when `len` raw bytes at `a` are all zero.
///
/// # Safety
/// `a` must be valid for reads of `len` bytes for the whole call.
#[inline]
unsafe fn bytes_zero(a: *const u8, len: usize) -> bool {
    let words = len / 8;
    for i in 0..words {
        // SAFETY: i * 8 + 8 <= len, inside the range the caller vouched for; unaligned load.
        if unsafe { ptr::read_unaligned(a.add(i * 8).cast::<u64>()) } != 0 {
            return false;
        }
    }
    // SAFETY: i < len, inside the range.
    (words * 8..len).all(|i| unsafe { a.add(i).read() } == 0)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

    use super::*;
    use crate::create_memfd;

    #[derive(Debug, PartialEq, Eq, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
    #[repr(C)]
    struct Pair {
        a: u32,
        b: u32,
    }

    fn shared_pair(size: u64) -> (std::os::fd::OwnedFd, MmapRegion, MmapRegion) {
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
    fn cache_hints_change_nothing_and_ignore_bad_offsets() {
        let m = MmapRegion::anonymous(8192).unwrap();
        m.fill(0, 8192, 0x5a).unwrap();
        for off in [0, 63, 64, 4095, 8191] {
            m.prefetch(off, 4096);
            m.demote(off);
        }
        // Past the end, and offsets whose address arithmetic would overflow.
        for off in [8192, u64::MAX] {
            m.prefetch(off, 64);
            m.demote(off);
        }
        let mut back = vec![0u8; 8192];
        m.copy_to(0, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0x5a));
    }

    #[test]
    fn anonymous_reads_zero_and_round_trips() {
        let m = MmapRegion::anonymous(10_000).unwrap();
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.protection(), Protection::ReadWrite);
        let mut buf = [0xffu8; 64];
        m.copy_to(9_936, &mut buf).unwrap();
        assert_eq!(buf, [0u8; 64]);
        m.write_obj(
            3,
            &Pair {
                a: 1,
                b: 0xdead_beef,
            },
        )
        .unwrap();
        assert_eq!(
            m.read_obj::<Pair>(3).unwrap(),
            Pair {
                a: 1,
                b: 0xdead_beef
            }
        );
        assert_eq!(m.read_obj::<u8>(7).unwrap(), 0xef);
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
    fn region_to_region_checks_both_ends() {
        let a = MmapRegion::anonymous(4096).unwrap();
        let b = MmapRegion::anonymous(8192).unwrap();
        a.fill(0, 4096, 0x5a).unwrap();
        a.copy_to_region(0, &b, 4096, 4096).unwrap();
        assert!(b.compare_with(4096, &a, 0, 4096).unwrap());
        assert!(b.is_zero(0, 4096).unwrap());
        assert!(a.copy_to_region(1, &b, 0, 4096).is_err());
        assert!(a.copy_to_region(0, &b, 4097, 4096).is_err());
        assert!(a.compare_with(0, &b, 4097, 4096).is_err());
    }

    #[test]
    fn overlapping_copy_within_one_region_is_memmove() {
        let m = MmapRegion::anonymous(4096).unwrap();
        let src: Vec<u8> = (0..100u8).collect();
        m.copy_from(0, &src).unwrap();
        m.copy_to_region(0, &m, 10, 100).unwrap();
        let mut out = [0u8; 100];
        m.copy_to(10, &mut out).unwrap();
        assert_eq!(&out[..], &src[..]);
    }

    #[test]
    fn compare_detects_a_difference_in_the_tail_and_the_words() {
        let a = MmapRegion::anonymous(4096).unwrap();
        let b = MmapRegion::anonymous(4096).unwrap();
        assert!(a.compare_with(0, &b, 0, 4096).unwrap());
        b.write_obj(4090, &1u8).unwrap();
        assert!(!a.compare_with(0, &b, 0, 4091).unwrap());
        assert!(a.compare_with(0, &b, 0, 4090).unwrap());
        b.write_obj(3, &1u8).unwrap();
        assert!(!a.compare_with(0, &b, 0, 16).unwrap());
        assert!(!b.is_zero(0, 8).unwrap());
        assert!(b.is_zero(4, 4086).unwrap());
        assert!(!b.is_zero(4, 4087).unwrap());
    }

    #[test]
    fn streaming_copy_matches_memmove_on_every_path() {
        let src = MmapRegion::anonymous(16384).unwrap();
        let pattern: Vec<u8> = (0..16384u32).map(|i| (i * 31 % 251) as u8).collect();
        src.copy_from(0, &pattern).unwrap();
        // (source offset, destination offset, length): streamed, then the fallbacks for a
        // misaligned destination and a length that is not whole lines.
        for (so, d_o, len) in [
            (0u64, 4096u64, 4096u64),
            (3, 64, 512),
            (0, 8, 4096),
            (0, 0, 100),
        ] {
            let dst = MmapRegion::anonymous(16384).unwrap();
            src.copy_to_region_streaming(so, &dst, d_o, len).unwrap();
            let mut got = vec![0u8; 16384];
            dst.copy_to(0, &mut got).unwrap();
            let mut want = vec![0u8; 16384];
            want[us(d_o)..us(d_o + len)].copy_from_slice(&pattern[us(so)..us(so + len)]);
            assert!(got == want, "copy {so} -> {d_o}, {len} bytes");
        }
        // Overlapping ranges of one region move like memmove.
        src.copy_to_region_streaming(0, &src, 64, 4096).unwrap();
        let mut got = vec![0u8; 4096];
        src.copy_to(64, &mut got).unwrap();
        assert!(got == pattern[..4096], "overlapping copy");
        let dst = MmapRegion::anonymous(4096).unwrap();
        assert!(matches!(
            src.copy_to_region_streaming(0, &dst, 64, 4096),
            Err(MemError::OutOfBounds { .. })
        ));
    }

    #[test]
    fn word_stores_land_in_order_and_check_alignment_and_bounds() {
        let m = MmapRegion::anonymous(4096).unwrap();
        let words = [1u64, 2, 3, 4, 5, 6, 7, 0x8877_6655_4433_2211];
        m.store_u64s(4096 - 64, words).unwrap();
        assert_eq!(m.read_obj::<[u64; 8]>(4096 - 64).unwrap(), words);
        // An odd count takes the single-store tail.
        m.store_u64s(16, [9u64, 10, 11]).unwrap();
        assert_eq!(m.read_obj::<[u64; 4]>(16).unwrap(), [9, 10, 11, 0]);
        m.store_release_u64(8, 0xdead_beef_0bad_f00d).unwrap();
        assert_eq!(m.load_acquire_u32(12).unwrap(), 0xdead_beef);
        assert!(matches!(
            m.store_u64s(4, [0u64; 2]),
            Err(MemError::Misaligned { offset: 4 })
        ));
        assert!(matches!(
            m.store_u64s(4096 - 8, [0u64; 2]),
            Err(MemError::OutOfBounds { .. })
        ));
        assert!(matches!(
            m.store_release_u64(12, 0),
            Err(MemError::Misaligned { offset: 12 })
        ));
        // Nothing was written by the refused stores.
        assert_eq!(m.read_obj::<u64>(4096 - 8).unwrap(), words[7]);
    }

    #[test]
    fn atomics_check_alignment_and_bounds() {
        let m = MmapRegion::anonymous(4096).unwrap();
        m.store_release_u32(8, 0x1234_5678).unwrap();
        assert_eq!(m.load_acquire_u32(8).unwrap(), 0x1234_5678);
        assert_eq!(m.load_acquire_u16(8).unwrap(), 0x5678);
        m.store_release_u16(10, 0xabcd).unwrap();
        assert_eq!(m.load_acquire_u32(8).unwrap(), 0xabcd_5678);
        assert!(matches!(
            m.load_acquire_u32(2),
            Err(MemError::Misaligned { offset: 2 })
        ));
        assert!(matches!(
            m.store_release_u32(6, 0),
            Err(MemError::Misaligned { offset: 6 })
        ));
        assert!(matches!(
            m.store_release_u16(1, 0),
            Err(MemError::Misaligned { offset: 1 })
        ));
        assert!(matches!(
            m.load_acquire_u16(3),
            Err(MemError::Misaligned { offset: 3 })
        ));
        m.store_release_u32(4092, 1).unwrap();
        assert!(matches!(
            m.load_acquire_u32(4096),
            Err(MemError::OutOfBounds { .. })
        ));
        assert!(matches!(
            m.load_acquire_u16(4096),
            Err(MemError::OutOfBounds { .. })
        ));
    }

    #[test]
    fn alignment_is_of_the_address_not_the_window_offset() {
        let fd = create_memfd("unaligned", 8192, false).unwrap();
        // The window starts at file offset 2, so window offset 2 is address-aligned to 4.
        let m = MmapRegion::map_shared(fd.as_fd(), 2, 100, Protection::ReadWrite).unwrap();
        m.store_release_u32(2, 9).unwrap();
        assert!(matches!(
            m.load_acquire_u32(0),
            Err(MemError::Misaligned { offset: 0 })
        ));
        let whole = MmapRegion::map_shared(fd.as_fd(), 0, 8192, Protection::Read).unwrap();
        assert_eq!(whole.load_acquire_u32(4).unwrap(), 9);
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
    fn two_mappings_of_one_memfd_share_data() {
        let (_fd, a, b) = shared_pair(3 * 4096);
        let data: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        a.copy_from(1000, &data).unwrap();
        let mut out = vec![0u8; 5000];
        b.copy_to(1000, &mut out).unwrap();
        assert_eq!(out, data);
        b.store_release_u32(12_000, 77).unwrap();
        assert_eq!(a.load_acquire_u32(12_000).unwrap(), 77);
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
    fn discard_rezeroes_anonymous_memory_and_keeps_neighbours() {
        let m = MmapRegion::anonymous(5 * 4096).unwrap();
        m.fill(0, 5 * 4096, 0xaa).unwrap();
        // Partial head page, two whole pages, partial tail page.
        m.discard(100, 3 * 4096 + 200).unwrap();
        assert!(m.is_zero(100, 3 * 4096 + 200).unwrap());
        assert_eq!(m.read_obj::<u8>(99).unwrap(), 0xaa);
        assert_eq!(m.read_obj::<u8>(100 + 3 * 4096 + 200).unwrap(), 0xaa);
        // Within one page.
        m.fill(0, 5 * 4096, 0xbb).unwrap();
        m.discard(10, 20).unwrap();
        assert!(m.is_zero(10, 20).unwrap());
        assert_eq!(m.read_obj::<u8>(9).unwrap(), 0xbb);
        assert_eq!(m.read_obj::<u8>(30).unwrap(), 0xbb);
        // Exactly whole pages; written again after discard.
        m.discard(4096, 4096).unwrap();
        assert!(m.is_zero(4096, 4096).unwrap());
        m.write_obj(4096, &5u8).unwrap();
        assert_eq!(m.read_obj::<u8>(4096).unwrap(), 5);
    }

    #[test]
    fn discard_on_a_shared_mapping_zeroes_every_mapping() {
        let (_fd, a, b) = shared_pair(4 * 4096);
        a.fill(0, 4 * 4096, 0xcc).unwrap();
        a.discard(50, 3 * 4096).unwrap();
        assert!(b.is_zero(50, 3 * 4096).unwrap());
        assert_eq!(b.read_obj::<u8>(49).unwrap(), 0xcc);
        assert_eq!(b.read_obj::<u8>(50 + 3 * 4096).unwrap(), 0xcc);
    }

    #[test]
    fn discard_on_a_memfd_returns_its_pages() {
        let fd = create_memfd("punch", 64 * 4096, false).unwrap();
        let m = MmapRegion::map_shared(fd.as_fd(), 0, 64 * 4096, Protection::ReadWrite).unwrap();
        m.fill(0, 64 * 4096, 1).unwrap();
        let before = fs::fstat(&fd).unwrap().st_blocks;
        m.discard(0, 64 * 4096).unwrap();
        let after = fs::fstat(&fd).unwrap().st_blocks;
        assert!(after < before, "blocks {before} -> {after}");
        assert!(m.is_zero(0, 64 * 4096).unwrap());
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
