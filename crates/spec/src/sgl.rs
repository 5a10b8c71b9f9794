// SPDX-License-Identifier: Apache-2.0
//! Scatter Gather List descriptors (NVMe Base 1.4, 4.4 "Scatter Gather List (SGL)").

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A 16-byte SGL descriptor as it sits in the SQE's DPTR or in an SGL segment.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct SglDescriptor {
    /// Address (bytes 7:0).
    pub addr: u64,
    /// Length (bytes 11:8).
    pub len: u32,
    /// Reserved (bytes 14:12).
    pub reserved: [u8; 3],
    /// SGL Identifier: descriptor type (7:4) and sub type (3:0).
    pub sgl_id: u8,
}
const _: () = assert!(size_of::<SglDescriptor>() == 16);

/// SGL descriptor types this controller can meet (NVMe Base 1.4, Figure 116).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SglKind {
    /// SGL Data Block: `len` bytes at `addr`.
    DataBlock {
        /// Address of the data.
        addr: u64,
        /// Length in bytes.
        len: u32,
    },
    /// SGL Bit Bucket: `len` bytes of a read are discarded.
    BitBucket {
        /// Length in bytes.
        len: u32,
    },
    /// SGL Segment: the next segment (`len` bytes of descriptors) is at `addr`.
    Segment {
        /// Address of the next segment.
        addr: u64,
        /// Length of the next segment in bytes.
        len: u32,
    },
    /// SGL Last Segment: the final segment is at `addr`.
    LastSegment {
        /// Address of the last segment.
        addr: u64,
        /// Length of the last segment in bytes.
        len: u32,
    },
    /// Any other type or sub type (keyed, transport, offset addressing, reserved).
    Unsupported {
        /// The raw SGL Identifier byte.
        sgl_id: u8,
    },
}

impl SglDescriptor {
    /// Build from the SQE's DPTR fields (PSDT 01b/10b): PRP1 holds bytes 7:0, PRP2 bytes 15:8.
    pub const fn from_dptr(dptr1: u64, dptr2: u64) -> SglDescriptor {
        SglDescriptor {
            addr: dptr1,
            len: (dptr2 & 0xFFFF_FFFF) as u32,
            reserved: [
                ((dptr2 >> 32) & 0xFF) as u8,
                ((dptr2 >> 40) & 0xFF) as u8,
                ((dptr2 >> 48) & 0xFF) as u8,
            ],
            sgl_id: (dptr2 >> 56) as u8,
        }
    }

    /// The (dptr1, dptr2) pair for an SQE carrying this descriptor (host side).
    pub const fn to_dptr(&self) -> (u64, u64) {
        let dptr2 = (self.len as u64)
            | ((self.reserved[0] as u64) << 32)
            | ((self.reserved[1] as u64) << 40)
            | ((self.reserved[2] as u64) << 48)
            | ((self.sgl_id as u64) << 56);
        (self.addr, dptr2)
    }

    /// A descriptor of `kind` (host side); `Unsupported` keeps its raw identifier.
    pub const fn new(kind: SglKind) -> SglDescriptor {
        let (addr, len, sgl_id) = match kind {
            SglKind::DataBlock { addr, len } => (addr, len, 0x00),
            SglKind::BitBucket { len } => (0, len, 0x10),
            SglKind::Segment { addr, len } => (addr, len, 0x20),
            SglKind::LastSegment { addr, len } => (addr, len, 0x30),
            SglKind::Unsupported { sgl_id } => (0, 0, sgl_id),
        };
        SglDescriptor {
            addr,
            len,
            reserved: [0; 3],
            sgl_id,
        }
    }

    /// Decode the descriptor type. Only the address sub type (0h) is supported.
    pub const fn kind(&self) -> SglKind {
        let (addr, len) = (self.addr, self.len);
        match self.sgl_id {
            0x00 => SglKind::DataBlock { addr, len },
            0x10 => SglKind::BitBucket { len },
            0x20 => SglKind::Segment { addr, len },
            0x30 => SglKind::LastSegment { addr, len },
            sgl_id => SglKind::Unsupported { sgl_id },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dptr_round_trip_and_kinds() {
        for kind in [
            SglKind::DataBlock {
                addr: 0x1234_5000,
                len: 4096,
            },
            SglKind::BitBucket { len: 512 },
            SglKind::Segment {
                addr: 0x9000,
                len: 48,
            },
            SglKind::LastSegment {
                addr: 0xA000,
                len: 32,
            },
            SglKind::Unsupported { sgl_id: 0x40 },
            SglKind::Unsupported { sgl_id: 0x01 },
        ] {
            let d = SglDescriptor::new(kind);
            let (a, b) = d.to_dptr();
            assert_eq!(SglDescriptor::from_dptr(a, b), d);
            assert_eq!(d.kind(), kind);
        }
        assert_eq!(
            SglDescriptor::from_dptr(0, 0x3000_0000_0000_0010).kind(),
            SglKind::LastSegment { addr: 0, len: 16 }
        );
    }
}
