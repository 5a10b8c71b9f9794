// SPDX-License-Identifier: Apache-2.0
//! PRP construction (NVMe Base 1.4, 4.3 "Physical Region Page Entry and List").
//!
//! PRP1 addresses the first byte (dword aligned, any offset in its page). If the transfer
//! ends in the next page, PRP2 is that page. Otherwise PRP2 points at a PRP list: one entry
//! per remaining page; when a list page fills up and entries remain, its last entry points to
//! the next list page instead (chaining). The list lives in space preallocated per command
//! slot, so building one never allocates.

use nvmemu_mem::MemError;

use crate::error::NvmeError;

/// NVMe memory page size (CC.MPS = 0).
const PAGE: u64 = nvmemu_spec::PAGE_SIZE;
/// Bytes per PRP entry.
const ENTRY: u64 = 8;

/// The two data pointer fields of an SQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prps {
    /// PRP1 (SQE DPTR bytes 0-7).
    pub prp1: u64,
    /// PRP2 (SQE DPTR bytes 8-15): 0, a second data page, or a PRP list.
    pub prp2: u64,
}

/// Where one command slot's PRP list is written: `len()` bytes at device address `iova()`.
pub trait PrpListSink {
    /// Device address of the list space.
    fn iova(&self) -> u64;
    /// Bytes of list space (0 when the slot has none).
    fn len(&self) -> u64;
    /// Store one entry at byte `offset` of the list space.
    fn write_entry(&mut self, offset: u64, value: u64) -> Result<(), MemError>;
}

/// Bytes of per-slot PRP list space needed for transfers of up to `max_bytes` at any dword
/// aligned start: a power of two below one page, or whole pages when chaining is needed.
pub fn list_bytes_for(max_bytes: u64) -> u64 {
    // An unaligned start makes the transfer touch one page more than its length suggests;
    // PRP1 covers the first, the list the rest.
    let entries = max_bytes.div_ceil(PAGE);
    if entries <= 1 {
        return 0;
    }
    let bytes = entries * ENTRY;
    if bytes <= PAGE {
        return bytes.next_power_of_two();
    }
    // Each full list page carries PAGE/ENTRY - 1 data entries plus the chain pointer; the last
    // one carries PAGE/ENTRY.
    let per_page = PAGE / ENTRY - 1;
    (entries - 1).div_ceil(per_page) * PAGE
}

/// Largest transfer (bytes) whose PRPs fit in `list_bytes` of list space laid out as
/// `list_bytes_for` does, for any dword aligned start.
pub fn max_transfer_for(list_bytes: u64) -> u64 {
    let entries = if list_bytes < PAGE {
        list_bytes / ENTRY
    } else {
        (list_bytes / PAGE) * (PAGE / ENTRY - 1) + 1
    };
    // At an unaligned start, `n` pages of data touch `n + 1` pages: PRP1 plus `n` entries.
    entries.max(1) * PAGE
}

