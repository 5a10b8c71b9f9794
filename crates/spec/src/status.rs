// SPDX-License-Identifier: Apache-2.0
//! Completion status (NVMe Base 1.4, 4.6.1.2 "Status Field Definition").
//!
//! A `Status` is what a command handler returns on failure; the CQE's 15-bit status field
//! (bits 31:17 of DW3, above the phase tag) is derived from it in one place.

/// Status Code Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Sct {
    /// Generic Command Status.
    Generic = 0,
    /// Command Specific Status.
    CommandSpecific = 1,
    /// Media and Data Integrity Errors.
    MediaDataIntegrity = 2,
    /// Path Related Status.
    Path = 3,
    /// Vendor Specific.
    Vendor = 7,
}

/// A completion status: type, code, Do Not Retry and More.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status {
    /// Status Code Type.
    pub sct: Sct,
    /// Status Code.
    pub sc: u8,
    /// Do Not Retry.
    pub dnr: bool,
    /// More information in the Error Information log page.
    pub more: bool,
}

macro_rules! statuses {
    ($($(#[$doc:meta])* $name:ident = ($sct:ident, $sc:expr, $dnr:expr);)*) => {
        impl Status {
            $($(#[$doc])* pub const $name: Status =
                Status { sct: Sct::$sct, sc: $sc, dnr: $dnr, more: false };)*
        }
    };
}

statuses! {
    /// Successful Completion.
    SUCCESS = (Generic, 0x00, false);
    /// Invalid Command Opcode.
    INVALID_OPCODE = (Generic, 0x01, true);
    /// Invalid Field in Command.
    INVALID_FIELD = (Generic, 0x02, true);
    /// Command ID Conflict.
    CID_CONFLICT = (Generic, 0x03, true);
    /// Data Transfer Error.
    DATA_TRANSFER_ERROR = (Generic, 0x04, false);
    /// Commands Aborted due to Power Loss Notification.
    ABORTED_POWER_LOSS = (Generic, 0x05, false);
    /// Internal Error.
    INTERNAL_ERROR = (Generic, 0x06, false);
    /// Command Abort Requested.
    ABORT_REQUESTED = (Generic, 0x07, false);
    /// Command Aborted due to SQ Deletion.
    ABORTED_SQ_DELETION = (Generic, 0x08, false);
    /// Command Sequence Error.
    COMMAND_SEQUENCE_ERROR = (Generic, 0x0C, true);
    /// Invalid Namespace or Format.
    INVALID_NAMESPACE = (Generic, 0x0B, true);
    /// Invalid SGL Segment Descriptor.
    INVALID_SGL_SEGMENT = (Generic, 0x0D, true);
    /// Invalid Number of SGL Descriptors.
    INVALID_SGL_COUNT = (Generic, 0x0E, true);
    /// Data SGL Length Invalid.
    DATA_SGL_LENGTH_INVALID = (Generic, 0x0F, true);
    /// Metadata SGL Length Invalid.
    METADATA_SGL_LENGTH_INVALID = (Generic, 0x10, true);
    /// SGL Descriptor Type Invalid.
    SGL_DESCRIPTOR_TYPE_INVALID = (Generic, 0x11, true);
    /// Invalid Use of Controller Memory Buffer.
    INVALID_CMB_USE = (Generic, 0x12, true);
    /// PRP Offset Invalid.
    PRP_OFFSET_INVALID = (Generic, 0x13, true);
    /// SGL Offset Invalid.
    SGL_OFFSET_INVALID = (Generic, 0x16, true);
    /// The Host Identifier format does not match what the command needs (Reservation
    /// Report without EDS while 128-bit host identifiers are in use).
    HOST_ID_INCONSISTENT_FORMAT = (Generic, 0x18, true);
    /// Namespace is Write Protected.
    NAMESPACE_WRITE_PROTECTED = (Generic, 0x20, true);
    /// LBA Out of Range.
    LBA_OUT_OF_RANGE = (Generic, 0x80, true);
    /// Capacity Exceeded.
    CAPACITY_EXCEEDED = (Generic, 0x81, true);
    /// Namespace Not Ready.
    NAMESPACE_NOT_READY = (Generic, 0x82, false);
    /// The namespace is reserved by another host (retryable, as SPDK reports it).
    RESERVATION_CONFLICT = (Generic, 0x83, false);
    /// Completion Queue Invalid (Create I/O SQ).
    CQ_INVALID = (CommandSpecific, 0x00, true);
    /// Invalid Queue Identifier.
    INVALID_QID = (CommandSpecific, 0x01, true);
    /// Invalid Queue Size.
    INVALID_QUEUE_SIZE = (CommandSpecific, 0x02, true);
    /// Abort Command Limit Exceeded.
    ABORT_LIMIT_EXCEEDED = (CommandSpecific, 0x03, true);
    /// Asynchronous Event Request Limit Exceeded.
    AER_LIMIT_EXCEEDED = (CommandSpecific, 0x05, true);
    /// Invalid Firmware Slot.
    INVALID_FIRMWARE_SLOT = (CommandSpecific, 0x06, true);
    /// Invalid Interrupt Vector.
    INVALID_INTERRUPT_VECTOR = (CommandSpecific, 0x08, true);
    /// Invalid Log Page.
    INVALID_LOG_PAGE = (CommandSpecific, 0x09, true);
    /// Invalid Format.
    INVALID_FORMAT = (CommandSpecific, 0x0A, true);
    /// Invalid Queue Deletion (e.g. deleting a CQ that still has SQs).
    INVALID_QUEUE_DELETION = (CommandSpecific, 0x0C, true);
    /// Feature Identifier Not Saveable.
    FEATURE_NOT_SAVEABLE = (CommandSpecific, 0x0D, true);
    /// Feature Not Changeable.
    FEATURE_NOT_CHANGEABLE = (CommandSpecific, 0x0E, true);
    /// Attempted Write to Read Only Range (Dataset Management).
    ATTEMPTED_WRITE_READ_ONLY = (CommandSpecific, 0x82, true);
    /// Compare Failure.
    COMPARE_FAILURE = (MediaDataIntegrity, 0x85, true);
    /// Unrecovered Read Error.
    UNRECOVERED_READ_ERROR = (MediaDataIntegrity, 0x81, false);
    /// Write Fault.
    WRITE_FAULT = (MediaDataIntegrity, 0x80, false);
}

impl Status {
    /// The 15-bit status field as it sits in CQE DW3 bits 31:17 (phase tag excluded).
    pub const fn to_field(self) -> u16 {
        (self.sc as u16)
            | ((self.sct as u16) << 8)
            | ((self.more as u16) << 13)
            | ((self.dnr as u16) << 14)
    }

    /// Decode the 15-bit status field (phase tag excluded). Unknown SCT values map to Vendor.
    pub const fn from_field(field: u16) -> Status {
        let sct = match (field >> 8) & 0x7 {
            0 => Sct::Generic,
            1 => Sct::CommandSpecific,
            2 => Sct::MediaDataIntegrity,
            3 => Sct::Path,
            _ => Sct::Vendor,
        };
        Status {
            sct,
            sc: (field & 0xFF) as u8,
            more: field & (1 << 13) != 0,
            dnr: field & (1 << 14) != 0,
        }
    }

    /// True for Successful Completion.
    pub const fn is_success(self) -> bool {
        matches!(self.sct, Sct::Generic) && self.sc == 0
    }

    /// The same status with Do Not Retry cleared or set.
    pub const fn with_dnr(self, dnr: bool) -> Status {
        Status { dnr, ..self }
    }
}

impl core::fmt::Display for Status {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "sct {:#x} sc {:#04x}", self.sct as u8, self.sc)?;
        if self.dnr {
            f.write_str(" dnr")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_round_trips() {
        for s in [
            Status::SUCCESS,
            Status::INVALID_QID,
            Status::LBA_OUT_OF_RANGE,
            Status::COMPARE_FAILURE,
        ] {
            assert_eq!(Status::from_field(s.to_field()), s);
        }
        assert_eq!(Status::INVALID_FIELD.to_field(), 0x4002);
        assert_eq!(Status::INVALID_QID.to_field(), 0x4101);
    }
}
