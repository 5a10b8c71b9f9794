// SPDX-License-Identifier: Apache-2.0
//! Log pages and asynchronous event results (NVMe Base 1.4, 5.14 "Get Log Page" and 5.2
//! "Asynchronous Event Request").

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Log Page Identifier (LID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogPageId {
    /// 01h Error Information.
    ErrorInformation,
    /// 02h SMART / Health Information.
    SmartHealth,
    /// 03h Firmware Slot Information.
    FirmwareSlot,
    /// 04h Changed Namespace List.
    ChangedNamespaceList,
    /// 05h Commands Supported and Effects.
    CommandEffects,
    /// 80h Reservation Notification.
    ReservationNotification,
    /// A LID this controller does not implement.
    Unknown(u8),
}

impl From<u8> for LogPageId {
    fn from(raw: u8) -> Self {
        match raw {
            0x01 => LogPageId::ErrorInformation,
            0x02 => LogPageId::SmartHealth,
            0x03 => LogPageId::FirmwareSlot,
            0x04 => LogPageId::ChangedNamespaceList,
            0x05 => LogPageId::CommandEffects,
            0x80 => LogPageId::ReservationNotification,
            other => LogPageId::Unknown(other),
        }
    }
}

impl From<LogPageId> for u8 {
    fn from(lid: LogPageId) -> u8 {
        match lid {
            LogPageId::ErrorInformation => 0x01,
            LogPageId::SmartHealth => 0x02,
            LogPageId::FirmwareSlot => 0x03,
            LogPageId::ChangedNamespaceList => 0x04,
            LogPageId::CommandEffects => 0x05,
            LogPageId::ReservationNotification => 0x80,
            LogPageId::Unknown(other) => other,
        }
    }
}

/// Error Information log entry (NVMe Base 1.4, Figure 194).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct ErrorLogEntry {
    /// Error Count: unique, incrementing, never 0 for a valid entry.
    pub error_count: u64,
    /// Submission Queue ID.
    pub sqid: u16,
    /// Command ID.
    pub cid: u16,
    /// Status Field (bits 15:1) and phase tag (bit 0) of the completion.
    pub status: u16,
    /// Parameter Error Location (0xFFFF: not applicable).
    pub param_error_location: u16,
    /// LBA.
    pub lba: u64,
    /// Namespace.
    pub nsid: u32,
    /// Vendor Specific Information Available.
    pub vs: u8,
    /// Transport Type.
    pub trtype: u8,
    /// Reserved.
    pub rsvd30: [u8; 2],
    /// Command Specific Information.
    pub csi: u64,
    /// Transport Type Specific Information.
    pub trtype_specific: u16,
    /// Reserved.
    pub rsvd42: [u8; 22],
}
const _: () = assert!(size_of::<ErrorLogEntry>() == 64);

/// SMART / Health Information log page (NVMe Base 1.4, Figure 196). 128-bit counters and
/// the unaligned composite temperature are little-endian byte arrays.
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct SmartLog {
    /// Critical Warning bits.
    pub critical_warning: u8,
    /// Composite Temperature (kelvin).
    pub composite_temperature: [u8; 2],
    /// Available Spare (percent).
    pub available_spare: u8,
    /// Available Spare Threshold (percent).
    pub available_spare_threshold: u8,
    /// Percentage Used.
    pub percentage_used: u8,
    /// Endurance Group Critical Warning Summary.
    pub endurance_group_warning: u8,
    /// Reserved.
    pub rsvd7: [u8; 25],
    /// Data Units Read (thousands of 512-byte units, rounded up).
    pub data_units_read: [u8; 16],
    /// Data Units Written.
    pub data_units_written: [u8; 16],
    /// Host Read Commands.
    pub host_read_commands: [u8; 16],
    /// Host Write Commands.
    pub host_write_commands: [u8; 16],
    /// Controller Busy Time (minutes).
    pub controller_busy_time: [u8; 16],
    /// Power Cycles.
    pub power_cycles: [u8; 16],
    /// Power On Hours.
    pub power_on_hours: [u8; 16],
    /// Unsafe Shutdowns.
    pub unsafe_shutdowns: [u8; 16],
    /// Media and Data Integrity Errors.
    pub media_errors: [u8; 16],
    /// Number of Error Information Log Entries.
    pub num_error_log_entries: [u8; 16],
    /// Warning Composite Temperature Time (minutes).
    pub warning_temp_time: u32,
    /// Critical Composite Temperature Time (minutes).
    pub critical_temp_time: u32,
    /// Temperature Sensors 1-8.
    pub temp_sensors: [u16; 8],
    /// Thermal Management Temperature 1/2 Transition Counts.
    pub thermal_transition_counts: [u32; 2],
    /// Total Time For Thermal Management Temperature 1/2.
    pub thermal_total_times: [u32; 2],
    /// Reserved.
    pub rsvd232: [u8; 280],
}
const _: () = assert!(size_of::<SmartLog>() == 512);
const _: () = assert!(core::mem::offset_of!(SmartLog, data_units_read) == 32);
const _: () = assert!(core::mem::offset_of!(SmartLog, warning_temp_time) == 192);

