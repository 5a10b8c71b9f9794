// SPDX-License-Identifier: Apache-2.0
//! Typed decode of submission queue entries (NVMe Base 1.4, 5 "Admin Command Set" and NVM
//! Command Set 6).
//!
//! An SQE is copied out of the ring once and decoded here into a command with named,
//! one-based fields; handlers never look at raw dwords. Decoding never panics: unknown
//! opcodes become `Unknown`, fields that cannot be honoured at all (reserved PSDT, fused
//! operations) become a `Status`.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::features::{FeatureId, FeatureSelect};
use crate::identify::Cns;
use crate::log_page::LogPageId;
use crate::queue_entry::Psdt;
use crate::sgl::SglDescriptor;
use crate::{AdminOpcode, Cid, IoOpcode, Lba, Nsid, Qid, Sqe, Status};

/// Where a command's data lives (DPTR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPtr {
    /// PRP Entry 1 and PRP Entry 2 (NVMe Base 1.4, 4.3).
    Prp {
        /// PRP1: first data page, may carry an offset.
        prp1: u64,
        /// PRP2: second data page or a PRP list pointer.
        prp2: u64,
    },
    /// The first SGL descriptor (NVMe Base 1.4, 4.4).
    Sgl(SglDescriptor),
}

impl DataPtr {
    /// Decode the DPTR of `sqe` according to CDW0.PSDT. Metadata is not supported, so both
    /// SGL variants describe data the same way; the reserved value is Invalid Field.
    #[inline]
    pub fn decode(sqe: &Sqe) -> Result<DataPtr, Status> {
        match sqe.psdt() {
            Psdt::Prp => Ok(DataPtr::Prp {
                prp1: sqe.dptr1,
                prp2: sqe.dptr2,
            }),
            Psdt::SglMptrContiguous | Psdt::SglMptrSgl => {
                Ok(DataPtr::Sgl(SglDescriptor::from_dptr(sqe.dptr1, sqe.dptr2)))
            }
            Psdt::Reserved => Err(Status::INVALID_FIELD),
        }
    }
}

/// Dataset Management attributes (CDW11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DsmAttributes {
    /// Integral Dataset for Read.
    pub idr: bool,
    /// Integral Dataset for Write.
    pub idw: bool,
    /// Deallocate.
    pub deallocate: bool,
}

/// One Dataset Management range (NVMe NVM Command Set 1.0 / Base 1.4, Figure 364).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct DsmRange {
    /// Context Attributes.
    pub attributes: u32,
    /// Length in logical blocks (a plain count; 0 describes nothing).
    pub blocks: u32,
    /// Starting LBA.
    pub slba: u64,
}
const _: () = assert!(size_of::<DsmRange>() == 16);

/// Most ranges one Dataset Management command carries (NR is 8 bits, zero-based).
pub const DSM_MAX_RANGES: usize = 256;

/// A decoded NVM command set I/O command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoCommand {
    /// Flush the volatile write cache.
    Flush {
        /// Namespace (broadcast allowed).
        nsid: Nsid,
    },
    /// Read or Write (NVM Command Set 6.7 / 6.15).
    ReadWrite(ReadWrite),
    /// Compare `blocks` logical blocks at `slba` with the data at `dptr`.
    Compare {
        /// Namespace.
        nsid: Nsid,
        /// Starting LBA.
        slba: Lba,
        /// Number of logical blocks, one-based.
        blocks: u32,
        /// Data.
        dptr: DataPtr,
    },
    /// Write zeroes to `blocks` logical blocks at `slba`.
    WriteZeroes {
        /// Namespace.
        nsid: Nsid,
        /// Starting LBA.
        slba: Lba,
        /// Number of logical blocks, one-based.
        blocks: u32,
        /// Deallocate (DEAC).
        deallocate: bool,
        /// Force Unit Access.
        fua: bool,
    },
    /// Dataset Management over `ranges` 16-byte range entries at `dptr`.
    DatasetManagement {
        /// Namespace.
        nsid: Nsid,
        /// Number of ranges, one-based (1..=256).
        ranges: u16,
        /// Attributes.
        attrs: DsmAttributes,
        /// The range list.
        dptr: DataPtr,
    },
    /// Reservation Register, Report, Acquire or Release.
    Reservation(crate::reservation::ReservationCommand),
    /// An opcode this controller does not implement.
    Unknown(u8),
}

