// SPDX-License-Identifier: Apache-2.0
//! Which sockets have something for the poll group: one epoll set with the listeners,
//! every connection and the group's waker (an eventfd other groups write after handing it a
//! connection). Listeners are level-triggered (ready while connections wait in the
//! backlog); connections are edge-triggered: an event says bytes arrived or send space
//! opened, and the connection keeps that in its own flags until a read or a write finds
//! the socket dry. A pass asks once without waiting and visits only the connections named,
//! so neither a pass nor the sleep (the same call with a timeout) costs more with more
//! idle connections, and no `accept` or `recv` runs just to learn there is nothing.

use std::io;
use std::mem::MaybeUninit;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};
use rustix::event::{EventfdFlags, Timespec, eventfd};

/// The tag of listener events (connections are tagged with their slot index).
const LISTENER: u64 = u64::MAX;
/// The tag of the waker's events.
const WAKE: u64 = u64::MAX - 1;
/// Events taken per call; more stay queued in the kernel for the next pass.
const EVENTS: usize = 1024;

/// What one event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ready {
    /// A listener has connections to accept.
    Listener,
    /// Another group woke this one (its control channel has something).
    Wake,
    /// Connection `slot` can be read (bytes, end of stream or an error) and/or written.
    Conn {
        slot: usize,
        read: bool,
        write: bool,
    },
}

/// The epoll set.
#[derive(Debug)]
pub(crate) struct Readiness {
    epoll: OwnedFd,
    waker: Waker,
}

/// Wakes a poll group sleeping in `epoll_wait`: a write to its eventfd (level-triggered in
/// its set, read back when reported).
#[derive(Debug, Clone)]
pub(crate) struct Waker(Arc<OwnedFd>);

impl Waker {
    /// Wake the group (a failed write leaves it to its next timed wake-up, within `SLEEP`).
    pub(crate) fn wake(&self) {
        let _ = rustix::io::write(&*self.0, &1u64.to_ne_bytes());
    }
}

impl Readiness {
    pub(crate) fn new() -> io::Result<Readiness> {
        let epoll = epoll::create(CreateFlags::CLOEXEC)?;
        let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        epoll::add(&epoll, &fd, EventData::new_u64(WAKE), EventFlags::IN)?;
        Ok(Readiness {
            epoll,
            waker: Waker(Arc::new(fd)),
        })
    }

    /// What wakes this group from another thread.
    pub(crate) fn waker(&self) -> Waker {
        self.waker.clone()
    }

    /// Stop watching `s` (a connection handed to another group).
    pub(crate) fn remove_conn(&self, s: &TcpStream) -> io::Result<()> {
        epoll::delete(&self.epoll, s.as_fd())?;
        Ok(())
    }

    /// Watch `l` (it leaves the set when it is closed).
    pub(crate) fn add_listener(&self, l: &TcpListener) -> io::Result<()> {
        epoll::add(&self.epoll, l, EventData::new_u64(LISTENER), EventFlags::IN)?;
        Ok(())
    }

    /// Watch connection `s` in slot `slot` (it leaves the set when it is closed).
    pub(crate) fn add_conn(&self, s: &TcpStream, slot: usize) -> io::Result<()> {
        let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
        epoll::add(
            &self.epoll,
            s.as_fd(),
            EventData::new_u64(slot as u64),
            flags,
        )?;
        Ok(())
    }

    /// Hand each event now to `each`, waiting up to `timeout` for one (None: do not wait).
    /// The events land on the stack, so a call allocates nothing.
    pub(crate) fn wait(&self, timeout: Option<Duration>, mut each: impl FnMut(Ready)) {
        let t = timeout.map_or(
            Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            |d| Timespec {
                tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(d.subsec_nanos()),
            },
        );
        let mut buf = [MaybeUninit::<Event>::uninit(); EVENTS];
        let events = match epoll::wait(&self.epoll, &mut buf, Some(&t)) {
            Ok((events, _)) => events,
            Err(e) => {
                if e != rustix::io::Errno::INTR {
                    tracing::warn!(%e, "epoll_wait failed");
                }
                return;
            }
        };
        let gone = EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR;
        for ev in events.iter() {
            let (flags, tag) = (ev.flags, ev.data.u64());
            each(if tag == LISTENER {
                Ready::Listener
            } else if tag == WAKE {
                // Reset the counter, or the level-triggered event comes back every call.
                let mut b = [0u8; 8];
                let _ = rustix::io::read(&*self.waker.0, &mut b[..]);
                Ready::Wake
            } else {
                Ready::Conn {
                    slot: usize::try_from(tag).unwrap_or(usize::MAX),
                    read: flags.intersects(EventFlags::IN | gone),
                    write: flags.intersects(EventFlags::OUT | gone),
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    fn events(r: &Readiness, timeout: Option<Duration>) -> Vec<Ready> {
        let mut v = Vec::new();
        r.wait(timeout, |e| v.push(e));
        v
    }

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    #[test]
    fn names_the_connection_that_got_bytes_once_per_arrival() {
        let r = Readiness::new().unwrap();
        let (mut c1, s1) = pair();
        let (_c2, s2) = pair();
        r.add_conn(&s1, 7).unwrap();
        r.add_conn(&s2, 9).unwrap();
        // Both start writable (the first edge), neither readable.
        let first: Vec<_> = events(&r, None);
        assert_eq!(first.len(), 2);
        assert!(first.iter().all(|e| matches!(
            e,
            Ready::Conn {
                read: false,
                write: true,
                ..
            }
        )));
        assert_eq!(
            events(&r, None).len(),
            0,
            "edge-triggered: nothing new, nothing named"
        );
        c1.write_all(b"x").unwrap();
        let got: Vec<_> = events(&r, Some(Duration::from_secs(5)));
        assert!(matches!(
            got[..],
            [Ready::Conn {
                slot: 7,
                read: true,
                ..
            }]
        ));
        assert_eq!(events(&r, None).len(), 0);
    }

    #[test]
    fn a_listener_is_ready_while_connections_wait() {
        let r = Readiness::new().unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        r.add_listener(&l).unwrap();
        assert_eq!(events(&r, None).len(), 0);
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let got: Vec<_> = events(&r, Some(Duration::from_secs(5)));
        assert_eq!(got, [Ready::Listener]);
        assert_eq!(events(&r, None), [Ready::Listener]);
    }

    #[test]
    fn a_wake_is_named_once_however_many_came() {
        let r = Readiness::new().unwrap();
        assert_eq!(events(&r, None).len(), 0);
        let w = r.waker();
        w.wake();
        w.wake();
        assert_eq!(events(&r, Some(Duration::from_secs(5))), [Ready::Wake]);
        assert_eq!(events(&r, None).len(), 0, "reading it reset the eventfd");
        std::thread::spawn(move || w.wake());
        assert_eq!(
            events(&r, Some(Duration::from_secs(5))),
            [Ready::Wake],
            "a wake from another thread ends the wait"
        );
    }
}