/// Fill in PRPs for `len` bytes starting at device address `iova`, writing the PRP list (if
/// one is needed) through `list`.
pub fn build(iova: u64, len: u64, list: &mut impl PrpListSink) -> Result<Prps, NvmeError> {
    if iova & 0x3 != 0 {
        return Err(NvmeError::BufferMisaligned { iova });
    }
    if len == 0 {
        return Ok(Prps {
            prp1: iova,
            prp2: 0,
        });
    }
    let first = PAGE - (iova % PAGE);
    if len <= first {
        return Ok(Prps {
            prp1: iova,
            prp2: 0,
        });
    }
    let mut page = iova - (iova % PAGE) + PAGE;
    let rest = len - first;
    if rest <= PAGE {
        return Ok(Prps {
            prp1: iova,
            prp2: page,
        });
    }
    let mut remaining = rest.div_ceil(PAGE);
    let list_len = list.len();
    let too_large = || NvmeError::TransferTooLarge {
        bytes: len,
        max: max_transfer_for(list_len),
    };
    let base = list.iova();
    if base & (ENTRY - 1) != 0 {
        return Err(NvmeError::BufferMisaligned { iova: base });
    }
    let mut pos = 0u64;
    while remaining > 0 {
        if pos + ENTRY > list_len {
            return Err(too_large());
        }
        let at_page_end = (base + pos) % PAGE == PAGE - ENTRY;
        if at_page_end && remaining > 1 {
            // Last slot of a list page with more than one entry left: chain.
            if pos + 2 * ENTRY > list_len {
                return Err(too_large());
            }
            list.write_entry(pos, base + pos + ENTRY)?;
        } else {
            list.write_entry(pos, page)?;
            page += PAGE;
            remaining -= 1;
        }
        pos += ENTRY;
    }
    Ok(Prps {
        prp1: iova,
        prp2: base,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// List space backed by a Vec, for checking what `build` writes.
    struct VecList {
        iova: u64,
        entries: Vec<u64>,
    }

    impl VecList {
        fn new(iova: u64, bytes: u64) -> VecList {
            VecList {
                iova,
                entries: vec![0; (bytes / ENTRY) as usize],
            }
        }
    }

    impl PrpListSink for VecList {
        fn iova(&self) -> u64 {
            self.iova
        }
        fn len(&self) -> u64 {
            self.entries.len() as u64 * ENTRY
        }
        fn write_entry(&mut self, offset: u64, value: u64) -> Result<(), MemError> {
            self.entries[(offset / ENTRY) as usize] = value;
            Ok(())
        }
    }

    /// Walk PRP1/PRP2/list as a controller would and return every (address, length) segment.
    fn walk(p: Prps, len: u64, list: &VecList) -> Vec<(u64, u64)> {
        let mut segs = vec![];
        let first = (PAGE - p.prp1 % PAGE).min(len);
        segs.push((p.prp1, first));
        let mut left = len - first;
        if left == 0 {
            return segs;
        }
        if left <= PAGE {
            segs.push((p.prp2, left));
            return segs;
        }
        let mut at = p.prp2;
        while left > 0 {
            let idx = ((at - list.iova) / ENTRY) as usize;
            let e = list.entries[idx];
            if (at + ENTRY).is_multiple_of(PAGE) && left > PAGE {
                at = e; // chain pointer
                continue;
            }
            let n = left.min(PAGE);
            segs.push((e, n));
            left -= n;
            at += ENTRY;
        }
        segs
    }

    fn contiguous(segs: &[(u64, u64)], iova: u64, len: u64) -> bool {
        let mut next = iova;
        for &(a, n) in segs {
            if a != next {
                return false;
            }
            next += n;
        }
        next == iova + len
    }

    #[test]
    fn single_page_uses_prp1_only() {
        let mut l = VecList::new(0x9000_0000, 256);
        let p = build(0x1_0000, 4096, &mut l).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: 0x1_0000,
                prp2: 0
            }
        );
        let p = build(0x1_0800, 0x800, &mut l).unwrap();
        assert_eq!(p.prp2, 0);
    }

    #[test]
    fn two_pages_use_prp2_as_data() {
        let mut l = VecList::new(0x9000_0000, 256);
        let p = build(0x1_0000, 8192, &mut l).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: 0x1_0000,
                prp2: 0x1_1000
            }
        );
        // Unaligned start crossing one boundary: still two pages.
        let p = build(0x1_0200, 4096, &mut l).unwrap();
        assert_eq!(
            p,
            Prps {
                prp1: 0x1_0200,
                prp2: 0x1_1000
            }
        );
        assert!(l.entries.iter().all(|&e| e == 0), "no list written");
    }

    #[test]
    fn three_pages_use_a_list() {
        let mut l = VecList::new(0x9000_0100, 256);
        let p = build(0x1_0000, 3 * 4096, &mut l).unwrap();
        assert_eq!(p.prp2, 0x9000_0100);
        assert_eq!(&l.entries[..2], &[0x1_1000, 0x1_2000]);
        // Unaligned: 8 KiB from offset 0x10 touches three pages.
        let p = build(0x1_0010, 8192, &mut l).unwrap();
        assert_eq!(p.prp2, 0x9000_0100);
        assert_eq!(&l.entries[..2], &[0x1_1000, 0x1_2000]);
        assert!(contiguous(&walk(p, 8192, &l), 0x1_0010, 8192));
    }

    #[test]
    fn segments_cover_the_buffer_for_many_shapes() {
        for &(iova, len) in &[
            (0x4_0000u64, 128 * 1024u64),
            (0x4_0004, 128 * 1024 - 4),
            (0x4_0ffc, 9000),
            (0x4_0000, 512 * 4096 + 4096),
            (0x4_0000, 600 * 4096),
            (0x4_0008, 1100 * 4096),
        ] {
            let mut l = VecList::new(0x8000_0000, list_bytes_for(len + 4096));
            let p = build(iova, len, &mut l).unwrap();
            let segs = walk(p, len, &l);
            assert!(
                contiguous(&segs, iova, len),
                "{iova:#x}+{len:#x}: {segs:x?}"
            );
            for &(a, _) in &segs[1..] {
                assert_eq!(a % PAGE, 0, "only PRP1 may carry an offset");
            }
        }
    }

    #[test]
    fn list_of_exactly_one_page_does_not_chain() {
        // 513 data pages: PRP1 + 512 list entries fill one list page exactly.
        let mut l = VecList::new(0x8000_0000, 2 * PAGE);
        let p = build(0x10_0000, 513 * PAGE, &mut l).unwrap();
        assert_eq!(p.prp2, 0x8000_0000);
        assert_eq!(l.entries[511], 0x10_0000 + 512 * PAGE);
        assert_eq!(l.entries[512], 0, "second list page untouched");
    }

    #[test]
    fn list_chains_when_a_page_overflows() {
        // 514 data pages: 513 entries, so page 0 holds 511 + a chain pointer.
        let mut l = VecList::new(0x8000_0000, 2 * PAGE);
        let p = build(0x10_0000, 514 * PAGE, &mut l).unwrap();
        assert_eq!(l.entries[510], 0x10_0000 + 511 * PAGE);
        assert_eq!(l.entries[511], 0x8000_1000, "chain to the next list page");
        assert_eq!(l.entries[512], 0x10_0000 + 512 * PAGE);
        assert_eq!(l.entries[513], 0x10_0000 + 513 * PAGE);
        assert!(contiguous(&walk(p, 514 * PAGE, &l), 0x10_0000, 514 * PAGE));
    }

    #[test]
    fn list_space_too_small_is_transfer_too_large() {
        let mut l = VecList::new(0x8000_0000, 16);
        let err = build(0x10_0000, 4 * PAGE, &mut l).unwrap_err();
        assert!(matches!(err, NvmeError::TransferTooLarge { bytes, .. } if bytes == 4 * PAGE));
        let mut none = VecList::new(0x8000_0000, 0);
        assert!(build(0x10_0000, 3 * PAGE, &mut none).is_err());
        // A chain pointer needs room for the entry after it.
        let mut one_page = VecList::new(0x8000_0000, PAGE);
        assert!(build(0x10_0000, 514 * PAGE, &mut one_page).is_err());
    }

    #[test]
    fn misaligned_buffer_is_rejected() {
        let mut l = VecList::new(0x8000_0000, 256);
        assert!(matches!(
            build(0x10_0002, 512, &mut l),
            Err(NvmeError::BufferMisaligned { iova: 0x10_0002 })
        ));
    }

    #[test]
    fn sizing_round_trips() {
        assert_eq!(list_bytes_for(4096), 0);
        assert_eq!(list_bytes_for(8192), 16);
        assert_eq!(list_bytes_for(128 * 1024 + 4096), 512);
        assert_eq!(list_bytes_for(512 * 4096), PAGE);
        // 513 pages at an unaligned start touch 514: PRP1 + 513 entries, which must chain.
        assert_eq!(list_bytes_for(513 * 4096), 2 * PAGE);
        for max in [8192u64, 128 * 1024, 2 << 20, 4 << 20, 8 << 20] {
            // Space sized for `max` + one page (unaligned start) always suffices for `max`.
            let bytes = list_bytes_for(max + PAGE);
            assert!(max_transfer_for(bytes) >= max, "{max}");
        }
    }
}