const fn lba(sqe: &Sqe) -> Lba {
    Lba((sqe.cdw10 as u64) | ((sqe.cdw11 as u64) << 32))
}

const fn nlb(sqe: &Sqe) -> u32 {
    (sqe.cdw12 & 0xFFFF) + 1
}

const fn bit(dw: u32, n: u32) -> bool {
    dw & (1 << n) != 0
}

const fn lo16(dw: u32) -> u16 {
    (dw & 0xFFFF) as u16
}

const fn hi16(dw: u32) -> u16 {
    (dw >> 16) as u16
}

fn reject_fused(sqe: &Sqe) -> Result<(), Status> {
    if sqe.fuse() != 0 {
        Err(Status::INVALID_FIELD)
    } else {
        Ok(())
    }
}

/// A Read or Write: move `blocks` logical blocks at `slba` between the namespace and `dptr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadWrite {
    /// Write (else Read).
    pub write: bool,
    /// Namespace.
    pub nsid: Nsid,
    /// Starting LBA.
    pub slba: Lba,
    /// Number of logical blocks, one-based (1..=65536).
    pub blocks: u32,
    /// Force Unit Access.
    pub fua: bool,
    /// Data.
    pub dptr: DataPtr,
}

impl ReadWrite {
    /// Decode a Read or Write SQE; `None` for any other opcode. The one decoder of both:
    /// [`IoCommand::decode`] uses it, and so does the controller's I/O path, which calls it
    /// first and directly.
    ///
    /// Why always inlined: the poll loop would otherwise get the command through memory,
    /// written with narrow stores and read back with wider loads. Such a load cannot be
    /// forwarded from the store buffer, so it waits until every older store (the previous
    /// command's CQE, on a line the host holds) has reached the cache: about 40 ns per
    /// command. Inlined, the fields stay in registers.
    #[inline(always)]
    pub fn decode(sqe: &Sqe) -> Option<Result<ReadWrite, Status>> {
        // Compared as bytes: `IoOpcode::from` is a match over every opcode.
        let op = sqe.opcode();
        let write = if op == u8::from(IoOpcode::Read) {
            false
        } else if op == u8::from(IoOpcode::Write) {
            true
        } else {
            return None;
        };
        if let Err(s) = reject_fused(sqe) {
            return Some(Err(s));
        }
        Some(DataPtr::decode(sqe).map(|dptr| ReadWrite {
            write,
            nsid: Nsid(sqe.nsid),
            slba: lba(sqe),
            blocks: nlb(sqe),
            fua: bit(sqe.cdw12, 30),
            dptr,
        }))
    }
}

impl IoCommand {
    /// Decode an I/O SQE. Inlined into the poll loop: returned through memory, the
    /// command would be read back with loads that straddle the stores that wrote it, and
    /// such a load waits for every older store (the previous command's data) to complete.
    #[inline]
    pub fn decode(sqe: &Sqe) -> Result<IoCommand, Status> {
        reject_fused(sqe)?;
        let nsid = Nsid(sqe.nsid);
        Ok(match IoOpcode::from(sqe.opcode()) {
            IoOpcode::Flush => IoCommand::Flush { nsid },
            IoOpcode::Read | IoOpcode::Write => match ReadWrite::decode(sqe) {
                Some(rw) => IoCommand::ReadWrite(rw?),
                None => IoCommand::Unknown(sqe.opcode()),
            },
            IoOpcode::Compare => IoCommand::Compare {
                nsid,
                slba: lba(sqe),
                blocks: nlb(sqe),
                dptr: DataPtr::decode(sqe)?,
            },
            IoOpcode::WriteZeroes => IoCommand::WriteZeroes {
                nsid,
                slba: lba(sqe),
                blocks: nlb(sqe),
                deallocate: bit(sqe.cdw12, 25),
                fua: bit(sqe.cdw12, 30),
            },
            IoOpcode::DatasetManagement => IoCommand::DatasetManagement {
                nsid,
                ranges: (sqe.cdw10 & 0xFF) as u16 + 1,
                attrs: DsmAttributes {
                    idr: bit(sqe.cdw11, 0),
                    idw: bit(sqe.cdw11, 1),
                    deallocate: bit(sqe.cdw11, 2),
                },
                dptr: DataPtr::decode(sqe)?,
            },
            op @ (IoOpcode::ReservationRegister
            | IoOpcode::ReservationReport
            | IoOpcode::ReservationAcquire
            | IoOpcode::ReservationRelease) => IoCommand::Reservation(
                crate::reservation::ReservationCommand::decode(u8::from(op), sqe)?,
            ),
            IoOpcode::Unknown(op) => IoCommand::Unknown(op),
        })
    }
}

