// SPDX-License-Identifier: Apache-2.0
//! Deallocate and Write Zeroes: commands whose work is bounded by the namespace, not by a
//! data transfer. One Dataset Management command names up to 256 ranges of up to 2^32 blocks
//! each (the same blocks may be named 256 times), one Write Zeroes up to 65,536 blocks of up
//! to 64 KiB. Done in one go, a client could stall the poller, and every controller on it,
//! for seconds per command.
//!
//! So the ranges are sorted and merged first (a command's work is at most the namespace's
//! size), a command of at most [`PIECE_BYTES`] runs at once, and a larger one is set aside
//! in the controller's one slot and done [`PIECE_BYTES`] per poll pass; its CQE is posted
//! when the last piece is done. While the slot is taken, an SQ whose next command is a
//! Write Zeroes or Dataset Management waits (its head stays where it is); every other
//! command, SQ and controller goes on. Commands of one SQ may complete out of order
//! (NVMe Base 2.0, 3.4.1: the host orders dependent commands by waiting for completions).

use nvmemu_bdev::BdevOp;
use nvmemu_spec::command::DSM_MAX_RANGES;
use nvmemu_spec::opcode::IoOpcode;
use nvmemu_spec::{Nsid, Qid, Sqe, Status};

use super::file_io::Started;
use super::{active_ns, bdev_status};
use crate::Controller;
use crate::latency::Stage;
use crate::namespace::Namespace;

/// The most bytes zeroed or deallocated for one controller in one poll pass (about 25 us
/// of memset on the development VM, a few times that on a loaded machine).
pub(crate) const PIECE_BYTES: u64 = 1 << 20;

/// The byte ranges of one command: sorted, merged, none empty.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ByteRanges {
    /// `[start, end)` pairs; only the first `len` are used.
    list: [(u64, u64); DSM_MAX_RANGES],
    len: usize,
}

impl ByteRanges {
    /// Sorted and merged from `ranges` (`(offset, len)` pairs already checked against the
    /// namespace; empty ones are dropped). At most [`DSM_MAX_RANGES`] are kept, which is
    /// all a command can name.
    pub(crate) fn merged(ranges: impl Iterator<Item = (u64, u64)>) -> ByteRanges {
        let mut out = ByteRanges {
            list: [(0, 0); DSM_MAX_RANGES],
            len: 0,
        };
        for ((start, end), slot) in ranges
            .filter(|&(_, len)| len > 0)
            .map(|(off, len)| (off, off.saturating_add(len)))
            .zip(out.list.iter_mut())
        {
            *slot = (start, end);
            out.len += 1;
        }
        let used = out.list.get_mut(..out.len).unwrap_or_default();
        used.sort_unstable_by_key(|&(start, _)| start);
        let mut merged = 0usize;
        for i in 0..used.len() {
            let Some(&(start, end)) = used.get(i) else {
                break;
            };
            match merged.checked_sub(1).and_then(|m| used.get_mut(m)) {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => {
                    if let Some(slot) = used.get_mut(merged) {
                        *slot = (start, end);
                    }
                    merged += 1;
                }
            }
        }
        out.len = merged;
        out
    }

    fn get(&self, i: usize) -> Option<(u64, u64)> {
        self.list.get(..self.len)?.get(i).copied()
    }

    /// The `[start, end)` pairs.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.len).filter_map(|i| self.get(i))
    }

    /// Bytes covered.
    pub(crate) fn total(&self) -> u64 {
        (0..self.len)
            .filter_map(|i| self.get(i))
            .map(|(start, end)| end - start)
            .sum()
    }
}

/// A Deallocate or Write Zeroes set aside to run across passes.
#[derive(Debug)]
pub(crate) struct Zeroing {
    sqid: Qid,
    sqe: Sqe,
    nsid: Nsid,
    op: BdevOp,
    ranges: ByteRanges,
    /// The range being worked on, and how many of its bytes are done.
    next: usize,
    done: u64,
    /// Set when the work is over; the CQE waits for room in its CQ.
    result: Option<Result<u32, Status>>,
}

