// SPDX-License-Identifier: Apache-2.0
//! Copies into, out of and between mappings, compares and fills: every access is bounds
//! checked by `span` and done with raw-pointer copies, never through a reference.

use std::ptr;

use zerocopy::{FromBytes, Immutable, IntoBytes};

use super::{MemError, MmapRegion, us};

impl MmapRegion {
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
    use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

    use super::super::tests::shared_pair;
    use super::super::{MemError, MmapRegion, Protection, us};

    #[derive(Debug, PartialEq, Eq, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
    #[repr(C)]
    struct Pair {
        a: u32,
        b: u32,
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
}