/// A decoded admin command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminCommand {
    /// Delete I/O Submission Queue.
    DeleteIoSq {
        /// Queue to delete.
        qid: Qid,
    },
    /// Create I/O Submission Queue.
    CreateIoSq {
        /// New queue id.
        qid: Qid,
        /// Entries, one-based (QSIZE + 1).
        size: u32,
        /// Physically Contiguous.
        pc: bool,
        /// Queue Priority (QPRIO).
        prio: u8,
        /// Completion queue this SQ posts to.
        cqid: Qid,
        /// Ring base address (PRP1).
        base: u64,
    },
    /// Get Log Page.
    GetLogPage {
        /// Log page.
        lid: LogPageId,
        /// Log Specific Field.
        lsp: u8,
        /// Retain Asynchronous Event.
        rae: bool,
        /// Number of dwords to return, one-based (NUMDU:NUMDL + 1).
        dwords: u32,
        /// Byte offset into the log (LPOU:LPOL).
        offset: u64,
        /// Namespace.
        nsid: Nsid,
        /// Destination.
        dptr: DataPtr,
    },
    /// Delete I/O Completion Queue.
    DeleteIoCq {
        /// Queue to delete.
        qid: Qid,
    },
    /// Create I/O Completion Queue.
    CreateIoCq {
        /// New queue id.
        qid: Qid,
        /// Entries, one-based (QSIZE + 1).
        size: u32,
        /// Physically Contiguous.
        pc: bool,
        /// Interrupts Enabled.
        ien: bool,
        /// Interrupt Vector.
        iv: u16,
        /// Ring base address (PRP1).
        base: u64,
    },
    /// Identify.
    Identify {
        /// Controller or Namespace Structure.
        cns: Cns,
        /// Controller Identifier (CDW10 31:16).
        cntid: u16,
        /// Namespace.
        nsid: Nsid,
        /// Destination (4096 bytes).
        dptr: DataPtr,
    },
    /// Abort.
    Abort {
        /// Submission queue of the command to abort.
        sqid: Qid,
        /// Command to abort.
        cid: Cid,
    },
    /// Set Features.
    SetFeatures {
        /// Feature.
        fid: FeatureId,
        /// Save (SV).
        save: bool,
        /// Namespace.
        nsid: Nsid,
        /// The feature-specific value (CDW11); `features` decodes it per FID.
        value: u32,
        /// Data buffer, for the features that carry a data structure (Host Behavior Support).
        dptr: DataPtr,
    },
    /// Get Features.
    GetFeatures {
        /// Feature.
        fid: FeatureId,
        /// Select (SEL).
        sel: FeatureSelect,
        /// Namespace.
        nsid: Nsid,
        /// Feature-specific input (CDW11), e.g. the vector for Interrupt Vector Configuration.
        value: u32,
        /// Data buffer, for the features that return a data structure (Host Behavior Support).
        dptr: DataPtr,
    },
    /// Asynchronous Event Request.
    AsyncEventRequest,
    /// Keep Alive.
    KeepAlive,
    /// Doorbell Buffer Config.
    DoorbellBufferConfig {
        /// Shadow doorbell buffer (PRP1).
        shadow: u64,
        /// EventIdx buffer (PRP2).
        event_idx: u64,
    },
    /// An opcode this controller does not implement.
    Unknown(u8),
}

