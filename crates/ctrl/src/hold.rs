// SPDX-License-Identifier: Apache-2.0
//! Held completions: a command whose namespace has a model (`model.rs`) executes when it
//! is fetched, but its CQE is posted only when the model says it is due, by the first poll
//! pass at or after that time. The held CQEs wait in one min-heap per controller, ordered
//! by due time and then by arrival, allocated once with room for [`MAX_HELD`]; a full
//! heap stops fetching (the commands wait in their SQs), so a host cannot make it grow.
//! Nothing per command but a heap push and pop: no thread, timer, syscall or allocation.
//! An injected `pending` command (`fault.rs`) is held the same way, never due. A
//! per-command trace (`latency.rs`) gets a held command's *post* when its CQE is posted.
//!
//! What the host sees: the CQE's SQ Head is the one at posting time. A CQ without room
//! keeps every later-due CQE waiting too, until the host frees entries. Deleting an SQ
//! posts its held CQEs at once (as its CQ has room); a reset drops them, as it drops the
//! queues.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use nvmemu_mem::global_clock;
use nvmemu_spec::{Cid, Cqe, Qid, Sqe, Status};

use crate::Controller;
use crate::instruments::Stamps;
use crate::latency::Stage;
use crate::timing::HeldStamps;

/// Most CQEs one controller holds at once (the internal command slots of the device).
pub const MAX_HELD: usize = 4096;

/// The due time of a completion that is never due (an injected `pending` command): only
/// Abort, Delete I/O SQ or a reset ends it.
pub(crate) const NEVER: u64 = u64::MAX;

/// One held CQE.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// When it is due, on the global clock (ns).
    due: u64,
    /// Arrival order: equal deadlines post in the order the commands were fetched.
    seq: u64,
    sqid: Qid,
    cid: Cid,
    status: Status,
    dw0: u32,
    /// Its readings, when its namespace is timed (`timing`).
    stamps: Option<HeldStamps>,
}

impl Held {
    fn key(&self) -> (u64, u64) {
        (self.due, self.seq)
    }
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// The controller's held CQEs, soonest due first.
#[derive(Debug, Default)]
pub(crate) struct HeldCompletions {
    heap: BinaryHeap<Reverse<Held>>,
    seq: u64,
    /// The last `post_due` stopped at a due CQE whose CQ had no room: only the host's
    /// reaping (a CQ head doorbell) lets it go, not time.
    blocked: bool,
}

impl HeldCompletions {
    /// Whether no more commands may be held (fetching stops until some are posted).
    pub(crate) fn is_full(&self) -> bool {
        self.heap.len() >= MAX_HELD
    }

    /// Whether nothing is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// How many CQEs are held.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Drop everything held (a controller reset).
    pub(crate) fn clear(&mut self) {
        self.heap.clear();
        self.blocked = false;
    }
}

impl Controller {
    /// Hold the completion of `sqe` if its namespace's model times it; whether it did.
    /// Out of line, so the unmodelled loop in `poll_sq` stays small. The batch's readings
    /// and the command's fetch and done readings are kept with the CQE when the batch is
    /// timed.
    #[inline(never)]
    pub(crate) fn hold_if_modelled(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        result: Result<u32, Status>,
        (stamps, readings): (Stamps, (u64, u64)),
    ) -> bool {
        match crate::model::due(&mut self.namespaces, sqe) {
            Some(due) => {
                let op = (sqe.opcode(), result.is_ok());
                let timed = self.instruments.held(stamps, sqe.nsid, op, readings);
                self.hold_timed(sqid, sqe, result, due, timed);
                true
            }
            None => false,
        }
    }

    /// Hold the completion of `sqe`, taken from `sqid` and executed with `result`, until
    /// `due`. It is counted now (commands, errors, the Error Information log), as the
    /// command has run; only its CQE waits.
    pub(crate) fn hold(&mut self, sqid: Qid, sqe: &Sqe, result: Result<u32, Status>, due: u64) {
        self.hold_timed(sqid, sqe, result, due, None);
    }

    /// [`hold`](Self::hold), keeping the command's readings (`stamps`) for its timing.
    pub(crate) fn hold_timed(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        result: Result<u32, Status>,
        due: u64,
        stamps: Option<HeldStamps>,
    ) {
        let (status, dw0) = match result {
            Ok(dw0) => (Status::SUCCESS, dw0),
            Err(s) => (s, 0),
        };
        self.account(sqid, sqe, status);
        self.push_held(sqid, sqe, (status, dw0), due, stamps);
    }

    /// Hold a CQE for `sqe` with `status` and `dw0` until `due`, counting nothing (also an
    /// injected `pending` command, which never runs and is not counted).
    pub(crate) fn hold_unaccounted(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        (status, dw0): (Status, u32),
        due: u64,
    ) {
        self.push_held(sqid, sqe, (status, dw0), due, None);
    }

