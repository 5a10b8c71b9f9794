// SPDX-License-Identifier: Apache-2.0
//! NVMe/TCP PDUs (NVMe over Fabrics TCP Transport 1.0, section 3.6): the common header,
//! the fixed headers of each type, digests and padding.
//!
//! Decoding is pure: [`check_header`] validates a common header against what the
//! connection allows before the rest is read (so a lying PLEN never makes us buffer more
//! than one PDU), and [`decode`] checks a whole PDU (digests, lengths, offsets) and returns
//! a typed view borrowing the data. Every error names the FES and FEI a termination
//! request carries. Encoding the controller's PDUs is in `encode`.

use nvmemu_spec::Sqe;
use zerocopy::FromBytes;

mod encode;

pub use encode::{
    C2hLayout, MAX_SMALL_PDU, ReadHeaders, encode_c2h_data_header, encode_icresp, encode_r2t,
    encode_resp, encode_term_req, finish_c2h_data, prefix_len,
};

/// Length of the common header.
pub const CH_LEN: usize = 8;
/// Length of a header or data digest.
pub const DIGEST_LEN: usize = 4;
/// Header length of ICReq and ICResp.
pub const IC_HLEN: usize = 128;
/// Header length of a command capsule (common header plus SQE).
pub const CMD_HLEN: usize = CH_LEN + 64;
/// Header length of a response capsule (common header plus CQE).
pub const RESP_HLEN: usize = CH_LEN + 16;
/// Header length of H2CData, C2HData, R2T and the termination requests.
pub const DATA_HLEN: usize = 24;
const IC_HLEN_U32: u32 = 128;

/// A header length (all below 256) as the common header's byte.
fn small(n: usize) -> u8 {
    u8::try_from(n).unwrap_or(u8::MAX)
}

/// Most error data a C2HTermReq carries (the offending header, truncated).
pub const TERM_DATA_MAX: usize = 152;

/// PDU types (TCP Transport, Figure 3).
pub mod pdu_type {
    /// Initialize Connection Request.
    pub const IC_REQ: u8 = 0x00;
    /// Initialize Connection Response.
    pub const IC_RESP: u8 = 0x01;
    /// Host to Controller Terminate Connection Request.
    pub const H2C_TERM_REQ: u8 = 0x02;
    /// Controller to Host Terminate Connection Request.
    pub const C2H_TERM_REQ: u8 = 0x03;
    /// Command Capsule.
    pub const CAPSULE_CMD: u8 = 0x04;
    /// Response Capsule.
    pub const CAPSULE_RESP: u8 = 0x05;
    /// Host to Controller Data.
    pub const H2C_DATA: u8 = 0x06;
    /// Controller to Host Data.
    pub const C2H_DATA: u8 = 0x07;
    /// Ready to Transfer.
    pub const R2T: u8 = 0x09;
}

/// Common header FLAGS bits.
pub mod flags {
    /// A header digest follows the header.
    pub const HDGSTF: u8 = 1 << 0;
    /// A data digest follows the data.
    pub const DDGSTF: u8 = 1 << 1;
    /// Last data PDU of a transfer (H2CData, C2HData).
    pub const LAST_PDU: u8 = 1 << 2;
    /// C2HData: the command completed successfully and no response capsule follows.
    pub const SUCCESS: u8 = 1 << 3;
}

/// Fatal Error Status of a termination request (TCP Transport, Figure 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Fes {
    /// A header field is invalid; FEI is its byte offset.
    InvalidHeaderField = 0x01,
    /// A PDU arrived that the connection's state does not allow.
    PduSequenceError = 0x02,
    /// The header digest did not match.
    HeaderDigestError = 0x03,
    /// H2CData beyond the range an R2T asked for.
    DataTransferOutOfRange = 0x04,
    /// More data than the limit (MAXH2CDATA, in-capsule data size).
    DataTransferLimitExceeded = 0x05,
    /// An ICReq parameter is unsupported; FEI is its byte offset.
    UnsupportedParameter = 0x06,
}

/// Why a PDU ends its connection: what a termination request reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what} (FES {fes:?}, FEI {fei})")]
pub struct PduError {
    /// Fatal Error Status.
    pub fes: Fes,
    /// Fatal Error Information: a byte offset into the PDU header, or 0.
    pub fei: u32,
    /// What was wrong, for the log line.
    pub what: &'static str,
}

impl PduError {
    const fn field(fei: u32, what: &'static str) -> PduError {
        PduError {
            fes: Fes::InvalidHeaderField,
            fei,
            what,
        }
    }

