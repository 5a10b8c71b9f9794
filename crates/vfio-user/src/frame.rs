// SPDX-License-Identifier: Apache-2.0
//! Message framing over a UNIX stream socket (vfio-user spec "Socket" and "Header").
//!
//! Receive: the header and payload are read with `recvmsg`, collecting SCM_RIGHTS fds from
//! every read as `OwnedFd`s at once. A message whose header gives its size is always consumed
//! completely, even when it is rejected, so the stream never loses sync; an oversized payload
//! is drained in chunks without being allocated.
//!
//! Send: header, payload and fds go out in one `sendmsg`, because SPDK's client reads the
//! payload with a single `read()` after the header.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use nvmemu_sockfile::Wake;
use rustix::event::PollFlags;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, recvmsg, sendmsg,
};
use zerocopy::{FromBytes, IntoBytes};

use crate::Errno;
use crate::StopHandle;
use crate::error::FrameError;
use crate::wire::{HEADER_SIZE, Header, MAX_FDS};

/// Control buffer size for [`MAX_FDS`] descriptors.
const CMSG_SPACE: usize = rustix::cmsg_space!(ScmRights(MAX_FDS));
/// Chunk size used to drain payloads that are too large to accept.
const DRAIN_CHUNK: usize = 16 * 1024;

/// One complete, well-framed message.
#[derive(Debug)]
pub(crate) struct Frame {
    /// The header as received.
    pub header: Header,
    /// Exactly `msg_size - 16` bytes.
    pub payload: Vec<u8>,
    /// Fds that arrived with the message (at most [`MAX_FDS`]).
    pub fds: Vec<OwnedFd>,
}

/// What one [`Channel::recv`] produced.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A complete message.
    Frame(Frame),
    /// A message that was consumed but cannot be accepted; answer it with `errno`.
    Rejected {
        /// Its header.
        header: Header,
        /// Why it was rejected.
        errno: Errno,
    },
    /// The peer closed the socket between messages.
    Eof,
    /// The stop handle was stopped.
    Stopped,
}

/// Fds received for the message being read.
#[derive(Debug, Default)]
struct FdCollector {
    fds: Vec<OwnedFd>,
    /// More fds arrived than allowed, or the kernel truncated the control data.
    overflow: bool,
}

impl FdCollector {
    fn push(&mut self, fd: OwnedFd) {
        if self.fds.len() < MAX_FDS {
            self.fds.push(fd);
        } else {
            // Dropping closes it.
            self.overflow = true;
        }
    }
}

enum Read {
    Bytes(usize),
    Stopped,
}

/// A vfio-user message stream.
#[derive(Debug)]
pub(crate) struct Channel {
    stream: UnixStream,
    max_payload: usize,
    limits: Limits,
}

/// Time limits of a channel: the server's deadlines, or the client's reply limit.
#[derive(Debug, Clone, Default)]
pub(crate) struct Limits {
    /// The first byte of the next message must arrive by then (`None`: wait for ever).
    pub idle_deadline: Option<Instant>,
    /// Once a message's first byte arrived, the rest must follow within this.
    pub message: Option<Duration>,
    /// A reply must be taken by the peer within this; with it, sends never block past it
    /// and give up when `stop` is stopped.
    pub send: Option<(Duration, StopHandle)>,
}

impl AsFd for Channel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }
}

impl Channel {
    /// Wraps a connected stream; payloads larger than `max_payload` are drained and rejected.
    pub fn new(stream: UnixStream, max_payload: usize) -> Self {
        Self {
            stream,
            max_payload,
            limits: Limits::default(),
        }
    }

    /// The same channel with time limits (server side).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Set or clear the deadline for the next message's first byte.
    pub fn set_idle_deadline(&mut self, deadline: Option<Instant>) {
        self.limits.idle_deadline = deadline;
    }

