// SPDX-License-Identifier: Apache-2.0
//! Reservations (NVMe Base 1.4, 8.8 and 6.10-6.13 of the NVM command set): the four
//! commands decoded from an SQE copy, the reservation types and the Reservation Status
//! data structure's layout.

use crate::command::DataPtr;
use crate::ids::Nsid;
use crate::queue_entry::Sqe;
use crate::status::Status;

/// A reservation type (RTYPE). Each decides who may read and who may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReservationType {
    /// 1h: only the holder writes; everyone reads.
    WriteExclusive,
    /// 2h: only the holder reads or writes.
    ExclusiveAccess,
    /// 3h: only registrants write; one registrant holds it.
    WriteExclusiveRegistrantsOnly,
    /// 4h: only registrants read or write; one registrant holds it.
    ExclusiveAccessRegistrantsOnly,
    /// 5h: only registrants write; every registrant holds it.
    WriteExclusiveAllRegistrants,
    /// 6h: only registrants read or write; every registrant holds it.
    ExclusiveAccessAllRegistrants,
}

impl ReservationType {
    /// The type for an RTYPE value; 0 and 7..=255 are not types.
    pub fn from_raw(raw: u8) -> Option<ReservationType> {
        Some(match raw {
            1 => ReservationType::WriteExclusive,
            2 => ReservationType::ExclusiveAccess,
            3 => ReservationType::WriteExclusiveRegistrantsOnly,
            4 => ReservationType::ExclusiveAccessRegistrantsOnly,
            5 => ReservationType::WriteExclusiveAllRegistrants,
            6 => ReservationType::ExclusiveAccessAllRegistrants,
            _ => return None,
        })
    }

    /// The RTYPE value.
    pub fn raw(self) -> u8 {
        match self {
            ReservationType::WriteExclusive => 1,
            ReservationType::ExclusiveAccess => 2,
            ReservationType::WriteExclusiveRegistrantsOnly => 3,
            ReservationType::ExclusiveAccessRegistrantsOnly => 4,
            ReservationType::WriteExclusiveAllRegistrants => 5,
            ReservationType::ExclusiveAccessAllRegistrants => 6,
        }
    }

    /// Whether every registrant holds the reservation (types 5h and 6h).
    pub fn all_registrants(self) -> bool {
        matches!(
            self,
            ReservationType::WriteExclusiveAllRegistrants
                | ReservationType::ExclusiveAccessAllRegistrants
        )
    }

    /// Whether reads, not only writes, are limited (the "Exclusive Access" types).
    pub fn limits_reads(self) -> bool {
        matches!(
            self,
            ReservationType::ExclusiveAccess
                | ReservationType::ExclusiveAccessRegistrantsOnly
                | ReservationType::ExclusiveAccessAllRegistrants
        )
    }

    /// Whether registrants that do not hold it still get access (types 3h-6h).
    pub fn registrants_have_access(self) -> bool {
        !matches!(
            self,
            ReservationType::WriteExclusive | ReservationType::ExclusiveAccess
        )
    }
}

/// Reservation Register Action (RREGA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterAction {
    /// 0h: register NRKEY.
    Register,
    /// 1h: unregister.
    Unregister,
    /// 2h: replace the key with NRKEY.
    Replace,
}

/// Reservation Acquire Action (RACQA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireAction {
    /// 0h: acquire.
    Acquire,
    /// 1h: preempt the registrants with key PRKEY.
    Preempt,
    /// 2h: preempt and abort their commands.
    PreemptAndAbort,
}

/// Reservation Release Action (RRELA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseAction {
    /// 0h: release.
    Release,
    /// 1h: clear every registration and the reservation.
    Clear,
}

