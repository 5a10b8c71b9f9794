// SPDX-License-Identifier: Apache-2.0
//! The host's receive side. One read takes whatever the target has sent into a fixed
//! buffer, and whole PDUs are parsed from there, each header checked field by field, with
//! no further system call: at queue depth one read brings many responses. C2HData data
//! found in the buffer is copied into its command's buffer; when a PDU's data is still to
//! come and nothing else is buffered, the next read places it straight into the command's
//! buffer (and what follows it into the receive buffer), so a large read is not copied
//! twice.
//!
//! After a large C2HData PDU (at least [`LARGE_DATA`] bytes) the reads take no more than
//! the next PDU header behind the data, so the next large PDU's data is read straight into
//! its command's buffer too: one read per PDU instead of a copy of most of its data. Small
//! PDUs are read many to a read, as before.

use std::io::{self, IoSliceMut, Read};
use std::net::TcpStream;

use nvmemu_spec::Cqe;
use zerocopy::FromBytes;

use super::{CommandBuffers, HostError};
use crate::buffers::ByteBuf;
use crate::pdu::{CH_LEN, DATA_HLEN, DIGEST_LEN, RESP_HLEN, flags, pdu_type as ty};

/// R2T header length (common header, CID, TTAG, offset, length, reserved).
const R2T_HLEN: usize = 24;
/// C2HTermReq header length.
const TERM_HLEN: usize = 24;
/// C2HData of this many bytes or more puts the receiver in header-sized reads: the
/// system call a PDU then costs is cheaper than copying its data once more.
const LARGE_DATA: usize = 32 * 1024;

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

/// A C2HData PDU whose header is checked and whose data is arriving.
#[derive(Debug, Clone, Copy)]
struct Arriving {
    cid: u16,
    /// Where the PDU's data goes in the command's buffer.
    offset: usize,
    len: usize,
    /// Data bytes placed so far.
    placed: usize,
    success: bool,
    /// CRC32C of the data placed so far (data digests on).
    crc: u32,
}

impl Arriving {
    /// The part of the command's buffer still to be filled.
    fn rest<'a>(&self, bufs: &'a mut dyn CommandBuffers) -> Result<&'a mut [u8], HostError> {
        let (from, to) = (self.offset + self.placed, self.offset + self.len);
        bufs.buffer(self.cid)
            .and_then(|b| b.get_mut(from..to))
            .ok_or(HostError::Protocol("C2HData for a CID not outstanding"))
    }
}

/// A parsed header: a whole PDU, or the start of C2HData.
enum Header {
    Incomplete,
    Done(Received),
    Data(Arriving),
}

/// The receive buffer and the PDU being parsed.
#[derive(Debug)]
pub(super) struct Receiver {
    rx: ByteBuf,
    hdgst: bool,
    ddgst: bool,
    data: Option<Arriving>,
    /// The last C2HData was large: read no further than the next PDU header.
    large: bool,
}

impl Receiver {
    pub(super) fn new(capacity: usize, hdgst: bool, ddgst: bool) -> Receiver {
        Receiver {
            rx: ByteBuf::new(capacity),
            hdgst,
            ddgst,
            data: None,
            large: false,
        }
    }

    /// Bytes of the next PDU header (every PDU a host receives has a 24-byte header),
    /// with its digest.
    fn next_header_len(&self) -> usize {
        RESP_HLEN + if self.hdgst { DIGEST_LEN } else { 0 }
    }

    /// The next whole PDU among the bytes received so far (None: more must arrive). Makes
    /// no system call.
    pub(super) fn next(
        &mut self,
        bufs: &mut dyn CommandBuffers,
    ) -> Result<Option<Received>, HostError> {
        if self.data.is_none() {
            match self.header(bufs)? {
                Header::Incomplete => return Ok(None),
                Header::Done(r) => return Ok(Some(r)),
                Header::Data(d) => self.data = Some(d),
            }
        }
        self.data_step(bufs)
    }

