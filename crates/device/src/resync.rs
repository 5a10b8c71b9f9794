// SPDX-License-Identifier: Apache-2.0
//! Whether a control thread and its poller agree on the controller, and how they come to
//! agree again after a call timed out.
//!
//! A call the poller did not answer in time stays queued and may still run, so from then on
//! the control side's view (its DMA table above all) and the poller's may differ: the
//! client of that moment is dropped. When it has gone, one resync job is queued behind
//! whatever is still pending: it resets the controller and gives it the state the control
//! side now has (no DMA regions, no interrupt fds). Jobs run in order, so once the resync
//! has answered every stale call has run before it and both sides agree: the next client is
//! served. Until then each new client is refused with ENODEV, after a short wait for the
//! answer. A poller that was only slow (a burst of work, a descheduled thread) so costs one
//! client, never an operator's intervention.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use nvmemu_mem::{GuestMemory, MmapRegion};

use crate::ControllerId;
use crate::irq::MsixSink;
use crate::mailbox::Mailbox;
use crate::poller::PollerState;

/// The most a new client's request waits for an outstanding resync to answer (at most
/// the call timeout).
const RESYNC_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug)]
enum LinkState {
    /// Both sides agree.
    Agreed,
    /// A call timed out while a client was connected; that client is being dropped.
    Lost { since: Instant },
    /// The client has gone; the resync job is queued and `answer` reports it.
    Resyncing {
        since: Instant,
        answer: Receiver<()>,
    },
}

/// A control thread's link to its poller: in sync, or on the way back to it.
#[derive(Debug)]
pub(crate) struct PollerLink {
    id: ControllerId,
    wait: Duration,
    state: RefCell<LinkState>,
}

impl PollerLink {
    /// In sync; `call_timeout` is how long the control thread's calls wait.
    pub(crate) fn new(id: ControllerId, call_timeout: Duration) -> PollerLink {
        PollerLink {
            id,
            wait: call_timeout.min(RESYNC_WAIT),
            state: RefCell::new(LinkState::Agreed),
        }
    }

    /// Whether calls may be made (the two sides agree).
    pub(crate) fn in_sync(&self) -> bool {
        matches!(*self.state.borrow(), LinkState::Agreed)
    }

    /// A call was not answered within `timeout`: the client is to be dropped.
    pub(crate) fn lost(&self, timeout: Duration) {
        let mut state = self.state.borrow_mut();
        if matches!(*state, LinkState::Agreed) {
            tracing::error!(
                "controller {:?}: its poller did not answer within {timeout:?}; its client \
                 is dropped, and the controller serves again once the poller answers",
                self.id
            );
            *state = LinkState::Lost {
                since: Instant::now(),
            };
        }
    }

    /// The client has gone (the control side now holds no DMA regions and no interrupt
    /// fds, and `doorbells` is the page the next client gets): queue the resync that brings
    /// the poller to the same state.
    pub(crate) fn client_gone(&self, mailbox: &Mailbox<PollerState>, doorbells: Arc<MmapRegion>) {
        let mut state = self.state.borrow_mut();
        let LinkState::Lost { since } = *state else {
            return;
        };
        let id = self.id;
        let answer = mailbox.post_call(move |st| {
            if let Some(c) = st.get_mut(id) {
                c.ctrl.reset();
                let _ = doorbells.fill(0, doorbells.len(), 0);
                // The control side's page: a fresh one unless none could be made.
                let _ = c.ctrl.replace_doorbells(doorbells);
                c.ctrl.set_guest_memory(Arc::new(GuestMemory::new()));
                c.irq = MsixSink::default();
            }
        });
        *state = LinkState::Resyncing { since, answer };
    }

    /// Whether the controller can serve a request now. While resyncing, waits briefly for
    /// the poller's answer and returns to serving once it comes.
    pub(crate) fn can_serve(&self) -> bool {
        let mut state = self.state.borrow_mut();
        match &*state {
            LinkState::Agreed => true,
            LinkState::Lost { .. } => false,
            LinkState::Resyncing { since, answer } => match answer.recv_timeout(self.wait) {
                Ok(()) => {
                    tracing::warn!(
                        "controller {:?} recovered: its poller answered again after {:?}",
                        self.id,
                        since.elapsed()
                    );
                    *state = LinkState::Agreed;
                    true
                }
                Err(RecvTimeoutError::Timeout) => {
                    tracing::warn!(
                        "controller {:?}: its poller has not answered for {:?}; client refused",
                        self.id,
                        since.elapsed()
                    );
                    false
                }
                // The poller dropped the job without running it (it is stopping).
                Err(RecvTimeoutError::Disconnected) => false,
            },
        }
    }
}
