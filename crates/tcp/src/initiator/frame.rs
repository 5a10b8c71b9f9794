// SPDX-License-Identifier: Apache-2.0
//! PDU framing on the host side: ICReq/ICResp, sending PDUs with their digests, and
//! receiving the controller's PDUs checked field by field.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use nvmemu_spec::Cqe;

use super::{CommandBuffers, HostError, HostOptions, read_cqe};
use crate::pdu::{CH_LEN, DATA_HLEN, DIGEST_LEN, IC_HLEN, RESP_HLEN, flags, pdu_type as ty};

/// R2T header length (common header, CID, TTAG, offset, length, reserved).
const R2T_HLEN: usize = 24;
/// C2HTermReq header length.
const TERM_HLEN: usize = 24;
/// ICReq and ICResp are 128 bytes, header only.
const IC_LEN_U8: u8 = 128;
const _: () = assert!(IC_LEN_U8 as usize == IC_HLEN);
/// The largest header the controller sends, with its digest.
const MAX_HEADER: usize = IC_HLEN + DIGEST_LEN;

/// What one received PDU meant.
#[derive(Debug)]
pub enum Received {
    /// A CapsuleResp.
    Response(Cqe),
    /// C2HData of `len` bytes placed at `offset` in command `cid`'s buffer;
    /// `last_success` when the target completed the command with it (no CapsuleResp).
    Data {
        /// The command.
        cid: u16,
        /// Where in its buffer.
        offset: usize,
        /// How many bytes.
        len: usize,
        /// SUCCESS: the command is complete.
        last_success: bool,
    },
    /// The target asks for `len` bytes of command `cid`'s write data from `offset`.
    R2t {
        /// The command.
        cid: u16,
        /// The transfer tag the H2CData PDUs carry back.
        ttag: u16,
        /// First byte asked for.
        offset: u32,
        /// Bytes asked for.
        len: u32,
    },
}

/// One connection's socket and what ICReq/ICResp negotiated.
#[derive(Debug)]
pub(super) struct Framer {
    pub(super) sock: TcpStream,
    hdgst: bool,
    ddgst: bool,
    pub(super) maxh2cdata: u32,
    /// Outgoing PDU, reused (its capacity is reached once, at the largest PDU sent).
    out: Vec<u8>,
    header: [u8; MAX_HEADER],
    /// How long the rest of a begun PDU, or room to send one, may take.
    timeout: Duration,
}

impl Framer {
    /// Send ICReq (PFV 0, HPDA 0, MAXR2T 0: one R2T outstanding) and check ICResp.
    pub(super) fn handshake(mut sock: TcpStream, opts: &HostOptions) -> Result<Framer, HostError> {
        let mut req = [0u8; IC_HLEN];
        req[0] = ty::IC_REQ;
        req[2] = IC_LEN_U8;
        req[4..8].copy_from_slice(&u32::from(IC_LEN_U8).to_le_bytes());
        let dgst = u8::from(opts.hdgst) | (u8::from(opts.ddgst) << 1);
        req[11] = dgst;
        sock.write_all(&req)?;
        let mut resp = [0u8; IC_HLEN];
        sock.read_exact(&mut resp)?;
        let plen = u32::from_le_bytes([resp[4], resp[5], resp[6], resp[7]]);
        if resp[0] != ty::IC_RESP || resp[2] != IC_LEN_U8 || plen != u32::from(IC_LEN_U8) {
            return Err(HostError::Protocol("ICResp expected (type 01h, 128 bytes)"));
        }
        if resp[8..10] != [0, 0] {
            return Err(HostError::Protocol("ICResp PFV is not 0"));
        }
        if resp[10] != 0 {
            return Err(HostError::Protocol(
                "ICResp CPDA other than 0 is not supported",
            ));
        }
        if resp[11] & !dgst != 0 {
            return Err(HostError::Protocol("ICResp enables a digest not asked for"));
        }
        let maxh2cdata = u32::from_le_bytes([resp[12], resp[13], resp[14], resp[15]]);
        if maxh2cdata < 4096 || maxh2cdata % 4 != 0 {
            return Err(HostError::Protocol(
                "ICResp MAXH2CDATA below 4096 or unaligned",
            ));
        }
        let out_cap = crate::pdu::CMD_HLEN + 2 * DIGEST_LEN + 8192.max(opts.max_transfer);
        Ok(Framer {
            sock,
            hdgst: resp[11] & 1 != 0,
            ddgst: resp[11] & 2 != 0,
            maxh2cdata,
            out: Vec::with_capacity(out_cap),
            header: [0; MAX_HEADER],
            timeout: opts.timeout,
        })
    }

