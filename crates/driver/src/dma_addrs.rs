// SPDX-License-Identifier: Apache-2.0
//! How the device addresses the DMA pool: one IOVA range (vfio-user, VFIO with an IOMMU) or
//! the physical address of each huge page (uio, VFIO no-IOMMU), which are not contiguous.

use nvmemu_mem::Iova;

/// Device addresses of a pool's bytes.
#[derive(Debug)]
pub(crate) enum DeviceAddrs {
    /// Pool offset `o` is at `iova + o`.
    Linear(Iova),
    /// Pool offset `o` is in page `o >> shift`, at `bases[o >> shift] + (o & mask)`; a DMA
    /// buffer must not cross a page boundary (the next page is elsewhere).
    Pages {
        /// log2 of the page size.
        shift: u32,
        /// Physical address of each page.
        bases: Box<[u64]>,
    },
}

impl DeviceAddrs {
    /// Physical pages of `page_size` bytes (a power of two) at `bases`.
    pub(crate) fn pages(page_size: u64, bases: Vec<u64>) -> DeviceAddrs {
        DeviceAddrs::Pages {
            shift: page_size.trailing_zeros(),
            bases: bases.into_boxed_slice(),
        }
    }

    /// Device address of pool offset `offset` (the caller keeps it inside the pool).
    pub(crate) fn at(&self, offset: u64) -> u64 {
        match self {
            DeviceAddrs::Linear(iova) => iova.0 + offset,
            DeviceAddrs::Pages { shift, bases } => {
                let page = usize::try_from(offset >> shift).unwrap_or(usize::MAX);
                let base = bases.get(page).copied().unwrap_or(0);
                base + (offset & ((1u64 << shift) - 1))
            }
        }
    }

    /// Bytes an allocation may span without crossing into memory the device sees elsewhere.
    pub(crate) fn contiguous_limit(&self) -> Option<u64> {
        match self {
            DeviceAddrs::Linear(_) => None,
            DeviceAddrs::Pages { shift, .. } => Some(1 << shift),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_adds_the_offset() {
        let a = DeviceAddrs::Linear(Iova(1 << 32));
        assert_eq!(a.at(0x1234), (1 << 32) + 0x1234);
        assert_eq!(a.contiguous_limit(), None);
    }

    #[test]
    fn pages_map_each_huge_page_to_its_own_base() {
        let a = DeviceAddrs::pages(2 << 20, vec![0x4000_0000, 0x1200_0000]);
        assert_eq!(a.at(0), 0x4000_0000);
        assert_eq!(a.at(0x1F_F000), 0x401F_F000);
        assert_eq!(a.at(0x20_0000), 0x1200_0000);
        assert_eq!(a.at(0x20_1008), 0x1200_1008);
        assert_eq!(a.contiguous_limit(), Some(2 << 20));
    }
}
