// SPDX-License-Identifier: Apache-2.0
//! The function's VFIO regions: BAR0 (NVMe registers + doorbells), BAR4 (MSI-X table),
//! BAR5 (MSI-X PBA) and config space; everything else has size 0.

/// Number of regions reported in DEVICE_GET_INFO (BAR0-5, ROM, config, VGA). QEMU needs
/// at least 8, SPDK's client at most 10.
pub const NUM_REGIONS: u32 = 9;
/// BAR0: NVMe registers below 0x1000, doorbells from 0x1000.
pub const BAR0: u32 = 0;
/// BAR4: MSI-X table.
pub const BAR4: u32 = 4;
/// BAR5: MSI-X pending bit array.
pub const BAR5: u32 = 5;
/// PCI config space.
pub const CONFIG: u32 = 7;

/// BAR0 size: a power of two holding the registers and one doorbell page.
pub const BAR0_SIZE: u64 = BAR0_SIZE_U32 as u64;
/// BAR0 size as the 32-bit BAR register sees it.
pub const BAR0_SIZE_U32: u32 = 0x4000;
/// Where the doorbells start in BAR0 and in the doorbell memfd.
pub const DOORBELL_OFFSET: u64 = 0x1000;
/// Bytes of doorbells: 256 queue pairs at stride 4 (CAP.DSTRD = 0).
pub const DOORBELL_SIZE: u64 = 0x1000;
/// MSI-X table and PBA BAR size (one page each, enough for 256 vectors).
pub const MSIX_BAR_SIZE: u64 = MSIX_BAR_SIZE_U32 as u64;
/// MSI-X BAR size as the 32-bit BAR register sees it.
pub const MSIX_BAR_SIZE_U32: u32 = 0x1000;

/// Size of region `index` (0 for the unimplemented ones), or None if out of range.
pub fn region_size(index: u32) -> Option<u64> {
    match index {
        BAR0 => Some(BAR0_SIZE),
        BAR4 | BAR5 => Some(MSIX_BAR_SIZE),
        CONFIG => Some(crate::pci::config::CONFIG_SPACE_SIZE as u64),
        i if i < NUM_REGIONS => Some(0),
        _ => None,
    }
}

/// Check that `[offset, offset + len)` lies in region `index`.
pub fn check_access(index: u32, offset: u64, len: usize) -> bool {
    let Some(size) = region_size(index) else {
        return false;
    };
    let Ok(len) = u64::try_from(len) else {
        return false;
    };
    len > 0 && offset.checked_add(len).is_some_and(|end| end <= size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_are_bounded_by_region_size() {
        assert!(check_access(BAR0, 0, 4));
        assert!(check_access(BAR0, BAR0_SIZE - 8, 8));
        assert!(!check_access(BAR0, BAR0_SIZE - 4, 8));
        assert!(!check_access(BAR0, u64::MAX, 4));
        assert!(!check_access(1, 0, 4), "unimplemented BAR has size 0");
        assert!(!check_access(9, 0, 4));
        assert!(!check_access(CONFIG, 0, 0));
        assert!(check_access(CONFIG, 0, 4096));
        assert!(BAR0_SIZE.is_power_of_two() && MSIX_BAR_SIZE.is_power_of_two());
    }
}
