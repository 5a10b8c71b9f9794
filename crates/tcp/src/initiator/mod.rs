// SPDX-License-Identifier: Apache-2.0
//! The host side of NVMe/TCP: one [`HostQueue`] per TCP connection (ICReq/ICResp, command
//! capsules with in-capsule data, R2T answered with H2CData, C2HData gathered into the
//! caller's buffer, optional digests) and a [`HostController`] on top (Fabrics Connect,
//! Property Get/Set, enable, Keep Alive, Disconnect).
//!
//! A queue batches as SPDK's host does: [`HostQueue::submit`] only queues a capsule, and
//! [`HostQueue::flush`] sends all that is queued in one `write`; [`HostQueue::receive`]
//! takes all the target has sent in one read, and [`HostQueue::next_pdu`] parses PDUs from it
//! without a system call.
//!
//! What the target sends is input like any other: every PDU header is checked (type, lengths,
//! data offset, digests, the CID and the data range of the command it names) and a bad one
//! is a [`HostError`], never a panic. The buffers are the queue's own, sized once at
//! connect: a command makes no allocation.

mod controller;
mod frame;
mod receive;

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use nvmemu_spec::{Cqe, Sqe, Status};
use zerocopy::IntoBytes;

pub use controller::{HostController, HostIdentity};
use frame::Framer;
pub use receive::Received;

use crate::pdu::{flags, pdu_type as ty};

/// Why a host-side operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The socket failed or the target closed it.
    #[error("NVMe/TCP connection")]
    Io(#[from] io::Error),
    /// The target sent something the TCP binding does not allow.
    #[error("NVMe/TCP target sent a bad PDU: {0}")]
    Protocol(&'static str),
    /// The target ended the connection with a C2HTermReq.
    #[error("NVMe/TCP target ended the connection (C2HTermReq FES {fes:#x}, FEI {fei})")]
    Terminated {
        /// Fatal Error Status.
        fes: u16,
        /// Fatal Error Information.
        fei: u32,
    },
    /// A command completed with an error status.
    #[error("{what} failed: {status}")]
    Status {
        /// The command.
        what: &'static str,
        /// Its status.
        status: Status,
    },
}

/// Options of one host connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostOptions {
    /// Ask for header digests (CRC32C).
    pub hdgst: bool,
    /// Ask for data digests (CRC32C).
    pub ddgst: bool,
    /// How long a read from the target may block.
    pub timeout: Duration,
    /// The largest transfer one command moves (sizes the send buffer once).
    pub max_transfer: usize,
}

impl Default for HostOptions {
    fn default() -> HostOptions {
        HostOptions {
            hdgst: false,
            ddgst: false,
            timeout: Duration::from_secs(10),
            max_transfer: 128 * 1024,
        }
    }
}

