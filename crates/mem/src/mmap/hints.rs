// SPDX-License-Identifier: Apache-2.0
//! Hints about a mapping's memory: cache prefetch and demote for the data path, and
//! `discard`, which gives whole pages back to the kernel (Deallocate, large Write Zeroes).

use rustix::mm::{self, Advice};

use super::{Kind, MemError, MmapRegion, us};

/// How much of a read [`MmapRegion::prefetch`] asks for: its first eight lines, all of a
/// 512 B read. Of a longer one the copy's own sequential loads and the core's stream
/// prefetcher fetch the rest. Asking for every line of a batch of 4 KiB reads (64 each)
/// filled the core's line-fill buffers, so the prefetch instructions themselves waited for
/// memory: with eight lines 4 KiB randread ran about 1.1x faster over vfio-user and gave
/// 1.06x per busy core over NVMe/TCP; fewer than eight slow a 512 B read (docs/performance.md
/// 8.10).
const PREFETCH_BYTES: u64 = 512;

/// PREFETCHT0 of the line holding `a`, an address inside a live mapping.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_line(a: *const u8) {
    // SAFETY: SSE is part of the x86_64 baseline, so the target feature is always present;
    // PREFETCHT0 only hints the cache, has no architectural effect and never faults, and the
    // caller passes an address inside a live mapping (`prefetch` checked the range).
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(a.cast());
    }
}

impl MmapRegion {
    /// Hint that `len` bytes at `offset` will be read soon: one prefetch per cache line of
    /// the first 512 bytes (`PREFETCH_BYTES`), so the misses of several queued commands
    /// overlap instead of being taken one after the other. Out-of-range requests are ignored;
    /// it never faults (a prefetch of an unmapped page is dropped by the CPU) and reads
    /// nothing architecturally.
    #[inline]
    pub fn prefetch(&self, offset: u64, len: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let len = len.min(PREFETCH_BYTES);
            if let Ok(p) = self.span(offset, len) {
                let lines = us(len.div_ceil(64));
                // The common case (512 B or more) without a loop test per line.
                if lines == 8 {
                    for k in 0..8 {
                        prefetch_line(p.wrapping_add(k * 64));
                    }
                } else {
                    for k in 0..lines {
                        prefetch_line(p.wrapping_add(k * 64));
                    }
                }
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
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use rustix::fs;

    use super::super::tests::shared_pair;
    use super::super::{MmapRegion, Protection};
    use crate::create_memfd;

    #[test]
    fn cache_hints_change_nothing_and_ignore_bad_offsets() {
        let m = MmapRegion::anonymous(8192).unwrap();
        m.fill(0, 8192, 0x5a).unwrap();
        for off in [0, 63, 64, 4095, 8191] {
            m.prefetch(off, 4096);
            // Shorter than the prefetched part: fewer lines than eight.
            m.prefetch(off, 100);
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
}
