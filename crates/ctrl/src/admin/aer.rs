// SPDX-License-Identifier: Apache-2.0
//! Asynchronous Event Request (NVMe Base 1.4, 5.2): held commands, pending events, and the
//! per-type masking that lasts until the host reads the event's log page.

use nvmemu_spec::features::aec;
use nvmemu_spec::log_page::{AsyncEvent, AsyncEventType, LogPageId};
use nvmemu_spec::{Cid, Qid, Status};

use crate::Controller;

/// Asynchronous Event Request Limit (AERL, zero-based): 4 requests may be outstanding.
pub(crate) const AERL: u8 = 3;
const SLOTS: usize = AERL as usize + 1;
/// Distinct events that may wait for a request.
const PENDING: usize = 4;

/// Held requests and events waiting for one.
#[derive(Debug, Default)]
pub(crate) struct AerState {
    requests: [Cid; SLOTS],
    request_count: usize,
    pending: [Option<AsyncEvent>; PENDING],
    /// Per event type: reported and not yet cleared by reading its log page.
    masked: [bool; 4],
}

fn type_index(kind: AsyncEventType) -> usize {
    match kind {
        AsyncEventType::Error => 0,
        AsyncEventType::SmartHealth => 1,
        AsyncEventType::Notice => 2,
        AsyncEventType::IoCommandSpecific => 3,
    }
}

impl AerState {
    /// Drop held requests and pending events (controller reset).
    pub(crate) fn reset(&mut self) {
        *self = AerState::default();
    }

    fn push_request(&mut self, cid: Cid) -> bool {
        match self.requests.get_mut(self.request_count) {
            Some(slot) => {
                *slot = cid;
                self.request_count += 1;
                true
            }
            None => false,
        }
    }

    fn queue(&mut self, event: AsyncEvent) {
        if self
            .masked
            .get(type_index(event.kind))
            .copied()
            .unwrap_or(true)
            || self.pending.contains(&Some(event))
        {
            return;
        }
        if let Some(slot) = self.pending.iter_mut().find(|p| p.is_none()) {
            *slot = Some(event);
        }
    }

    /// The oldest held request and the oldest pending event, if both exist.
    fn take_pair(&mut self) -> Option<(Cid, AsyncEvent)> {
        if self.request_count == 0 {
            return None;
        }
        let event = self.pending.first().copied().flatten()?;
        self.pending.rotate_left(1);
        if let Some(last) = self.pending.last_mut() {
            *last = None;
        }
        let cid = self.requests.first().copied()?;
        self.requests.rotate_left(1);
        self.request_count -= 1;
        if let Some(m) = self.masked.get_mut(type_index(event.kind)) {
            *m = true;
        }
        Some((cid, event))
    }

    /// Reading `lid` (without Retain Asynchronous Event) re-arms the event types it clears.
    pub(crate) fn log_read(&mut self, lid: LogPageId) {
        for (kind, m) in [
            AsyncEventType::Error,
            AsyncEventType::SmartHealth,
            AsyncEventType::Notice,
            AsyncEventType::IoCommandSpecific,
        ]
        .into_iter()
        .zip(self.masked.iter_mut())
        {
            let clears = match kind {
                AsyncEventType::Error => lid == LogPageId::ErrorInformation,
                AsyncEventType::SmartHealth => lid == LogPageId::SmartHealth,
                AsyncEventType::Notice => lid == LogPageId::ChangedNamespaceList,
                AsyncEventType::IoCommandSpecific => lid == LogPageId::ReservationNotification,
            };
            if clears {
                *m = false;
            }
        }
    }

    /// Requests currently held.
    pub(crate) fn outstanding(&self) -> usize {
        self.request_count
    }
}

impl Controller {
    /// Hold an Asynchronous Event Request; beyond AERL + 1 it fails at once.
    pub(crate) fn async_event_request(&mut self, cid: Cid) -> Option<Result<u32, Status>> {
        if self.aer.push_request(cid) {
            None
        } else {
            Some(Err(Status::AER_LIMIT_EXCEEDED))
        }
    }

    /// Queue an event if the host enabled its type (error events cannot be disabled;
    /// reservation events are masked per namespace before they get here).
    pub(crate) fn raise_event(&mut self, event: AsyncEvent) {
        let enabled = match event.kind {
            AsyncEventType::Error => true,
            AsyncEventType::SmartHealth => self.features.aec & aec::SMART_MASK != 0,
            AsyncEventType::Notice => self.features.aec & aec::NAMESPACE_ATTRIBUTE != 0,
            AsyncEventType::IoCommandSpecific => true,
        };
        if enabled && self.state.is_ready() {
            self.aer.queue(event);
        }
    }

    /// Complete held requests with pending events while the admin CQ has room.
    pub(crate) fn deliver_events(&mut self) -> usize {
        self.take_reservation_notices();
        let mut n = 0;
        while self.aer.outstanding() > 0 && self.cq_has_room(Qid::ADMIN) {
            let Some((cid, event)) = self.aer.take_pair() else {
                break;
            };
            if self.post_admin(cid, event.to_dw0()) {
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_pair_with_requests_and_mask_until_log_read() {
        let mut a = AerState::default();
        a.queue(AsyncEvent::NAMESPACE_ATTRIBUTE_CHANGED);
        a.queue(AsyncEvent::NAMESPACE_ATTRIBUTE_CHANGED);
        assert_eq!(a.take_pair(), None);
        for i in 0..4 {
            assert!(a.push_request(Cid(i)));
        }
        assert!(!a.push_request(Cid(9)));
        assert_eq!(
            a.take_pair(),
            Some((Cid(0), AsyncEvent::NAMESPACE_ATTRIBUTE_CHANGED))
        );
        assert_eq!(a.take_pair(), None, "coalesced into one event");
        a.queue(AsyncEvent::NAMESPACE_ATTRIBUTE_CHANGED);
        assert_eq!(a.take_pair(), None, "masked until the log is read");
        a.log_read(LogPageId::ChangedNamespaceList);
        a.queue(AsyncEvent::NAMESPACE_ATTRIBUTE_CHANGED);
        assert_eq!(
            a.take_pair(),
            Some((Cid(1), AsyncEvent::NAMESPACE_ATTRIBUTE_CHANGED))
        );
        assert_eq!(a.outstanding(), 2);
    }
}
