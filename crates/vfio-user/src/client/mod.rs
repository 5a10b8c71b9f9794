// SPDX-License-Identifier: Apache-2.0
//! A blocking vfio-user client: one request at a time, replies checked against the request.
//!
//! Used by the userspace NVMe driver and by tests. `raw_*` methods send arbitrary bytes for
//! hostile-input tests.
//!
//! Nothing waits for ever on a server: connecting, sending a request and receiving its
//! reply each have a limit ([`DEFAULT_REPLY_TIMEOUT`] unless [`Client::connect_within`]
//! says otherwise), after which the call fails with [`ClientError::ConnectTimedOut`] or
//! [`ClientError::TimedOut`]. Only the `raw_*` receive calls, used by tests that expect
//! silence, wait without a limit.

mod caps;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use zerocopy::{FromBytes, IntoBytes};

use crate::Errno;
use crate::error::{ClientError, FrameError};
use crate::frame::{Channel, Incoming, Limits};
use crate::types::{DeviceInfo, DmaMap, DmaUnmap, IrqInfo, OwnedRegionInfo, SetIrqs};
use crate::wire::{
    Command, DeviceInfoWire, DmaMapWire, DmaUnmapWire, Header, IrqInfoWire, MAX_FDS, MAX_PAYLOAD,
    REGION_INFO_SIZE, RegionAccessWire, RegionInfoWire, SetIrqsWire, VersionWire, msg_flags,
};

pub use caps::ServerCaps;

/// The capabilities JSON this client sends with VERSION (without the NUL).
const CLIENT_CAPABILITIES: &str =
    r#"{"capabilities":{"max_msg_fds":16,"max_data_xfer_size":1048576}}"#;

/// How long a client waits for the server to accept its connection, to take a request
/// and to answer it, unless told otherwise.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// Any message received by [`Client::raw_recv`] / [`Client::raw_request`], unvalidated.
#[derive(Debug)]
pub struct RawReply {
    /// The header as received.
    pub header: Header,
    /// The payload (`msg_size - 16` bytes).
    pub payload: Vec<u8>,
    /// Fds that came with it.
    pub fds: Vec<OwnedFd>,
}

/// A connected, version-negotiated vfio-user client.
#[derive(Debug)]
pub struct Client {
    channel: Channel,
    next_id: u16,
    server: ServerCaps,
    /// Limit for each request to be sent and for its reply to arrive.
    limit: Duration,
}

impl Client {
    /// Connects to `socket_path` and negotiates VERSION (0.0, `max_msg_fds` 16), waiting at
    /// most [`DEFAULT_REPLY_TIMEOUT`] for each step. A server that runs as neither root nor
    /// us is refused before anything is sent ([`ClientError::Untrusted`]).
    pub fn connect(socket_path: &Path) -> Result<Client, ClientError> {
        Self::connect_within(socket_path, DEFAULT_REPLY_TIMEOUT)
    }

    /// [`Client::connect`], waiting at most `limit` for the server to accept the
    /// connection and, from then on, for each request to be taken and answered.
    pub fn connect_within(socket_path: &Path, limit: Duration) -> Result<Client, ClientError> {
        let stream = connect_stream(socket_path, limit)?;
        Self::from_stream_within(stream, limit)
    }

    /// Negotiates VERSION over an already connected stream (e.g. one end of a socketpair).
    /// A server that already serves another client refuses VERSION with EBUSY:
    /// [`ClientError::Busy`].
    pub fn from_stream(stream: UnixStream) -> Result<Client, ClientError> {
        Self::from_stream_within(stream, DEFAULT_REPLY_TIMEOUT)
    }

    /// [`Client::from_stream`] with `limit` for each request and its reply.
    pub fn from_stream_within(stream: UnixStream, limit: Duration) -> Result<Client, ClientError> {
        let mut client = Self::unnegotiated(stream, limit)?;
        let mut payload = VersionWire { major: 0, minor: 0 }.as_bytes().to_vec();
        payload.extend_from_slice(CLIENT_CAPABILITIES.as_bytes());
        payload.push(0);
        let reply = match client.request(Command::Version, 0, &[&payload], &[]) {
            Err(ClientError::Remote {
                command: Command::Version,
                errno: Errno::BUSY,
            }) => return Err(ClientError::Busy),
            Err(ClientError::Remote {
                command: Command::Version,
                errno: Errno::ACCESS,
            }) => return Err(ClientError::Refused),
            other => other?,
        };
        client.server =
            ServerCaps::parse(&reply.payload).map_err(|reason| ClientError::BadReply {
                command: Command::Version,
                reason,
            })?;
        Ok(client)
    }