    fn push_held(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        (status, dw0): (Status, u32),
        due: u64,
        stamps: Option<HeldStamps>,
    ) {
        let held = &mut self.held;
        if held.heap.capacity() == 0 {
            // Once per controller, the first time a model holds a command.
            held.heap.reserve_exact(MAX_HELD);
        }
        held.seq += 1;
        held.heap.push(Reverse(Held {
            due,
            seq: held.seq,
            sqid,
            cid: sqe.cid(),
            status,
            dw0,
            stamps,
        }));
    }

    /// Post the held CQEs that are due, soonest first, while their CQs have room; the
    /// number posted. Each CQ posted to is written out before returning.
    pub(crate) fn post_due(&mut self) -> usize {
        let now = global_clock().now_ns();
        let mut posted = 0;
        self.held.blocked = false;
        while let Some(Reverse(next)) = self.held.heap.peek().copied()
            && next.due <= now
        {
            let Some(cqid) = self.queues.sq(next.sqid).map(|sq| sq.cqid) else {
                // Unreachable: deleting an SQ or resetting removes its entries.
                self.held.heap.pop();
                continue;
            };
            if !self.cq_has_room(cqid) {
                self.held.blocked = true;
                break;
            }
            self.held.heap.pop();
            let staged = self.post_held(next, cqid);
            self.flush_cq(cqid);
            if staged {
                posted += 1;
                if let Some(stamps) = next.stamps {
                    self.instruments
                        .held_posted(next.sqid, stamps, &self.namespaces);
                }
            }
        }
        posted
    }

    fn post_held(&mut self, h: Held, cqid: Qid) -> bool {
        let Some(sqhd) = self.queues.sq(h.sqid).map(|sq| sq.head.as_u16()) else {
            return false;
        };
        self.instruments.trace_now((h.sqid, h.cid), Stage::Post);
        self.stage(cqid, Cqe::new(h.cid, h.sqid, sqhd, h.status, h.dw0, false))
    }

    /// SQ `qid` is being deleted: post its held CQEs now, as far as its CQ has room (the
    /// commands have run; a host that stopped reaping gets what fits), and forget the rest.
    pub(crate) fn release_held_on(&mut self, qid: Qid) {
        if self.held.is_empty() {
            return;
        }
        let Some(cqid) = self.queues.sq(qid).map(|sq| sq.cqid) else {
            return;
        };
        let mut all = std::mem::take(&mut self.held.heap).into_sorted_vec();
        // Sorted by Reverse: the latest due first; post in due order.
        all.reverse();
        for Reverse(h) in all.iter().filter(|Reverse(h)| h.sqid == qid) {
            if self.cq_has_room(cqid) {
                self.post_held(*h, cqid);
            }
        }
        self.flush_cq(cqid);
        all.retain(|Reverse(h)| h.sqid != qid);
        self.held.heap = BinaryHeap::from(all);
    }

    /// Abort a held command: its CQE is posted now with Command Abort Requested. Whether
    /// `(sqid, cid)` was held.
    pub(crate) fn abort_held(&mut self, sqid: Qid, cid: Cid) -> bool {
        let found = self
            .held
            .heap
            .iter()
            .any(|Reverse(h)| h.sqid == sqid && h.cid == cid);
        let Some(cqid) = self.queues.sq(sqid).map(|sq| sq.cqid) else {
            return false;
        };
        if !found || !self.cq_has_room(cqid) {
            return false;
        }
        let mut kept = std::mem::take(&mut self.held.heap).into_vec();
        let Some(at) = kept
            .iter()
            .position(|Reverse(h)| h.sqid == sqid && h.cid == cid)
        else {
            return false;
        };
        let Reverse(mut h) = kept.swap_remove(at);
        self.held.heap = BinaryHeap::from(kept);
        h.status = Status::ABORT_REQUESTED;
        h.dw0 = 0;
        let posted = self.post_held(h, cqid);
        self.flush_cq(cqid);
        posted
    }

    /// Whether completions are held (each poll pass posts those due).
    pub(crate) fn holds_completions(&self) -> bool {
        !self.held.is_empty()
    }

    /// When the soonest held CQE is due (ns on `global_clock`): the poller may sleep until
    /// then when nothing else arrives. None when time alone posts nothing: nothing is held,
    /// only injected `pending` commands are, the soonest is waiting for room in its CQ (the
    /// host's reaping frees it), or the controller is not processing commands.
    pub fn next_due_ns(&self) -> Option<u64> {
        if self.held.blocked || !self.state.is_ready() {
            return None;
        }
        // `pending` commands are due at NEVER and sort last: the soonest is one only when
        // nothing else is held.
        let Reverse(soonest) = self.held.heap.peek()?;
        (soonest.due != NEVER).then_some(soonest.due)
    }

    /// CQEs held now (`nvmemu stat`, tests).
    pub fn held_completions(&self) -> usize {
        self.held.len()
    }
}
