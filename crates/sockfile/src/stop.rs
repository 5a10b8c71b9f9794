// SPDX-License-Identifier: Apache-2.0
//! [`StopHandle`] and [`wait`]: the one place the servers and the vfio-user client block on
//! a socket, until it is ready, the server is stopped, or a deadline passes.
//!
//! A [`StopHandle`] owns an eventfd that every wait polls next to its socket, so `stop()`
//! wakes every accept loop and idle connection at once and no thread busy-waits.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd, poll};
use rustix::io::Errno;

/// Tells a server's accept loop and connections to return. Cheap to clone (clones share one
/// signal); stopping is permanent.
#[derive(Debug, Clone)]
pub struct StopHandle {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    stopped: AtomicBool,
    /// Written once by `stop()` and never read, so it stays readable and wakes every poller.
    event: OwnedFd,
}

/// Why [`wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The socket reported one of the events asked for, an error or a hang-up.
    Ready,
    /// The [`StopHandle`] was stopped; this wins over a ready socket.
    Stopped,
    /// The deadline passed first.
    TimedOut,
}

impl StopHandle {
    /// A new, un-stopped handle.
    pub fn new() -> io::Result<Self> {
        let event = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Self {
            inner: Arc::new(Inner {
                stopped: AtomicBool::new(false),
                event,
            }),
        })
    }

    /// Stops: every current and future wait on this handle (or a clone) returns
    /// [`Wake::Stopped`]. Returns at once.
    pub fn stop(&self) {
        // Release pairs with the Acquire in `is_stopped`: what was written before `stop`
        // is visible to a thread that sees the flag. The flag is set before the eventfd
        // is written, so a poller woken by the eventfd sees it too.
        self.inner.stopped.store(true, Ordering::Release);
        // A full counter (EAGAIN) already wakes everyone; nothing else can fail here.
        let _ = rustix::io::write(&self.inner.event, &1u64.to_ne_bytes());
    }

    /// Whether [`StopHandle::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::Acquire)
    }

    /// [`wait`] that also returns once this handle is stopped.
    pub fn wait(
        &self,
        socket: impl AsFd,
        events: PollFlags,
        deadline: Option<Instant>,
    ) -> io::Result<Wake> {
        wait(socket, events, Some(self), deadline)
    }
}

/// The eventfd that turns readable once the handle is stopped, for a loop that polls
/// several sockets at once (a server's doorman).
impl AsFd for StopHandle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.event.as_fd()
    }
}

/// Waits until `socket` reports any of `events` (or an error or hang-up), `stop` (if given)
/// is stopped, or `deadline` passes (`None`: no deadline). Interrupted polls are retried.
pub fn wait(
    socket: impl AsFd,
    events: PollFlags,
    stop: Option<&StopHandle>,
    deadline: Option<Instant>,
) -> io::Result<Wake> {
    let stopped = || stop.is_some_and(StopHandle::is_stopped);
    loop {
        if stopped() {
            return Ok(Wake::Stopped);
        }
        let timeout = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(Wake::TimedOut);
                }
                // Only a deadline centuries away overflows; waiting "for ever" is the same.
                Some(Timespec::try_from(left).unwrap_or(Timespec {
                    tv_sec: i64::MAX,
                    tv_nsec: 0,
                }))
            }
            None => None,
        };
        let socket = PollFd::new(&socket, events);
        let ready = match stop {
            Some(s) => first_ready(
                [socket, PollFd::new(&s.inner.event, PollFlags::IN)],
                timeout,
            )?,
            None => first_ready([socket], timeout)?,
        };
        if stopped() {
            return Ok(Wake::Stopped);
        }
        if ready {
            return Ok(Wake::Ready);
        }
    }
}

/// One `poll` of `fds`: whether the first (the socket) reported anything. An interrupted
/// poll reports nothing, so the caller's loop checks the stop flag and deadline again.
fn first_ready<const N: usize>(
    mut fds: [PollFd<'_>; N],
    timeout: Option<Timespec>,
) -> io::Result<bool> {
    match poll(&mut fds, timeout.as_ref()) {
        Ok(_) => Ok(fds.first().is_some_and(|f| !f.revents().is_empty())),
        Err(Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Whether the peer of `socket` has closed its end (both directions): a zero-timeout poll.
/// A peer that only shut down its writing side (and still waits for a reply) is not gone.
pub fn peer_gone(socket: impl AsFd) -> bool {
    let mut fds = [PollFd::new(&socket, PollFlags::empty())];
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
    use std::io::Write;
    use std::net::Shutdown;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    fn soon() -> Option<Instant> {
        Some(Instant::now() + Duration::from_millis(20))
    }

    #[test]
    fn wait_reports_deadline_data_and_stop_and_stop_wins() {
        let stop = StopHandle::new().unwrap();
        let (a, mut b) = UnixStream::pair().unwrap();
        assert_eq!(
            stop.wait(&a, PollFlags::IN, soon()).unwrap(),
            Wake::TimedOut
        );
        b.write_all(b"x").unwrap();
        assert_eq!(stop.wait(&a, PollFlags::IN, None).unwrap(), Wake::Ready);
        stop.stop();
        assert_eq!(stop.wait(&a, PollFlags::IN, None).unwrap(), Wake::Stopped);
    }

    #[test]
    fn stop_wakes_a_blocked_waiter_and_clones_share_state() {
        let stop = StopHandle::new().unwrap();
        let clone = stop.clone();
        let (a, _b) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || clone.wait(&a, PollFlags::IN, None).unwrap());
        assert!(!stop.is_stopped());
        stop.stop();
        assert_eq!(t.join().unwrap(), Wake::Stopped);
        assert!(stop.is_stopped());
    }

    #[test]
    fn without_a_stop_handle_only_the_socket_and_deadline_count() {
        let (a, mut b) = UnixStream::pair().unwrap();
        assert_eq!(
            wait(&a, PollFlags::IN, None, soon()).unwrap(),
            Wake::TimedOut
        );
        assert_eq!(wait(&a, PollFlags::OUT, None, soon()).unwrap(), Wake::Ready);
        b.write_all(b"x").unwrap();
        assert_eq!(wait(&a, PollFlags::IN, None, soon()).unwrap(), Wake::Ready);
    }

    #[test]
    fn a_hung_up_peer_wakes_a_reader() {
        let stop = StopHandle::new().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        assert_eq!(stop.wait(&a, PollFlags::IN, soon()).unwrap(), Wake::Ready);
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
