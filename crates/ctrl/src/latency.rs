// SPDX-License-Identifier: Apache-2.0
//! The per-command trace a client in the same process can install
//! ([`Controller::set_trace`](crate::Controller::set_trace); `nvmemu bench --lat-breakdown`
//! does): the poller stores raw TSC ticks for three moments of each command (SQE fetched,
//! backend done, CQE about to be posted) in a slot indexed by queue id and CID, and the
//! client reads them back after it reaped the completion. Commands that complete in a
//! later pass (file I/O, held and set-aside completions) are recorded where they finish
//! and where their CQE is posted (`Instruments::trace_now`). Without a trace nothing is read or
//! written (one test per batch; see `instruments.rs`).
//!
//! Ordering: the ticks are stored (Relaxed) before the CQE's phase word is published with
//! Release; the host reads the phase with Acquire before it reads the ticks, so it sees them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One of the moments the controller records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The SQE was copied out of the ring.
    Fetch = 0,
    /// The backend finished: the bdev copy returned, or a file namespace's last I/O
    /// operation was reaped (for a held command, before its hold).
    Done = 1,
    /// The completion is about to be posted (for a held command, after its hold).
    Post = 2,
}

/// Ticks per (queue, CID): written by the poller, read by the host after the completion.
#[derive(Debug)]
pub struct LatencyTable {
    cids: usize,
    queues: usize,
    ticks: Vec<AtomicU64>,
}

impl LatencyTable {
    /// A table for queue ids `0..queues` and CIDs `0..cids` (commands outside it are not
    /// recorded).
    pub fn new(queues: u16, cids: u16) -> LatencyTable {
        let (q, c) = (usize::from(queues), usize::from(cids));
        LatencyTable {
            cids: c,
            queues: q,
            ticks: (0..q * c * 3).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn index(&self, qid: u16, cid: u16) -> Option<usize> {
        let (q, c) = (usize::from(qid), usize::from(cid));
        (q < self.queues && c < self.cids).then_some((q * self.cids + c) * 3)
    }

    /// Record `ticks` for `stage` of command `cid` on `qid`.
    #[inline]
    pub fn record(&self, qid: u16, cid: u16, stage: Stage, ticks: u64) {
        if let Some(i) = self.index(qid, cid)
            && let Some(t) = self.ticks.get(i + stage as usize)
        {
            t.store(ticks, Ordering::Relaxed);
        }
    }

    /// Command `cid` on `qid` was fetched at `ticks`: its fetch, with the done and post of
    /// the command that used the slot before cleared, so a command that never reaches its
    /// backend (an aborted `pending` one) reads as not done rather than with another's.
    #[inline]
    pub fn fetched(&self, qid: u16, cid: u16, ticks: u64) {
        if let Some(i) = self.index(qid, cid)
            && let Some([fetch, done, post]) = self.ticks.get(i..i + 3)
        {
            fetch.store(ticks, Ordering::Relaxed);
            done.store(0, Ordering::Relaxed);
            post.store(0, Ordering::Relaxed);
        }
    }

    /// The fetch, done and post ticks of command `cid` on `qid` (zeros when never recorded).
    pub fn read(&self, qid: u16, cid: u16) -> Option<[u64; 3]> {
        let i = self.index(qid, cid)?;
        let get = |k: usize| {
            self.ticks
                .get(i + k)
                .map_or(0, |t| t.load(Ordering::Relaxed))
        };
        Some([get(0), get(1), get(2)])
    }
}

/// A shared [`LatencyTable`] as a controller holds it (equal when it is the same table).
#[derive(Debug, Clone)]
pub struct LatencyHook(pub Arc<LatencyTable>);

impl PartialEq for LatencyHook {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for LatencyHook {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_in_range_and_ignores_the_rest() {
        let t = LatencyTable::new(2, 4);
        t.record(1, 3, Stage::Fetch, 10);
        t.record(1, 3, Stage::Done, 20);
        t.record(1, 3, Stage::Post, 30);
        t.record(2, 0, Stage::Fetch, 1);
        t.record(0, 4, Stage::Fetch, 1);
        assert_eq!(t.read(1, 3), Some([10, 20, 30]));
        assert_eq!(t.read(0, 0), Some([0, 0, 0]));
        assert_eq!(t.read(2, 0), None);
        assert_eq!(t.read(0, 4), None);
    }

    #[test]
    fn a_new_fetch_clears_the_previous_commands_done_and_post() {
        let t = LatencyTable::new(2, 4);
        t.record(1, 3, Stage::Fetch, 10);
        t.record(1, 3, Stage::Done, 20);
        t.record(1, 3, Stage::Post, 30);
        t.fetched(1, 3, 40);
        assert_eq!(t.read(1, 3), Some([40, 0, 0]));
        t.fetched(2, 0, 1);
        assert_eq!(t.read(0, 0), Some([0, 0, 0]));
    }
}