    /// Send a PDU of type `kind`: `specific` is its header after the common header.
    pub(super) fn send(
        &mut self,
        kind: u8,
        pdu_flags: u8,
        specific: &[u8],
        data: &[u8],
    ) -> Result<(), HostError> {
        let hlen = CH_LEN + specific.len();
        let hd = if self.hdgst { DIGEST_LEN } else { 0 };
        let dd = if self.ddgst && !data.is_empty() {
            DIGEST_LEN
        } else {
            0
        };
        let pdo = if data.is_empty() { 0 } else { hlen + hd };
        let plen = u32::try_from(hlen + hd + data.len() + dd)
            .map_err(|_| HostError::Protocol("PDU too long"))?;
        let too_long = |_| HostError::Protocol("PDU header too long");
        let (hlen8, pdo8) = (
            u8::try_from(hlen).map_err(too_long)?,
            u8::try_from(pdo).map_err(too_long)?,
        );
        let mut f = pdu_flags;
        if hd > 0 {
            f |= flags::HDGSTF;
        }
        if dd > 0 {
            f |= flags::DDGSTF;
        }
        let out = &mut self.out;
        out.clear();
        out.extend_from_slice(&[kind, f, hlen8, pdo8]);
        out.extend_from_slice(&plen.to_le_bytes());
        out.extend_from_slice(specific);
        if hd > 0 {
            let c = crc32c::crc32c(out);
            out.extend_from_slice(&c.to_le_bytes());
        }
        out.extend_from_slice(data);
        if dd > 0 {
            out.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
        }
        write_spin(&mut self.sock, out, self.timeout)?;
        Ok(())
    }

    /// Receive one PDU if one has begun to arrive (`None`: nothing yet, on a
    /// non-blocking socket). C2HData goes into `bufs`' buffer of its CID, at its offset.
    pub(super) fn poll(
        &mut self,
        bufs: &mut dyn CommandBuffers,
    ) -> Result<Option<Received>, HostError> {
        let mut ch = [0u8; CH_LEN];
        let got = match self.sock.read(&mut ch) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        read_spin(&mut self.sock, &mut ch[got..], self.timeout)?;
        self.recv_rest(ch, bufs).map(Some)
    }

