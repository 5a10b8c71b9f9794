// SPDX-License-Identifier: Apache-2.0
//! The parts of Identify data this driver uses (NVMe Base 1.4, Figures 247 and 249),
//! parsed from the 4096-byte page by byte offset. Decoding reads a copy and never fails:
//! the device's page is untrusted, and odd values are the caller's to judge.

/// Size of an Identify data structure.
pub const IDENTIFY_BYTES: usize = 4096;

fn le16(b: &[u8], off: usize) -> u16 {
    b.get(off..off + 2)
        .and_then(|s| s.try_into().ok())
        .map(u16::from_le_bytes)
        .unwrap_or(0)
}

fn le32(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .unwrap_or(0)
}

fn le64(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

fn byte(b: &[u8], off: usize) -> u8 {
    b.get(off).copied().unwrap_or(0)
}

/// An ASCII field, space/NUL padding trimmed, non-printable bytes replaced.
fn ascii(b: &[u8], off: usize, len: usize) -> String {
    let raw = b.get(off..off + len).unwrap_or(&[]);
    raw.iter()
        .map(|&c| {
            if c.is_ascii_graphic() || c == b' ' {
                char::from(c)
            } else {
                ' '
            }
        })
        .collect::<String>()
        .trim()
        .to_owned()
}

/// Identify Controller (CNS 01h), the fields this driver and its tools use.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdentifyController {
    /// PCI Vendor ID.
    pub vid: u16,
    /// PCI Subsystem Vendor ID.
    pub ssvid: u16,
    /// Serial Number.
    pub sn: String,
    /// Model Number.
    pub mn: String,
    /// Firmware Revision.
    pub fr: String,
    /// Maximum Data Transfer Size: 2^MDTS units of CAP.MPSMIN; 0 = no limit.
    pub mdts: u8,
    /// Controller ID.
    pub cntlid: u16,
    /// Version.
    pub ver: u32,
    /// Optional Admin Command Support.
    pub oacs: u16,
    /// Abort Command Limit (zero-based).
    pub acl: u8,
    /// Asynchronous Event Request Limit (zero-based).
    pub aerl: u8,
    /// Log Page Attributes.
    pub lpa: u8,
    /// Submission Queue Entry Size (max << 4 | required).
    pub sqes: u8,
    /// Completion Queue Entry Size (max << 4 | required).
    pub cqes: u8,
    /// Maximum Outstanding Commands.
    pub maxcmd: u16,
    /// Number of Namespaces.
    pub nn: u32,
    /// Optional NVM Command Support (bit 0 Compare, 2 DSM, 3 Write Zeroes, ...).
    pub oncs: u16,
    /// Volatile Write Cache (bit 0 present).
    pub vwc: u8,
    /// SGL Support.
    pub sgls: u32,
    /// NVM Subsystem NVMe Qualified Name.
    pub subnqn: String,
}

impl IdentifyController {
    /// Parse the 4096-byte Identify Controller page.
    pub fn parse(b: &[u8]) -> IdentifyController {
        IdentifyController {
            vid: le16(b, 0),
            ssvid: le16(b, 2),
            sn: ascii(b, 4, 20),
            mn: ascii(b, 24, 40),
            fr: ascii(b, 64, 8),
            mdts: byte(b, 77),
            cntlid: le16(b, 78),
            ver: le32(b, 80),
            oacs: le16(b, 256),
            acl: byte(b, 258),
            aerl: byte(b, 259),
            lpa: byte(b, 261),
            sqes: byte(b, 512),
            cqes: byte(b, 513),
            maxcmd: le16(b, 514),
            nn: le32(b, 516),
            oncs: le16(b, 520),
            vwc: byte(b, 525),
            sgls: le32(b, 536),
            subnqn: {
                let s = ascii(b, 768, 256);
                s.trim_end_matches(' ').to_owned()
            },
        }
    }

