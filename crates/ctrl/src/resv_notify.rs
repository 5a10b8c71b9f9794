// SPDX-License-Identifier: Apache-2.0
//! Reservation notifications between controllers (NVMe Base 1.4, 8.8): which controllers
//! a namespace's reservation change reaches, and the inbox through which it reaches a
//! controller that another poller thread owns.
//!
//! A namespace keeps the inboxes of the controllers it is attached to. A reservation
//! command that preempts, releases or clears another host's registration or reservation
//! pushes a notice into the inbox of every controller that host has. The receiving
//! controller checks one flag per poll pass, and only when it is set takes the inbox's
//! mutex and turns the notices into Reservation Notification log pages and an event
//! (`admin/resv_log.rs`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use nvmemu_spec::reservation::notice::NoticeKind;

use crate::reservation::Host;

/// Notices an inbox holds before further ones are only counted: bounds what another
/// controller's host can make this controller keep while its poller is away.
pub(crate) const INBOX_MAX: usize = 255;

/// A notice for namespace `nsid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Notice {
    pub(crate) nsid: u32,
    pub(crate) kind: NoticeKind,
}

#[derive(Debug)]
struct InboxState {
    /// The host the owning controller speaks for now (its Host Identifier changes).
    host: Host,
    notices: VecDeque<Notice>,
    /// Notices dropped because the inbox was full.
    lost: u64,
}

/// One controller's inbox. The owning controller drains it; namespaces push into it.
#[derive(Debug)]
pub(crate) struct Inbox {
    /// Set with the mutex held when a notice is pushed, cleared with it held when the
    /// inbox is drained; the owner reads it without the mutex once per pass as a hint.
    pending: AtomicBool,
    state: Mutex<InboxState>,
}

impl Inbox {
    pub(crate) fn new(host: Host) -> Inbox {
        Inbox {
            pending: AtomicBool::new(false),
            state: Mutex::new(InboxState {
                host,
                notices: VecDeque::new(),
                lost: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record the host the owner speaks for (after Set Features Host Identifier or a
    /// reset); notices go to controllers by host.
    pub(crate) fn set_host(&self, host: Host) {
        self.lock().host = host;
    }

    /// Whether a notice may be waiting.
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// Take every waiting notice and the number lost since the last call.
    pub(crate) fn drain(&self, mut each: impl FnMut(Notice)) -> u64 {
        let mut st = self.lock();
        for n in st.notices.drain(..) {
            each(n);
        }
        self.pending.store(false, Ordering::Relaxed);
        std::mem::take(&mut st.lost)
    }

    /// Drop waiting notices (controller reset: the log starts empty).
    pub(crate) fn clear(&self) {
        self.drain(|_| {});
    }

    fn push_if_for(&self, targets: &[(Host, NoticeKind)], nsid: u32) {
        let mut st = self.lock();
        let host = st.host;
        for &(_, kind) in targets.iter().filter(|(h, _)| h.is(&host)) {
            if st.notices.len() < INBOX_MAX {
                st.notices.push_back(Notice { nsid, kind });
            } else {
                st.lost = st.lost.saturating_add(1);
            }
            self.pending.store(true, Ordering::Relaxed);
        }
    }
}

/// The controllers a namespace is attached to, as (NSID, inbox).
#[derive(Debug, Default)]
pub(crate) struct Subscribers {
    list: Mutex<Vec<(u32, Weak<Inbox>)>>,
}

impl Subscribers {
    fn lock(&self) -> MutexGuard<'_, Vec<(u32, Weak<Inbox>)>> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start sending notices for this namespace, known as `nsid`, to `inbox`. Inboxes of
    /// controllers that are gone are dropped here.
    pub(crate) fn add(&self, nsid: u32, inbox: &Arc<Inbox>) {
        let mut list = self.lock();
        list.retain(|(_, w)| w.strong_count() > 0);
        list.push((nsid, Arc::downgrade(inbox)));
    }

    /// Stop sending notices to `inbox` (the namespace was detached from its controller).
    pub(crate) fn remove(&self, inbox: &Arc<Inbox>) {
        let target = Arc::downgrade(inbox);
        self.lock()
            .retain(|(_, w)| w.strong_count() > 0 && !w.ptr_eq(&target));
    }

    /// Send each (host, kind) to every controller of that host.
    pub(crate) fn send(&self, targets: &[(Host, NoticeKind)]) {
        if targets.is_empty() {
            return;
        }
        for (nsid, w) in self.lock().iter() {
            if let Some(inbox) = w.upgrade() {
                inbox.push_if_for(targets, *nsid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(id: u8, cntlid: u16) -> Host {
        Host {
            id: [id; 16],
            cntlid,
        }
    }

    #[test]
    fn notices_reach_every_controller_of_the_host_and_overflow_is_counted() {
        let subs = Subscribers::default();
        let a1 = Arc::new(Inbox::new(host(1, 1)));
        let a2 = Arc::new(Inbox::new(host(1, 2)));
        let b = Arc::new(Inbox::new(host(2, 3)));
        for i in [&a1, &a2, &b] {
            subs.add(7, i);
        }
        subs.send(&[(host(1, 9), NoticeKind::ReservationReleased)]);
        assert!(a1.has_pending() && a2.has_pending() && !b.has_pending());
        let mut got = Vec::new();
        assert_eq!(a1.drain(|n| got.push(n)), 0);
        assert_eq!(
            got,
            [Notice {
                nsid: 7,
                kind: NoticeKind::ReservationReleased
            }]
        );
        assert!(!a1.has_pending());

        subs.remove(&a2);
        a2.clear();
        for _ in 0..INBOX_MAX + 3 {
            subs.send(&[(host(1, 1), NoticeKind::RegistrationPreempted)]);
        }
        assert!(!a2.has_pending(), "removed");
        let mut n = 0;
        assert_eq!(a1.drain(|_| n += 1), 3);
        assert_eq!(n, INBOX_MAX);
    }
}