/// A decoded reservation command. Keys travel in the data buffer (`dptr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservationCommand {
    /// Reservation Register: data is CRKEY then NRKEY (16 bytes).
    Register {
        /// Namespace.
        nsid: Nsid,
        /// What to do.
        action: RegisterAction,
        /// Ignore Existing Key: CRKEY is not checked.
        iekey: bool,
        /// Change Persist Through Power Loss State (CPTPL).
        cptpl: u8,
        /// The keys.
        dptr: DataPtr,
    },
    /// Reservation Report into `dptr`, `dwords` dwords long.
    Report {
        /// Namespace.
        nsid: Nsid,
        /// Number of dwords, one-based.
        dwords: u32,
        /// Extended Data Structure: 64-byte entries with 128-bit host identifiers.
        eds: bool,
        /// Destination.
        dptr: DataPtr,
    },
    /// Reservation Acquire: data is CRKEY then PRKEY (16 bytes).
    Acquire {
        /// Namespace.
        nsid: Nsid,
        /// What to do.
        action: AcquireAction,
        /// Ignore Existing Key.
        iekey: bool,
        /// Reservation type (RTYPE, raw: validated when executed).
        rtype: u8,
        /// The keys.
        dptr: DataPtr,
    },
    /// Reservation Release: data is CRKEY (8 bytes).
    Release {
        /// Namespace.
        nsid: Nsid,
        /// What to do.
        action: ReleaseAction,
        /// Ignore Existing Key.
        iekey: bool,
        /// Reservation type (RTYPE, raw).
        rtype: u8,
        /// The key.
        dptr: DataPtr,
    },
}

impl ReservationCommand {
    /// Decodes opcode `opcode` (one of the four reservation opcodes) from the SQE copy;
    /// a reserved action is Invalid Field in Command.
    pub fn decode(opcode: u8, sqe: &Sqe) -> Result<ReservationCommand, Status> {
        let nsid = Nsid(sqe.nsid);
        let action = sqe.cdw10 & 0x7;
        let iekey = sqe.cdw10 & (1 << 3) != 0;
        let rtype = ((sqe.cdw10 >> 8) & 0xFF) as u8;
        let dptr = DataPtr::decode(sqe)?;
        Ok(match opcode {
            0x0D => ReservationCommand::Register {
                nsid,
                action: match action {
                    0 => RegisterAction::Register,
                    1 => RegisterAction::Unregister,
                    2 => RegisterAction::Replace,
                    _ => return Err(Status::INVALID_FIELD),
                },
                iekey,
                cptpl: (sqe.cdw10 >> 30) as u8,
                dptr,
            },
            0x0E => ReservationCommand::Report {
                nsid,
                dwords: sqe.cdw10.saturating_add(1),
                eds: sqe.cdw11 & 1 != 0,
                dptr,
            },
            0x11 => ReservationCommand::Acquire {
                nsid,
                action: match action {
                    0 => AcquireAction::Acquire,
                    1 => AcquireAction::Preempt,
                    2 => AcquireAction::PreemptAndAbort,
                    _ => return Err(Status::INVALID_FIELD),
                },
                iekey,
                rtype,
                dptr,
            },
            0x15 => ReservationCommand::Release {
                nsid,
                action: match action {
                    0 => ReleaseAction::Release,
                    1 => ReleaseAction::Clear,
                    _ => return Err(Status::INVALID_FIELD),
                },
                iekey,
                rtype,
                dptr,
            },
            _ => return Err(Status::INVALID_OPCODE),
        })
    }

    /// The namespace the command names.
    pub fn nsid(&self) -> Nsid {
        match self {
            ReservationCommand::Register { nsid, .. }
            | ReservationCommand::Report { nsid, .. }
            | ReservationCommand::Acquire { nsid, .. }
            | ReservationCommand::Release { nsid, .. } => *nsid,
        }
    }
}

/// Reservation Status data structure (Figure 394, and 395-397 for the extended form).
pub mod report {
    /// Header bytes: GEN (4), RTYPE (1), REGCTL (2), reserved (2), PTPLS (1), reserved.
    pub const HEADER: usize = 24;
    /// Header bytes of the extended form (EDS set).
    pub const HEADER_EXTENDED: usize = 64;
    /// One Registered Controller data structure: CNTLID (2), RCSTS (1), reserved (5),
    /// HOSTID (8), RKEY (8).
    pub const ENTRY: usize = 24;
    /// One Registered Controller Extended data structure: CNTLID (2), RCSTS (1),
    /// reserved (5), RKEY (8), HOSTID (16), reserved (32).
    pub const ENTRY_EXTENDED: usize = 64;
    /// RCSTS bit 0: this controller's host holds the reservation.
    pub const RCSTS_HOLDS: u8 = 1;
}

