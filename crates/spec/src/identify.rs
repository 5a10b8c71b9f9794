// SPDX-License-Identifier: Apache-2.0
//! Identify data structures (NVMe Base 1.4, 5.15 "Identify command").

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Controller or Namespace Structure (CNS, CDW10 bits 7:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cns {
    /// 00h: Identify Namespace data structure for NSID.
    Namespace,
    /// 01h: Identify Controller data structure.
    Controller,
    /// 02h: Active Namespace ID list (NSIDs greater than NSID).
    ActiveNamespaceList,
    /// 03h: Namespace Identification Descriptor list for NSID.
    NamespaceIdDescriptors,
    /// Any CNS value this controller does not implement.
    Unknown(u8),
}

impl From<u8> for Cns {
    fn from(raw: u8) -> Self {
        match raw {
            0x00 => Cns::Namespace,
            0x01 => Cns::Controller,
            0x02 => Cns::ActiveNamespaceList,
            0x03 => Cns::NamespaceIdDescriptors,
            other => Cns::Unknown(other),
        }
    }
}

/// Size of every Identify data structure.
pub const IDENTIFY_SIZE: usize = 4096;

/// Power State Descriptor (NVMe Base 1.4, Figure 248).
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct PowerStateDescriptor {
    /// Maximum Power (centiwatts unless MXPS).
    pub mp: u16,
    /// Reserved.
    pub rsvd2: u8,
    /// MXPS (bit 0), NOPS (bit 1).
    pub flags: u8,
    /// Entry Latency (us).
    pub enlat: u32,
    /// Exit Latency (us).
    pub exlat: u32,
    /// Relative Read Throughput.
    pub rrt: u8,
    /// Relative Read Latency.
    pub rrl: u8,
    /// Relative Write Throughput.
    pub rwt: u8,
    /// Relative Write Latency.
    pub rwl: u8,
    /// Idle Power.
    pub idlp: u16,
    /// Idle Power Scale (bits 7:6).
    pub ips: u8,
    /// Reserved.
    pub rsvd19: u8,
    /// Active Power.
    pub actp: u16,
    /// Active Power Workload (2:0) and Active Power Scale (7:6).
    pub apw_aps: u8,
    /// Reserved.
    pub rsvd23: [u8; 9],
}
const _: () = assert!(size_of::<PowerStateDescriptor>() == 32);

/// Identify Controller data structure (NVMe Base 1.4, Figure 247).
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
#[allow(missing_docs)] // fields are named by the spec's mnemonics
pub struct IdentifyController {
    pub vid: u16,
    pub ssvid: u16,
    pub sn: [u8; 20],
    pub mn: [u8; 40],
    pub fr: [u8; 8],
    pub rab: u8,
    pub ieee: [u8; 3],
    pub cmic: u8,
    pub mdts: u8,
    pub cntlid: u16,
    pub ver: u32,
    pub rtd3r: u32,
    pub rtd3e: u32,
    pub oaes: u32,
    pub ctratt: u32,
    pub rrls: u16,
    pub rsvd102: [u8; 9],
    pub cntrltype: u8,
    pub fguid: [u8; 16],
    pub crdt: [u16; 3],
    pub rsvd134: [u8; 122],
    pub oacs: u16,
    pub acl: u8,
    pub aerl: u8,
    pub frmw: u8,
    pub lpa: u8,
    pub elpe: u8,
    pub npss: u8,
    pub avscc: u8,
    pub apsta: u8,
    pub wctemp: u16,
    pub cctemp: u16,
    pub mtfa: u16,
    pub hmpre: u32,
    pub hmmin: u32,
    pub tnvmcap: [u8; 16],
    pub unvmcap: [u8; 16],
    pub rpmbs: u32,
    pub edstt: u16,
    pub dsto: u8,
    pub fwug: u8,
    pub kas: u16,
    pub hctma: u16,
    pub mntmt: u16,
    pub mxtmt: u16,
    pub sanicap: u32,
    pub hmminds: u32,
    pub hmmaxd: u16,
    pub nsetidmax: u16,
    pub endgidmax: u16,
    pub anatt: u8,
    pub anacap: u8,
    pub anagrpmax: u32,
    pub nanagrpid: u32,
    pub pels: u32,
    pub rsvd356: [u8; 156],
    pub sqes: u8,
    pub cqes: u8,
    pub maxcmd: u16,
    pub nn: u32,
    pub oncs: u16,
    pub fuses: u16,
    pub fna: u8,
    pub vwc: u8,
    pub awun: u16,
    pub awupf: u16,
    pub nvscc: u8,
    pub nwpc: u8,
    pub acwu: u16,
    pub rsvd534: [u8; 2],
    pub sgls: u32,
    pub mnan: u32,
    pub rsvd544: [u8; 224],
    pub subnqn: [u8; 256],
    pub rsvd1024: [u8; 768],
    pub nvmeof: [u8; 256],
    pub psd: [PowerStateDescriptor; 32],
    pub vs: [u8; 1024],
}
const _: () = assert!(size_of::<IdentifyController>() == IDENTIFY_SIZE);
const _: () = assert!(core::mem::offset_of!(IdentifyController, oacs) == 256);
const _: () = assert!(core::mem::offset_of!(IdentifyController, sqes) == 512);
const _: () = assert!(core::mem::offset_of!(IdentifyController, sgls) == 536);
const _: () = assert!(core::mem::offset_of!(IdentifyController, subnqn) == 768);
const _: () = assert!(core::mem::offset_of!(IdentifyController, psd) == 2048);

/// Identify Controller bit fields this project uses.
pub mod ctrl_bits {
    /// CMIC: the NVM subsystem may have two or more ports.
    pub const CMIC_MULTI_PORT: u8 = 1 << 0;
    /// CMIC: the NVM subsystem may have two or more controllers.
    pub const CMIC_MULTI_CTRLR: u8 = 1 << 1;
    /// CTRATT: 128-bit Host Identifiers supported.
    pub const CTRATT_EXHID: u32 = 1 << 0;
    /// CTRATT: Traffic Based Keep Alive (any command restarts the Keep Alive Timer).
    pub const CTRATT_TBKAS: u32 = 1 << 6;
    /// OFCS: Disconnect (of one I/O queue) supported.
    pub const OFCS_DISCONNECT: u8 = 1 << 0;
    /// OACS: Doorbell Buffer Config supported.
    pub const OACS_DBBUF: u16 = 1 << 8;
    /// OAES: Namespace Attribute Notices supported.
    pub const OAES_NS_ATTRIBUTE: u32 = 1 << 8;
    /// ONCS: Compare.
    pub const ONCS_COMPARE: u16 = 1 << 0;
    /// ONCS: Dataset Management.
    pub const ONCS_DSM: u16 = 1 << 2;
    /// ONCS: Write Zeroes.
    pub const ONCS_WRITE_ZEROES: u16 = 1 << 3;
    /// ONCS: Save field in Set Features and Select field in Get Features.
    pub const ONCS_SAVE_SELECT: u16 = 1 << 4;
    /// ONCS: Reservations.
    pub const ONCS_RESERVATIONS: u16 = 1 << 5;
    /// ONCS: Copy.
    pub const ONCS_COPY: u16 = 1 << 8;
    /// VWC: a volatile write cache is present.
    pub const VWC_PRESENT: u8 = 1 << 0;
    /// VWC: Flush with the broadcast NSID is supported (bits 2:1 = 11b).
    pub const VWC_FLUSH_BROADCAST: u8 = 0b11 << 1;
    /// SGLS: SGLs supported, no alignment or granularity requirement.
    pub const SGLS_SUPPORTED: u32 = 0b01;
    /// SGLS: SGL Bit Bucket descriptor supported.
    pub const SGLS_BIT_BUCKET: u32 = 1 << 16;
    /// SGLS: Keyed SGL Data Block descriptor supported (NVMe over Fabrics).
    pub const SGLS_KEYED: u32 = 1 << 2;
    /// SGLS: the Address field of an SGL Data Block may be an offset (in-capsule data).
    pub const SGLS_OFFSET: u32 = 1 << 20;
    /// CNTRLTYPE: I/O controller.
    pub const CNTRLTYPE_IO: u8 = 1;
    /// LPA: Commands Supported and Effects log page.
    pub const LPA_CMD_EFFECTS: u8 = 1 << 1;
    /// LPA: extended Get Log Page (NUMDU, LPOL/LPOU).
    pub const LPA_EXTENDED: u8 = 1 << 2;
}

/// LBA Format (NVMe Base 1.4, Figure 246), packed in a dword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LbaFormat {
    /// Metadata Size in bytes.
    pub ms: u16,
    /// LBA Data Size as a power of two.
    pub lbads: u8,
    /// Relative Performance (0 best).
    pub rp: u8,
}