/// Where a command's data goes.
#[derive(Debug)]
pub enum Transfer<'a> {
    /// No data.
    None,
    /// Host to controller (Write, Connect, Set Features with data).
    Out(&'a [u8]),
    /// Controller to host (Read, Identify, Get Log Page).
    In(&'a mut [u8]),
}

/// One NVMe/TCP connection: an admin or an I/O queue.
#[derive(Debug)]
pub struct HostQueue {
    framer: Framer,
    /// Largest data a capsule may carry: 8 KiB on the admin queue, the controller's
    /// IOCCSZ less the SQE on an I/O queue (set by [`HostController`]).
    icd_max: u32,
    next_cid: u16,
}

/// SGL descriptor identifiers (Data Block with the offset and transport subtypes).
const SGL_INCAPSULE: u8 = 0x01;
const SGL_TRANSPORT: u8 = 0x5A;
/// PSDT = 01b: the command carries an SGL.
const PSDT_SGL: u32 = 1 << 14;

impl HostQueue {
    /// Connect to `addr` and exchange ICReq/ICResp.
    pub fn connect(addr: SocketAddr, opts: &HostOptions) -> Result<HostQueue, HostError> {
        let sock = TcpStream::connect_timeout(&addr, opts.timeout)?;
        sock.set_read_timeout(Some(opts.timeout))?;
        sock.set_nodelay(true)?;
        let framer = Framer::handshake(sock, opts)?;
        Ok(HostQueue {
            framer,
            icd_max: 0,
            next_cid: 0,
        })
    }

    /// Let capsules carry up to `bytes` of data in-capsule (from IOCCSZ).
    pub fn set_in_capsule_max(&mut self, bytes: u32) {
        self.icd_max = bytes;
    }

    /// The target's MAXH2CDATA.
    pub fn maxh2cdata(&self) -> u32 {
        self.framer.maxh2cdata
    }

    /// Run one command to its completion (its CID is set here), waiting for each PDU up
    /// to the timeout. A write's data goes in-capsule when it fits, otherwise in H2CData
    /// PDUs as the target asks by R2T.
    pub fn exec(&mut self, sqe: Sqe, data: Transfer<'_>) -> Result<Cqe, HostError> {
        self.next_cid = self.next_cid.wrapping_add(1);
        let cid = self.next_cid;
        let (out, mut into): (&[u8], &mut [u8]) = match data {
            Transfer::None => (&[], &mut []),
            Transfer::Out(d) => (d, &mut []),
            Transfer::In(d) => (&[], d),
        };
        let len = out.len().max(into.len());
        let in_capsule = self.submit(cid, sqe, len, (!out.is_empty()).then_some(out))?;
        self.framer.flush_all()?;
        let mut received = 0usize;
        loop {
            let mut one = OneBuffer { cid, buf: into };
            let event = self.framer.wait(&mut one)?;
            into = one.buf;
            match event {
                Received::Response(cqe) => {
                    if cqe.cid != cid {
                        return Err(HostError::Protocol("response for a CID not outstanding"));
                    }
                    return Ok(cqe);
                }
                Received::Data {
                    len, last_success, ..
                } => {
                    received += len;
                    if last_success {
                        if received != into.len() {
                            return Err(HostError::Protocol("SUCCESS before all the data"));
                        }
                        return Ok(Cqe {
                            cid,
                            ..Cqe::default()
                        });
                    }
                }
                Received::R2t {
                    cid: rcid,
                    ttag,
                    offset,
                    len,
                } => {
                    if rcid != cid || in_capsule {
                        return Err(HostError::Protocol("R2T for no write data outstanding"));
                    }
                    self.send_data(cid, ttag, out, offset, len)?;
                    self.framer.flush_all()?;
                }
            }
        }
    }

    /// Queue command `cid` (the SGL and CID are set here) moving `len` bytes, for the next
    /// [`HostQueue::flush`]; write data `out` goes in-capsule when it fits (copied into
    /// the send buffer). Returns whether it did (no R2T may follow).
    pub fn submit(
        &mut self,
        cid: u16,
        mut sqe: Sqe,
        len: usize,
        out: Option<&[u8]>,
    ) -> Result<bool, HostError> {
        let in_capsule = out.is_some_and(|d| d.len() <= self.icd_max as usize);
        let len = u32::try_from(len).map_err(|_| HostError::Protocol("transfer too long"))?;
        let id = if in_capsule {
            SGL_INCAPSULE
        } else {
            SGL_TRANSPORT
        };
        sqe.cdw0 = (sqe.cdw0 & 0xFFFF & !(3 << 14)) | PSDT_SGL | (u32::from(cid) << 16);
        sqe.dptr1 = 0;
        sqe.dptr2 = u64::from(len) | (u64::from(id) << 56);
        let icd = if in_capsule {
            out.unwrap_or_default()
        } else {
            &[]
        };
        self.framer.queue(ty::CAPSULE_CMD, 0, sqe.as_bytes(), icd)?;
        Ok(in_capsule)
    }

    /// Send what is queued, as much as the socket takes now (one `write` when it takes
    /// all); the rest goes at the next flush. Returns whether nothing is left.
    pub fn flush(&mut self) -> Result<bool, HostError> {
        self.framer.flush()
    }

    /// Make room in the send buffer for `bytes` of queued PDUs, once before the I/O, so
    /// the first batches do not grow it.
    pub fn reserve_send(&mut self, bytes: usize) {
        self.framer.reserve(bytes);
    }

    /// The next PDU among those already received (no system call), or None until
    /// [`HostQueue::receive`] brings more. C2HData lands in `bufs`' buffer of its command.
    pub fn next_pdu(
        &mut self,
        bufs: &mut dyn CommandBuffers,
    ) -> Result<Option<Received>, HostError> {
        self.framer.rx.next(bufs)
    }

    /// One read of what the target has sent: true when it brought bytes, false when
    /// there were none (non-blocking mode, or a blocking read's timeout). A C2HData
    /// PDU's data still to come is read straight into `bufs`' buffer of its command.
    pub fn receive(&mut self, bufs: &mut dyn CommandBuffers) -> Result<bool, HostError> {
        let f = &mut self.framer;
        Ok(f.rx.receive(&mut f.sock, bufs)?.is_some())
    }

    /// Non-blocking: [`HostQueue::receive`] and [`HostQueue::flush`] return at once.
    pub fn set_nonblocking(&mut self, on: bool) -> Result<(), HostError> {
        Ok(self.framer.sock.set_nonblocking(on)?)
    }

    /// Answer an R2T: queue `out[offset..offset + len]` in H2CData PDUs of at most
    /// MAXH2CDATA bytes, for the next flush.
    pub fn send_data(
        &mut self,
        cid: u16,
        ttag: u16,
        out: &[u8],
        offset: u32,
        len: u32,
    ) -> Result<(), HostError> {
        let (start, len) = (offset as usize, len as usize);
        let end = start
            .checked_add(len)
            .filter(|&e| e <= out.len() && len > 0)
            .ok_or(HostError::Protocol("R2T outside the command's data"))?;
        let chunk = (self.framer.maxh2cdata as usize).max(1);
        let mut at = start;
        while at < end {
            let n = chunk.min(end - at);
            let last = at + n == end;
            let mut h = [0u8; 16];
            h[0..2].copy_from_slice(&cid.to_le_bytes());
            h[2..4].copy_from_slice(&ttag.to_le_bytes());
            h[4..8].copy_from_slice(&u32::try_from(at).unwrap_or(u32::MAX).to_le_bytes());
            h[8..12].copy_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
            let f = if last { flags::LAST_PDU } else { 0 };
            self.framer
                .queue(ty::H2C_DATA, f, &h, out.get(at..at + n).unwrap_or_default())?;
            at += n;
        }
        Ok(())
    }

    /// Close the connection.
    pub fn close(mut self) {
        let _ = self.framer.flush_all();
        let _ = self.framer.sock.flush();
        let _ = self.framer.sock.shutdown(std::net::Shutdown::Both);
    }
}

/// The data buffers of the commands in flight on a queue, by CID.
pub trait CommandBuffers {
    /// Command `cid`'s buffer for C2HData, if it is outstanding and reads data.
    fn buffer(&mut self, cid: u16) -> Option<&mut [u8]>;
}

/// The one command [`HostQueue::exec`] runs.
struct OneBuffer<'a> {
    cid: u16,
    buf: &'a mut [u8],
}

impl CommandBuffers for OneBuffer<'_> {
    fn buffer(&mut self, cid: u16) -> Option<&mut [u8]> {
        (cid == self.cid).then_some(&mut *self.buf)
    }
}