    /// Maximum transfer in bytes for a minimum page size of `2^(12 + mpsmin)`; `None` when
    /// the controller sets no limit.
    pub fn max_transfer_bytes(&self, mpsmin: u32) -> Option<u64> {
        if self.mdts == 0 {
            return None;
        }
        1u64.checked_shl(u32::from(self.mdts) + 12 + mpsmin)
    }

    /// ONCS bit 0: Compare.
    pub fn supports_compare(&self) -> bool {
        self.oncs & 1 != 0
    }

    /// ONCS bit 2: Dataset Management.
    pub fn supports_dsm(&self) -> bool {
        self.oncs & (1 << 2) != 0
    }

    /// ONCS bit 3: Write Zeroes.
    pub fn supports_write_zeroes(&self) -> bool {
        self.oncs & (1 << 3) != 0
    }
}

/// One LBA Format descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LbaFormat {
    /// Metadata Size in bytes.
    pub ms: u16,
    /// LBA Data Size as a power of two.
    pub lbads: u8,
    /// Relative Performance.
    pub rp: u8,
}

/// Identify Namespace (CNS 00h), the fields this driver uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdentifyNamespace {
    /// Namespace Size in logical blocks.
    pub nsze: u64,
    /// Namespace Capacity.
    pub ncap: u64,
    /// Namespace Utilization.
    pub nuse: u64,
    /// Namespace Features.
    pub nsfeat: u8,
    /// Number of LBA Formats (zero-based).
    pub nlbaf: u8,
    /// Formatted LBA Size (bits 3:0 select the format).
    pub flbas: u8,
    /// Deallocate Logical Block Features (bits 2:0: what a deallocated block reads as).
    pub dlfeat: u8,
    /// LBA formats 0..=15.
    pub lbaf: [LbaFormat; 16],
}

impl IdentifyNamespace {
    /// Parse the 4096-byte Identify Namespace page.
    pub fn parse(b: &[u8]) -> IdentifyNamespace {
        let mut lbaf = [LbaFormat::default(); 16];
        for (i, f) in lbaf.iter_mut().enumerate() {
            let raw = le32(b, 128 + 4 * i);
            *f = LbaFormat {
                ms: (raw & 0xFFFF) as u16,
                lbads: ((raw >> 16) & 0xFF) as u8,
                rp: ((raw >> 24) & 0x3) as u8,
            };
        }
        IdentifyNamespace {
            nsze: le64(b, 0),
            ncap: le64(b, 8),
            nuse: le64(b, 16),
            nsfeat: byte(b, 24),
            nlbaf: byte(b, 25),
            flbas: byte(b, 26),
            dlfeat: byte(b, 33),
            lbaf,
        }
    }

    /// The LBA format in use.
    pub fn current_format(&self) -> LbaFormat {
        let idx = usize::from(self.flbas & 0xF);
        self.lbaf.get(idx).copied().unwrap_or_default()
    }

    /// Logical block size in bytes; `None` when LBADS is outside 9..=16 (512 B to 64 KiB),
    /// which this driver does not handle.
    pub fn lba_size(&self) -> Option<u32> {
        let lbads = self.current_format().lbads;
        (9..=16).contains(&lbads).then(|| 1u32 << lbads)
    }
}

