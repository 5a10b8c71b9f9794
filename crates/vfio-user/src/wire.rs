// SPDX-License-Identifier: Apache-2.0
//! Byte layouts of the vfio-user header and of every payload this crate decodes or builds
//! (vfio-user spec "Header" and the per-command "Request"/"Reply" tables).
//!
//! All structs are host-endian (little-endian only, see `lib.rs`) and `#[repr(C)]` without
//! implicit padding, so any byte pattern is a valid value.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Size of [`Header`] on the wire.
pub const HEADER_SIZE: usize = 16;
/// Largest payload accepted in one message: `max_data_xfer_size` (1 MiB) plus room for the
/// command's own fields.
pub const MAX_PAYLOAD: usize = 1024 * 1024 + 4096;
/// Largest data transfer (`count`) accepted by REGION_READ/REGION_WRITE.
pub const MAX_DATA_XFER: u32 = 1024 * 1024;
/// Most fds accepted with one message (QEMU and Cloud Hypervisor send up to 16).
pub const MAX_FDS: usize = 16;

/// Message header flag bits (spec "Header", `flags`).
pub mod msg_flags {
    /// Mask of the message type field (bits 0-3).
    pub const TYPE_MASK: u32 = 0xf;
    /// Type: command (request).
    pub const TYPE_COMMAND: u32 = 0;
    /// Type: reply.
    pub const TYPE_REPLY: u32 = 1;
    /// The sender expects no reply.
    pub const NO_REPLY: u32 = 0x10;
    /// The reply is an error; `error` holds the errno.
    pub const ERROR: u32 = 0x20;
}

/// The 16-byte header in front of every message.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct Header {
    /// Sender-chosen id, echoed in the reply.
    pub msg_id: u16,
    /// Raw command number (see [`Command`]).
    pub command: u16,
    /// Size of the whole message including this header.
    pub msg_size: u32,
    /// Type and NO_REPLY/ERROR bits ([`msg_flags`]).
    pub flags: u32,
    /// errno of an error reply, else 0.
    pub error: u32,
}
const _: () = assert!(size_of::<Header>() == HEADER_SIZE);

impl Header {
    /// The message type (bits 0-3 of `flags`).
    pub fn msg_type(&self) -> u32 {
        self.flags & msg_flags::TYPE_MASK
    }
    /// Whether the sender asked for no reply.
    pub fn no_reply(&self) -> bool {
        self.flags & msg_flags::NO_REPLY != 0
    }
    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        self.flags & msg_flags::ERROR != 0
    }
    /// The decoded command.
    pub fn command(&self) -> Command {
        Command::from(self.command)
    }
}

/// vfio-user command numbers (spec "Commands"). Unknown values decode to `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// 1: VFIO_USER_VERSION.
    Version,
    /// 2: VFIO_USER_DMA_MAP.
    DmaMap,
    /// 3: VFIO_USER_DMA_UNMAP.
    DmaUnmap,
    /// 4: VFIO_USER_DEVICE_GET_INFO.
    DeviceGetInfo,
    /// 5: VFIO_USER_DEVICE_GET_REGION_INFO.
    DeviceGetRegionInfo,
    /// 6: VFIO_USER_DEVICE_GET_REGION_IO_FDS.
    DeviceGetRegionIoFds,
    /// 7: VFIO_USER_DEVICE_GET_IRQ_INFO.
    DeviceGetIrqInfo,
    /// 8: VFIO_USER_DEVICE_SET_IRQS.
    DeviceSetIrqs,
    /// 9: VFIO_USER_REGION_READ.
    RegionRead,
    /// 10: VFIO_USER_REGION_WRITE.
    RegionWrite,
    /// 11: VFIO_USER_DMA_READ (server to client).
    DmaRead,
    /// 12: VFIO_USER_DMA_WRITE (server to client).
    DmaWrite,
    /// 13: VFIO_USER_DEVICE_RESET.
    DeviceReset,
    /// 14: legacy VFIO_USER_DIRTY_PAGES.
    DirtyPages,
    /// 15: VFIO_USER_REGION_WRITE_MULTI.
    RegionWriteMulti,
    /// 16: VFIO_USER_DEVICE_FEATURE.
    DeviceFeature,
    /// 17: VFIO_USER_MIG_DATA_READ.
    MigDataRead,
    /// 18: VFIO_USER_MIG_DATA_WRITE.
    MigDataWrite,
    /// Any other value.
    Unknown(u16),
}

