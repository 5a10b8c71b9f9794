// SPDX-License-Identifier: Apache-2.0
//! Encoding the PDUs the controller sends: ICResp, response capsules, R2T, C2HData headers
//! and digests, and termination requests.

use nvmemu_spec::Cqe;
use zerocopy::IntoBytes;

use super::{
    CH_LEN, CommonHeader, DATA_HLEN, DIGEST_LEN, IC_HLEN, IC_HLEN_U32, Negotiated, PduError,
    RESP_HLEN, TERM_DATA_MAX, align_pad_max, flags, pdu_type, small,
};

/// ICResp (TCP Transport, Figure 21) into `out[..IC_HLEN]`.
pub fn encode_icresp(out: &mut [u8; IC_HLEN], n: &Negotiated) {
    out.fill(0);
    CommonHeader {
        pdu_type: pdu_type::IC_RESP,
        flags: 0,
        hlen: small(IC_HLEN),
        pdo: 0,
        plen: IC_HLEN_U32,
    }
    .write(out);
    out[10] = n.cpda;
    out[11] = u8::from(n.hdgst) | (u8::from(n.ddgst) << 1);
    out[12..16].copy_from_slice(&n.maxh2cdata.to_le_bytes());
}

/// Lengths of a controller-to-host PDU with `data_len` bytes of data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct C2hLayout {
    /// Header length.
    pub hlen: usize,
    /// Offset of the data (0 without data).
    pub pdo: usize,
    /// Total length.
    pub plen: usize,
}

impl C2hLayout {
    /// Where everything of a PDU with header `hlen` and `data_len` bytes of data goes.
    pub fn new(hlen: usize, data_len: usize, n: &Negotiated) -> C2hLayout {
        let header_end = hlen + n.hd_len();
        if data_len == 0 {
            return C2hLayout {
                hlen,
                pdo: 0,
                plen: header_end,
            };
        }
        let align = align_pad_max(n.hpda);
        let pdo = header_end.div_ceil(align) * align;
        C2hLayout {
            hlen,
            pdo,
            plen: pdo + data_len + n.dd_len(),
        }
    }
}

/// Length of the header of every PDU `encode_c2h` writes: the common header and 16 bytes
/// (C2HData, CapsuleResp and R2T alike).
const C2H_HLEN: usize = CH_LEN + 16;
const _: () = assert!(C2H_HLEN == DATA_HLEN && C2H_HLEN == RESP_HLEN);

/// Write the header (and header digest, and zero padding) of a controller PDU into
/// `out[..layout.pdo or header end]`; `specific` is the header after the common header.
///
/// The header is built in a fixed-size array and stored with one copy: writing it field by
/// field into a slice of run-time length (with a fill and a copy of run-time lengths) took
/// about 190 instructions for the two PDUs of a 4 KiB read (callgrind), more than the rest
/// of the PDU's encoding.
#[inline]
fn encode_c2h(
    out: &mut [u8],
    ty: u8,
    extra_flags: u8,
    l: &C2hLayout,
    specific: &[u8; 16],
    n: &Negotiated,
) {
    debug_assert_eq!(l.hlen, C2H_HLEN);
    let has_data = l.pdo != 0;
    let mut f = extra_flags;
    if n.hdgst {
        f |= flags::HDGSTF;
    }
    if n.ddgst && has_data {
        f |= flags::DDGSTF;
    }
    let mut h = [0u8; C2H_HLEN];
    CommonHeader {
        pdu_type: ty,
        flags: f,
        hlen: small(C2H_HLEN),
        pdo: u8::try_from(l.pdo).unwrap_or(0),
        plen: u32::try_from(l.plen).unwrap_or(u32::MAX),
    }
    .write(&mut h);
    h[CH_LEN..].copy_from_slice(specific);
    let Some(dst) = out.get_mut(..C2H_HLEN) else {
        return;
    };
    dst.copy_from_slice(&h);
    let mut end = C2H_HLEN;
    if n.hdgst {
        let d = crc32c::crc32c(&h).to_le_bytes();
        if let Some(dst) = out.get_mut(end..end + DIGEST_LEN) {
            dst.copy_from_slice(&d);
        }
        end += DIGEST_LEN;
    }
    if has_data
        && l.pdo > end
        && let Some(pad) = out.get_mut(end..l.pdo)
    {
        pad.fill(0);
    }
}