impl LbaFormat {
    /// The dword as stored in `IdentifyNamespace::lbaf`.
    pub const fn to_dword(self) -> u32 {
        (self.ms as u32) | ((self.lbads as u32) << 16) | (((self.rp & 0x3) as u32) << 24)
    }

    /// Decode a dword.
    pub const fn from_dword(dw: u32) -> LbaFormat {
        LbaFormat {
            ms: (dw & 0xFFFF) as u16,
            lbads: ((dw >> 16) & 0xFF) as u8,
            rp: ((dw >> 24) & 0x3) as u8,
        }
    }
}

/// Identify Namespace data structure (NVMe Base 1.4, Figure 245).
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
#[allow(missing_docs)] // fields are named by the spec's mnemonics
pub struct IdentifyNamespace {
    pub nsze: u64,
    pub ncap: u64,
    pub nuse: u64,
    pub nsfeat: u8,
    pub nlbaf: u8,
    pub flbas: u8,
    pub mc: u8,
    pub dpc: u8,
    pub dps: u8,
    pub nmic: u8,
    pub rescap: u8,
    pub fpi: u8,
    pub dlfeat: u8,
    pub nawun: u16,
    pub nawupf: u16,
    pub nacwu: u16,
    pub nabsn: u16,
    pub nabo: u16,
    pub nabspf: u16,
    pub noiob: u16,
    pub nvmcap: [u8; 16],
    pub npwg: u16,
    pub npwa: u16,
    pub npdg: u16,
    pub npda: u16,
    pub nows: u16,
    pub rsvd74: [u8; 18],
    pub anagrpid: u32,
    pub rsvd96: [u8; 3],
    pub nsattr: u8,
    pub nvmsetid: u16,
    pub endgid: u16,
    pub nguid: [u8; 16],
    pub eui64: [u8; 8],
    pub lbaf: [u32; 16],
    pub rsvd192: [u8; 192],
    pub vs: [u8; 3712],
}
const _: () = assert!(size_of::<IdentifyNamespace>() == IDENTIFY_SIZE);
const _: () = assert!(core::mem::offset_of!(IdentifyNamespace, nguid) == 104);
const _: () = assert!(core::mem::offset_of!(IdentifyNamespace, lbaf) == 128);