const COMMANDS: [Command; 18] = [
    Command::Version,
    Command::DmaMap,
    Command::DmaUnmap,
    Command::DeviceGetInfo,
    Command::DeviceGetRegionInfo,
    Command::DeviceGetRegionIoFds,
    Command::DeviceGetIrqInfo,
    Command::DeviceSetIrqs,
    Command::RegionRead,
    Command::RegionWrite,
    Command::DmaRead,
    Command::DmaWrite,
    Command::DeviceReset,
    Command::DirtyPages,
    Command::RegionWriteMulti,
    Command::DeviceFeature,
    Command::MigDataRead,
    Command::MigDataWrite,
];

impl From<u16> for Command {
    fn from(raw: u16) -> Self {
        usize::from(raw)
            .checked_sub(1)
            .and_then(|i| COMMANDS.get(i).copied())
            .unwrap_or(Command::Unknown(raw))
    }
}

impl Command {
    /// The raw command number.
    pub fn raw(self) -> u16 {
        match self {
            Command::Unknown(raw) => raw,
            known => COMMANDS
                .iter()
                .position(|c| *c == known)
                .and_then(|i| u16::try_from(i + 1).ok())
                .unwrap_or(0),
        }
    }
}

/// VERSION payload prefix; a NUL-terminated JSON string may follow.
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct VersionWire {
    /// Major version (0).
    pub major: u16,
    /// Minor version.
    pub minor: u16,
}
const _: () = assert!(size_of::<VersionWire>() == 4);

/// DEVICE_GET_INFO request and reply (`struct vfio_device_info`).
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct DeviceInfoWire {
    /// Size of the structure the client can accept.
    pub argsz: u32,
    /// RESET (1), PCI (2).
    pub flags: u32,
    /// Number of regions.
    pub num_regions: u32,
    /// Number of interrupt types.
    pub num_irqs: u32,
}
const _: () = assert!(size_of::<DeviceInfoWire>() == 16);
/// `argsz` of a complete [`DeviceInfoWire`].
pub const DEVICE_INFO_SIZE: u32 = 16;

/// DEVICE_GET_REGION_INFO request and reply prefix (`struct vfio_region_info`).
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct RegionInfoWire {
    /// Request: buffer size of the client; reply: full size of the reply.
    pub argsz: u32,
    /// READ 1, WRITE 2, MMAP 4, CAPS 8.
    pub flags: u32,
    /// Region index.
    pub index: u32,
    /// Offset of the first capability from the start of this struct (0 = none).
    pub cap_offset: u32,
    /// Region size.
    pub size: u64,
    /// File offset to mmap the region's fd at.
    pub offset: u64,
}
const _: () = assert!(size_of::<RegionInfoWire>() == 32);
/// `argsz` of a complete [`RegionInfoWire`].
pub const REGION_INFO_SIZE: u32 = 32;

/// Region info capability header (`struct vfio_info_cap_header`).
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct CapHeaderWire {
    /// Capability id (1 = sparse mmap).
    pub id: u16,
    /// Capability version (1).
    pub version: u16,
    /// Offset of the next capability, 0 = last.
    pub next: u32,
}
const _: () = assert!(size_of::<CapHeaderWire>() == 8);

/// Sparse mmap capability prefix (`struct vfio_region_info_cap_sparse_mmap`).
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct SparseCapWire {
    /// Generic capability header.
    pub header: CapHeaderWire,
    /// Number of areas that follow.
    pub nr_areas: u32,
    /// Reserved, 0.
    pub reserved: u32,
}
const _: () = assert!(size_of::<SparseCapWire>() == 16);

/// One sparse mmap area (`struct vfio_region_sparse_mmap_area`).
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct SparseAreaWire {
    /// Offset inside the region.
    pub offset: u64,
    /// Size of the area.
    pub size: u64,
}
const _: () = assert!(size_of::<SparseAreaWire>() == 16);

