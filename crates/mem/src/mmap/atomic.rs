// SPDX-License-Identifier: Apache-2.0
//! Atomic loads and stores on a mapping (doorbells, queue entries, CQE phase words): each
//! says which access on the other side it pairs with.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering, fence};

use super::{MemError, MmapRegion};

impl MmapRegion {
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

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::super::{MemError, MmapRegion, Protection};
    use crate::create_memfd;

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
}