    /// One read from `sock`; Some(bytes) or None when nothing was there (on a blocking
    /// socket: its read timeout passed). End of stream is an error.
    pub(super) fn receive(
        &mut self,
        sock: &mut TcpStream,
        bufs: &mut dyn CommandBuffers,
    ) -> Result<Option<usize>, HostError> {
        let read = match self.data {
            Some(d) if self.rx.is_empty() && d.placed < d.len => self.read_direct(sock, d, bufs),
            None if self.large && self.rx.len() < self.next_header_len() => self.read_header(sock),
            _ => self.rx.fill_from(sock).map_err(HostError::from),
        };
        match read {
            Ok(0) => Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => Ok(Some(n)),
            Err(HostError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Read no more than the rest of the next PDU header into the receive buffer.
    fn read_header(&mut self, sock: &mut TcpStream) -> Result<usize, HostError> {
        let want = self.next_header_len().saturating_sub(self.rx.len());
        let free = self.rx.spare();
        let k = want.min(free.len());
        let n = sock.read(&mut free[..k])?;
        self.rx.commit(n);
        Ok(n)
    }

    /// Read the rest of `d`'s data into its command's buffer and what follows into the
    /// receive buffer, in one call: after large data, only its digest and the next header.
    fn read_direct(
        &mut self,
        sock: &mut TcpStream,
        mut d: Arriving,
        bufs: &mut dyn CommandBuffers,
    ) -> Result<usize, HostError> {
        let dst = d.rest(bufs)?;
        let want = dst.len();
        let tail = if self.large {
            self.next_header_len() + if self.ddgst { DIGEST_LEN } else { 0 }
        } else {
            usize::MAX
        };
        let spare = self.rx.spare();
        let k = tail.min(spare.len());
        let spare = &mut spare[..k];
        let n = sock.read_vectored(&mut [IoSliceMut::new(&mut *dst), IoSliceMut::new(spare)])?;
        let direct = n.min(want);
        if self.ddgst {
            d.crc = crc32c::crc32c_append(d.crc, dst.get(..direct).unwrap_or_default());
        }
        d.placed += direct;
        self.rx.commit(n - direct);
        self.data = Some(d);
        Ok(n)
    }

    /// Check the header at the front of the buffer, once it is all there.
    fn header(&mut self, bufs: &mut dyn CommandBuffers) -> Result<Header, HostError> {
        let avail = self.rx.data();
        let Some(ch) = avail.get(..CH_LEN) else {
            return Ok(Header::Incomplete);
        };
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
        let hend = hlen + if digested { DIGEST_LEN } else { 0 };
        if plen < hend {
            return Err(HostError::Protocol("PLEN shorter than the header"));
        }
        let Some(header) = avail.get(..hend) else {
            return Ok(Header::Incomplete);
        };
        if digested && header[hlen..] != crc32c::crc32c(&header[..hlen]).to_le_bytes() {
            return Err(HostError::Protocol("header digest mismatch"));
        }
        let h = &header[CH_LEN..hlen];
        let without_data = |what| {
            (plen == hend)
                .then_some(())
                .ok_or(HostError::Protocol(what))
        };
        let parsed = match pdu_type {
            ty::CAPSULE_RESP => {
                without_data("CapsuleResp with data")?;
                let (cqe, _) = Cqe::read_from_prefix(h)
                    .map_err(|_| HostError::Protocol("short CapsuleResp"))?;
                Header::Done(Received::Response(cqe))
            }
            ty::R2T => {
                without_data("R2T with data")?;
                Header::Done(Received::R2t {
                    cid: u16::from_le_bytes([h[0], h[1]]),
                    ttag: u16::from_le_bytes([h[2], h[3]]),
                    offset: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
                    len: u32::from_le_bytes([h[8], h[9], h[10], h[11]]),
                })
            }
            ty::C2H_TERM_REQ => {
                return Err(HostError::Terminated {
                    fes: u16::from_le_bytes([h[0], h[1]]),
                    fei: u32::from_le_bytes([h[2], h[3], h[4], h[5]]),
                });
            }
            _ => {
                let d = self.data_header(f, h, (hend, pdo, plen), bufs)?;
                self.large = d.len >= LARGE_DATA;
                Header::Data(d)
            }
        };
        self.rx.consume(hend);
        Ok(parsed)
    }

    /// Check a C2HData header `h` (flags `f`) against the command it names.
    fn data_header(
        &self,
        f: u8,
        h: &[u8],
        (hend, pdo, plen): (usize, usize, usize),
        bufs: &mut dyn CommandBuffers,
    ) -> Result<Arriving, HostError> {
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
        let success = f & flags::SUCCESS != 0;
        if success && f & flags::LAST_PDU == 0 {
            return Err(HostError::Protocol("C2HData SUCCESS without LAST_PDU"));
        }
        let into = bufs
            .buffer(cid)
            .ok_or(HostError::Protocol("C2HData for a CID not outstanding"))?;
        if offset.checked_add(len).is_none_or(|end| end > into.len()) {
            return Err(HostError::Protocol("C2HData beyond the command's buffer"));
        }
        Ok(Arriving {
            cid,
            offset,
            len,
            placed: 0,
            success,
            crc: 0,
        })
    }

    /// Place the buffered part of the data arriving; the PDU once its data (and digest)
    /// are all there.
    fn data_step(&mut self, bufs: &mut dyn CommandBuffers) -> Result<Option<Received>, HostError> {
        let Some(mut d) = self.data else {
            return Ok(None);
        };
        if d.placed < d.len {
            let dst = d.rest(bufs)?;
            let n = dst.len().min(self.rx.len());
            let (dst, src) = (&mut dst[..n], &self.rx.data()[..n]);
            dst.copy_from_slice(src);
            if self.ddgst {
                d.crc = crc32c::crc32c_append(d.crc, dst);
            }
            self.rx.consume(n);
            d.placed += n;
        }
        self.data = Some(d);
        if d.placed < d.len {
            return Ok(None);
        }
        if self.ddgst {
            let Some(digest) = self.rx.data().get(..DIGEST_LEN) else {
                return Ok(None);
            };
            if digest != d.crc.to_le_bytes() {
                return Err(HostError::Protocol("data digest mismatch"));
            }
            self.rx.consume(DIGEST_LEN);
        }
        self.data = None;
        Ok(Some(Received::Data {
            cid: d.cid,
            offset: d.offset,
            len: d.len,
            last_success: d.success,
        }))
    }
}
