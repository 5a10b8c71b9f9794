// SPDX-License-Identifier: Apache-2.0
//! Typed requests and answers exchanged between the protocol layer and a [`crate::Device`].
//!
//! Every value here has already been validated by the protocol layer when a device sees it
//! (flag combinations, overflow, fd counts); range checks against the device's own regions and
//! irq counts are the device's job.

use std::os::fd::{BorrowedFd, OwnedFd};

/// DEVICE_GET_INFO answer (`struct vfio_device_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceInfo {
    /// [`DeviceInfo::FLAG_RESET`] | [`DeviceInfo::FLAG_PCI`].
    pub flags: u32,
    /// Number of regions (QEMU needs >= 8 for PCI, SPDK's client breaks above 10).
    pub num_regions: u32,
    /// Number of irq indices (QEMU needs >= 3).
    pub num_irqs: u32,
}

impl DeviceInfo {
    /// VFIO_DEVICE_FLAGS_RESET: the device supports DEVICE_RESET.
    pub const FLAG_RESET: u32 = 1;
    /// VFIO_DEVICE_FLAGS_PCI: a PCI device.
    pub const FLAG_PCI: u32 = 2;
}

/// One mmappable area inside a region, relative to the region's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SparseArea {
    /// Offset inside the region (and, added to `file_offset`, inside the fd).
    pub offset: u64,
    /// Size of the area.
    pub size: u64,
}

/// DEVICE_GET_REGION_INFO answer of a device.
#[derive(Debug)]
pub struct RegionInfo<'a> {
    /// [`RegionInfo::FLAG_READ`] | [`RegionInfo::FLAG_WRITE`] | [`RegionInfo::FLAG_MMAP`].
    pub flags: u32,
    /// Region size (a power of two for BARs, or 0 for an absent region).
    pub size: u64,
    /// Offset into `fd` at which the region starts.
    pub file_offset: u64,
    /// Sparse mmap areas. Only the first is sent: SPDK's client needs one fd per area and
    /// QEMU accepts one fd per reply.
    pub sparse: Vec<SparseArea>,
    /// The fd clients mmap, for regions with MMAP.
    pub fd: Option<BorrowedFd<'a>>,
}

impl RegionInfo<'_> {
    /// VFIO_REGION_INFO_FLAG_READ.
    pub const FLAG_READ: u32 = 1;
    /// VFIO_REGION_INFO_FLAG_WRITE.
    pub const FLAG_WRITE: u32 = 2;
    /// VFIO_REGION_INFO_FLAG_MMAP.
    pub const FLAG_MMAP: u32 = 4;
}

/// A region's description as a client received it (no borrowed fd).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRegionInfo {
    /// READ 1, WRITE 2, MMAP 4 (CAPS 8 if capabilities were present).
    pub flags: u32,
    /// Region size.
    pub size: u64,
    /// File offset of the region inside the region fd.
    pub file_offset: u64,
    /// Sparse mmap areas from the capability chain.
    pub sparse: Vec<SparseArea>,
}

/// DEVICE_GET_IRQ_INFO answer (`struct vfio_irq_info` without argsz and index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IrqInfo {
    /// EVENTFD 1, MASKABLE 2, AUTOMASKED 4, NORESIZE 8.
    pub flags: u32,
    /// Number of vectors.
    pub count: u32,
}

impl IrqInfo {
    /// VFIO_IRQ_INFO_EVENTFD.
    pub const FLAG_EVENTFD: u32 = 1;
    /// VFIO_IRQ_INFO_MASKABLE (do not advertise for MSI-X: QEMU dropped per-vector masking).
    pub const FLAG_MASKABLE: u32 = 2;
    /// VFIO_IRQ_INFO_AUTOMASKED.
    pub const FLAG_AUTOMASKED: u32 = 4;
    /// VFIO_IRQ_INFO_NORESIZE.
    pub const FLAG_NORESIZE: u32 = 8;
}

/// DEVICE_SET_IRQS request (`struct vfio_irq_set` without data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetIrqs {
    /// One `DATA_*` bit and one `ACTION_*` bit.
    pub flags: u32,
    /// IRQ index (0 INTx, 1 MSI, 2 MSI-X, 3 ERR, 4 REQ).
    pub index: u32,
    /// First vector.
    pub start: u32,
    /// Number of vectors (`start + count` never overflows when the server hands it over).
    pub count: u32,
}

/// What a SET_IRQS request does to the vectors (`VFIO_IRQ_SET_ACTION_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IrqAction {
    /// ACTION_MASK.
    Mask,
    /// ACTION_UNMASK.
    Unmask,
    /// ACTION_TRIGGER (with eventfds: assign/de-assign the trigger fds).
    Trigger,
}

/// Which data a SET_IRQS request carries (`VFIO_IRQ_SET_DATA_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IrqDataType {
    /// DATA_NONE.
    None,
    /// DATA_BOOL: one byte per vector.
    Bool,
    /// DATA_EVENTFD: fds in SCM_RIGHTS.
    Eventfd,
}