impl AdminCommand {
    /// Decode an admin SQE. Admin commands use PRPs only (NVMe over PCIe), so any other PSDT
    /// is Invalid Field, as are fused operations.
    pub fn decode(sqe: &Sqe) -> Result<AdminCommand, Status> {
        reject_fused(sqe)?;
        if sqe.psdt() != Psdt::Prp {
            return Err(Status::INVALID_FIELD);
        }
        let nsid = Nsid(sqe.nsid);
        let dptr = DataPtr::Prp {
            prp1: sqe.dptr1,
            prp2: sqe.dptr2,
        };
        Ok(match AdminOpcode::from(sqe.opcode()) {
            AdminOpcode::DeleteIoSq => AdminCommand::DeleteIoSq {
                qid: Qid(lo16(sqe.cdw10)),
            },
            AdminOpcode::CreateIoSq => AdminCommand::CreateIoSq {
                qid: Qid(lo16(sqe.cdw10)),
                size: u32::from(hi16(sqe.cdw10)) + 1,
                pc: bit(sqe.cdw11, 0),
                prio: ((sqe.cdw11 >> 1) & 0x3) as u8,
                cqid: Qid(hi16(sqe.cdw11)),
                base: sqe.dptr1,
            },
            AdminOpcode::GetLogPage => AdminCommand::GetLogPage {
                lid: LogPageId::from((sqe.cdw10 & 0xFF) as u8),
                lsp: ((sqe.cdw10 >> 8) & 0x1F) as u8,
                rae: bit(sqe.cdw10, 15),
                dwords: ((u32::from(lo16(sqe.cdw11)) << 16) | u32::from(hi16(sqe.cdw10)))
                    .saturating_add(1),
                offset: u64::from(sqe.cdw12) | (u64::from(sqe.cdw13) << 32),
                nsid,
                dptr,
            },
            AdminOpcode::DeleteIoCq => AdminCommand::DeleteIoCq {
                qid: Qid(lo16(sqe.cdw10)),
            },
            AdminOpcode::CreateIoCq => AdminCommand::CreateIoCq {
                qid: Qid(lo16(sqe.cdw10)),
                size: u32::from(hi16(sqe.cdw10)) + 1,
                pc: bit(sqe.cdw11, 0),
                ien: bit(sqe.cdw11, 1),
                iv: hi16(sqe.cdw11),
                base: sqe.dptr1,
            },
            AdminOpcode::Identify => AdminCommand::Identify {
                cns: Cns::from((sqe.cdw10 & 0xFF) as u8),
                cntid: hi16(sqe.cdw10),
                nsid,
                dptr,
            },
            AdminOpcode::Abort => AdminCommand::Abort {
                sqid: Qid(lo16(sqe.cdw10)),
                cid: Cid(hi16(sqe.cdw10)),
            },
            AdminOpcode::SetFeatures => AdminCommand::SetFeatures {
                fid: FeatureId::from((sqe.cdw10 & 0xFF) as u8),
                save: bit(sqe.cdw10, 31),
                nsid,
                value: sqe.cdw11,
                dptr,
            },
            AdminOpcode::GetFeatures => AdminCommand::GetFeatures {
                fid: FeatureId::from((sqe.cdw10 & 0xFF) as u8),
                sel: FeatureSelect::from(((sqe.cdw10 >> 8) & 0x7) as u8),
                nsid,
                value: sqe.cdw11,
                dptr,
            },
            AdminOpcode::AsyncEventRequest => AdminCommand::AsyncEventRequest,
            AdminOpcode::KeepAlive => AdminCommand::KeepAlive,
            AdminOpcode::DoorbellBufferConfig => AdminCommand::DoorbellBufferConfig {
                shadow: sqe.dptr1,
                event_idx: sqe.dptr2,
            },
            AdminOpcode::Unknown(op) => AdminCommand::Unknown(op),
        })
    }
}

#[cfg(test)]
mod tests;
