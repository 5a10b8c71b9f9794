// SPDX-License-Identifier: Apache-2.0
//! [`StopHandle`]: how `spdk_kill_instance` and signals stop the server, and the one place
//! this crate waits on a socket (readable, stopped, or a deadline passed).
//!
//! A [`StopHandle`] owns an eventfd that every wait watches next to its socket, so `stop()`
//! unblocks the accept loop and idle connections at once.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd, poll};

/// Signals [`serve`](crate::serve) (and its connections) to stop. Cheap to clone; stopping
/// is permanent.
#[derive(Debug, Clone)]
pub struct StopHandle {
    inner: Arc<StopInner>,
}

#[derive(Debug)]
struct StopInner {
    stopped: AtomicBool,
    /// Written once by `stop()`; never read, so it stays readable and wakes every poller.
    event: OwnedFd,
}

/// Why [`StopHandle::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The socket is readable (or hung up, or in error).
    Readable,
    /// `stop()` was called.
    Stopped,
    /// The deadline passed.
    TimedOut,
}

impl StopHandle {
    /// A new, un-stopped handle.
    pub fn new() -> io::Result<Self> {
        let event = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Self {
            inner: Arc::new(StopInner {
                stopped: AtomicBool::new(false),
                event,
            }),
        })
    }

    /// Asks the server to stop; returns at once.
    pub fn stop(&self) {
        // Release pairs with the Acquire load in `is_stopped` on the polling threads.
        self.inner.stopped.store(true, Ordering::Release);
        // A full counter (EAGAIN) already wakes everyone; nothing else can fail here.
        let _ = rustix::io::write(&self.inner.event, &1u64.to_ne_bytes());
    }

    /// Whether `stop()` has been called.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::Acquire)
    }

    /// Waits until `fd` is readable, the handle is stopped or `deadline` passes (`None`:
    /// no deadline).
    pub(crate) fn wait(&self, fd: impl AsFd, deadline: Option<Instant>) -> io::Result<Wake> {
        loop {
            if self.is_stopped() {
                return Ok(Wake::Stopped);
            }
            let timeout = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(Wake::TimedOut);
                    }
                    Some(Timespec::try_from(left).unwrap_or(Timespec {
                        tv_sec: i64::MAX,
                        tv_nsec: 0,
                    }))
                }
                None => None,
            };
            let mut fds = [
                PollFd::new(&fd, PollFlags::IN),
                PollFd::new(&self.inner.event, PollFlags::IN),
            ];
            match poll(&mut fds, timeout.as_ref()) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            if self.is_stopped() {
                return Ok(Wake::Stopped);
            }
            if !fds[0].revents().is_empty() {
                return Ok(Wake::Readable);
            }
        }
    }
}

/// Whether the peer of `fd` has closed its end (both directions): a zero-timeout poll.
/// A peer that only shut down its writing side (and still waits for a reply) is not gone.
pub(crate) fn peer_gone(fd: impl AsFd) -> bool {
    let mut fds = [PollFd::new(&fd, PollFlags::empty())];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&zero)) {
        Ok(_) => fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Shutdown;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    #[test]
    fn wait_reports_deadline_data_and_stop() {
        let stop = StopHandle::new().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(stop.wait(&a, Some(soon)).unwrap(), Wake::TimedOut);
        std::io::Write::write_all(&mut &b, b"x").unwrap();
        assert_eq!(stop.wait(&a, None).unwrap(), Wake::Readable);
        stop.stop();
        assert_eq!(stop.wait(&a, None).unwrap(), Wake::Stopped);
    }

    #[test]
    fn a_half_closed_peer_is_not_gone_a_closed_one_is() {
        let (a, b) = UnixStream::pair().unwrap();
        assert!(!peer_gone(&a));
        b.shutdown(Shutdown::Write).unwrap();
        assert!(!peer_gone(&a));
        drop(b);
        assert!(peer_gone(&a));
    }
}