    /// When the rest of a message that started now must have arrived.
    fn message_deadline(&self) -> Option<Instant> {
        let by_size = self.limits.message.map(|d| Instant::now() + d);
        match (self.limits.idle_deadline, by_size) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Receives the next message. `stop`, if given, is polled next to the socket.
    pub fn recv(&mut self, stop: Option<&StopHandle>) -> Result<Incoming, FrameError> {
        let mut fds = FdCollector::default();
        let mut raw = [0u8; HEADER_SIZE];
        let mut got = 0;
        let mut deadline = self.limits.idle_deadline;
        while let Some(rest) = raw.get_mut(got..).filter(|r| !r.is_empty()) {
            let what = if got == 0 { "message" } else { "whole header" };
            let read = self.read_some(rest, &mut fds, stop, deadline, what)?;
            if got == 0 {
                deadline = self.message_deadline();
            }
            match read {
                Read::Stopped => return Ok(Incoming::Stopped),
                Read::Bytes(0) if got == 0 => return Ok(Incoming::Eof),
                Read::Bytes(0) => {
                    return Err(FrameError::Truncated {
                        expected: HEADER_SIZE,
                        received: got,
                    });
                }
                Read::Bytes(n) => got += n,
            }
        }
        let header = Header::read_from_bytes(&raw).unwrap_or_default();
        let Some(len) = usize::try_from(header.msg_size)
            .ok()
            .and_then(|size| size.checked_sub(HEADER_SIZE))
        else {
            // The size is unusable; nothing beyond the header can be attributed to it.
            return Ok(Incoming::Rejected {
                header,
                errno: Errno::INVAL,
            });
        };
        if len > self.max_payload {
            if self.drain(len, &mut fds, stop, deadline)? {
                return Ok(Incoming::Stopped);
            }
            return Ok(Incoming::Rejected {
                header,
                errno: Errno::TOOBIG,
            });
        }
        let mut payload = vec![0u8; len];
        let mut got = 0;
        while let Some(rest) = payload.get_mut(got..).filter(|r| !r.is_empty()) {
            match self.read_some(rest, &mut fds, stop, deadline, "whole payload")? {
                Read::Stopped => return Ok(Incoming::Stopped),
                Read::Bytes(0) => {
                    return Err(FrameError::Truncated {
                        expected: len,
                        received: got,
                    });
                }
                Read::Bytes(n) => got += n,
            }
        }
        if fds.overflow {
            return Ok(Incoming::Rejected {
                header,
                errno: Errno::INVAL,
            });
        }
        Ok(Incoming::Frame(Frame {
            header,
            payload,
            fds: fds.fds,
        }))
    }

    /// Reads and discards `len` bytes. Returns true if stopped.
    fn drain(
        &mut self,
        len: usize,
        fds: &mut FdCollector,
        stop: Option<&StopHandle>,
        deadline: Option<Instant>,
    ) -> Result<bool, FrameError> {
        let mut chunk = [0u8; DRAIN_CHUNK];
        let mut left = len;
        while left > 0 {
            let want = left.min(DRAIN_CHUNK);
            let buf = chunk.get_mut(..want).unwrap_or_default();
            match self.read_some(buf, fds, stop, deadline, "whole payload")? {
                Read::Stopped => return Ok(true),
                Read::Bytes(0) => {
                    return Err(FrameError::Truncated {
                        expected: len,
                        received: len - left,
                    });
                }
                Read::Bytes(n) => left = left.saturating_sub(n),
            }
        }
        Ok(false)
    }

    /// One `recvmsg` into `buf`, collecting any fds that come with it.
    fn read_some(
        &mut self,
        buf: &mut [u8],
        fds: &mut FdCollector,
        stop: Option<&StopHandle>,
        deadline: Option<Instant>,
        what: &'static str,
    ) -> Result<Read, FrameError> {
        let wake = match (stop, deadline) {
            // Nothing to wait for but the socket: the blocking recvmsg does that.
            (None, None) => Wake::Ready,
            _ => nvmemu_sockfile::wait(&self.stream, PollFlags::IN, stop, deadline)?,
        };
        match wake {
            Wake::Ready => {}
            Wake::Stopped => return Ok(Read::Stopped),
            Wake::TimedOut => return Err(FrameError::ReadTimedOut { what }),
        }
        let mut space = [MaybeUninit::<u8>::uninit(); CMSG_SPACE];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(buf)];
        let msg = loop {
            match recvmsg(
                &self.stream,
                &mut iov,
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            ) {
                Err(Errno::INTR) => continue,
                other => break other,
            }
        }
        .map_err(std::io::Error::from)?;
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = message {
                for fd in received {
                    fds.push(fd);
                }
            }
        }
        if msg.flags.contains(ReturnFlags::CTRUNC) {
            fds.overflow = true;
        }
        Ok(Read::Bytes(msg.bytes))
    }

    /// Sends one message: `header` (its `msg_size` is filled in), the concatenation of
    /// `parts`, and `fds`, in a single `sendmsg`.
    pub fn send(
        &mut self,
        mut header: Header,
        parts: &[&[u8]],
        fds: &[BorrowedFd<'_>],
    ) -> Result<(), FrameError> {
        let size = parts.iter().map(|p| p.len()).sum::<usize>() + HEADER_SIZE;
        header.msg_size = u32::try_from(size).map_err(|_| FrameError::TooLarge { size })?;
        let mut slices = Vec::with_capacity(parts.len() + 1);
        slices.push(header.as_bytes());
        slices.extend_from_slice(parts);
        self.send_slices(&slices, fds)
    }

    /// Sends raw bytes (which need not be a valid message) with `fds` in one `sendmsg`.
    pub fn send_raw(&mut self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(), FrameError> {
        self.send_slices(&[bytes], fds)
    }

    fn send_slices(&mut self, slices: &[&[u8]], fds: &[BorrowedFd<'_>]) -> Result<(), FrameError> {
        if fds.len() > MAX_FDS {
            return Err(FrameError::TooManyFds { count: fds.len() });
        }
        let mut space = [MaybeUninit::<u8>::uninit(); CMSG_SPACE];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(FrameError::TooManyFds { count: fds.len() });
        }
        let iov: Vec<IoSlice<'_>> = slices.iter().map(|s| IoSlice::new(s)).collect();
        let total: usize = slices.iter().map(|s| s.len()).sum();
        let deadline = self.limits.send.as_ref().map(|(d, _)| Instant::now() + *d);
        let flags = match deadline {
            Some(_) => SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
            None => SendFlags::NOSIGNAL,
        };
        let sent = self.send_until(deadline, || {
            sendmsg(&self.stream, &iov, &mut control, flags)
        })?;
        if sent < total {
            // The fds already went with the first part, so finish with plain sends.
            let rest: Vec<u8> = slices.concat().split_off(sent);
            let mut off = 0;
            while let Some(left) = rest.get(off..).filter(|l| !l.is_empty()) {
                off +=
                    self.send_until(deadline, || rustix::net::send(&self.stream, left, flags))?;
            }
        }
        Ok(())
    }

    /// Run one send call until it makes progress: retried on EINTR, and with a deadline
    /// (non-blocking sends) retried once the socket is writable, until the deadline passes
    /// or `stop` is stopped.
    fn send_until(
        &self,
        deadline: Option<Instant>,
        mut op: impl FnMut() -> rustix::io::Result<usize>,
    ) -> Result<usize, FrameError> {
        loop {
            match (op(), deadline, &self.limits.send) {
                (Err(Errno::INTR), _, _) => {}
                (Err(Errno::AGAIN), Some(d), Some((limit, stop))) => {
                    match stop.wait(&self.stream, PollFlags::OUT, Some(d))? {
                        Wake::Ready => {}
                        Wake::Stopped => return Err(FrameError::Stopped),
                        Wake::TimedOut => {
                            return Err(FrameError::SendTimedOut { limit: *limit });
                        }
                    }
                }
                (Err(e), _, _) => return Err(std::io::Error::from(e).into()),
                (Ok(n), _, _) => return Ok(n),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MAX_PAYLOAD;
    use std::io::Write;

    fn pair() -> (Channel, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        (Channel::new(a, MAX_PAYLOAD), b)
    }

    fn hdr(command: u16, msg_size: u32) -> Header {
        Header {
            msg_id: 7,
            command,
            msg_size,
            flags: 0,
            error: 0,
        }
    }

    #[test]
    fn message_split_over_several_writes_is_reassembled() {
        let (mut ch, mut peer) = pair();
        let h = hdr(4, 16 + 5);
        peer.write_all(&h.as_bytes()[..10]).unwrap();
        let t = std::thread::spawn(move || {
            peer.write_all(&h.as_bytes()[10..]).unwrap();
            peer.write_all(b"ab").unwrap();
            peer.write_all(b"cde").unwrap();
            peer
        });
        let Incoming::Frame(f) = ch.recv(None).unwrap() else {
            panic!("expected a frame")
        };
        assert_eq!(f.header, h);
        assert_eq!(f.payload, b"abcde");
        drop(t.join().unwrap());
        assert!(matches!(ch.recv(None).unwrap(), Incoming::Eof));
    }

    #[test]
    fn short_msg_size_is_rejected_without_consuming_more() {
        let (mut ch, mut peer) = pair();
        peer.write_all(hdr(4, 8).as_bytes()).unwrap();
        peer.write_all(hdr(4, 16).as_bytes()).unwrap();
        assert!(matches!(
            ch.recv(None).unwrap(),
            Incoming::Rejected {
                errno: Errno::INVAL,
                ..
            }
        ));
        assert!(matches!(ch.recv(None).unwrap(), Incoming::Frame(_)));
    }

    #[test]
    fn oversized_payload_is_drained_then_next_message_is_read() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut ch = Channel::new(a, 100);
        let mut peer = b;
        let t = std::thread::spawn(move || {
            peer.write_all(hdr(9, 16 + 50_000).as_bytes()).unwrap();
            peer.write_all(&vec![0xAA; 50_000]).unwrap();
            peer.write_all(hdr(4, 16 + 2).as_bytes()).unwrap();
            peer.write_all(b"ok").unwrap();
            peer
        });
        assert!(matches!(
            ch.recv(None).unwrap(),
            Incoming::Rejected {
                errno: Errno::TOOBIG,
                ..
            }
        ));
        let Incoming::Frame(f) = ch.recv(None).unwrap() else {
            panic!("expected a frame")
        };
        assert_eq!(f.payload, b"ok");
        drop(t.join().unwrap());
    }

    #[test]
    fn eof_inside_header_or_payload_is_truncation() {
        let (mut ch, mut peer) = pair();
        peer.write_all(&[1, 2, 3]).unwrap();
        drop(peer);
        assert!(matches!(
            ch.recv(None),
            Err(FrameError::Truncated {
                expected: 16,
                received: 3
            })
        ));

        let (mut ch, mut peer) = pair();
        peer.write_all(hdr(4, 16 + 10).as_bytes()).unwrap();
        peer.write_all(b"abc").unwrap();
        drop(peer);
        assert!(matches!(
            ch.recv(None),
            Err(FrameError::Truncated {
                expected: 10,
                received: 3
            })
        ));
    }

    #[test]
    fn fds_travel_with_the_message() {
        let (mut ch, peer) = pair();
        let mut tx = Channel::new(peer, MAX_PAYLOAD);
        let (x, _y) = UnixStream::pair().unwrap();
        tx.send(hdr(2, 0), &[b"0123", b"4567"], &[x.as_fd(), x.as_fd()])
            .unwrap();
        let Incoming::Frame(f) = ch.recv(None).unwrap() else {
            panic!("expected a frame")
        };
        assert_eq!(f.header.msg_size, 24);
        assert_eq!(f.payload, b"01234567");
        assert_eq!(f.fds.len(), 2);
    }

    #[test]
    fn too_many_fds_to_send_is_an_error() {
        let (mut ch, _peer) = pair();
        let (x, _y) = UnixStream::pair().unwrap();
        let fds = vec![x.as_fd(); MAX_FDS + 1];
        assert!(matches!(
            ch.send(hdr(2, 0), &[], &fds),
            Err(FrameError::TooManyFds { count: 17 })
        ));
    }
}
