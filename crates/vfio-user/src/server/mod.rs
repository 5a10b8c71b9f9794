// SPDX-License-Identifier: Apache-2.0
//! The per-connection server: session state, request routing and replies.
//!
//! Each command family has its own file; this module only routes and sends.

mod device;
mod dma;
mod irq;
#[cfg(test)]
mod props;
mod region;
mod version;

pub use version::SERVER_CAPABILITIES;

use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use tracing::debug;

use crate::Errno;
use crate::StopHandle;
use crate::device::Device;
use crate::error::{ConnectionError, FrameError};
use crate::frame::{Channel, Frame, Incoming, Limits};
use crate::wire::{Command, Header, MAX_PAYLOAD, msg_flags};

/// Where a connection is in the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Session {
    /// Nothing but VERSION is accepted yet.
    AwaitingVersion,
    /// VERSION succeeded.
    Negotiated {
        /// Most fds the client accepts per message (spec default 1).
        client_max_fds: u32,
    },
}

/// A successful reply: payload plus at most one fd (a region fd).
#[derive(Debug, Default)]
pub(crate) struct Reply<'a> {
    pub payload: Vec<u8>,
    pub fd: Option<BorrowedFd<'a>>,
}

impl Reply<'static> {
    /// A reply with this payload and no fd.
    pub fn bytes(payload: Vec<u8>) -> Self {
        Self { payload, fd: None }
    }
}

/// How long a server waits for its client, so that no client can hold a control thread:
/// one that connects and says nothing, sends a message a byte at a time, or never reads its
/// replies is dropped (with a log line) when the limit passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// From connect until a complete VERSION request has arrived.
    pub version: Duration,
    /// From the first byte of any message until its last (a negotiated client may stay idle
    /// between messages as long as it likes: a guest does).
    pub message: Duration,
    /// For the client to take each reply off the socket.
    pub reply: Duration,
}

impl Default for Deadlines {
    /// 5 s each: QEMU's own per-request timeout (`x-msg-timeout`) is 5 s too.
    fn default() -> Self {
        Deadlines {
            version: Duration::from_secs(5),
            message: Duration::from_secs(5),
            reply: Duration::from_secs(5),
        }
    }
}

/// Serves one client until it disconnects, misses a deadline or `stop` is stopped.
///
/// Returns `Ok` on a clean EOF between messages or when stopped, and an error when the socket
/// fails, the client closes it in the middle of a message or misses one of `deadlines`. Calls
/// `device.disconnected()` exactly once before returning, in every case.
pub fn serve_connection(
    stream: UnixStream,
    device: &mut dyn Device,
    stop: &StopHandle,
    deadlines: &Deadlines,
) -> Result<(), ConnectionError> {
    let result = run(stream, device, stop, deadlines);
    device.disconnected();
    match result {
        Err(ConnectionError::Frame(FrameError::Stopped)) => Ok(()),
        other => other,
    }
}

fn run(
    stream: UnixStream,
    device: &mut dyn Device,
    stop: &StopHandle,
    deadlines: &Deadlines,
) -> Result<(), ConnectionError> {
    // Blocking reads after polling (readiness, stop and deadlines are handled there);
    // sends are non-blocking with a deadline.
    stream.set_nonblocking(false).map_err(FrameError::from)?;
    let mut channel = Channel::new(stream, MAX_PAYLOAD).with_limits(Limits {
        idle_deadline: Some(Instant::now() + deadlines.version),
        message: Some(deadlines.message),
        send: Some((deadlines.reply, stop.clone())),
    });
    let mut session = Session::AwaitingVersion;
    loop {
        if matches!(session, Session::Negotiated { .. }) {
            channel.set_idle_deadline(None);
        }
        match channel.recv(Some(stop))? {
            Incoming::Eof | Incoming::Stopped => return Ok(()),
            Incoming::Rejected { header, errno } => {
                debug!(target: "guest", ?header, %errno, "vfio-user: message rejected by framing");
                if wants_reply(&header) {
                    send_error(&mut channel, &header, errno)?;
                }
            }
            Incoming::Frame(frame) => {
                if session == Session::AwaitingVersion && !device.admits_clients() {
                    if wants_reply(&frame.header) {
                        send_error(&mut channel, &frame.header, Errno::ACCESS)?;
                    }
                    return Err(ConnectionError::NotAdmitted);
                }
                if device.failed() {
                    // A failed device serves nobody: say so, then drop the client.
                    if wants_reply(&frame.header) {
                        send_error(&mut channel, &frame.header, Errno::NODEV)?;
                    }
                    return Err(ConnectionError::DeviceFailed);
                }
                handle_frame(&mut channel, &mut session, device, frame)?;
                if device.failed() {
                    return Err(ConnectionError::DeviceFailed);
                }
            }
        }
    }
}

/// Whether `header` expects an answer: anything but a reply (we send no requests, so a
/// reply from the client answers nothing and must not be answered, or two confused peers
/// would echo each other for ever) or a message marked NO_REPLY.
fn wants_reply(header: &Header) -> bool {
    header.msg_type() != msg_flags::TYPE_REPLY && !header.no_reply()
}