    /// A client over `stream` that has sent nothing yet, not even VERSION: for hostile
    /// clients (tests, fuzzing) that speak through the `raw_*` calls. `limit` bounds each
    /// send and each message once its first byte has arrived.
    pub fn unnegotiated(stream: UnixStream, limit: Duration) -> Result<Client, ClientError> {
        stream
            .set_nonblocking(false)
            .map_err(ClientError::Connect)?;
        // A server that stops reading makes a blocking send fail (EAGAIN) after `limit`.
        stream
            .set_write_timeout(Some(limit.max(Duration::from_millis(1))))
            .map_err(ClientError::Connect)?;
        Ok(Client {
            channel: Channel::new(stream, MAX_PAYLOAD).with_limits(Limits {
                idle_deadline: None,
                message: Some(limit),
                send: None,
            }),
            next_id: 0,
            server: ServerCaps::default(),
            limit,
        })
    }

    /// What the server advertised in its VERSION reply.
    pub fn server_caps(&self) -> ServerCaps {
        self.server
    }

    /// DEVICE_GET_INFO.
    pub fn device_info(&mut self) -> Result<DeviceInfo, ClientError> {
        let req = DeviceInfoWire {
            argsz: 16,
            ..Default::default()
        };
        let reply = self.request(Command::DeviceGetInfo, 0, &[req.as_bytes()], &[])?;
        let (w, _) = DeviceInfoWire::read_from_prefix(&reply.payload)
            .map_err(|_| bad(Command::DeviceGetInfo, "reply shorter than 16 bytes"))?;
        Ok(DeviceInfo {
            flags: w.flags,
            num_regions: w.num_regions,
            num_irqs: w.num_irqs,
        })
    }

    /// DEVICE_GET_REGION_INFO: asks with argsz 32 and, if the server needs more, asks again
    /// with the full size (as QEMU does). Returns the region and its fd, if one was sent with
    /// the final reply.
    pub fn region_info(
        &mut self,
        index: u32,
    ) -> Result<(OwnedRegionInfo, Option<OwnedFd>), ClientError> {
        const CMD: Command = Command::DeviceGetRegionInfo;
        let mut argsz = REGION_INFO_SIZE;
        for _ in 0..2 {
            let req = RegionInfoWire {
                argsz,
                index,
                ..Default::default()
            };
            let mut reply = self.request(CMD, 0, &[req.as_bytes()], &[])?;
            let (head, _) = RegionInfoWire::read_from_prefix(&reply.payload)
                .map_err(|_| bad(CMD, "reply shorter than 32 bytes"))?;
            if head.argsz > argsz {
                if usize::try_from(head.argsz).map_or(true, |a| a > MAX_PAYLOAD) {
                    return Err(bad(CMD, "argsz too large"));
                }
                argsz = head.argsz;
                continue; // fds of the truncated reply are closed here
            }
            if reply.fds.len() > 1 {
                return Err(bad(CMD, "more than one fd"));
            }
            let info = caps::parse_region_info(&reply.payload).map_err(|r| bad(CMD, r))?;
            return Ok((info, reply.fds.pop()));
        }
        Err(bad(CMD, "argsz grew on retry"))
    }

    /// DEVICE_GET_IRQ_INFO.
    pub fn irq_info(&mut self, index: u32) -> Result<IrqInfo, ClientError> {
        let req = IrqInfoWire {
            argsz: 16,
            flags: 0,
            index,
            count: 0,
        };
        let reply = self.request(Command::DeviceGetIrqInfo, 0, &[req.as_bytes()], &[])?;
        let (w, _) = IrqInfoWire::read_from_prefix(&reply.payload)
            .map_err(|_| bad(Command::DeviceGetIrqInfo, "reply shorter than 16 bytes"))?;
        Ok(IrqInfo {
            flags: w.flags,
            count: w.count,
        })
    }

