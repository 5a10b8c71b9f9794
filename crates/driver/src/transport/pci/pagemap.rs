// SPDX-License-Identifier: Apache-2.0
//! Physical addresses of our own pages from `/proc/self/pagemap`: one 64-bit entry per
//! virtual page, bit 63 "present", bits 0-54 the page frame number. The kernel shows frame
//! numbers only to CAP_SYS_ADMIN (others read 0), which is what uio and VFIO no-IOMMU need:
//! the device is given physical addresses.

use std::fs::File;
use std::os::unix::fs::FileExt;

use nvmemu_mem::MmapRegion;

use crate::dma::DmaAllocError;

/// Size of the pages pagemap counts in (the base page size on x86-64).
const BASE_PAGE: u64 = 4096;
const PRESENT: u64 = 1 << 63;
const PFN_MASK: u64 = (1 << 55) - 1;

/// Physical address of each `page`-sized page of `region` (all already faulted in).
pub(crate) fn physical_pages(region: &MmapRegion, page: u64) -> Result<Vec<u64>, DmaAllocError> {
    let file = File::open("/proc/self/pagemap").map_err(DmaAllocError::Pagemap)?;
    let base = region.addr() as u64;
    (0..region.len() / page)
        .map(|i| {
            let vaddr = base + i * page;
            let mut entry = [0u8; 8];
            file.read_exact_at(&mut entry, vaddr / BASE_PAGE * 8)
                .map_err(DmaAllocError::Pagemap)?;
            physical(u64::from_le_bytes(entry), vaddr)
                .ok_or(DmaAllocError::NoAddress { offset: i * page })
        })
        .collect()
}

/// The physical address of `vaddr` from its pagemap entry, if the entry shows one.
fn physical(entry: u64, vaddr: u64) -> Option<u64> {
    let pfn = entry & PFN_MASK;
    (entry & PRESENT != 0 && pfn != 0).then_some(pfn * BASE_PAGE + vaddr % BASE_PAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_decoding() {
        assert_eq!(
            physical(PRESENT | 0x12345, 0x7f00_0000_1010),
            Some(0x1234_5010)
        );
        // Not present, or present with the frame number hidden (no CAP_SYS_ADMIN).
        assert_eq!(physical(0x12345, 0), None);
        assert_eq!(physical(PRESENT, 0), None);
        // Bits 55-62 are flags, not part of the frame number.
        assert_eq!(physical(PRESENT | (1 << 61) | 7, 0), Some(7 * 4096));
    }

    #[test]
    fn own_pages_resolve_or_say_why_not() {
        let r = MmapRegion::anonymous(8192).unwrap();
        r.fill(0, 8192, 1).unwrap();
        match physical_pages(&r, 4096) {
            // Root: two distinct frames.
            Ok(v) => {
                assert_eq!(v.len(), 2);
                assert_ne!(v[0], v[1]);
                assert_eq!(v[0] % 4096, 0);
            }
            Err(e) => assert!(e.to_string().contains("CAP_SYS_ADMIN"), "{e}"),
        }
    }
}