/// Reservation Capabilities (RESCAP) bits of Identify Namespace.
pub mod rescap {
    /// Write Exclusive through Exclusive Access - All Registrants (bits 1-6) and Ignore
    /// Existing Key (bit 7); bit 0 (Persist Through Power Loss) is not offered.
    pub const ALL_TYPES_AND_IEKEY: u8 = 0xFE;
}

/// Reservation notifications (NVMe Base 1.4, Get Log Page 80h and Set Features): the log page
/// types, the Reservation Notification log page's layout, and the Reservation Notification
/// Mask (Features 82h) and Reservation Persistence (Features 83h) bits.
pub mod notice {
    /// A Reservation Notification Log Page Type.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum NoticeKind {
        /// 1h: this host's registration was preempted by another host.
        RegistrationPreempted,
        /// 2h: the reservation was released by another host.
        ReservationReleased,
        /// 3h: the reservation was preempted (cleared) by another host.
        ReservationPreempted,
    }

    impl NoticeKind {
        /// The log page type value.
        pub fn raw(self) -> u8 {
            match self {
                NoticeKind::RegistrationPreempted => 1,
                NoticeKind::ReservationReleased => 2,
                NoticeKind::ReservationPreempted => 3,
            }
        }

        /// The Reservation Notification Mask bit that suppresses this type.
        pub fn mask_bit(self) -> u32 {
            1 << self.raw()
        }
    }

    /// Bytes in one Reservation Notification log page.
    pub const LOG_SIZE: usize = 64;
    /// Byte offsets: Log Page Count (8 bytes), Log Page Type, Number of Available Log
    /// Pages, NSID (4 bytes).
    pub const LOG_COUNT: usize = 0;
    /// Log Page Type.
    pub const LOG_TYPE: usize = 8;
    /// Number of Available Log Pages (after this one; 255 means 255 or more).
    pub const LOG_AVAILABLE: usize = 9;
    /// Namespace ID.
    pub const LOG_NSID: usize = 12;
    /// Mask bits defined in Features 82h CDW11 (REGPRE, RESREL, RESPRE).
    pub const MASK_BITS: u32 = 0b1110;
    /// Persist Through Power Loss (Features 83h CDW11 bit 0).
    pub const PTPL: u32 = 1 << 0;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue_entry::Sqe;

    #[test]
    fn decode_fields_and_reserved_actions() {
        let sqe = Sqe {
            cdw0: 0x11,
            nsid: 3,
            cdw10: 1 | (1 << 3) | (2 << 8),
            ..Sqe::default()
        };
        let c = ReservationCommand::decode(0x11, &sqe).unwrap();
        assert!(matches!(
            c,
            ReservationCommand::Acquire {
                nsid: Nsid(3),
                action: AcquireAction::Preempt,
                iekey: true,
                rtype: 2,
                ..
            }
        ));
        let bad = Sqe { cdw10: 3, ..sqe };
        assert_eq!(
            ReservationCommand::decode(0x11, &bad),
            Err(Status::INVALID_FIELD)
        );
        assert_eq!(
            ReservationCommand::decode(0x15, &Sqe { cdw10: 2, ..sqe }),
            Err(Status::INVALID_FIELD)
        );
        let report = Sqe {
            cdw10: u32::MAX,
            cdw11: 1,
            ..sqe
        };
        assert!(matches!(
            ReservationCommand::decode(0x0E, &report),
            Ok(ReservationCommand::Report {
                dwords: u32::MAX,
                eds: true,
                ..
            })
        ));
    }

    #[test]
    fn types_round_trip_and_say_who_may_access() {
        for raw in 1..=6 {
            assert_eq!(ReservationType::from_raw(raw).unwrap().raw(), raw);
        }
        assert_eq!(ReservationType::from_raw(0), None);
        assert_eq!(ReservationType::from_raw(7), None);
        let we = ReservationType::WriteExclusive;
        assert!(!we.limits_reads() && !we.registrants_have_access());
        let eaar = ReservationType::ExclusiveAccessAllRegistrants;
        assert!(eaar.limits_reads() && eaar.all_registrants() && eaar.registrants_have_access());
    }
}
