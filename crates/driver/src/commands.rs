// SPDX-License-Identifier: Apache-2.0
//! SQE builders for the commands this driver sends (NVMe Base 1.4 section 5, NVM 6).
//! CID and data pointers are filled in by the queue when the command is pushed.

use nvmemu_spec::opcode::{AdminOpcode, IoOpcode};
use nvmemu_spec::{Lba, Nsid, Qid, Sqe};

/// Identify CNS values used here.
pub mod cns {
    /// Identify Namespace.
    pub const NAMESPACE: u8 = 0x00;
    /// Identify Controller.
    pub const CONTROLLER: u8 = 0x01;
    /// Active Namespace ID list.
    pub const ACTIVE_NS_LIST: u8 = 0x02;
}

/// Feature identifiers used here.
pub mod fid {
    /// Number of Queues.
    pub const NUMBER_OF_QUEUES: u8 = 0x07;
}

fn admin(op: AdminOpcode) -> Sqe {
    Sqe {
        cdw0: u32::from(u8::from(op)),
        ..Sqe::default()
    }
}

fn io(op: IoOpcode, nsid: Nsid) -> Sqe {
    Sqe {
        cdw0: u32::from(u8::from(op)),
        nsid: nsid.0,
        ..Sqe::default()
    }
}

/// Identify with `cns` for `nsid` (4096-byte data buffer).
pub fn identify(cns: u8, nsid: Nsid) -> Sqe {
    Sqe {
        nsid: nsid.0,
        cdw10: u32::from(cns),
        ..admin(AdminOpcode::Identify)
    }
}

/// Get Log Page `lid` for `nsid`: `bytes` (a multiple of 4) from byte `offset` of the page.
pub fn get_log_page(lid: u8, nsid: Nsid, bytes: u32, offset: u64) -> Sqe {
    let numd = (bytes / 4).saturating_sub(1);
    Sqe {
        nsid: nsid.0,
        cdw10: u32::from(lid) | ((numd & 0xFFFF) << 16),
        cdw11: numd >> 16,
        cdw12: (offset & 0xFFFF_FFFF) as u32,
        cdw13: (offset >> 32) as u32,
        ..admin(AdminOpcode::GetLogPage)
    }
}

/// Asynchronous Event Request (NVMe Base 1.4, 5.2): completes when the controller has an
/// event to report; DW0 carries its type, information and log page.
pub fn async_event_request() -> Sqe {
    admin(AdminOpcode::AsyncEventRequest)
}

/// Set Features `fid` with CDW11 `value`.
pub fn set_features(fid: u8, value: u32) -> Sqe {
    Sqe {
        cdw10: u32::from(fid),
        cdw11: value,
        ..admin(AdminOpcode::SetFeatures)
    }
}

/// Get Features `fid` (current value).
pub fn get_features(fid: u8) -> Sqe {
    Sqe {
        cdw10: u32::from(fid),
        ..admin(AdminOpcode::GetFeatures)
    }
}

/// Set Features Number of Queues: ask for `n` SQs and `n` CQs (one-based `n` >= 1).
pub fn set_num_queues(n: u16) -> Sqe {
    let z = u32::from(n.saturating_sub(1));
    set_features(fid::NUMBER_OF_QUEUES, z | (z << 16))
}

/// Create I/O Completion Queue `qid` of `entries` entries at `iova`, physically contiguous,
/// interrupts disabled (the driver polls).
pub fn create_io_cq(qid: Qid, entries: u16, iova: u64) -> Sqe {
    Sqe {
        dptr1: iova,
        cdw10: u32::from(qid.0) | (u32::from(entries.saturating_sub(1)) << 16),
        cdw11: 1, // PC=1, IEN=0, IV=0
        ..admin(AdminOpcode::CreateIoCq)
    }
}

/// Create I/O Submission Queue `qid` of `entries` entries at `iova`, bound to CQ `cqid`.
pub fn create_io_sq(qid: Qid, entries: u16, iova: u64, cqid: Qid) -> Sqe {
    Sqe {
        dptr1: iova,
        cdw10: u32::from(qid.0) | (u32::from(entries.saturating_sub(1)) << 16),
        cdw11: 1 | (u32::from(cqid.0) << 16), // PC=1, QPRIO=0
        ..admin(AdminOpcode::CreateIoSq)
    }
}

/// Delete I/O Submission Queue `qid`.
pub fn delete_io_sq(qid: Qid) -> Sqe {
    Sqe {
        cdw10: u32::from(qid.0),
        ..admin(AdminOpcode::DeleteIoSq)
    }
}

/// Delete I/O Completion Queue `qid`.
pub fn delete_io_cq(qid: Qid) -> Sqe {
    Sqe {
        cdw10: u32::from(qid.0),
        ..admin(AdminOpcode::DeleteIoCq)
    }
}

/// Read, Write or Compare of `nblocks` (one-based, 1..=65536) blocks at `slba`.
pub fn rw(op: IoOpcode, nsid: Nsid, slba: Lba, nblocks: u32) -> Sqe {
    Sqe {
        cdw10: (slba.0 & 0xFFFF_FFFF) as u32,
        cdw11: (slba.0 >> 32) as u32,
        cdw12: nblocks.saturating_sub(1) & 0xFFFF,
        ..io(op, nsid)
    }
}

/// Flush.
pub fn flush(nsid: Nsid) -> Sqe {
    io(IoOpcode::Flush, nsid)
}

/// Dataset Management with Attribute Deallocate over `nr` (1..=256) ranges.
pub fn deallocate(nsid: Nsid, nr: u32) -> Sqe {
    Sqe {
        cdw10: nr.saturating_sub(1) & 0xFF,
        cdw11: 1 << 2, // AD
        ..io(IoOpcode::DatasetManagement, nsid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rw_fields() {
        let s = rw(IoOpcode::Write, Nsid(3), Lba(0x1_2345_6789), 8);
        assert_eq!(s.opcode(), 0x01);
        assert_eq!(s.nsid, 3);
        assert_eq!(s.cdw10, 0x2345_6789);
        assert_eq!(s.cdw11, 0x1);
        assert_eq!(s.cdw12, 7);
        assert_eq!(rw(IoOpcode::Read, Nsid(1), Lba(0), 65536).cdw12, 0xFFFF);
    }

    #[test]
    fn queue_creation_fields() {
        let cq = create_io_cq(Qid(2), 1024, 0x1000);
        assert_eq!(cq.opcode(), 0x05);
        assert_eq!(cq.cdw10, 2 | (1023 << 16));
        assert_eq!(cq.cdw11, 1);
        let sq = create_io_sq(Qid(2), 1024, 0x2000, Qid(2));
        assert_eq!(sq.opcode(), 0x01);
        assert_eq!(sq.cdw11, 1 | (2 << 16));
        assert_eq!(set_num_queues(4).cdw11, 0x0003_0003);
    }

    #[test]
    fn log_page_numd_split() {
        let s = get_log_page(0x02, Nsid::BROADCAST, 512, 0);
        assert_eq!(s.cdw10, 0x02 | (127 << 16));
        assert_eq!(s.cdw11, 0);
        let big = get_log_page(0x01, Nsid(0), 0x40_0000, 0x1_0000_0004);
        assert_eq!(big.cdw10 >> 16, 0xFFFF);
        assert_eq!(big.cdw11, 0xF);
        assert_eq!((big.cdw12, big.cdw13), (4, 1));
    }
}