/// NMIC: the namespace may be attached to two or more controllers.
pub const NMIC_SHARED: u8 = 1 << 0;

/// DLFEAT: deallocated blocks read as zeroes (bits 2:0 = 001b).
pub const DLFEAT_READ_ZEROES: u8 = 0b001;
/// DLFEAT: Write Zeroes supports the Deallocate bit.
pub const DLFEAT_WRITE_ZEROES_DEALLOCATE: u8 = 1 << 3;

/// Namespace Identifier Type (NIDT) in a Namespace Identification Descriptor (Figure 249).
pub mod nidt {
    /// IEEE Extended Unique Identifier, 8 bytes.
    pub const EUI64: u8 = 1;
    /// Namespace Globally Unique Identifier, 16 bytes.
    pub const NGUID: u8 = 2;
    /// Namespace UUID, 16 bytes.
    pub const UUID: u8 = 3;
}

/// An ASCII field padded with spaces (SN, MN, FR); longer input is truncated, non-ASCII and
/// control bytes become `_` so the host never sees bytes the spec forbids.
pub fn ascii_field<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [b' '; N];
    for (dst, b) in out.iter_mut().zip(s.bytes()) {
        *dst = if b.is_ascii_graphic() || b == b' ' {
            b
        } else {
            b'_'
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_is_space_padded_and_sanitised() {
        assert_eq!(&ascii_field::<8>("1.0"), b"1.0     ");
        assert_eq!(&ascii_field::<4>("abcdef"), b"abcd");
        assert_eq!(&ascii_field::<4>("a\nb"), b"a_b ");
    }

    #[test]
    fn lba_format_dword() {
        let f = LbaFormat {
            ms: 0,
            lbads: 12,
            rp: 0,
        };
        assert_eq!(f.to_dword(), 0x000C_0000);
        assert_eq!(LbaFormat::from_dword(f.to_dword()), f);
    }

    #[test]
    fn cns_decode() {
        assert_eq!(Cns::from(1), Cns::Controller);
        assert_eq!(Cns::from(0x10), Cns::Unknown(0x10));
    }
}
