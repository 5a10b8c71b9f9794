// SPDX-License-Identifier: Apache-2.0
//! The Reservation Notification log page (LID 80h, NVMe Base 1.4, Get Log Page) and the
//! Reservation Notification Mask and Reservation Persistence features (82h, 83h).
//!
//! Notices other controllers' reservation commands send (`resv_notify.rs`) become log
//! pages here unless this controller masked their type for that namespace, and raise the
//! "Reservation Log Page Available" event. Each Get Log Page returns the oldest page and
//! removes it; with none left it returns an empty (all zero) page.

use std::collections::VecDeque;
use std::sync::Arc;

use nvmemu_spec::log_page::AsyncEvent;
use nvmemu_spec::reservation::notice;
use nvmemu_spec::{Nsid, Status};

use crate::Controller;
use crate::io::active_ns;
use crate::reservation::Host;
use crate::resv_notify::{INBOX_MAX, Inbox, Notice};

/// Log pages kept before the oldest unread ones stop growing the queue (as SPDK's 255).
const LOG_MAX: usize = INBOX_MAX;

#[derive(Debug, Clone, Copy)]
struct LogEntry {
    count: u64,
    notice: Notice,
}

/// A controller's inbox and its queue of unread log pages.
#[derive(Debug)]
pub(crate) struct ResvNotices {
    pub(crate) inbox: Arc<Inbox>,
    log: VecDeque<LogEntry>,
    /// Log Page Count of the newest page created (0: none since the last reset).
    count: u64,
}

impl ResvNotices {
    pub(crate) fn new(cntlid: u16) -> ResvNotices {
        ResvNotices {
            inbox: Arc::new(Inbox::new(Host {
                id: [0; 16],
                cntlid,
            })),
            log: VecDeque::new(),
            count: 0,
        }
    }

    /// Controller reset: no pages, the count starts again at 0, the host identifier is
    /// cleared.
    pub(crate) fn reset(&mut self, host: Host) {
        self.inbox.clear();
        self.inbox.set_host(host);
        self.log.clear();
        self.count = 0;
    }

    /// Create a log page. A full queue loses it, but the count still moves on, and the
    /// newest queued page carries the latest count so the host sees the gap (as SPDK).
    fn add(&mut self, notice: Notice) {
        self.count = next_count(self.count);
        if self.log.len() < LOG_MAX {
            self.log.push_back(LogEntry {
                count: self.count,
                notice,
            });
        } else if let Some(newest) = self.log.back_mut() {
            newest.count = self.count;
        }
    }

    /// Pages lost before they reached this controller: counted, as lost pages are.
    fn lose(&mut self, n: u64) {
        for _ in 0..n.min(LOG_MAX as u64 + 1) {
            self.count = next_count(self.count);
        }
        if let Some(newest) = self.log.back_mut()
            && n > 0
        {
            newest.count = self.count;
        }
    }

    /// The oldest page, as the log page's 64 bytes; zeros if there is none.
    pub(crate) fn oldest_page(&self) -> [u8; notice::LOG_SIZE] {
        let mut page = [0u8; notice::LOG_SIZE];
        if let Some(e) = self.log.front() {
            page[notice::LOG_COUNT..notice::LOG_COUNT + 8].copy_from_slice(&e.count.to_le_bytes());
            page[notice::LOG_TYPE] = e.notice.kind.raw();
            let after = u8::try_from(self.log.len() - 1).unwrap_or(u8::MAX);
            page[notice::LOG_AVAILABLE] = after;
            page[notice::LOG_NSID..notice::LOG_NSID + 4]
                .copy_from_slice(&e.notice.nsid.to_le_bytes());
        }
        page
    }

    /// The host read the oldest page: remove it.
    pub(crate) fn consume_oldest(&mut self) {
        self.log.pop_front();
    }
}

/// The Log Page Count after `c`: 0 means an empty page, so it wraps to 1.
fn next_count(c: u64) -> u64 {
    c.checked_add(1).unwrap_or(1)
}

