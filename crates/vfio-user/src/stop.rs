// SPDX-License-Identifier: Apache-2.0
//! A cloneable stop signal that wakes threads blocked on a socket.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd, poll};

#[derive(Debug)]
struct Inner {
    /// Becomes readable (and stays so: nobody reads it) once fired.
    eventfd: OwnedFd,
    fired: AtomicBool,
}

/// Tells [`crate::Listener::accept`] and [`crate::serve_connection`] to return.
///
/// Firing writes to an eventfd that the blocked threads poll next to their socket, so no
/// thread busy-waits. Clones share the same signal.
#[derive(Debug, Clone)]
pub struct StopSignal {
    inner: Arc<Inner>,
}

/// What [`StopSignal::wait_readable`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// The socket has data, EOF or an error: read it.
    Socket,
    /// The stop signal fired.
    Stopped,
    /// The deadline passed first.
    TimedOut,
}

impl StopSignal {
    /// A new, unfired signal.
    pub fn new() -> io::Result<Self> {
        let eventfd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Self {
            inner: Arc::new(Inner {
                eventfd,
                fired: AtomicBool::new(false),
            }),
        })
    }

    /// Fires the signal; every current and future wait returns.
    pub fn fire(&self) {
        // Release pairs with the Acquire in `is_fired`: state written before `fire` is
        // visible to a thread that observes the flag.
        self.inner.fired.store(true, Ordering::Release);
        // A full counter (EAGAIN) still leaves the fd readable, so the result does not matter.
        let _ = rustix::io::write(&self.inner.eventfd, &1u64.to_ne_bytes());
    }

    /// Whether [`StopSignal::fire`] was called.
    pub fn is_fired(&self) -> bool {
        self.inner.fired.load(Ordering::Acquire)
    }

    /// Blocks until `socket` is readable (or hung up) or the signal fires.
    pub(crate) fn wait_readable(&self, socket: BorrowedFd<'_>) -> io::Result<Readiness> {
        self.wait(socket, PollFlags::IN, None)
    }

    /// Wait until `socket` reports any of `events` (or an error/hang-up), the signal fires,
    /// or `deadline` passes (`Readiness::TimedOut`; `None` waits for ever).
    pub(crate) fn wait(
        &self,
        socket: BorrowedFd<'_>,
        events: PollFlags,
        deadline: Option<Instant>,
    ) -> io::Result<Readiness> {
        loop {
            if self.is_fired() {
                return Ok(Readiness::Stopped);
            }
            let timeout = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(Readiness::TimedOut);
                    }
                    Some(Timespec::try_from(left).unwrap_or(Timespec {
                        tv_sec: i64::MAX,
                        tv_nsec: 0,
                    }))
                }
                None => None,
            };
            let mut fds = [
                PollFd::from_borrowed_fd(socket, events),
                PollFd::from_borrowed_fd(self.inner.eventfd.as_fd(), PollFlags::IN),
            ];
            match poll(&mut fds, timeout.as_ref()) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let [sock, stop] = &fds;
            if !stop.revents().is_empty() {
                return Ok(Readiness::Stopped);
            }
            if !sock.revents().is_empty() {
                return Ok(Readiness::Socket);
            }
        }
    }
}

/// Waits until `socket` reports any of `events` (or an error/hang-up), or `deadline`
/// passes (`Readiness::TimedOut`). For callers without a stop signal (the client).
pub(crate) fn wait_socket(
    socket: BorrowedFd<'_>,
    events: PollFlags,
    deadline: Instant,
) -> io::Result<Readiness> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Readiness::TimedOut);
        }
        let timeout = Timespec::try_from(left).unwrap_or(Timespec {
            tv_sec: i64::MAX,
            tv_nsec: 0,
        });
        let mut fds = [PollFd::from_borrowed_fd(socket, events)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        if fds.iter().any(|f| !f.revents().is_empty()) {
            return Ok(Readiness::Socket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn fire_wakes_a_waiter_and_clones_share_state() {
        let stop = StopSignal::new().unwrap();
        let clone = stop.clone();
        let (a, _b) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || clone.wait_readable(a.as_fd()).unwrap());
        assert!(!stop.is_fired());
        stop.fire();
        assert_eq!(t.join().unwrap(), Readiness::Stopped);
        assert!(stop.is_fired());
    }

    #[test]
    fn data_on_the_socket_is_reported() {
        use std::io::Write;
        let stop = StopSignal::new().unwrap();
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"x").unwrap();
        assert_eq!(stop.wait_readable(a.as_fd()).unwrap(), Readiness::Socket);
    }
}
