// SPDX-License-Identifier: Apache-2.0
//! PDU framing on the host side: ICReq/ICResp, and sending PDUs with their digests. PDUs
//! are queued in the send buffer and go out together at the next flush, one `write` for a
//! whole batch of capsules; receiving is `receive.rs`.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::receive::{Received, Receiver};
use super::{CommandBuffers, HostError, HostOptions};
use crate::pdu::{CH_LEN, DIGEST_LEN, IC_HLEN, flags, pdu_type as ty};

/// ICReq and ICResp are 128 bytes, header only.
const IC_LEN_U8: u8 = 128;
const _: () = assert!(IC_LEN_U8 as usize == IC_HLEN);
/// The receive buffer: room for the responses and read data of a whole pass at depth
/// (64 C2HData PDUs of 4 KiB), taken by one read.
const RECEIVE_BUFFER: usize = 256 * 1024;

/// One connection's socket, what ICReq/ICResp negotiated, and its two buffers.
#[derive(Debug)]
pub(super) struct Framer {
    pub(super) sock: TcpStream,
    hdgst: bool,
    ddgst: bool,
    pub(super) maxh2cdata: u32,
    /// PDUs queued to send; `tx[tx_sent..]` is what the socket has not taken yet. Grows
    /// at most to what the commands in flight carry, and keeps that capacity.
    tx: Vec<u8>,
    tx_sent: usize,
    pub(super) rx: Receiver,
    /// How long a blocking wait (a flush, a command's answer) may take.
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
            tx: Vec::with_capacity(out_cap),
            tx_sent: 0,
            rx: Receiver::new(RECEIVE_BUFFER, resp[11] & 1 != 0, resp[11] & 2 != 0),
            timeout: opts.timeout,
        })
    }

    /// Queue a PDU of type `kind` for the next flush: `specific` is its header after the
    /// common header, `data` its data.
    pub(super) fn queue(
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
        let out = &mut self.tx;
        let at = out.len();
        out.extend_from_slice(&[kind, f, hlen8, pdo8]);
        out.extend_from_slice(&plen.to_le_bytes());
        out.extend_from_slice(specific);
        if hd > 0 {
            let c = crc32c::crc32c(out.get(at..).unwrap_or_default());
            out.extend_from_slice(&c.to_le_bytes());
        }
        out.extend_from_slice(data);
        if dd > 0 {
            out.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
        }
        Ok(())
    }

    /// Reserve send buffer room for `bytes` of queued PDUs, once, before the I/O.
    pub(super) fn reserve(&mut self, bytes: usize) {
        self.tx.reserve(bytes.saturating_sub(self.tx.len()));
    }

    /// Write what the socket takes of the queued PDUs; true when none is left. One `write`
    /// while the socket takes everything.
    pub(super) fn flush(&mut self) -> Result<bool, HostError> {
        while let Some(rest) = self.tx.get(self.tx_sent..).filter(|r| !r.is_empty()) {
            match self.sock.write(rest) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero).into()),
                Ok(n) => self.tx_sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e.into()),
            }
        }
        self.tx.clear();
        self.tx_sent = 0;
        Ok(true)
    }

    /// Flush all that is queued, waiting out a full socket up to the timeout.
    pub(super) fn flush_all(&mut self) -> Result<(), HostError> {
        let since = Instant::now();
        while !self.flush()? {
            if since.elapsed() > self.timeout {
                return Err(io::Error::from(io::ErrorKind::TimedOut).into());
            }
            std::hint::spin_loop();
        }
        Ok(())
    }

    /// The next PDU, received now if none is buffered, waiting up to the timeout.
    pub(super) fn wait(&mut self, bufs: &mut dyn CommandBuffers) -> Result<Received, HostError> {
        let since = Instant::now();
        loop {
            if let Some(r) = self.rx.next(bufs)? {
                return Ok(r);
            }
            if self.rx.receive(&mut self.sock, bufs)?.is_none() {
                if since.elapsed() > self.timeout {
                    return Err(io::Error::from(io::ErrorKind::TimedOut).into());
                }
                std::hint::spin_loop();
            }
        }
    }
}