/// The bytes before the data of a C2H PDU: its header, digest and padding.
pub fn prefix_len(l: &C2hLayout, n: &Negotiated) -> usize {
    if l.pdo != 0 {
        l.pdo
    } else {
        l.hlen + n.hd_len()
    }
}

/// A CapsuleResp into `out` (at least `C2hLayout::new(RESP_HLEN, 0, n).plen` bytes).
pub fn encode_resp(out: &mut [u8], cqe: &Cqe, n: &Negotiated) -> usize {
    let l = C2hLayout::new(RESP_HLEN, 0, n);
    let mut specific = [0u8; 16];
    specific.copy_from_slice(cqe.as_bytes());
    encode_c2h(out, pdu_type::CAPSULE_RESP, 0, &l, &specific, n);
    l.plen
}

/// An R2T asking for `len` bytes at offset `offset` of command `cccid`.
pub fn encode_r2t(
    out: &mut [u8],
    cccid: u16,
    ttag: u16,
    offset: u32,
    len: u32,
    n: &Negotiated,
) -> usize {
    let l = C2hLayout::new(DATA_HLEN, 0, n);
    let mut s = [0u8; 16];
    s[0..2].copy_from_slice(&cccid.to_le_bytes());
    s[2..4].copy_from_slice(&ttag.to_le_bytes());
    s[4..8].copy_from_slice(&offset.to_le_bytes());
    s[8..12].copy_from_slice(&len.to_le_bytes());
    encode_c2h(out, pdu_type::R2T, 0, &l, &s, n);
    l.plen
}

/// The header part of a C2HData PDU carrying `len` bytes at `offset`; the caller puts the
/// data at `layout.pdo` and then calls [`finish_c2h_data`]. Returns the layout.
pub fn encode_c2h_data_header(
    out: &mut [u8],
    cccid: u16,
    offset: u32,
    len: u32,
    success: bool,
    n: &Negotiated,
) -> C2hLayout {
    let l = C2hLayout::new(DATA_HLEN, len as usize, n);
    encode_c2h_data_header_as(out, &l, cccid, offset, len, success, n);
    l
}

/// [`encode_c2h_data_header`] with the layout the caller already worked out (`l`, from
/// `C2hLayout::new(DATA_HLEN, len, n)`), not worked out again for each PDU.
pub fn encode_c2h_data_header_as(
    out: &mut [u8],
    l: &C2hLayout,
    cccid: u16,
    offset: u32,
    len: u32,
    success: bool,
    n: &Negotiated,
) {
    let mut s = [0u8; 16];
    s[0..2].copy_from_slice(&cccid.to_le_bytes());
    s[4..8].copy_from_slice(&offset.to_le_bytes());
    s[8..12].copy_from_slice(&len.to_le_bytes());
    let f = flags::LAST_PDU | if success { flags::SUCCESS } else { 0 };
    encode_c2h(out, pdu_type::C2H_DATA, f, l, &s, n);
}

/// Append the data digest of a C2HData PDU whose data is already in place.
pub fn finish_c2h_data(pdu: &mut [u8], l: &C2hLayout, n: &Negotiated) {
    if n.ddgst {
        let end = l.plen - DIGEST_LEN;
        let d = crc32c::crc32c(&pdu[l.pdo..end]).to_le_bytes();
        pdu[end..l.plen].copy_from_slice(&d);
    }
}

/// A C2HTermReq reporting `err`, with up to [`TERM_DATA_MAX`] bytes of the offending header.
/// Never digested (the host may not have negotiated yet).
pub fn encode_term_req(out: &mut [u8], err: &PduError, offending: &[u8]) -> usize {
    let data = &offending[..offending.len().min(TERM_DATA_MAX)];
    let plen = DATA_HLEN + data.len();
    CommonHeader {
        pdu_type: pdu_type::C2H_TERM_REQ,
        flags: 0,
        hlen: small(DATA_HLEN),
        pdo: 0,
        plen: u32::try_from(plen).unwrap_or(u32::MAX),
    }
    .write(out);
    out[CH_LEN..DATA_HLEN].fill(0);
    out[8..10].copy_from_slice(&(err.fes as u16).to_le_bytes());
    out[10..14].copy_from_slice(&err.fei.to_le_bytes());
    out[DATA_HLEN..plen].copy_from_slice(data);
    plen
}

/// The longest PDU [`encode_resp`], [`encode_r2t`] or [`encode_term_req`] writes.
pub const MAX_SMALL_PDU: usize = DATA_HLEN + TERM_DATA_MAX + DIGEST_LEN;