    const fn new(fes: Fes, what: &'static str) -> PduError {
        PduError { fes, fei: 0, what }
    }
}

/// The common header (TCP Transport, Figure 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommonHeader {
    /// PDU-Type.
    pub pdu_type: u8,
    /// FLAGS.
    pub flags: u8,
    /// HLEN: header length without the header digest.
    pub hlen: u8,
    /// PDO: offset of the data from the start of the PDU (0 without data).
    pub pdo: u8,
    /// PLEN: the whole PDU, digests and padding included.
    pub plen: u32,
}

impl CommonHeader {
    /// Decode the first eight bytes of a PDU.
    pub fn parse(b: &[u8; CH_LEN]) -> CommonHeader {
        CommonHeader {
            pdu_type: b[0],
            flags: b[1],
            hlen: b[2],
            pdo: b[3],
            plen: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    fn write(&self, out: &mut [u8]) {
        if let Some(b) = out.get_mut(..CH_LEN) {
            b[0] = self.pdu_type;
            b[1] = self.flags;
            b[2] = self.hlen;
            b[3] = self.pdo;
            b[4..8].copy_from_slice(&self.plen.to_le_bytes());
        }
    }
}

/// What a connection has negotiated (or, before ICReq, the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// Header digests on.
    pub hdgst: bool,
    /// Data digests on.
    pub ddgst: bool,
    /// The host's PDU data alignment (HPDA): C2HData data starts at a multiple of
    /// `(hpda + 1) * 4`.
    pub hpda: u8,
    /// The controller's PDU data alignment (CPDA) that the host must honour.
    pub cpda: u8,
    /// Largest in-capsule data accepted.
    pub icd_max: u32,
    /// Largest H2CData PDU data (MAXH2CDATA).
    pub maxh2cdata: u32,
}

impl Negotiated {
    fn hd_len(&self) -> usize {
        if self.hdgst { DIGEST_LEN } else { 0 }
    }

    fn dd_len(&self) -> usize {
        if self.ddgst { DIGEST_LEN } else { 0 }
    }

    /// The largest command capsule a host may send on this connection.
    pub fn max_capsule(&self) -> usize {
        CMD_HLEN + DIGEST_LEN + align_pad_max(self.cpda) + self.icd_max as usize + DIGEST_LEN
    }

    /// The largest PDU a host may send on this connection.
    pub fn max_h2c_pdu(&self) -> usize {
        let data = self.icd_max.max(self.maxh2cdata) as usize;
        CMD_HLEN + DIGEST_LEN + align_pad_max(self.cpda) + data + DIGEST_LEN
    }
}

fn align_pad_max(pda: u8) -> usize {
    (usize::from(pda) + 1) * 4
}

/// Where the connection is: before ICReq only ICReq may come, after it never again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for ICReq.
    Initializing,
    /// ICReq done: capsules, data and termination requests.
    Established,
}

/// A validated host-to-controller PDU.
#[derive(Debug, PartialEq, Eq)]
pub enum H2cPdu<'a> {
    /// ICReq.
    IcReq(IcReq),
    /// A command capsule and its in-capsule data (possibly empty).
    Command {
        /// The SQE copy.
        sqe: Sqe,
        /// In-capsule data.
        data: &'a [u8],
    },
    /// H2CData.
    Data {
        /// Command capsule CID.
        cccid: u16,
        /// Transfer tag of the R2T answered.
        ttag: u16,
        /// Offset of this data in the command's transfer.
        datao: u32,
        /// LAST_PDU flag.
        last: bool,
        /// The data.
        data: &'a [u8],
    },
    /// The host ends the connection.
    TermReq {
        /// Its FES.
        fes: u16,
    },
}

/// ICReq parameters (TCP Transport, Figure 20).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcReq {
    /// PDU Format Version (0 is the only one).
    pub pfv: u16,
    /// Host PDU Data Alignment.
    pub hpda: u8,
    /// Header digest requested.
    pub hdgst: bool,
    /// Data digest requested.
    pub ddgst: bool,
    /// Most outstanding R2Ts per command, 0-based.
    pub maxr2t: u32,
}

/// The header length each host PDU type must have, or None for a type a host never sends.
fn h2c_hlen(pdu_type: u8) -> Option<usize> {
    match pdu_type {
        pdu_type::IC_REQ => Some(IC_HLEN),
        pdu_type::CAPSULE_CMD => Some(CMD_HLEN),
        pdu_type::H2C_DATA | pdu_type::H2C_TERM_REQ => Some(DATA_HLEN),
        _ => None,
    }
}

