// SPDX-License-Identifier: Apache-2.0
//! Submission and completion queue entries (NVMe Base 1.4, 4.2 and 4.6).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::{Cid, Qid, Status};

/// A 64-byte submission queue entry, exactly as it sits in the SQ.
///
/// Copy it out of shared memory once, then decode the copy; handlers never read `cdw10`..
/// directly but use the typed command decoded from it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct Sqe {
    /// CDW0: opcode (7:0), fused (9:8), PSDT (15:14), CID (31:16).
    pub cdw0: u32,
    /// Namespace identifier.
    pub nsid: u32,
    /// Command dword 2.
    pub cdw2: u32,
    /// Command dword 3.
    pub cdw3: u32,
    /// Metadata pointer.
    pub mptr: u64,
    /// Data pointer: PRP1 or the first 8 bytes of an SGL descriptor.
    pub dptr1: u64,
    /// Data pointer: PRP2 or the last 8 bytes of an SGL descriptor.
    pub dptr2: u64,
    /// Command dword 10.
    pub cdw10: u32,
    /// Command dword 11.
    pub cdw11: u32,
    /// Command dword 12.
    pub cdw12: u32,
    /// Command dword 13.
    pub cdw13: u32,
    /// Command dword 14.
    pub cdw14: u32,
    /// Command dword 15.
    pub cdw15: u32,
}
const _: () = assert!(size_of::<Sqe>() == 64);

/// Two dwords as the little-endian 64-bit word they form in memory.
const fn pair(lo: u32, hi: u32) -> u64 {
    (lo as u64) | ((hi as u64) << 32)
}

/// PRP or SGL Data Transfer (CDW0.PSDT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Psdt {
    /// PRPs are used.
    Prp,
    /// SGL; MPTR is a single contiguous buffer.
    SglMptrContiguous,
    /// SGL; MPTR is an SGL segment.
    SglMptrSgl,
    /// Reserved value 3.
    Reserved,
}

impl Sqe {
    /// The entry as the eight little-endian 64-bit words of its memory layout, for a
    /// writer that stores it word by word (see `MmapRegion::store_u64s`).
    pub const fn to_words(&self) -> [u64; 8] {
        [
            pair(self.cdw0, self.nsid),
            pair(self.cdw2, self.cdw3),
            self.mptr,
            self.dptr1,
            self.dptr2,
            pair(self.cdw10, self.cdw11),
            pair(self.cdw12, self.cdw13),
            pair(self.cdw14, self.cdw15),
        ]
    }

    /// Opcode (CDW0 bits 7:0).
    pub const fn opcode(&self) -> u8 {
        (self.cdw0 & 0xFF) as u8
    }

    /// Fused operation (CDW0 bits 9:8); 0 means a normal command.
    pub const fn fuse(&self) -> u8 {
        ((self.cdw0 >> 8) & 0x3) as u8
    }

    /// PRP or SGL for Data Transfer (CDW0 bits 15:14).
    pub const fn psdt(&self) -> Psdt {
        match (self.cdw0 >> 14) & 0x3 {
            0 => Psdt::Prp,
            1 => Psdt::SglMptrContiguous,
            2 => Psdt::SglMptrSgl,
            _ => Psdt::Reserved,
        }
    }

    /// Command identifier (CDW0 bits 31:16).
    pub const fn cid(&self) -> Cid {
        Cid((self.cdw0 >> 16) as u16)
    }

    /// Build CDW0 from its parts (host side).
    pub const fn make_cdw0(opcode: u8, psdt: Psdt, cid: Cid) -> u32 {
        let psdt = match psdt {
            Psdt::Prp => 0,
            Psdt::SglMptrContiguous => 1,
            Psdt::SglMptrSgl => 2,
            Psdt::Reserved => 3,
        };
        (opcode as u32) | (psdt << 14) | ((cid.0 as u32) << 16)
    }
}