/// Capability id of the sparse mmap capability.
pub const CAP_SPARSE_MMAP: u16 = 1;
/// Region info flag: capabilities follow.
pub const REGION_FLAG_CAPS: u32 = 8;

/// DEVICE_GET_IRQ_INFO request and reply (`struct vfio_irq_info`).
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct IrqInfoWire {
    /// Structure size.
    pub argsz: u32,
    /// EVENTFD 1, MASKABLE 2, AUTOMASKED 4, NORESIZE 8.
    pub flags: u32,
    /// IRQ index (0 INTx, 1 MSI, 2 MSI-X, 3 ERR, 4 REQ).
    pub index: u32,
    /// Number of vectors.
    pub count: u32,
}
const _: () = assert!(size_of::<IrqInfoWire>() == 16);
/// `argsz` of a complete [`IrqInfoWire`].
pub const IRQ_INFO_SIZE: u32 = 16;

/// DEVICE_SET_IRQS request prefix (`struct vfio_irq_set` without data).
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct SetIrqsWire {
    /// Structure size (QEMU keeps 20 for eventfd chunks).
    pub argsz: u32,
    /// One DATA_* bit and one ACTION_* bit.
    pub flags: u32,
    /// IRQ index.
    pub index: u32,
    /// First vector.
    pub start: u32,
    /// Number of vectors.
    pub count: u32,
}
const _: () = assert!(size_of::<SetIrqsWire>() == 20);
/// `argsz` of a complete [`SetIrqsWire`].
pub const SET_IRQS_SIZE: u32 = 20;

/// REGION_READ/REGION_WRITE request and reply prefix.
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct RegionAccessWire {
    /// Offset inside the region.
    pub offset: u64,
    /// Region index.
    pub region: u32,
    /// Number of data bytes.
    pub count: u32,
}
const _: () = assert!(size_of::<RegionAccessWire>() == 16);

/// DMA_MAP request.
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct DmaMapWire {
    /// Structure size (32).
    pub argsz: u32,
    /// READ 1, WRITE 2.
    pub flags: u32,
    /// Offset into the attached fd.
    pub offset: u64,
    /// IOVA of the region.
    pub addr: u64,
    /// Region size.
    pub size: u64,
}
const _: () = assert!(size_of::<DmaMapWire>() == 32);
/// `argsz` of a complete [`DmaMapWire`].
pub const DMA_MAP_SIZE: u32 = 32;

/// DMA_UNMAP request and reply.
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct DmaUnmapWire {
    /// Structure size (24).
    pub argsz: u32,
    /// GET_DIRTY_BITMAP 1, ALL 2.
    pub flags: u32,
    /// IOVA.
    pub addr: u64,
    /// Size.
    pub size: u64,
}
const _: () = assert!(size_of::<DmaUnmapWire>() == 24);
/// `argsz` of a complete [`DmaUnmapWire`].
pub const DMA_UNMAP_SIZE: u32 = 24;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_numbers_round_trip() {
        for raw in 0..=40u16 {
            assert_eq!(Command::from(raw).raw(), raw);
        }
        assert_eq!(Command::from(1), Command::Version);
        assert_eq!(Command::from(5), Command::DeviceGetRegionInfo);
        assert_eq!(Command::from(13), Command::DeviceReset);
        assert_eq!(Command::from(18), Command::MigDataWrite);
        assert_eq!(Command::from(0), Command::Unknown(0));
        assert_eq!(Command::from(99), Command::Unknown(99));
    }

    #[test]
    fn header_layout_matches_spec() {
        let h = Header {
            msg_id: 0x0102,
            command: 3,
            msg_size: 0x30,
            flags: 0x11,
            error: 5,
        };
        assert_eq!(
            h.as_bytes(),
            &[2, 1, 3, 0, 0x30, 0, 0, 0, 0x11, 0, 0, 0, 5, 0, 0, 0]
        );
        assert!(h.no_reply());
        assert_eq!(h.msg_type(), msg_flags::TYPE_REPLY);
    }
}