fn handle_frame(
    channel: &mut Channel,
    session: &mut Session,
    device: &mut dyn Device,
    frame: Frame,
) -> Result<(), FrameError> {
    let Frame {
        header,
        payload,
        fds,
    } = frame;
    match header.msg_type() {
        msg_flags::TYPE_COMMAND => {}
        msg_flags::TYPE_REPLY => {
            // We never send requests, so no reply is expected from the client.
            debug!(target: "guest", ?header, "vfio-user: dropping a reply nobody asked for");
            return Ok(());
        }
        other => {
            // An unknown message type: answered (unless NO_REPLY) so the client never waits
            // for ever; its payload and fds were consumed by the framing.
            debug!(target: "guest", ?header, msg_type = other, "vfio-user: unknown message type");
            return if wants_reply(&header) {
                send_error(channel, &header, Errno::INVAL)
            } else {
                Ok(())
            };
        }
    }
    match dispatch(session, device, &header, &payload, fds) {
        Ok(reply) if !header.no_reply() => {
            let fds: Vec<BorrowedFd<'_>> = reply.fd.into_iter().collect();
            let out = reply_header(&header, msg_flags::TYPE_REPLY, 0);
            channel.send(out, &[&reply.payload], &fds)
        }
        Ok(_) => Ok(()),
        Err(errno) => {
            debug!(target: "guest", command = ?header.command(), %errno, "vfio-user: request failed");
            if header.no_reply() {
                Ok(())
            } else {
                send_error(channel, &header, errno)
            }
        }
    }
}

fn reply_header(request: &Header, flags: u32, error: u32) -> Header {
    Header {
        msg_id: request.msg_id,
        command: request.command,
        msg_size: 0,
        flags,
        error,
    }
}

fn send_error(channel: &mut Channel, request: &Header, errno: Errno) -> Result<(), FrameError> {
    let raw = u32::try_from(errno.raw_os_error())
        .ok()
        .filter(|e| *e != 0)
        .unwrap_or_else(|| Errno::IO.raw_os_error().unsigned_abs());
    let out = reply_header(request, msg_flags::TYPE_REPLY | msg_flags::ERROR, raw);
    channel.send(out, &[], &[])
}

/// Routes one well-framed command. Fds not handed to the device are closed on return.
pub(crate) fn dispatch<'d>(
    session: &mut Session,
    device: &'d mut dyn Device,
    header: &Header,
    payload: &[u8],
    fds: Vec<OwnedFd>,
) -> Result<Reply<'d>, Errno> {
    let command = header.command();
    let client_max_fds = match (*session, command) {
        (Session::AwaitingVersion, Command::Version) => {
            let (reply, client_max_fds) = version::handle(payload)?;
            *session = Session::Negotiated { client_max_fds };
            return Ok(reply);
        }
        (Session::AwaitingVersion, _) => {
            debug!(target: "guest", ?command, "vfio-user: command before VERSION");
            return Err(Errno::INVAL);
        }
        (Session::Negotiated { .. }, Command::Version) => {
            debug!(target: "guest", "vfio-user: repeated VERSION");
            return Err(Errno::INVAL);
        }
        (Session::Negotiated { client_max_fds }, _) => client_max_fds,
    };
    match command {
        Command::Version => Err(Errno::INVAL),
        Command::DmaMap => dma::map(device, payload, fds),
        Command::DmaUnmap => dma::unmap(device, payload),
        Command::DeviceGetInfo => device::info(&*device, payload),
        Command::DeviceGetRegionInfo => region::info(&*device, payload, client_max_fds),
        Command::DeviceGetIrqInfo => irq::info(&*device, payload),
        Command::DeviceSetIrqs => irq::set(device, payload, fds),
        Command::RegionRead => region::read(device, payload),
        Command::RegionWrite => region::write(device, payload),
        Command::DeviceReset => device::reset(device),
        Command::DeviceGetRegionIoFds
        | Command::DmaRead
        | Command::DmaWrite
        | Command::DirtyPages
        | Command::RegionWriteMulti
        | Command::DeviceFeature
        | Command::MigDataRead
        | Command::MigDataWrite
        | Command::Unknown(_) => {
            debug!(target: "guest", ?command, "vfio-user: unsupported command");
            Err(Errno::NOTSUP)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::AcceptAll;

    fn run(session: Session, command: u16, payload: &[u8]) -> (Result<usize, Errno>, Session) {
        let mut s = session;
        let header = Header {
            msg_id: 1,
            command,
            msg_size: 0,
            flags: 0,
            error: 0,
        };
        let mut dev = AcceptAll;
        let r = dispatch(&mut s, &mut dev, &header, payload, Vec::new()).map(|r| r.payload.len());
        (r, s)
    }

    #[test]
    fn session_transitions() {
        const NEW: Session = Session::AwaitingVersion;
        const READY: Session = Session::Negotiated { client_max_fds: 1 };
        let spdk = [0u8, 0, 1, 0];
        let info = [16u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        type Row<'a> = (Session, u16, &'a [u8], Result<(), Errno>, Session);
        let table: [Row<'_>; 7] = [
            (NEW, 1, &spdk, Ok(()), READY),
            (NEW, 1, &[1, 0, 0, 0], Err(Errno::INVAL), NEW),
            (NEW, 4, &info, Err(Errno::INVAL), NEW),
            (NEW, 99, &[], Err(Errno::INVAL), NEW),
            (READY, 1, &spdk, Err(Errno::INVAL), READY),
            (READY, 4, &info, Ok(()), READY),
            (READY, 99, &[], Err(Errno::NOTSUP), READY),
        ];
        for (from, cmd, payload, want, to) in table {
            let (got, after) = run(from, cmd, payload);
            assert_eq!(got.map(drop), want, "{from:?} cmd {cmd}");
            assert_eq!(after, to, "{from:?} cmd {cmd}");
        }
    }
}