/// Validate a common header before reading the rest of the PDU; returns PLEN.
pub fn check_header(ch: &CommonHeader, phase: Phase, n: &Negotiated) -> Result<usize, PduError> {
    let hlen = h2c_hlen(ch.pdu_type).ok_or(PduError::field(0, "PDU type a host never sends"))?;
    match (phase, ch.pdu_type) {
        (Phase::Initializing, pdu_type::IC_REQ) | (Phase::Established, _) => {}
        (Phase::Initializing, _) => {
            return Err(PduError::new(Fes::PduSequenceError, "PDU before ICReq"));
        }
    }
    if phase == Phase::Established && ch.pdu_type == pdu_type::IC_REQ {
        return Err(PduError::new(Fes::PduSequenceError, "second ICReq"));
    }
    if usize::from(ch.hlen) != hlen {
        return Err(PduError::field(2, "HLEN is wrong for the PDU type"));
    }
    let plen = usize::try_from(ch.plen).unwrap_or(usize::MAX);
    let max = match ch.pdu_type {
        pdu_type::IC_REQ => IC_HLEN,
        pdu_type::H2C_TERM_REQ => DATA_HLEN + DIGEST_LEN + TERM_DATA_MAX,
        _ => n.max_h2c_pdu(),
    };
    if plen < hlen || plen > max {
        return Err(PduError::field(4, "PLEN is out of range"));
    }
    Ok(plen)
}

/// Decode a whole PDU (`pdu.len()` is its PLEN, already checked by [`check_header`]).
pub fn decode<'a>(pdu: &'a [u8], phase: Phase, n: &Negotiated) -> Result<H2cPdu<'a>, PduError> {
    let head: &[u8; CH_LEN] = pdu
        .get(..CH_LEN)
        .and_then(|b| b.try_into().ok())
        .ok_or(PduError::field(4, "PDU shorter than its common header"))?;
    let ch = CommonHeader::parse(head);
    let plen = check_header(&ch, phase, n)?;
    if plen != pdu.len() {
        return Err(PduError::field(4, "PLEN does not match the PDU"));
    }
    if ch.pdu_type == pdu_type::IC_REQ {
        return decode_icreq(pdu, &ch).map(H2cPdu::IcReq);
    }
    if ch.pdu_type == pdu_type::H2C_TERM_REQ {
        // The host is leaving; its error data is not checked.
        let fes = u16::from_le_bytes([pdu[8], pdu[9]]);
        return Ok(H2cPdu::TermReq { fes });
    }
    let hlen = usize::from(ch.hlen);
    let data = split_data(pdu, &ch, n)?;
    let header = pdu.get(..hlen).ok_or(PduError::field(2, "short header"))?;
    match ch.pdu_type {
        pdu_type::CAPSULE_CMD => {
            if data.len() > n.icd_max as usize {
                return Err(PduError::new(
                    Fes::DataTransferLimitExceeded,
                    "in-capsule data beyond the in-capsule data size",
                ));
            }
            let sqe = Sqe::read_from_bytes(header.get(CH_LEN..).unwrap_or_default())
                .map_err(|_| PduError::field(8, "short SQE"))?;
            Ok(H2cPdu::Command { sqe, data })
        }
        _ => {
            // H2CData (check_header admits no other type here).
            if ch.flags & !(flags::HDGSTF | flags::DDGSTF | flags::LAST_PDU) != 0 {
                return Err(PduError::field(1, "unknown H2CData flag"));
            }
            let word =
                |at: usize| u32::from_le_bytes([pdu[at], pdu[at + 1], pdu[at + 2], pdu[at + 3]]);
            let datal = word(16);
            if datal as usize != data.len() {
                return Err(PduError::field(16, "DATAL does not match the PDU's data"));
            }
            if datal == 0 || datal > n.maxh2cdata {
                return Err(PduError::new(
                    Fes::DataTransferLimitExceeded,
                    "H2CData length is 0 or beyond MAXH2CDATA",
                ));
            }
            Ok(H2cPdu::Data {
                cccid: u16::from_le_bytes([pdu[8], pdu[9]]),
                ttag: u16::from_le_bytes([pdu[10], pdu[11]]),
                datao: word(12),
                last: ch.flags & flags::LAST_PDU != 0,
                data,
            })
        }
    }
}