    /// DEVICE_SET_IRQS with eventfds in SCM_RIGHTS (argsz 20, no data in the payload).
    pub fn set_irqs(&mut self, req: &SetIrqs, fds: &[BorrowedFd<'_>]) -> Result<(), ClientError> {
        if fds.len() > self.server.max_msg_fds_usize() {
            return Err(ClientError::InvalidRequest {
                reason: "more fds than the server accepts",
            });
        }
        let w = SetIrqsWire {
            argsz: 20,
            flags: req.flags,
            index: req.index,
            start: req.start,
            count: req.count,
        };
        self.request(Command::DeviceSetIrqs, 0, &[w.as_bytes()], fds)
            .map(drop)
    }

    /// REGION_READ of `buf.len()` bytes.
    pub fn region_read(
        &mut self,
        index: u32,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(), ClientError> {
        const CMD: Command = Command::RegionRead;
        let req = self.access(index, offset, buf.len())?;
        let reply = self.request(CMD, 0, &[req.as_bytes()], &[])?;
        let (head, data) = RegionAccessWire::read_from_prefix(&reply.payload)
            .map_err(|_| bad(CMD, "reply shorter than 16 bytes"))?;
        if head.count != req.count || data.len() != buf.len() {
            return Err(bad(CMD, "reply count differs from the request"));
        }
        buf.copy_from_slice(data);
        Ok(())
    }

    /// REGION_WRITE, waiting for the reply.
    pub fn region_write(
        &mut self,
        index: u32,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ClientError> {
        let req = self.access(index, offset, data.len())?;
        self.request(Command::RegionWrite, 0, &[req.as_bytes(), data], &[])
            .map(drop)
    }

    /// REGION_WRITE with NO_REPLY (a posted write, as QEMU sends to memory BARs).
    pub fn region_write_posted(
        &mut self,
        index: u32,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ClientError> {
        let req = self.access(index, offset, data.len())?;
        let header = self.header(Command::RegionWrite, msg_flags::NO_REPLY);
        self.channel.send(header, &[req.as_bytes(), data], &[])?;
        Ok(())
    }

    /// DMA_MAP, with the memory fd if there is one.
    pub fn dma_map(&mut self, map: &DmaMap, fd: Option<BorrowedFd<'_>>) -> Result<(), ClientError> {
        let w = DmaMapWire {
            argsz: 32,
            flags: map.flags,
            offset: map.offset,
            addr: map.iova,
            size: map.size,
        };
        let fds: Vec<BorrowedFd<'_>> = fd.into_iter().collect();
        self.request(Command::DmaMap, 0, &[w.as_bytes()], &fds)
            .map(drop)
    }

    /// DMA_UNMAP.
    pub fn dma_unmap(&mut self, unmap: &DmaUnmap) -> Result<(), ClientError> {
        let w = DmaUnmapWire {
            argsz: 24,
            flags: unmap.flags,
            addr: unmap.iova,
            size: unmap.size,
        };
        self.request(Command::DmaUnmap, 0, &[w.as_bytes()], &[])
            .map(drop)
    }

    /// DEVICE_RESET.
    pub fn reset(&mut self) -> Result<(), ClientError> {
        self.request(Command::DeviceReset, 0, &[], &[]).map(drop)
    }

    /// Sends any command with the next msg_id and returns the next message received, without
    /// checking it (an error reply is returned as a `RawReply` with the ERROR flag). Blocks
    /// forever if the server (correctly) does not answer, e.g. for NO_REPLY.
    pub fn raw_request(
        &mut self,
        command: u16,
        flags: u32,
        payload: &[u8],
        fds: &[BorrowedFd<'_>],
    ) -> Result<RawReply, ClientError> {
        let header = self.header(Command::from(command), flags);
        self.channel.send(header, &[payload], fds)?;
        self.raw_recv()
    }

    /// Sends raw bytes (possibly a malformed or lying message) with `fds`.
    pub fn raw_send(&mut self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(), ClientError> {
        self.channel.send_raw(bytes, fds)?;
        Ok(())
    }

    /// Receives the next message, unchecked.
    pub fn raw_recv(&mut self) -> Result<RawReply, ClientError> {
        raw_reply(self.channel.recv(None)?)
    }

    /// The socket, e.g. to poll it or to shut it down in tests.
    pub fn stream_fd(&self) -> BorrowedFd<'_> {
        self.channel.as_fd()
    }

    fn header(&mut self, command: Command, flags: u32) -> Header {
        let msg_id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        Header {
            msg_id,
            command: command.raw(),
            msg_size: 0,
            flags,
            error: 0,
        }
    }

    fn access(&self, index: u32, offset: u64, len: usize) -> Result<RegionAccessWire, ClientError> {
        let count = u32::try_from(len)
            .ok()
            .filter(|c| u64::from(*c) <= self.server.max_data_xfer_size)
            .ok_or(ClientError::InvalidRequest {
                reason: "transfer larger than max_data_xfer_size",
            })?;
        Ok(RegionAccessWire {
            offset,
            region: index,
            count,
        })
    }

    /// Sends a request and returns its checked, non-error reply.
    fn request(
        &mut self,
        command: Command,
        flags: u32,
        parts: &[&[u8]],
        fds: &[BorrowedFd<'_>],
    ) -> Result<RawReply, ClientError> {
        if fds.len() > MAX_FDS {
            return Err(ClientError::InvalidRequest {
                reason: "too many fds",
            });
        }
        let header = self.header(command, flags);
        let limit = self.limit;
        let timed_out = |e: FrameError| match e {
            FrameError::ReadTimedOut { .. } => ClientError::TimedOut { command, limit },
            FrameError::Io(io) if io.kind() == std::io::ErrorKind::WouldBlock => {
                ClientError::TimedOut { command, limit }
            }
            other => ClientError::Frame(other),
        };
        self.channel.send(header, parts, fds).map_err(timed_out)?;
        self.channel.set_idle_deadline(Some(Instant::now() + limit));
        let received = self.channel.recv(None);
        self.channel.set_idle_deadline(None);
        let reply = raw_reply(received.map_err(timed_out)?)?;
        let h = reply.header;
        if h.msg_type() != msg_flags::TYPE_REPLY {
            return Err(bad(command, "expected a reply"));
        }
        if h.msg_id != header.msg_id || h.command != header.command {
            return Err(bad(command, "reply does not match the request"));
        }
        if h.is_error() {
            let errno = i32::try_from(h.error)
                .ok()
                .filter(|e| *e != 0)
                .ok_or(bad(command, "error reply without errno"))?;
            return Err(ClientError::Remote {
                command,
                errno: Errno::from_raw_os_error(errno),
            });
        }
        Ok(reply)
    }
}

/// What the server sent, as a [`RawReply`]; a message that could not be accepted, or the
/// end of the stream, as an error.
fn raw_reply(incoming: Incoming) -> Result<RawReply, ClientError> {
    match incoming {
        Incoming::Frame(f) => Ok(RawReply {
            header: f.header,
            payload: f.payload,
            fds: f.fds,
        }),
        Incoming::Rejected { header, .. } => Err(bad(
            header.command(),
            "reply too large or with too many fds",
        )),
        Incoming::Eof | Incoming::Stopped => Err(ClientError::Closed),
    }
}

/// Connects to the UNIX socket at `path`, giving up after `limit` if the server's listen
/// queue stays full (a server that never accepts).
fn connect_stream(path: &Path, limit: Duration) -> Result<UnixStream, ClientError> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let io = |e: Errno| ClientError::Connect(e.into());
    let addr = SocketAddrUnix::new(path).map_err(io)?;
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )
    .map_err(io)?;
    let deadline = Instant::now() + limit;
    loop {
        match rustix::net::connect(&fd, &addr) {
            Ok(()) => break,
            Err(Errno::INTR) => {}
            // A full listen queue: the server is not accepting (yet).
            Err(Errno::AGAIN) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(Errno::AGAIN) => return Err(ClientError::ConnectTimedOut { limit }),
            Err(e) => return Err(io(e)),
        }
    }
    // Before anything is sent: a squatter would receive our memory fds next.
    nvmemu_sockfile::check_server(&fd, path)?;
    Ok(UnixStream::from(fd))
}

fn bad(command: Command, reason: &'static str) -> ClientError {
    ClientError::BadReply { command, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_server_is_a_timeout_not_a_hang() {
        let (a, _silent) = UnixStream::pair().unwrap();
        let started = Instant::now();
        let limit = Duration::from_millis(200);
        match Client::from_stream_within(a, limit) {
            Err(ClientError::TimedOut {
                command: Command::Version,
                limit: l,
            }) => assert_eq!(l, limit),
            other => panic!("expected a VERSION timeout, got {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(5));
        let msg = ClientError::TimedOut {
            command: Command::Version,
            limit,
        }
        .to_string();
        assert_eq!(msg, "Server did not answer Version within 200ms");
    }

    #[test]
    fn a_server_that_never_accepts_is_a_connect_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cntrl");
        // A listen queue of one, filled by a connection nobody accepts.
        let listener = rustix::net::socket(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::STREAM,
            None,
        )
        .unwrap();
        let addr = rustix::net::SocketAddrUnix::new(&path).unwrap();
        rustix::net::bind(&listener, &addr).unwrap();
        rustix::net::listen(&listener, 0).unwrap();
        let mut held = Vec::new();
        let limit = Duration::from_millis(200);
        let err = loop {
            match connect_stream(&path, limit) {
                Ok(s) => held.push(s),
                Err(e) => break e,
            }
            assert!(held.len() < 64, "the listen queue never filled");
        };
        assert!(
            matches!(err, ClientError::ConnectTimedOut { .. }),
            "{err:?}"
        );
    }
}