/// Parse an Active Namespace ID list (CNS 02h): NSIDs up to the first zero.
pub fn parse_ns_list(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .take_while(|&n| n != 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_fields_at_spec_offsets() {
        let mut b = vec![0u8; IDENTIFY_BYTES];
        b[0..2].copy_from_slice(&0x1b36u16.to_le_bytes());
        b[4..24].copy_from_slice(b"SN-0001             ");
        b[24..30].copy_from_slice(b"nvmemu");
        b[30..64].fill(b' ');
        b[64..72].copy_from_slice(b"1.0\0\0\0\0\0");
        b[77] = 5;
        b[516..520].copy_from_slice(&4u32.to_le_bytes());
        b[520..522].copy_from_slice(&0x000Du16.to_le_bytes());
        b[525] = 1;
        b[768..768 + 12].copy_from_slice(b"nqn.2024-01.");
        let c = IdentifyController::parse(&b);
        assert_eq!(c.vid, 0x1b36);
        assert_eq!(c.sn, "SN-0001");
        assert_eq!(c.mn, "nvmemu");
        assert_eq!(c.fr, "1.0");
        assert_eq!(c.nn, 4);
        assert_eq!(c.max_transfer_bytes(0), Some(128 * 1024));
        assert!(c.supports_compare() && c.supports_dsm() && c.supports_write_zeroes());
        assert_eq!(c.vwc, 1);
        assert_eq!(c.subnqn, "nqn.2024-01.");
    }

    #[test]
    fn namespace_lba_size_from_flbas() {
        let mut b = vec![0u8; IDENTIFY_BYTES];
        b[0..8].copy_from_slice(&1000u64.to_le_bytes());
        b[25] = 1;
        b[26] = 1;
        b[128..132].copy_from_slice(&(9u32 << 16).to_le_bytes());
        b[132..136].copy_from_slice(&(12u32 << 16 | 8).to_le_bytes());
        let n = IdentifyNamespace::parse(&b);
        assert_eq!(n.nsze, 1000);
        assert_eq!(n.lba_size(), Some(4096));
        assert_eq!(n.current_format().ms, 8);
        b[26] = 2; // points at an all-zero format
        assert_eq!(IdentifyNamespace::parse(&b).lba_size(), None);
    }

    /// The byte-offset parser here and the wire structs in nvmemu-spec are written
    /// independently; they must agree, or the target and this driver could share a bug.
    #[test]
    fn agrees_with_spec_wire_structs() {
        use zerocopy::{FromZeros, IntoBytes};
        let mut w = nvmemu_spec::identify::IdentifyController::new_zeroed();
        w.vid = 0x1b36;
        w.sn = nvmemu_spec::identify::ascii_field("S1");
        w.mn = nvmemu_spec::identify::ascii_field("model");
        w.mdts = 7;
        w.cntlid = 3;
        w.ver = 0x10400;
        w.oacs = 0x8;
        w.sqes = 0x66;
        w.cqes = 0x44;
        w.maxcmd = 99;
        w.nn = 32;
        w.oncs = 0x1F;
        w.vwc = 1;
        w.sgls = 0x1_0001;
        w.subnqn[..4].copy_from_slice(b"nqn.");
        let c = IdentifyController::parse(w.as_bytes());
        assert_eq!(
            (c.vid, c.sn.as_str(), c.mn.as_str()),
            (0x1b36, "S1", "model")
        );
        assert_eq!((c.mdts, c.cntlid, c.ver, c.oacs), (7, 3, 0x10400, 0x8));
        assert_eq!((c.sqes, c.cqes, c.maxcmd, c.nn), (0x66, 0x44, 99, 32));
        assert_eq!(
            (c.oncs, c.vwc, c.sgls, c.subnqn.as_str()),
            (0x1F, 1, 0x1_0001, "nqn.")
        );

        let mut n = nvmemu_spec::identify::IdentifyNamespace::new_zeroed();
        n.nsze = 12345;
        n.ncap = 12000;
        n.nuse = 5;
        n.nlbaf = 1;
        n.flbas = 1;
        n.lbaf[1] = 12 << 16;
        let ns = IdentifyNamespace::parse(n.as_bytes());
        assert_eq!((ns.nsze, ns.ncap, ns.nuse), (12345, 12000, 5));
        assert_eq!(ns.lba_size(), Some(4096));
    }

    #[test]
    fn ns_list_stops_at_zero_and_short_pages_decode() {
        let mut b = vec![0u8; 16];
        b[0..4].copy_from_slice(&1u32.to_le_bytes());
        b[4..8].copy_from_slice(&7u32.to_le_bytes());
        b[12..16].copy_from_slice(&9u32.to_le_bytes());
        assert_eq!(parse_ns_list(&b), vec![1, 7]);
        assert_eq!(IdentifyController::parse(&[0xFF; 10]).nn, 0);
    }
}
