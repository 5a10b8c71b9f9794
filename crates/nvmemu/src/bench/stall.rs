// SPDX-License-Identifier: Apache-2.0
//! When a bench queue gives up waiting: the stall check both queue kinds (vfio-user and
//! NVMe/TCP) run after a poll that found nothing. The clock is read once per
//! `STALL_CHECK_POLLS` empty polls, never per I/O.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The longest wait for any completion while commands are in flight, once the run
/// was asked to stop (Ctrl-C, SIGTERM).
pub const STOP_STALL_TIMEOUT: Duration = Duration::from_secs(1);
/// Empty polls between two clock reads during a stall.
const STALL_CHECK_POLLS: u32 = 1024;

/// A queue's stall state.
#[derive(Debug)]
pub(crate) struct StallWatch {
    /// The run's stop flag: a stall is given up sooner once it is set.
    stop: Arc<AtomicBool>,
    /// The longest wait for any completion while commands are in flight.
    timeout: Duration,
    /// Consecutive polls that found nothing while commands were in flight.
    empty_polls: u32,
    /// When the current stall was first noticed.
    since: Option<Instant>,
}

impl StallWatch {
    pub(crate) fn new(stop: Arc<AtomicBool>, timeout: Duration) -> StallWatch {
        StallWatch {
            stop,
            timeout,
            empty_polls: 0,
            since: None,
        }
    }

    /// A poll completed something: no stall.
    pub(crate) fn progress(&mut self) {
        self.empty_polls = 0;
        self.since = None;
    }

    /// After a poll that found nothing, with `outstanding` commands in flight: how long
    /// they have waited, once past the limit.
    pub(crate) fn after_empty_poll(&mut self, outstanding: usize) -> Option<Duration> {
        if outstanding == 0 {
            self.progress();
            return None;
        }
        self.empty_polls += 1;
        if self.empty_polls < STALL_CHECK_POLLS {
            return None;
        }
        self.empty_polls = 0;
        let since = *self.since.get_or_insert_with(Instant::now);
        let limit = if self.stop.load(Ordering::Relaxed) {
            STOP_STALL_TIMEOUT.min(self.timeout)
        } else {
            self.timeout
        };
        let waited = since.elapsed();
        (waited >= limit).then_some(waited)
    }
}