/// A 16-byte completion queue entry.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct Cqe {
    /// Command specific result (DW0).
    pub dw0: u32,
    /// Reserved / command specific (DW1).
    pub dw1: u32,
    /// SQ head pointer (15:0) and SQ identifier (31:16).
    pub sq_head: u16,
    /// SQ identifier.
    pub sq_id: u16,
    /// Command identifier.
    pub cid: u16,
    /// Phase tag (bit 0) and status field (bits 15:1).
    pub status_phase: u16,
}
const _: () = assert!(size_of::<Cqe>() == 16);

impl Cqe {
    /// The entry as its two little-endian 64-bit words: DW0-DW1, then DW2-DW3 (SQ head,
    /// SQ id, CID, status and phase), which a controller stores last, in one store.
    pub const fn to_words(&self) -> [u64; 2] {
        [
            pair(self.dw0, self.dw1),
            (self.sq_head as u64)
                | ((self.sq_id as u64) << 16)
                | ((self.cid as u64) << 32)
                | ((self.status_phase as u64) << 48),
        ]
    }

    /// Build a completion; `phase` is the tag the host expects for this pass of the ring.
    pub const fn new(
        cid: Cid,
        sq_id: Qid,
        sq_head: u16,
        status: Status,
        dw0: u32,
        phase: bool,
    ) -> Cqe {
        Cqe {
            dw0,
            dw1: 0,
            sq_head,
            sq_id: sq_id.0,
            cid: cid.0,
            status_phase: (status.to_field() << 1) | (phase as u16),
        }
    }

    /// The phase tag.
    pub const fn phase(&self) -> bool {
        self.status_phase & 1 != 0
    }

    /// The decoded status.
    pub const fn status(&self) -> Status {
        Status::from_field(self.status_phase >> 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words, stored little-endian one after the other, are the entry's bytes.
    fn words_as_bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn to_words_lays_out_the_entries_exactly_as_in_memory() {
        let sqe = Sqe {
            cdw0: 0x1234_0102,
            nsid: 0x0506_0708,
            cdw2: 0x090A_0B0C,
            cdw3: 0x0D0E_0F10,
            mptr: 0x1112_1314_1516_1718,
            dptr1: 0x2122_2324_2526_2728,
            dptr2: 0x3132_3334_3536_3738,
            cdw10: 0x4142_4344,
            cdw11: 0x4546_4748,
            cdw12: 0x5152_5354,
            cdw13: 0x5556_5758,
            cdw14: 0x6162_6364,
            cdw15: 0x6566_6768,
        };
        assert_eq!(words_as_bytes(&sqe.to_words()), sqe.as_bytes());
        let cqe = Cqe {
            dw0: 0x0102_0304,
            dw1: 0x0506_0708,
            sq_head: 0x090A,
            sq_id: 0x0B0C,
            cid: 0x0D0E,
            status_phase: 0x0F11,
        };
        assert_eq!(words_as_bytes(&cqe.to_words()), cqe.as_bytes());
    }

    #[test]
    fn cdw0_fields_decode() {
        let sqe = Sqe {
            cdw0: Sqe::make_cdw0(0x02, Psdt::SglMptrContiguous, Cid(0xBEEF)),
            ..Sqe::default()
        };
        assert_eq!(sqe.opcode(), 0x02);
        assert_eq!(sqe.psdt(), Psdt::SglMptrContiguous);
        assert_eq!(sqe.cid(), Cid(0xBEEF));
        assert_eq!(sqe.fuse(), 0);
    }

    #[test]
    fn cqe_status_and_phase() {
        let cqe = Cqe::new(Cid(7), Qid(3), 12, Status::LBA_OUT_OF_RANGE, 0, true);
        assert!(cqe.phase());
        assert_eq!(cqe.status(), Status::LBA_OUT_OF_RANGE);
        assert_eq!(cqe.as_bytes()[14] & 1, 1);
    }
}
