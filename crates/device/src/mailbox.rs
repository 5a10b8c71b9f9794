// SPDX-License-Identifier: Apache-2.0
//! Control-thread -> poller calls.
//!
//! A poller owns its controllers outright (`&mut`, no lock on the I/O path). Anything the
//! control threads need done to that state (a register access, a new DMA table, new interrupt
//! eventfds, a reset) is sent as a closure that the poller runs between two polling passes.
//! The poller's only per-pass cost is one Acquire load of `pending`, a line written only
//! when mail is posted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use std::thread::Thread;
use std::time::Duration;

use crossbeam_utils::CachePadded;

/// How long a control thread waits for a poller before giving up (QEMU times out at 5 s).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(3);

type Job<S> = Box<dyn FnOnce(&mut S) + Send>;

/// Why a call to the poller failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MailboxError {
    /// The poller did not run the call in time (stopped or wedged).
    #[error("poller did not answer within {0:?}")]
    Timeout(Duration),
}

/// A queue of jobs for one poller, whose state is `S`.
#[repr(align(64))]
pub struct Mailbox<S> {
    /// Loaded by the poller on every pass: padded onto its own line.
    pending: CachePadded<AtomicBool>,
    jobs: Mutex<Vec<Job<S>>>,
    poller: Mutex<Option<Thread>>,
}

impl<S> std::fmt::Debug for Mailbox<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox")
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl<S> Default for Mailbox<S> {
    fn default() -> Self {
        Mailbox {
            pending: CachePadded::new(AtomicBool::new(false)),
            jobs: Mutex::new(Vec::new()),
            poller: Mutex::new(None),
        }
    }
}

impl<S> Mailbox<S> {
    /// Record the poller thread so a call can wake it from a back-off sleep.
    pub fn set_poller(&self, thread: Thread) {
        *self.poller.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
    }

    /// Run `f` on the poller and wait for its result.
    pub fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Result<R, MailboxError> {
        self.call_with_timeout(CALL_TIMEOUT, f)
    }

    /// Run `f` on the poller and wait at most `timeout` for its result.
    pub fn call_with_timeout<R: Send + 'static>(
        &self,
        timeout: Duration,
        f: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Result<R, MailboxError> {
        self.post_call(f)
            .recv_timeout(timeout)
            .map_err(|_| MailboxError::Timeout(timeout))
    }

    /// Queue `f` for the poller without waiting; its result arrives on the returned
    /// channel (which reports disconnection if the poller stops first). Jobs run in the
    /// order they were posted, so once this one has answered, every earlier one has run.
    pub fn post_call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> mpsc::Receiver<R> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.post(Box::new(move |state: &mut S| {
            // The caller may have timed out and gone; nothing to do then.
            let _ = tx.send(f(state));
        }));
        rx
    }

    fn post(&self, job: Job<S>) {
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(job);
        // Release: the job is in the queue before the poller can see `pending`.
        self.pending.store(true, Ordering::Release);
        if let Some(t) = self
            .poller
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            t.unpark();
        }
    }

    /// Poller side: run every queued job. Cheap when nothing is pending.
    #[inline]
    pub fn run_pending(&self, state: &mut S) -> bool {
        // Acquire pairs with the Release in `post`.
        if !self.pending.load(Ordering::Acquire) {
            return false;
        }
        self.pending.store(false, Ordering::Relaxed);
        let jobs = std::mem::take(&mut *self.jobs.lock().unwrap_or_else(|e| e.into_inner()));
        for job in jobs {
            job(state);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn call_runs_on_the_poller_and_returns() {
        let mb: Arc<Mailbox<u32>> = Arc::default();
        let poller = {
            let mb = mb.clone();
            std::thread::spawn(move || {
                let mut state = 5u32;
                let mut ran = 0;
                while ran < 2 {
                    if mb.run_pending(&mut state) {
                        ran += 1;
                    }
                    std::thread::yield_now();
                }
                state
            })
        };
        mb.set_poller(poller.thread().clone());
        assert_eq!(
            mb.call(|s| {
                *s += 1;
                *s
            })
            .unwrap(),
            6
        );
        assert_eq!(
            mb.call(|s| {
                *s *= 2;
                *s
            })
            .unwrap(),
            12
        );
        assert_eq!(poller.join().unwrap(), 12);
    }

    #[test]
    fn call_times_out_without_a_poller() {
        let mb: Mailbox<u32> = Mailbox::default();
        let t = Duration::from_millis(50);
        assert_eq!(
            mb.call_with_timeout(t, |s| *s).unwrap_err(),
            MailboxError::Timeout(t)
        );
    }
}