impl SetIrqs {
    /// VFIO_IRQ_SET_DATA_NONE.
    pub const DATA_NONE: u32 = 1;
    /// VFIO_IRQ_SET_DATA_BOOL.
    pub const DATA_BOOL: u32 = 2;
    /// VFIO_IRQ_SET_DATA_EVENTFD.
    pub const DATA_EVENTFD: u32 = 4;
    /// VFIO_IRQ_SET_ACTION_MASK.
    pub const ACTION_MASK: u32 = 8;
    /// VFIO_IRQ_SET_ACTION_UNMASK.
    pub const ACTION_UNMASK: u32 = 0x10;
    /// VFIO_IRQ_SET_ACTION_TRIGGER.
    pub const ACTION_TRIGGER: u32 = 0x20;
    const DATA_MASK: u32 = Self::DATA_NONE | Self::DATA_BOOL | Self::DATA_EVENTFD;
    const ACTION_MASK_ALL: u32 = Self::ACTION_MASK | Self::ACTION_UNMASK | Self::ACTION_TRIGGER;

    /// The action, if exactly one action bit is set.
    pub fn action(&self) -> Option<IrqAction> {
        match self.flags & Self::ACTION_MASK_ALL {
            Self::ACTION_MASK => Some(IrqAction::Mask),
            Self::ACTION_UNMASK => Some(IrqAction::Unmask),
            Self::ACTION_TRIGGER => Some(IrqAction::Trigger),
            _ => None,
        }
    }

    /// The data type, if exactly one data bit is set.
    pub fn data(&self) -> Option<IrqDataType> {
        match self.flags & Self::DATA_MASK {
            Self::DATA_NONE => Some(IrqDataType::None),
            Self::DATA_BOOL => Some(IrqDataType::Bool),
            Self::DATA_EVENTFD => Some(IrqDataType::Eventfd),
            _ => None,
        }
    }

    /// Whether no bits outside the known DATA/ACTION bits are set.
    pub fn flags_known(&self) -> bool {
        self.flags & !(Self::DATA_MASK | Self::ACTION_MASK_ALL) == 0
    }
}

/// The data of a SET_IRQS request.
#[derive(Debug)]
pub enum IrqData {
    /// DATA_NONE.
    None,
    /// DATA_BOOL: one flag per vector in `[start, start + count)`.
    Bool(Vec<bool>),
    /// DATA_EVENTFD: one eventfd per vector, or empty to de-assign `[start, start + count)`.
    Eventfds(Vec<OwnedFd>),
}

/// DMA_MAP request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaMap {
    /// [`DmaMap::FLAG_READ`] | [`DmaMap::FLAG_WRITE`].
    pub flags: u32,
    /// Offset into the attached fd.
    pub offset: u64,
    /// IOVA (guest physical address for QEMU, process VA for SPDK).
    pub iova: u64,
    /// Size in bytes (non-zero; `iova + size` and `offset + size` do not overflow).
    pub size: u64,
}

impl DmaMap {
    /// The device may read the region.
    pub const FLAG_READ: u32 = 1;
    /// The device may write the region.
    pub const FLAG_WRITE: u32 = 2;
}

/// DMA_UNMAP request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaUnmap {
    /// 0 or [`DmaUnmap::FLAG_ALL`] (with `iova == size == 0`).
    pub flags: u32,
    /// IOVA of a previous map.
    pub iova: u64,
    /// Size of that map.
    pub size: u64,
}

impl DmaUnmap {
    /// VFIO_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP (rejected with ENOTSUP by the server).
    pub const FLAG_GET_DIRTY_BITMAP: u32 = 1 << 0;
    /// VFIO_DMA_UNMAP_FLAG_ALL: unmap everything.
    pub const FLAG_ALL: u32 = 1 << 1;

    /// Whether this unmaps every region.
    pub fn is_all(&self) -> bool {
        self.flags & Self::FLAG_ALL != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_irqs_accessors_need_exactly_one_bit() {
        let mut s = SetIrqs {
            flags: 0,
            index: 2,
            start: 0,
            count: 1,
        };
        assert_eq!(s.action(), None);
        s.flags = SetIrqs::DATA_EVENTFD | SetIrqs::ACTION_TRIGGER;
        assert_eq!(s.action(), Some(IrqAction::Trigger));
        assert_eq!(s.data(), Some(IrqDataType::Eventfd));
        s.flags |= SetIrqs::DATA_BOOL;
        assert_eq!(s.data(), None);
        s.flags = SetIrqs::DATA_NONE | SetIrqs::ACTION_MASK | SetIrqs::ACTION_UNMASK;
        assert_eq!(s.action(), None);
        s.flags = 0x40 | SetIrqs::DATA_NONE | SetIrqs::ACTION_MASK;
        assert!(!s.flags_known());
    }
}
