// SPDX-License-Identifier: Apache-2.0
//! Controller register offsets and fields (NVMe Base 1.4, 3.1 "Register Definition").

/// Controller Capabilities (64-bit).
pub const CAP: u64 = 0x00;
/// Version.
pub const VS: u64 = 0x08;
/// Interrupt Mask Set.
pub const INTMS: u64 = 0x0C;
/// Interrupt Mask Clear.
pub const INTMC: u64 = 0x10;
/// Controller Configuration.
pub const CC: u64 = 0x14;
/// Controller Status.
pub const CSTS: u64 = 0x1C;
/// NVM Subsystem Reset.
pub const NSSR: u64 = 0x20;
/// Admin Queue Attributes.
pub const AQA: u64 = 0x24;
/// Admin Submission Queue Base Address (64-bit).
pub const ASQ: u64 = 0x28;
/// Admin Completion Queue Base Address (64-bit).
pub const ACQ: u64 = 0x30;
/// Controller Memory Buffer Location.
pub const CMBLOC: u64 = 0x38;
/// Controller Memory Buffer Size.
pub const CMBSZ: u64 = 0x3C;
/// First doorbell register (SQ 0 tail).
pub const DOORBELL_BASE: u64 = 0x1000;

/// The NVMe version this controller reports: 1.4.0.
pub const VERSION_1_4: u32 = 0x0001_0400;

/// CC fields.
pub mod cc {
    /// Enable.
    pub const EN: u32 = 1 << 0;
    /// I/O Command Set Selected (bits 6:4).
    pub const CSS_SHIFT: u32 = 4;
    /// Memory Page Size (bits 10:7), page size = 2^(12 + MPS).
    pub const MPS_SHIFT: u32 = 7;
    /// Arbitration Mechanism Selected (bits 13:11).
    pub const AMS_SHIFT: u32 = 11;
    /// Shutdown Notification (bits 15:14).
    pub const SHN_SHIFT: u32 = 14;
    /// Shutdown Notification mask (after shifting).
    pub const SHN_MASK: u32 = 0x3;
    /// I/O Submission Queue Entry Size (bits 19:16), log2.
    pub const IOSQES_SHIFT: u32 = 16;
    /// I/O Completion Queue Entry Size (bits 23:20), log2.
    pub const IOCQES_SHIFT: u32 = 20;
}

/// CSTS fields.
pub mod csts {
    /// Ready.
    pub const RDY: u32 = 1 << 0;
    /// Controller Fatal Status.
    pub const CFS: u32 = 1 << 1;
    /// Shutdown Status (bits 3:2).
    pub const SHST_SHIFT: u32 = 2;
    /// Shutdown processing occurring.
    pub const SHST_OCCURRING: u32 = 1 << 2;
    /// Shutdown processing complete.
    pub const SHST_COMPLETE: u32 = 2 << 2;
    /// NVM Subsystem Reset Occurred.
    pub const NSSRO: u32 = 1 << 4;
    /// Processing Paused.
    pub const PP: u32 = 1 << 5;
}

/// CAP fields (64-bit).
pub mod cap {
    /// Maximum Queue Entries Supported (15:0), zero-based.
    pub const MQES_MASK: u64 = 0xFFFF;
    /// Contiguous Queues Required.
    pub const CQR: u64 = 1 << 16;
    /// Timeout (31:24) in 500 ms units.
    pub const TO_SHIFT: u32 = 24;
    /// Doorbell Stride (35:32): stride = 4 << DSTRD bytes.
    pub const DSTRD_SHIFT: u32 = 32;
    /// NVM Subsystem Reset Supported.
    pub const NSSRS: u64 = 1 << 36;
    /// Command Sets Supported (44:37); bit 37 = NVM command set.
    pub const CSS_NVM: u64 = 1 << 37;
    /// Memory Page Size Minimum (51:48).
    pub const MPSMIN_SHIFT: u32 = 48;
    /// Memory Page Size Maximum (55:52).
    pub const MPSMAX_SHIFT: u32 = 52;
}

/// Byte offset in BAR0 of the SQ tail doorbell of `qid` (stride `4 << dstrd`).
pub const fn sq_tail_doorbell(qid: u16, dstrd: u32) -> u64 {
    DOORBELL_BASE + (2 * qid as u64) * (4 << dstrd)
}

/// Byte offset in BAR0 of the CQ head doorbell of `qid` (stride `4 << dstrd`).
pub const fn cq_head_doorbell(qid: u16, dstrd: u32) -> u64 {
    DOORBELL_BASE + (2 * qid as u64 + 1) * (4 << dstrd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doorbell_offsets_follow_the_stride() {
        assert_eq!(sq_tail_doorbell(0, 0), 0x1000);
        assert_eq!(cq_head_doorbell(0, 0), 0x1004);
        assert_eq!(sq_tail_doorbell(1, 0), 0x1008);
        assert_eq!(cq_head_doorbell(3, 1), 0x1000 + 7 * 8);
    }
}
