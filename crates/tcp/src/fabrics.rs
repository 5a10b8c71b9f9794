// SPDX-License-Identifier: Apache-2.0
//! Fabrics commands (opcode 7Fh; NVMe over Fabrics 1.1, section 3.3), decoded from the SQE
//! copy and the Connect data: pure, so the fuzz target reaches them without a socket.

use nvmemu_spec::Sqe;
use zerocopy::IntoBytes;

/// The Fabrics command opcode.
pub const OPCODE: u8 = 0x7F;
/// Length of the Connect command's data.
pub const CONNECT_DATA_LEN: usize = 1024;
/// The controller ID a host asks for to get a new (dynamic) controller.
pub const DYNAMIC_CNTLID: u16 = 0xFFFF;

/// A decoded Fabrics command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FabricsCommand {
    /// Property Set of a 4- or 8-byte register.
    PropertySet {
        /// Register offset.
        offset: u32,
        /// 8 bytes (else 4).
        wide: bool,
        /// The value.
        value: u64,
    },
    /// Connect (RECFMT, QID, SQSIZE 0-based, KATO in ms); the data comes separately.
    Connect {
        /// Record format (0 is the only one).
        recfmt: u16,
        /// Queue to connect (0: admin).
        qid: u16,
        /// Submission queue size, 0-based.
        sqsize: u16,
        /// Keep Alive Timeout in milliseconds (admin queue only).
        kato: u32,
    },
    /// Property Get.
    PropertyGet {
        /// Register offset.
        offset: u32,
        /// 8 bytes (else 4).
        wide: bool,
    },
    /// Disconnect this queue.
    Disconnect,
    /// Anything else (authentication, reserved types).
    Unknown(u8),
}

impl FabricsCommand {
    /// Decode the command in `sqe` (opcode 7Fh; FCTYPE is byte 4).
    pub fn decode(sqe: &Sqe) -> FabricsCommand {
        let b = sqe.as_bytes();
        let byte = |i: usize| b.get(i).copied().unwrap_or(0);
        let u16_at = |i: usize| u16::from_le_bytes([byte(i), byte(i + 1)]);
        let u32_at =
            |i: usize| u32::from_le_bytes([byte(i), byte(i + 1), byte(i + 2), byte(i + 3)]);
        let wide = byte(40) & 0x7 == 1;
        match byte(4) {
            0x00 => FabricsCommand::PropertySet {
                offset: u32_at(44),
                wide,
                value: u64::from(u32_at(48)) | (u64::from(u32_at(52)) << 32),
            },
            0x01 => FabricsCommand::Connect {
                recfmt: u16_at(40),
                qid: u16_at(42),
                sqsize: u16_at(44),
                kato: u32_at(48),
            },
            0x04 => FabricsCommand::PropertyGet {
                offset: u32_at(44),
                wide,
            },
            0x08 => FabricsCommand::Disconnect,
            t => FabricsCommand::Unknown(t),
        }
    }
}

/// Connect command data (NVMe over Fabrics 1.1, Figure 20).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectData {
    /// Host Identifier.
    pub hostid: [u8; 16],
    /// Controller ID asked for (FFFFh: any, dynamic).
    pub cntlid: u16,
    /// Subsystem NQN.
    pub subnqn: String,
    /// Host NQN.
    pub hostnqn: String,
}

/// Byte offsets in the Connect data, for the IPO of a Connect Invalid Parameters status.
pub mod connect_offsets {
    /// CNTLID.
    pub const CNTLID: u16 = 16;
    /// SUBNQN.
    pub const SUBNQN: u16 = 256;
    /// HOSTNQN.
    pub const HOSTNQN: u16 = 512;
}

/// Why Connect data cannot be used: the offset of the bad field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("Connect data field at byte {offset} is not a valid NQN")]
pub struct BadConnectData {
    /// Byte offset of the field.
    pub offset: u16,
}

impl ConnectData {
    /// Decode the 1024 bytes of Connect data: NQNs are NUL-terminated UTF-8 within 256 bytes,
    /// the subsystem's not empty.
    pub fn parse(data: &[u8]) -> Result<ConnectData, BadConnectData> {
        if data.len() < CONNECT_DATA_LEN {
            return Err(BadConnectData { offset: 0 });
        }
        let mut hostid = [0u8; 16];
        hostid.copy_from_slice(&data[..16]);
        Ok(ConnectData {
            hostid,
            cntlid: u16::from_le_bytes([data[16], data[17]]),
            subnqn: Some(nqn(data, connect_offsets::SUBNQN)?)
                .filter(|n| !n.is_empty())
                .ok_or(BadConnectData {
                    offset: connect_offsets::SUBNQN,
                })?,
            // May be empty (SPDK's perf tool sends none); only an allow list can refuse it.
            hostnqn: nqn(data, connect_offsets::HOSTNQN)?,
        })
    }
}

fn nqn(data: &[u8], offset: u16) -> Result<String, BadConnectData> {
    let at = usize::from(offset);
    let field = data.get(at..at + 256).ok_or(BadConnectData { offset })?;
    let end = field
        .iter()
        .position(|&b| b == 0)
        .ok_or(BadConnectData { offset })?;
    let text = std::str::from_utf8(&field[..end]).map_err(|_| BadConnectData { offset })?;
    Ok(text.to_owned())
}

/// Connect status codes (command specific; NVMe over Fabrics 1.1, Figure 21).
pub mod connect_status {
    use nvmemu_spec::{Sct, Status};

    const fn cs(sc: u8) -> Status {
        Status {
            sct: Sct::CommandSpecific,
            sc,
            dnr: true,
            more: false,
        }
    }
    /// Incompatible Format (RECFMT).
    pub const INCOMPATIBLE_FORMAT: Status = cs(0x80);
    /// Controller Busy.
    pub const CONTROLLER_BUSY: Status = cs(0x81);
    /// Connect Invalid Parameters (DW0 says which: IATTR, IPO).
    pub const INVALID_PARAMETERS: Status = cs(0x82);
    /// Connect Invalid Host.
    pub const INVALID_HOST: Status = cs(0x84);
}

/// DW0 of a Connect Invalid Parameters completion: the bad field is in the SQE
/// (`in_data` false) or in the data, at byte `offset`.
pub fn invalid_param_dw0(in_data: bool, offset: u16) -> u32 {
    u32::from(in_data) | (u32::from(offset) << 16)
}

/// SQE byte offsets of the Connect fields, for the IPO.
pub mod connect_sqe_offsets {
    /// RECFMT.
    pub const RECFMT: u16 = 40;
    /// QID.
    pub const QID: u16 = 42;
    /// SQSIZE.
    pub const SQSIZE: u16 = 44;
}