/// The controller's one slot for such a command. The work area is allocated once, with the
/// controller, so setting a command aside allocates nothing.
#[derive(Debug)]
pub(crate) struct ZeroingSlot {
    pub(crate) busy: bool,
    work: Box<Zeroing>,
}

impl Default for ZeroingSlot {
    fn default() -> Self {
        ZeroingSlot {
            busy: false,
            work: Box::new(Zeroing {
                sqid: Qid::ADMIN,
                sqe: Sqe::default(),
                nsid: Nsid(0),
                op: BdevOp::Deallocate,
                ranges: ByteRanges::merged(std::iter::empty()),
                next: 0,
                done: 0,
                result: None,
            }),
        }
    }
}

/// Whether `sqe` (an I/O command) is one that may need the slot.
#[inline]
pub(crate) fn may_need_slot(sqe: &Sqe) -> bool {
    matches!(
        IoOpcode::from(sqe.opcode()),
        IoOpcode::WriteZeroes | IoOpcode::DatasetManagement
    )
}

impl Zeroing {
    /// Zero up to [`PIECE_BYTES`] more; `Some` once the command is over.
    fn step(&mut self, ns: &Namespace) -> Option<Result<u32, Status>> {
        let mut budget = PIECE_BYTES;
        while budget > 0
            && let Some((start, end)) = self.ranges.get(self.next)
        {
            let from = start.saturating_add(self.done);
            let len = end.saturating_sub(from).min(budget);
            let last = from.saturating_add(len) >= end;
            if let Err(e) = ns.io().zero_piece(self.op, (from, len), last) {
                return Some(Err(bdev_status(&e)));
            }
            budget -= len;
            if last {
                self.next += 1;
                self.done = 0;
            } else {
                self.done += len;
            }
        }
        (self.next >= self.ranges.len).then_some(Ok(0))
    }
}

impl Controller {
    /// Run `op` over `ranges` of namespace `nsid` for the command `sqe` of `sqid`: at once
    /// when small, else set aside (`None`: the CQE comes from `advance_zeroing`).
    pub(super) fn zero_ranges(
        &mut self,
        (sqid, sqe): (Qid, &Sqe),
        nsid: Nsid,
        op: BdevOp,
        ranges: &ByteRanges,
    ) -> Option<Result<u32, Status>> {
        if self.file_on {
            match self.file_zero((sqid, sqe), nsid, op, ranges) {
                Started::NotHere => {}
                Started::Queued => return None,
                Started::Failed(s) => return Some(Err(s)),
            }
        }
        if ranges.total() <= PIECE_BYTES {
            let ns = match active_ns(&self.namespaces, nsid) {
                Ok(ns) => ns,
                Err(s) => return Some(Err(s)),
            };
            for (start, end) in (0..ranges.len).filter_map(|i| ranges.get(i)) {
                let res = match op {
                    BdevOp::WriteZeroes => ns.io().write_zeroes(start, end - start),
                    _ => ns.io().deallocate(start, end - start),
                };
                if let Err(e) = res {
                    return Some(Err(bdev_status(&e)));
                }
            }
            return Some(Ok(0));
        }
        if self.zeroing.busy {
            // `poll_sq` does not take such a command while the slot is busy.
            return Some(Err(Status::INTERNAL_ERROR));
        }
        let w = &mut *self.zeroing.work;
        (w.sqid, w.sqe, w.nsid, w.op, w.ranges) = (sqid, *sqe, nsid, op, *ranges);
        (w.next, w.done, w.result) = (0, 0, None);
        self.zeroing.busy = true;
        None
    }

