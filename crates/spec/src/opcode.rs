// SPDX-License-Identifier: Apache-2.0
//! Admin and NVM command set opcodes (NVMe Base 1.4, Figure 139 and NVM 6.1).

macro_rules! opcodes {
    ($(#[$tdoc:meta])* $ty:ident { $($(#[$doc:meta])* $name:ident = $val:expr,)* }) => {
        $(#[$tdoc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $ty {
            $($(#[$doc])* $name,)*
            /// An opcode this controller does not know.
            Unknown(u8),
        }

        impl From<u8> for $ty {
            fn from(raw: u8) -> Self {
                match raw {
                    $($val => $ty::$name,)*
                    other => $ty::Unknown(other),
                }
            }
        }

        impl From<$ty> for u8 {
            fn from(op: $ty) -> u8 {
                match op {
                    $($ty::$name => $val,)*
                    $ty::Unknown(other) => other,
                }
            }
        }
    };
}

opcodes! {
    /// Admin command opcodes.
    AdminOpcode {
        /// Delete I/O Submission Queue.
        DeleteIoSq = 0x00,
        /// Create I/O Submission Queue.
        CreateIoSq = 0x01,
        /// Get Log Page.
        GetLogPage = 0x02,
        /// Delete I/O Completion Queue.
        DeleteIoCq = 0x04,
        /// Create I/O Completion Queue.
        CreateIoCq = 0x05,
        /// Identify.
        Identify = 0x06,
        /// Abort.
        Abort = 0x08,
        /// Set Features.
        SetFeatures = 0x09,
        /// Get Features.
        GetFeatures = 0x0A,
        /// Asynchronous Event Request.
        AsyncEventRequest = 0x0C,
        /// Keep Alive.
        KeepAlive = 0x18,
        /// Doorbell Buffer Config.
        DoorbellBufferConfig = 0x7C,
    }
}

opcodes! {
    /// NVM command set I/O opcodes.
    IoOpcode {
        /// Flush.
        Flush = 0x00,
        /// Write.
        Write = 0x01,
        /// Read.
        Read = 0x02,
        /// Compare.
        Compare = 0x05,
        /// Write Zeroes.
        WriteZeroes = 0x08,
        /// Dataset Management.
        DatasetManagement = 0x09,
        /// Reservation Register.
        ReservationRegister = 0x0D,
        /// Reservation Report.
        ReservationReport = 0x0E,
        /// Reservation Acquire.
        ReservationAcquire = 0x11,
        /// Reservation Release.
        ReservationRelease = 0x15,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips() {
        for raw in 0..=u8::MAX {
            assert_eq!(u8::from(AdminOpcode::from(raw)), raw);
            assert_eq!(u8::from(IoOpcode::from(raw)), raw);
        }
        assert_eq!(IoOpcode::from(0x02), IoOpcode::Read);
        assert_eq!(AdminOpcode::from(0x7C), AdminOpcode::DoorbellBufferConfig);
        assert_eq!(IoOpcode::from(0x7F), IoOpcode::Unknown(0x7F));
    }
}
