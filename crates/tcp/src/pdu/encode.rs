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
    let mut h = [0u8; C2H_HLEN];
    c2h_header(&mut h, ty, extra_flags, l, specific, n);
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
    if l.pdo > end
        && let Some(pad) = out.get_mut(end..l.pdo)
    {
        pad.fill(0);
    }
}

/// The 24 header bytes `encode_c2h` writes, digest and padding aside.
#[inline]
fn c2h_header(
    h: &mut [u8; C2H_HLEN],
    ty: u8,
    extra_flags: u8,
    l: &C2hLayout,
    specific: &[u8; 16],
    n: &Negotiated,
) {
    debug_assert_eq!(l.hlen, C2H_HLEN);
    let mut f = extra_flags;
    if n.hdgst {
        f |= flags::HDGSTF;
    }
    if n.ddgst && l.pdo != 0 {
        f |= flags::DDGSTF;
    }
    CommonHeader {
        pdu_type: ty,
        flags: f,
        hlen: small(C2H_HLEN),
        pdo: u8::try_from(l.pdo).unwrap_or(0),
        plen: u32::try_from(l.plen).unwrap_or(u32::MAX),
    }
    .write(h);
    h[CH_LEN..].copy_from_slice(specific);
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
fn encode_c2h_data_header_as(
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

/// The two headers of a Read's completion on one connection (C2HData, CapsuleResp), with
/// what does not change between commands worked out once: each command then patches only
/// its CCCID, lengths and CQE into 24 bytes. Going through `encode_c2h` for every PDU
/// (flags, layout and bounds worked out again each time) took about 116 instructions per
/// 4 KiB read (callgrind).
#[derive(Debug, Clone, Copy)]
pub struct ReadHeaders {
    /// C2HData's common header without PLEN (its low four bytes, little-endian).
    data_ch: u64,
    /// C2HData's PLEN less the data length: PDO and the data digest.
    data_extra: usize,
    /// CapsuleResp's whole common header.
    resp_ch: u64,
    /// Neither a header digest nor padding: a header is its 24 bytes alone.
    plain: bool,
    /// The SUCCESS flag on C2HData (the host disabled SQ flow control).
    success: bool,
    n: Negotiated,
}

impl ReadHeaders {
    /// The headers of connection `n`; `success`: C2HData carries SUCCESS and no
    /// CapsuleResp follows a successful read.
    pub fn new(n: &Negotiated, success: bool) -> ReadHeaders {
        // Any data length gives the same PDO.
        let l = C2hLayout::new(DATA_HLEN, 1, n);
        let resp = C2hLayout::new(RESP_HLEN, 0, n);
        let mut data = [0u8; C2H_HLEN];
        let data_flags = flags::LAST_PDU | if success { flags::SUCCESS } else { 0 };
        c2h_header(&mut data, pdu_type::C2H_DATA, data_flags, &l, &[0; 16], n);
        let mut resp_h = [0u8; C2H_HLEN];
        c2h_header(&mut resp_h, pdu_type::CAPSULE_RESP, 0, &resp, &[0; 16], n);
        let word = |h: &[u8; C2H_HLEN]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&h[..8]);
            u64::from_le_bytes(w)
        };
        ReadHeaders {
            data_ch: word(&data) & u64::from(u32::MAX),
            data_extra: l.pdo + n.dd_len(),
            resp_ch: word(&resp_h),
            plain: !n.hdgst && l.pdo == C2H_HLEN,
            success,
            n: *n,
        }
    }

    /// Length of a C2HData PDU carrying `len` bytes.
    #[inline]
    pub fn data_plen(&self, len: usize) -> usize {
        self.data_extra + len
    }

    /// Offset of the data in a C2HData PDU.
    #[inline]
    pub fn data_pdo(&self) -> usize {
        self.data_extra - self.n.dd_len()
    }

    /// The layout of a C2HData PDU carrying `len` bytes (`C2hLayout::new`'s).
    #[inline]
    pub fn data_layout(&self, len: usize) -> C2hLayout {
        C2hLayout {
            hlen: DATA_HLEN,
            pdo: self.data_pdo(),
            plen: self.data_plen(len),
        }
    }

    /// Length of a CapsuleResp.
    #[inline]
    pub fn resp_plen(&self) -> usize {
        C2H_HLEN + self.n.hd_len()
    }

    /// The header part of a C2HData PDU carrying all `len` bytes of command `cccid`'s
    /// data (what [`encode_c2h_data_header`] writes) into `out[..data_pdo()]`.
    #[inline]
    pub fn data(&self, out: &mut [u8], cccid: u16, len: u32) {
        if !self.plain {
            let l = self.data_layout(len as usize);
            return encode_c2h_data_header_as(out, &l, cccid, 0, len, self.success, &self.n);
        }
        let plen = self.data_plen(len as usize);
        let plen = u64::try_from(plen)
            .unwrap_or(u64::MAX)
            .min(u64::from(u32::MAX));
        let mut h = [0u8; C2H_HLEN];
        h[..8].copy_from_slice(&(self.data_ch | plen << 32).to_le_bytes());
        // CCCID, a reserved word and DATAO 0; then DATAL and a reserved word.
        h[8..16].copy_from_slice(&u64::from(cccid).to_le_bytes());
        h[16..].copy_from_slice(&u64::from(len).to_le_bytes());
        if let Some(dst) = out.get_mut(..C2H_HLEN) {
            dst.copy_from_slice(&h);
        }
    }

    /// A CapsuleResp carrying `cqe` into `out[..resp_plen()]` (what [`encode_resp`]
    /// writes).
    #[inline]
    pub fn resp(&self, out: &mut [u8], cqe: &Cqe) {
        if !self.plain {
            encode_resp(out, cqe, &self.n);
            return;
        }
        let mut h = [0u8; C2H_HLEN];
        h[..8].copy_from_slice(&self.resp_ch.to_le_bytes());
        h[8..].copy_from_slice(cqe.as_bytes());
        if let Some(dst) = out.get_mut(..C2H_HLEN) {
            dst.copy_from_slice(&h);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    #[test]
    fn read_headers_write_what_the_general_encoders_write() {
        let mut cqe = Cqe::new_zeroed();
        (cqe.dw0, cqe.sq_head, cqe.cid, cqe.status_phase) = (0x1234_5678, 17, 0xbeef, 0x8003);
        for (hdgst, ddgst, hpda, success) in [
            (false, false, 0, false),
            (false, false, 0, true),
            (false, true, 0, false),
            (true, false, 0, false),
            (true, true, 3, true),
            (false, false, 7, false),
        ] {
            let n = Negotiated {
                hdgst,
                ddgst,
                hpda,
                cpda: 0,
                icd_max: 8192,
                maxh2cdata: 131_072,
            };
            let h = ReadHeaders::new(&n, success);
            for len in [512u32, 4096, 131_072] {
                let l = C2hLayout::new(DATA_HLEN, len as usize, &n);
                assert_eq!(h.data_layout(len as usize), l);
                let (mut want, mut got) = ([0u8; 160], [0xa5u8; 160]);
                want[l.pdo..].fill(0xa5);
                encode_c2h_data_header(&mut want, 0x4321, 0, len, success, &n);
                h.data(&mut got, 0x4321, len);
                assert_eq!(want, got, "{n:?} {len}");
            }
            let (mut want, mut got) = ([0xa5u8; 64], [0xa5u8; 64]);
            assert_eq!(encode_resp(&mut want, &cqe, &n), h.resp_plen());
            h.resp(&mut got, &cqe);
            assert_eq!(want, got, "{n:?}");
        }
    }
}