/// SMART Critical Warning: temperature above an over or below an under threshold.
pub const CRITICAL_WARNING_TEMPERATURE: u8 = 1 << 1;

/// Firmware Slot Information log page (NVMe Base 1.4, Figure 197).
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct FirmwareSlotLog {
    /// Active Firmware Info: active slot in bits 2:0.
    pub afi: u8,
    /// Reserved.
    pub rsvd1: [u8; 7],
    /// Firmware Revision for Slots 1-7.
    pub frs: [[u8; 8]; 7],
    /// Reserved.
    pub rsvd64: [u8; 448],
}
const _: () = assert!(size_of::<FirmwareSlotLog>() == 512);

/// Size of the Changed Namespace List log page: 1024 NSIDs.
pub const CHANGED_NS_LIST_ENTRIES: usize = 1024;

/// Commands Supported and Effects entry bits (NVMe Base 1.4, Figure 201).
pub mod effects {
    /// Command Supported.
    pub const CSUPP: u32 = 1 << 0;
    /// Logical Block Content Change.
    pub const LBCC: u32 = 1 << 1;
    /// Namespace Capability Change.
    pub const NCC: u32 = 1 << 2;
    /// Namespace Inventory Change.
    pub const NIC: u32 = 1 << 3;
    /// Controller Capability Change.
    pub const CCC: u32 = 1 << 4;
}

/// Asynchronous Event Type (CQE DW0 bits 2:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AsyncEventType {
    /// Error status.
    Error = 0,
    /// SMART / Health status.
    SmartHealth = 1,
    /// Notice.
    Notice = 2,
    /// I/O Command specific status (reservations).
    IoCommandSpecific = 6,
}

/// An asynchronous event as it completes an Asynchronous Event Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AsyncEvent {
    /// Event type.
    pub kind: AsyncEventType,
    /// Asynchronous Event Information.
    pub info: u8,
    /// Log page the host reads to clear the event.
    pub lid: LogPageId,
}

impl AsyncEvent {
    /// Notice: Namespace Attribute Changed (read the Changed Namespace List).
    pub const NAMESPACE_ATTRIBUTE_CHANGED: AsyncEvent = AsyncEvent {
        kind: AsyncEventType::Notice,
        info: 0x00,
        lid: LogPageId::ChangedNamespaceList,
    };
    /// Error: Invalid Doorbell Write Value.
    pub const INVALID_DOORBELL_VALUE: AsyncEvent = AsyncEvent {
        kind: AsyncEventType::Error,
        info: 0x01,
        lid: LogPageId::ErrorInformation,
    };
    /// SMART / Health: Temperature Threshold.
    pub const TEMPERATURE_THRESHOLD: AsyncEvent = AsyncEvent {
        kind: AsyncEventType::SmartHealth,
        info: 0x01,
        lid: LogPageId::SmartHealth,
    };

    /// I/O Command specific: Reservation Log Page Available.
    pub const RESERVATION_LOG_AVAILABLE: AsyncEvent = AsyncEvent {
        kind: AsyncEventType::IoCommandSpecific,
        info: 0x00,
        lid: LogPageId::ReservationNotification,
    };

    /// CQE DW0 of the completing Asynchronous Event Request.
    pub fn to_dw0(self) -> u32 {
        u32::from(self.kind as u8)
            | (u32::from(self.info) << 8)
            | (u32::from(u8::from(self.lid)) << 16)
    }
}

/// A 128-bit little-endian counter field.
pub const fn u128_field(v: u128) -> [u8; 16] {
    v.to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lid_round_trip() {
        for raw in 0..=u8::MAX {
            assert_eq!(u8::from(LogPageId::from(raw)), raw);
        }
    }

    #[test]
    fn aen_dw0_layout() {
        assert_eq!(
            AsyncEvent::NAMESPACE_ATTRIBUTE_CHANGED.to_dw0(),
            0x0004_0002
        );
        assert_eq!(AsyncEvent::INVALID_DOORBELL_VALUE.to_dw0(), 0x0001_0100);
        assert_eq!(AsyncEvent::RESERVATION_LOG_AVAILABLE.to_dw0(), 0x0080_0006);
    }
}