    /// One pass's piece of the command set aside, and its CQE once it is over and its CQ
    /// has room. Returns the number of CQEs posted (0 or 1).
    pub(crate) fn advance_zeroing(&mut self) -> usize {
        let w = &mut *self.zeroing.work;
        if w.result.is_none() {
            w.result = match active_ns(&self.namespaces, w.nsid) {
                Ok(ns) => w.step(ns),
                // Detached meanwhile.
                Err(s) => Some(Err(s)),
            };
            if w.result.is_some() {
                self.instruments
                    .trace_now((w.sqid, w.sqe.cid()), Stage::Done);
            }
        }
        let (Some(result), sqid, sqe) = (w.result, w.sqid, w.sqe) else {
            return 0;
        };
        let Some(cqid) = self.queues.sq(sqid).map(|sq| sq.cqid) else {
            // Its SQ is gone (deleting it aborted the command).
            self.zeroing.busy = false;
            return 0;
        };
        if !self.cq_has_room(cqid) {
            return 0;
        }
        self.zeroing.busy = false;
        let posted = self.complete(sqid, &sqe, result, self.instruments.untimed());
        self.flush_cq(cqid);
        usize::from(posted)
    }

    /// SQ `qid` is being deleted: its command in the slot, if any, completes with Command
    /// Aborted due to SQ Deletion (if its CQ has room, as for its queued commands).
    pub(crate) fn abort_zeroing_on(&mut self, qid: Qid) {
        if !self.zeroing.busy || self.zeroing.work.sqid != qid {
            return;
        }
        self.zeroing.busy = false;
        let sqe = self.zeroing.work.sqe;
        if let Some(cqid) = self.queues.sq(qid).map(|sq| sq.cqid)
            && self.cq_has_room(cqid)
        {
            let stamps = self.instruments.untimed();
            self.complete(qid, &sqe, Err(Status::ABORTED_SQ_DELETION), stamps);
            self.flush_cq(cqid);
        }
    }

    /// Whether a command set aside still has work or a CQE to post and the controller
    /// processes commands (a fatal one does not until it is reset): the poller must not
    /// back off meanwhile. (Completions a model holds only need a pass once due:
    /// [`Controller::next_due_ns`].)
    pub fn has_deferred_work(&self) -> bool {
        (self.zeroing.busy || self.file_io.in_flight() > 0) && self.state.is_ready()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::CtrlEvent;
    use crate::test_utils::{TestHost, layout, sqe};
    use nvmemu_spec::DataPtr;
    use zerocopy::IntoBytes;

    #[test]
    fn a_fatal_controller_lets_its_poller_back_off() {
        let mut h = TestHost::ready(16);
        // Deallocate the whole namespace: set aside after the first pass.
        let range: [u32; 4] = [0, 1 << 17, 0, 0];
        h.mem.write(layout::LISTS, range.as_bytes());
        let prp1 = h.mem.iova(layout::LISTS);
        h.submit(
            1,
            Sqe {
                nsid: 1,
                cdw11: 1 << 2,
                ..sqe(0x09, DataPtr::Prp { prp1, prp2: 0 })
            },
        );
        h.poll();
        assert!(h.ctrl.has_deferred_work());
        // Controller Fatal Status: nothing runs until a reset, so there is no work.
        h.ctrl.apply(CtrlEvent::Fault, None);
        assert!(!h.ctrl.has_deferred_work());
        h.ctrl.reset();
        assert!(!h.ctrl.zeroing.busy);
    }

    fn merged(r: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let m = ByteRanges::merged(r.iter().copied());
        (0..m.len).filter_map(|i| m.get(i)).collect()
    }

    #[test]
    fn ranges_are_sorted_merged_and_empty_ones_dropped() {
        assert_eq!(merged(&[]), vec![]);
        assert_eq!(merged(&[(0, 0), (5, 0)]), vec![]);
        assert_eq!(
            merged(&[(100, 10), (0, 10), (10, 5), (50, 1)]),
            vec![(0, 15), (50, 51), (100, 110)]
        );
        // The same range 256 times is one range: the work is bounded by the namespace.
        let same = [(4096u64, 1u64 << 26); DSM_MAX_RANGES];
        assert_eq!(merged(&same), vec![(4096, 4096 + (1 << 26))]);
        let m = ByteRanges::merged(same.iter().copied());
        assert_eq!(m.total(), 1 << 26);
        // Nested and overlapping.
        assert_eq!(merged(&[(0, 100), (10, 5), (90, 20)]), vec![(0, 110)]);
    }
}
