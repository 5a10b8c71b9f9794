// SPDX-License-Identifier: Apache-2.0
//! Feature identifiers and selects (NVMe Base 1.4, 5.21 "Set Features", Figure 271).

macro_rules! feature_ids {
    ($($(#[$doc:meta])* $name:ident = $val:expr,)*) => {
        /// Feature Identifier (FID).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum FeatureId {
            $($(#[$doc])* $name,)*
            /// A FID this controller does not know.
            Unknown(u8),
        }

        impl From<u8> for FeatureId {
            fn from(raw: u8) -> Self {
                match raw {
                    $($val => FeatureId::$name,)*
                    other => FeatureId::Unknown(other),
                }
            }
        }

        impl From<FeatureId> for u8 {
            fn from(fid: FeatureId) -> u8 {
                match fid {
                    $(FeatureId::$name => $val,)*
                    FeatureId::Unknown(other) => other,
                }
            }
        }
    };
}

feature_ids! {
    /// Arbitration.
    Arbitration = 0x01,
    /// Power Management.
    PowerManagement = 0x02,
    /// Temperature Threshold.
    TemperatureThreshold = 0x04,
    /// Error Recovery.
    ErrorRecovery = 0x05,
    /// Volatile Write Cache.
    VolatileWriteCache = 0x06,
    /// Number of Queues.
    NumberOfQueues = 0x07,
    /// Interrupt Coalescing.
    InterruptCoalescing = 0x08,
    /// Interrupt Vector Configuration.
    InterruptVectorConfig = 0x09,
    /// Write Atomicity Normal.
    WriteAtomicity = 0x0A,
    /// Asynchronous Event Configuration.
    AsyncEventConfig = 0x0B,
    /// Autonomous Power State Transition.
    Apst = 0x0C,
    /// Keep Alive Timer.
    KeepAliveTimer = 0x0F,
    /// Host Behavior Support (a 512-byte data structure, NVMe Base 2.0, 5.27.1.18).
    HostBehaviorSupport = 0x16,
    /// Host Identifier (8 or, with CDW11.EXHID, 16 bytes in the data buffer).
    HostIdentifier = 0x81,
    /// Reservation Notification Mask (namespace specific).
    ReservationNotificationMask = 0x82,
    /// Reservation Persistence (namespace specific).
    ReservationPersistence = 0x83,
}

/// Host Behavior Support (FID 16h): the data structure's size and its one field this
/// controller implements.
pub mod host_behavior {
    /// Bytes in the data structure both Get and Set Features transfer.
    pub const SIZE: usize = 512;
    /// Byte 0 bit 0: Advanced Command Retry Enable (ACRE).
    pub const ACRE: u8 = 1 << 0;
}

/// Get Features Select (SEL, CDW10 bits 10:8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureSelect {
    /// Current value.
    Current,
    /// Default value.
    Default,
    /// Saved value.
    Saved,
    /// Supported capabilities.
    SupportedCapabilities,
    /// Reserved values 4..=7.
    Reserved(u8),
}

impl From<u8> for FeatureSelect {
    fn from(raw: u8) -> Self {
        match raw {
            0 => FeatureSelect::Current,
            1 => FeatureSelect::Default,
            2 => FeatureSelect::Saved,
            3 => FeatureSelect::SupportedCapabilities,
            other => FeatureSelect::Reserved(other),
        }
    }
}

/// Supported-capabilities bits returned for SEL = 011b (NVMe Base 1.4, Figure 272).
pub mod capabilities {
    /// The feature is saveable.
    pub const SAVEABLE: u32 = 1 << 0;
    /// The feature is namespace specific.
    pub const NAMESPACE_SPECIFIC: u32 = 1 << 1;
    /// The feature is changeable.
    pub const CHANGEABLE: u32 = 1 << 2;
}

/// Number of Queues (FID 07h) request or result: both counts one-based here, zero-based on
/// the wire (NSQR/NCQR in CDW11, NSQA/NCQA in CQE DW0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueCounts {
    /// I/O submission queues.
    pub sq: u32,
    /// I/O completion queues.
    pub cq: u32,
}

impl QueueCounts {
    /// Decode CDW11 (or a result DW0).
    pub const fn from_dword(dw: u32) -> QueueCounts {
        QueueCounts {
            sq: (dw & 0xFFFF) + 1,
            cq: (dw >> 16) + 1,
        }
    }

    /// Encode as the zero-based dword; counts are clamped to 1..=65536.
    pub const fn to_dword(self) -> u32 {
        let sq = if self.sq == 0 {
            0
        } else if self.sq > 0x1_0000 {
            0xFFFF
        } else {
            self.sq - 1
        };
        let cq = if self.cq == 0 {
            0
        } else if self.cq > 0x1_0000 {
            0xFFFF
        } else {
            self.cq - 1
        };
        sq | (cq << 16)
    }
}

/// Temperature Threshold (FID 04h) CDW11 fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemperatureThreshold {
    /// Threshold in kelvin (TMPTH).
    pub kelvin: u16,
    /// Threshold Temperature Select (TMPSEL): 0 = composite, 1..=8 sensors, 0xF all.
    pub sensor: u8,
    /// Threshold Type Select (THSEL): 0 over, 1 under, others reserved.
    pub kind: u8,
}

impl TemperatureThreshold {
    /// Decode CDW11.
    pub const fn from_dword(dw: u32) -> TemperatureThreshold {
        TemperatureThreshold {
            kelvin: (dw & 0xFFFF) as u16,
            sensor: ((dw >> 16) & 0xF) as u8,
            kind: ((dw >> 20) & 0x3) as u8,
        }
    }
}

/// Asynchronous Event Configuration bits (FID 0Bh, CDW11).
pub mod aec {
    /// SMART / Health critical warnings (bits 7:0).
    pub const SMART_MASK: u32 = 0xFF;
    /// SMART temperature warning.
    pub const SMART_TEMPERATURE: u32 = 1 << 1;
    /// Namespace Attribute Notices.
    pub const NAMESPACE_ATTRIBUTE: u32 = 1 << 8;
    /// Firmware Activation Notices.
    pub const FIRMWARE_ACTIVATION: u32 = 1 << 9;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fid_round_trip() {
        for raw in 0..=u8::MAX {
            assert_eq!(u8::from(FeatureId::from(raw)), raw);
        }
        assert_eq!(FeatureId::from(7), FeatureId::NumberOfQueues);
    }

    #[test]
    fn queue_counts_are_zero_based_on_the_wire() {
        let q = QueueCounts::from_dword(0x0003_0007);
        assert_eq!(q, QueueCounts { sq: 8, cq: 4 });
        assert_eq!(q.to_dword(), 0x0003_0007);
        assert_eq!(QueueCounts::from_dword(u32::MAX).to_dword(), u32::MAX);
    }

    #[test]
    fn temperature_fields() {
        let t = TemperatureThreshold::from_dword(0x0010_0157);
        assert_eq!(
            t,
            TemperatureThreshold {
                kelvin: 0x157,
                sensor: 0,
                kind: 1
            }
        );
    }
}