impl Controller {
    /// Turn waiting notices into log pages; one event if any page was created. Called
    /// once per pass; one relaxed load when nothing waits.
    #[inline]
    pub(crate) fn take_reservation_notices(&mut self) {
        if !self.resv.inbox.has_pending() {
            return;
        }
        self.take_reservation_notices_cold();
    }

    #[cold]
    fn take_reservation_notices_cold(&mut self) {
        let inbox = Arc::clone(&self.resv.inbox);
        let mut created = false;
        let lost = inbox.drain(|n| {
            if self.notice_wanted(n) {
                self.resv.add(n);
                created = true;
            }
        });
        self.resv.lose(lost);
        if created {
            self.raise_event(AsyncEvent::RESERVATION_LOG_AVAILABLE);
        }
    }

    /// Whether `n` is for a namespace still attached whose mask lets its type through.
    fn notice_wanted(&self, n: Notice) -> bool {
        active_ns(&self.namespaces, Nsid(n.nsid))
            .is_ok_and(|ns| ns.notice_mask & n.kind.mask_bit() == 0)
    }

    /// Get Features 82h / 83h: the mask, or PTPL (never on), of one attached namespace.
    pub(crate) fn get_reservation_feature(
        &self,
        persistence: bool,
        nsid: Nsid,
    ) -> Result<u32, Status> {
        if nsid == Nsid::BROADCAST {
            tracing::debug!(target: "guest", "Get Features of a namespace feature for every namespace");
            return Err(Status::INVALID_FIELD);
        }
        let ns = self.attached(nsid)?;
        Ok(if persistence { 0 } else { ns.notice_mask })
    }

    /// Set Features 82h / 83h for one attached namespace or, with NSID FFFFFFFFh, all.
    /// PTPL cannot be turned on: RESCAP does not offer it.
    pub(crate) fn set_reservation_feature(
        &mut self,
        persistence: bool,
        nsid: Nsid,
        value: u32,
    ) -> Result<u32, Status> {
        if persistence && value & notice::PTPL != 0 {
            tracing::debug!(target: "guest", "Persist Through Power Loss is not supported");
            return Err(Status::INVALID_FIELD);
        }
        if nsid != Nsid::BROADCAST {
            self.attached(nsid)?;
        }
        if persistence {
            return Ok(0);
        }
        for ns in self.namespaces.iter_mut().flatten() {
            if nsid == Nsid::BROADCAST || ns.nsid() == nsid {
                ns.notice_mask = value & notice::MASK_BITS;
            }
        }
        Ok(0)
    }

    fn attached(&self, nsid: Nsid) -> Result<&crate::Namespace, Status> {
        active_ns(&self.namespaces, nsid).inspect_err(|_| {
            tracing::debug!(target: "guest", nsid = nsid.0, "feature for a namespace not attached");
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmemu_spec::reservation::notice::NoticeKind;

    fn notice(nsid: u32) -> Notice {
        Notice {
            nsid,
            kind: NoticeKind::ReservationPreempted,
        }
    }

    #[test]
    fn pages_come_out_oldest_first_with_the_count_and_what_is_left() {
        let mut r = ResvNotices::new(1);
        assert_eq!(r.oldest_page(), [0; 64], "empty page");
        r.add(notice(3));
        r.add(notice(4));
        let p = r.oldest_page();
        assert_eq!(p[0], 1);
        assert_eq!(p[8], 3);
        assert_eq!(p[9], 1);
        assert_eq!(p[12], 3);
        r.consume_oldest();
        let p = r.oldest_page();
        assert_eq!((p[0], p[9], p[12]), (2, 0, 4));
    }

    #[test]
    fn a_full_log_loses_pages_but_counts_them() {
        let mut r = ResvNotices::new(1);
        for _ in 0..LOG_MAX + 5 {
            r.add(notice(1));
        }
        assert_eq!(r.log.len(), LOG_MAX);
        assert_eq!(r.oldest_page()[9], 254);
        assert_eq!(r.log.back().unwrap().count, (LOG_MAX + 5) as u64);
        r.lose(2);
        assert_eq!(r.log.back().unwrap().count, (LOG_MAX + 7) as u64);
        assert_eq!(next_count(u64::MAX), 1);
    }
}