    /// The PDU after its common header `ch`.
    fn recv_rest(
        &mut self,
        ch: [u8; CH_LEN],
        bufs: &mut dyn CommandBuffers,
    ) -> Result<Received, HostError> {
        let (pdu_type, f, hlen, pdo) = (ch[0], ch[1], usize::from(ch[2]), usize::from(ch[3]));
        let plen = u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]) as usize;
        let want_hlen = match pdu_type {
            ty::CAPSULE_RESP => RESP_HLEN,
            ty::C2H_DATA => DATA_HLEN,
            ty::R2T => R2T_HLEN,
            ty::C2H_TERM_REQ => TERM_HLEN,
            _ => return Err(HostError::Protocol("unexpected PDU type")),
        };
        if hlen != want_hlen {
            return Err(HostError::Protocol("HLEN wrong for the PDU type"));
        }
        let digested = pdu_type != ty::C2H_TERM_REQ && self.hdgst;
        if digested != (f & flags::HDGSTF != 0) {
            return Err(HostError::Protocol(
                "HDGSTF differs from what ICResp negotiated",
            ));
        }
        let hd = if digested { DIGEST_LEN } else { 0 };
        if plen < hlen + hd {
            return Err(HostError::Protocol("PLEN shorter than the header"));
        }
        self.header[..CH_LEN].copy_from_slice(&ch);
        read_spin(
            &mut self.sock,
            &mut self.header[CH_LEN..hlen + hd],
            self.timeout,
        )?;
        if hd > 0 {
            let c = crc32c::crc32c(&self.header[..hlen]);
            if self.header[hlen..hlen + hd] != c.to_le_bytes() {
                return Err(HostError::Protocol("header digest mismatch"));
            }
        }
        let h = &self.header[CH_LEN..hlen];
        match pdu_type {
            ty::CAPSULE_RESP => {
                if plen != hlen + hd {
                    return Err(HostError::Protocol("CapsuleResp with data"));
                }
                let cqe = read_cqe(h).ok_or(HostError::Protocol("short CapsuleResp"))?;
                Ok(Received::Response(cqe))
            }
            ty::R2T => {
                if plen != hlen + hd {
                    return Err(HostError::Protocol("R2T with data"));
                }
                Ok(Received::R2t {
                    cid: u16::from_le_bytes([h[0], h[1]]),
                    ttag: u16::from_le_bytes([h[2], h[3]]),
                    offset: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
                    len: u32::from_le_bytes([h[8], h[9], h[10], h[11]]),
                })
            }
            ty::C2H_TERM_REQ => Err(HostError::Terminated {
                fes: u16::from_le_bytes([h[0], h[1]]),
                fei: u32::from_le_bytes([h[2], h[3], h[4], h[5]]),
            }),
            _ => self.recv_data(f, (hlen + hd, pdo, plen), bufs),
        }
    }

    /// The rest of a C2HData PDU whose header (`hend` bytes with digest) is in `self.header`.
    fn recv_data(
        &mut self,
        f: u8,
        (hend, pdo, plen): (usize, usize, usize),
        bufs: &mut dyn CommandBuffers,
    ) -> Result<Received, HostError> {
        let h = &self.header[CH_LEN..DATA_HLEN];
        let cid = u16::from_le_bytes([h[0], h[1]]);
        let offset = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
        let len = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
        if self.ddgst != (f & flags::DDGSTF != 0) {
            return Err(HostError::Protocol(
                "DDGSTF differs from what ICResp negotiated",
            ));
        }
        let dd = if self.ddgst { DIGEST_LEN } else { 0 };
        // HPDA 0: the data may start right after the header (and its digest).
        if pdo != hend || plen != pdo + len + dd || len == 0 {
            return Err(HostError::Protocol("C2HData PDO, PLEN and DATAL disagree"));
        }
        let into = bufs
            .buffer(cid)
            .ok_or(HostError::Protocol("C2HData for a CID not outstanding"))?;
        let dst = offset
            .checked_add(len)
            .and_then(|end| into.get_mut(offset..end))
            .ok_or(HostError::Protocol("C2HData beyond the command's buffer"))?;
        read_spin(&mut self.sock, dst, self.timeout)?;
        if dd > 0 {
            let mut d = [0u8; DIGEST_LEN];
            read_spin(&mut self.sock, &mut d, self.timeout)?;
            if d != crc32c::crc32c(dst).to_le_bytes() {
                return Err(HostError::Protocol("data digest mismatch"));
            }
        }
        let last = f & flags::LAST_PDU != 0;
        let success = f & flags::SUCCESS != 0;
        if success && !last {
            return Err(HostError::Protocol("C2HData SUCCESS without LAST_PDU"));
        }
        Ok(Received::Data {
            cid,
            offset,
            len,
            last_success: success,
        })
    }
}

/// Fill `buf` from `sock`, waiting out a non-blocking socket's empty moments (the rest of
/// a PDU that has begun is on its way) up to `timeout`.
fn read_spin(sock: &mut TcpStream, buf: &mut [u8], timeout: Duration) -> io::Result<()> {
    let total = buf.len();
    spin(total, timeout, io::ErrorKind::UnexpectedEof, |at| {
        sock.read(&mut buf[at..])
    })
}

/// Write all of `buf`, waiting out a full send buffer up to `timeout`.
fn write_spin(sock: &mut TcpStream, buf: &[u8], timeout: Duration) -> io::Result<()> {
    spin(buf.len(), timeout, io::ErrorKind::WriteZero, |at| {
        sock.write(&buf[at..])
    })
}

/// Repeat `op(done so far)` until `total` bytes are moved; `WouldBlock` is retried until
/// `timeout` passes, a zero-byte move is the error `zero`.
fn spin(
    total: usize,
    timeout: Duration,
    zero: io::ErrorKind,
    mut op: impl FnMut(usize) -> io::Result<usize>,
) -> io::Result<()> {
    let mut at = 0;
    let mut since: Option<Instant> = None;
    while at < total {
        match op(at) {
            Ok(0) => return Err(zero.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if since.get_or_insert_with(Instant::now).elapsed() > timeout {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                std::hint::spin_loop();
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