/// The common PDU alone, decoded from fixed offsets: a command capsule with no header
/// digest negotiated, no data and no digest flags (PLEN = HLEN = 72, PDO 0). For these
/// bytes on an established connection [`check_header`] and [`decode`] return
/// `Command { sqe, data: &[] }` with the same SQE; for any others this returns None and
/// they take that general path, so it rejects exactly what they reject.
#[inline]
pub fn plain_capsule(bytes: &[u8], n: &Negotiated) -> Option<Sqe> {
    let (ch, sqe) = bytes.get(..CMD_HLEN)?.split_first_chunk::<CH_LEN>()?;
    // PDU-Type, HLEN, PDO and PLEN as one word; FLAGS (byte 1) masked to its digest bits.
    let head = u64::from_le_bytes(*ch);
    let mask = !(u64::from(!(flags::HDGSTF | flags::DDGSTF)) << 8);
    let want = u64::from(pdu_type::CAPSULE_CMD) | (CMD_HLEN as u64) << 16 | (CMD_HLEN as u64) << 32;
    if n.hdgst || head & mask != want {
        return None;
    }
    Sqe::read_from_bytes(sqe).ok()
}

fn decode_icreq(pdu: &[u8], ch: &CommonHeader) -> Result<IcReq, PduError> {
    if ch.flags != 0 || ch.pdo != 0 {
        return Err(PduError::field(1, "ICReq with flags or PDO"));
    }
    let pfv = u16::from_le_bytes([pdu[8], pdu[9]]);
    if pfv != 0 {
        return Err(PduError {
            fes: Fes::UnsupportedParameter,
            fei: 8,
            what: "PDU format version is not 0",
        });
    }
    let hpda = pdu[10];
    if hpda > 31 {
        return Err(PduError {
            fes: Fes::UnsupportedParameter,
            fei: 10,
            what: "HPDA beyond 31",
        });
    }
    let dgst = pdu[11];
    Ok(IcReq {
        pfv,
        hpda,
        hdgst: dgst & 1 != 0,
        ddgst: dgst & 2 != 0,
        maxr2t: u32::from_le_bytes([pdu[12], pdu[13], pdu[14], pdu[15]]),
    })
}

/// Check digests, flags and PDO of a capsule or data PDU; returns its data.
fn split_data<'a>(pdu: &'a [u8], ch: &CommonHeader, n: &Negotiated) -> Result<&'a [u8], PduError> {
    let hlen = usize::from(ch.hlen);
    let hd = n.hd_len();
    if (ch.flags & flags::HDGSTF != 0) != n.hdgst {
        return Err(PduError::field(
            1,
            "HDGSTF does not match the negotiated header digest",
        ));
    }
    let header_end = hlen + hd;
    if pdu.len() < header_end {
        return Err(PduError::field(
            4,
            "PLEN shorter than the header and its digest",
        ));
    }
    if n.hdgst {
        let want = crc32c::crc32c(&pdu[..hlen]);
        let got = u32::from_le_bytes([pdu[hlen], pdu[hlen + 1], pdu[hlen + 2], pdu[hlen + 3]]);
        if want != got {
            return Err(PduError::new(
                Fes::HeaderDigestError,
                "header digest mismatch",
            ));
        }
    }
    let has_ddgst = ch.flags & flags::DDGSTF != 0;
    if pdu.len() == header_end {
        if ch.pdo != 0 || has_ddgst {
            return Err(PduError::field(3, "PDO or DDGSTF on a PDU without data"));
        }
        return Ok(&[]);
    }
    if has_ddgst != n.ddgst {
        return Err(PduError::field(
            1,
            "DDGSTF does not match the negotiated data digest",
        ));
    }
    let pdo = usize::from(ch.pdo);
    let align = align_pad_max(n.cpda);
    let dd = n.dd_len();
    if pdo < header_end || pdo % align != 0 || pdo + dd >= pdu.len() {
        return Err(PduError::field(3, "PDO is out of range or misaligned"));
    }
    let data_end = pdu.len() - dd;
    let data = &pdu[pdo..data_end];
    if n.ddgst {
        let want = crc32c::crc32c(data);
        let t = &pdu[data_end..];
        let got = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        if want != got {
            // A data digest error is not fatal in the spec (the command fails with
            // Transient Transport Error), but a host that sends a bad one has a broken
            // path; ending the connection is what SPDK's target does too.
            return Err(PduError::field(u32::from(ch.pdo), "data digest mismatch"));
        }
    }
    Ok(data)
}

#[cfg(test)]
mod tests;
