// SPDX-License-Identifier: Apache-2.0
//! The recorder behind [`super`]: the readings of the open batch and of the pass, turned
//! into histogram counts as soon as each layer's end is known.
//!
//! Readings: one per pass (its start), one per command (*done*), one per batch flush
//! (*post*) and one at the end of a pass that completed a timed command (*irq*). A TSC read
//! costs about as much as a 512 B command's whole backend copy, so the other moments reuse
//! the reading before them: a batch's *seen* is the last reading before its doorbell load
//! (the pass start for the pass's first busy SQ, the previous SQ's *post* after), a
//! command's *fetch* the last reading before it in its batch (*seen*, or the previous
//! command's *done*). What that moves: the total and the queued layer also hold the poller's
//! work between that reading and the doorbell load (the admin SQ and event checks, a few
//! ns; the previous SQ's event index update); a command's backend layer also holds its SQE
//! copy and the previous command's CQE staging (a few ns), its queued layer leaves them
//! out. Complete and interrupt are unchanged, and the layers still add up to the total. An
//! in-process trace (`latency.rs`), when installed, reads the clock at the fetch itself,
//! and the timing uses that reading.
//!
//! Where a transport marks the passes (`PassMarks::Transport`), the pass start is its
//! reading, the poll takes one more at its own start (the first command's *fetch*), and
//! every batch's *seen* is the pass start; the end of the pass is the transport's reading.
//!
//! At the flush, each command's queued, backend and complete layers go into its
//! (queue, namespace) histograms, and its backend time into its bdev's latency counters;
//! what the batch's commands share (the total, the interrupt layer, the wait bound) waits
//! for the pass end as one run per namespace, recorded once with the run's command count.

use nvmemu_bdev::BdevOp;
use nvmemu_spec::{IoOpcode, Qid};

use super::{LayerSet, NsTiming, PassMarks, QueueTiming};
use crate::Namespace;
use crate::poll::IO_BATCH;

/// One command of the open batch.
#[derive(Debug, Clone, Copy, Default)]
struct Cmd {
    nsid: u32,
    /// The bdev operation whose latency it counts as (successful Read, Write, Deallocate).
    op: Option<BdevOp>,
    fetch: u64,
    done: u64,
}

/// Commands of one namespace of one batch, waiting for the pass end (their *irq*).
#[derive(Debug, Clone, Copy)]
struct Run {
    qid: u16,
    nsid: u32,
    seen: u64,
    post: u64,
    /// The wait bound (*seen* less the previous pass start); None in the first pass.
    bound: Option<u64>,
    count: u64,
}

/// A held command's readings (`hold.rs` keeps them with its CQE until it is posted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeldStamps {
    nsid: u32,
    opcode: u8,
    ok: bool,
    seen: u64,
    fetch: u64,
    done: u64,
    bound: Option<u64>,
}

impl HeldStamps {
    /// The readings of a command [taken](Timing::taken) whose I/O was reaped at `done`
    /// with its result (`ok`): its backend layer spans the I/O, submission to reaping.
    pub(crate) fn finished(self, ok: bool, done: u64) -> HeldStamps {
        HeldStamps { ok, done, ..self }
    }
}

/// The bdev operation a successful command with `opcode` counts as.
fn bdev_op(opcode: u8, ok: bool) -> Option<BdevOp> {
    if !ok {
        return None;
    }
    match IoOpcode::from(opcode) {
        IoOpcode::Read => Some(BdevOp::Read),
        IoOpcode::Write => Some(BdevOp::Write),
        IoOpcode::DatasetManagement => Some(BdevOp::Deallocate),
        _ => None,
    }
}

/// A controller's timing state (exists only while some namespace's histogram is on).
#[derive(Debug)]
pub(crate) struct Timing {
    pub(super) granularity: u32,
    /// Bdev names whose namespaces are timed.
    pub(super) bdevs: Vec<String>,
    /// Timed, per NSID - 1.
    pub(super) ns_on: Vec<bool>,
    /// Per SQ id.
    pub(super) queues: Vec<QueueTiming>,
    /// The open batch: its SQ, *seen*, the last reading taken in it, its commands.
    qid: u16,
    seen: u64,
    last: u64,
    batch: [Cmd; IO_BATCH],
    batch_len: usize,
    /// This pass's runs; capacity fixed when enabled (never grows on the I/O path).
    runs: Vec<Run>,
    /// Who marks the passes: a transport's mark a batch *seen* at its pass start.
    pub(crate) marks: PassMarks,
    /// Ticks at the start of this pass and of the previous one.
    pass_now: u64,
    pass_prev: u64,
    /// Commands not timed for want of room (cannot happen with the capacities above).
    pub(super) dropped: u64,
}

impl Timing {
    pub(super) fn new(granularity: u32, max_qid: u16, held: usize, marks: PassMarks) -> Timing {
        let sqs = usize::from(max_qid) + 1;
        Timing {
            granularity: granularity.clamp(1, super::MAX_GRANULARITY),
            bdevs: Vec::new(),
            ns_on: Vec::new(),
            queues: vec![QueueTiming::default(); sqs],
            qid: 0,
            seen: 0,
            last: 0,
            batch: [Cmd::default(); IO_BATCH],
            batch_len: 0,
            runs: Vec::with_capacity(sqs * IO_BATCH + held),
            marks,
            pass_now: 0,
            pass_prev: 0,
            dropped: 0,
        }
    }

    #[inline]
    pub(crate) fn pass_begins(&mut self, now: u64) {
        self.pass_prev = self.pass_now;
        self.pass_now = now;
        self.last = now;
    }

    /// The poll of a pass a transport marks begins at `now`: the next command's *fetch*
    /// (the pass itself began when the transport said, [`PassMarks::Transport`]).
    #[inline]
    pub(crate) fn poll_begins(&mut self, now: u64) {
        self.last = now;
    }

    /// The doorbell of `qid` showed `queued` commands: a batch opens, *seen* at the last
    /// reading (at the pass start when a transport marks it: its commands were all taken
    /// off the wire before the controller's poll, see [`PassMarks::Transport`]).
    #[inline]
    pub(crate) fn sq_seen(&mut self, qid: Qid, queued: u32) {
        self.qid = qid.0;
        self.seen = match self.marks {
            PassMarks::Poll => self.last,
            PassMarks::Transport => self.pass_now,
        };
        self.batch_len = 0;
        if let Some(q) = self.queues.get_mut(usize::from(qid.0)) {
            q.depth_sum += u64::from(queued);
            q.looks += 1;
        }
    }

    /// The reading before the next command's: its *fetch*.
    #[inline(always)]
    pub(crate) fn last(&self) -> u64 {
        self.last
    }

    /// A command of the open batch was done at `now`.
    #[inline(always)]
    pub(crate) fn done_at(&mut self, now: u64) {
        self.last = now;
    }

    fn bound(&self, seen: u64) -> Option<u64> {
        (self.pass_prev != 0).then(|| seen.saturating_sub(self.pass_prev))
    }

    /// A command of the open batch (namespace `nsid`, `opcode`, successful or not) was
    /// staged for posting with readings `fetch` and `done`.
    #[inline]
    pub(crate) fn command(&mut self, nsid: u32, (opcode, ok): (u8, bool), fetch: u64, done: u64) {
        let Some(c) = self.batch.get_mut(self.batch_len) else {
            self.dropped += 1;
            return;
        };
        *c = Cmd {
            nsid,
            op: bdev_op(opcode, ok),
            fetch,
            done,
        };
        self.batch_len += 1;
    }

    /// The readings of a command of the open batch whose CQE is held.
    pub(crate) fn held(
        &self,
        nsid: u32,
        (opcode, ok): (u8, bool),
        fetch: u64,
        done: u64,
    ) -> HeldStamps {
        HeldStamps {
            nsid,
            opcode,
            ok,
            seen: self.seen,
            fetch,
            done,
            bound: self.bound(self.seen),
        }
    }

    /// The readings of a command of the open batch that leaves it to complete in a later
    /// pass (a file namespace's, `io/file_io/`): *seen* and *fetch* now, *done* when its
    /// I/O is reaped ([`HeldStamps::finished`]). None when namespace `nsid` is not timed.
    pub(crate) fn taken(&self, nsid: u32, opcode: u8) -> Option<HeldStamps> {
        let on = ns_slot(nsid).and_then(|i| self.ns_on.get(i)).copied();
        on.unwrap_or(false)
            .then(|| self.held(nsid, (opcode, true), self.last, 0))
    }

    /// The open batch's CQEs were written at `post`: record its commands' own layers (and
    /// their bdevs' latencies), keep a run per namespace for the pass end.
    pub(crate) fn batch_posted(&mut self, post: u64, namespaces: &[Option<Namespace>]) {
        self.last = post;
        let (qid, seen) = (self.qid, self.seen);
        let bound = self.bound(seen);
        let n = self.batch_len.min(IO_BATCH);
        self.batch_len = 0;
        let mut start = 0;
        while let Some(first) = self.batch.get(start).filter(|_| start < n).copied() {
            let len = self
                .batch
                .get(start..n)
                .unwrap_or_default()
                .iter()
                .take_while(|c| c.nsid == first.nsid)
                .count();
            let cmds = self.batch.get(start..start + len).unwrap_or_default();
            if let Some(set) = set_of(
                &mut self.queues,
                &self.ns_on,
                self.granularity,
                (qid, first.nsid),
            ) {
                set.record_commands(cmds.iter().map(|c| {
                    [
                        c.fetch.saturating_sub(seen),
                        c.done.saturating_sub(c.fetch),
                        post.saturating_sub(c.done),
                    ]
                }));
                // Only a timed namespace's channel leaves its latencies to the caller.
                note_bdev_latencies(first.nsid, cmds, namespaces);
            }
            let count = u64::try_from(len).unwrap_or(0);
            self.push_run(Run {
                qid,
                nsid: first.nsid,
                seen,
                post,
                bound,
                count,
            });
            start += len.max(1);
        }
    }

    /// A held command of SQ `qid` was posted at `post`.
    pub(crate) fn held_posted(
        &mut self,
        qid: Qid,
        h: HeldStamps,
        post: u64,
        namespaces: &[Option<Namespace>],
    ) {
        let Some(set) = set_of(
            &mut self.queues,
            &self.ns_on,
            self.granularity,
            (qid.0, h.nsid),
        ) else {
            return;
        };
        set.record_command([
            h.fetch.saturating_sub(h.seen),
            h.done.saturating_sub(h.fetch),
            post.saturating_sub(h.done),
        ]);
        if let (Some(op), Some(ns)) = (
            bdev_op(h.opcode, h.ok),
            ns_slot(h.nsid)
                .and_then(|s| namespaces.get(s))
                .and_then(Option::as_ref),
        ) {
            ns.io().record_latency(op, h.done.saturating_sub(h.fetch));
        }
        self.push_run(Run {
            qid: qid.0,
            nsid: h.nsid,
            seen: h.seen,
            post,
            bound: h.bound,
            count: 1,
        });
    }

    fn push_run(&mut self, run: Run) {
        if self.runs.len() == self.runs.capacity() {
            self.dropped += run.count;
            return;
        }
        self.runs.push(run);
    }

    /// Whether the pass end must be read: some command of this pass waits for it.
    #[inline]
    pub(crate) fn awaits_pass_end(&self) -> bool {
        !self.runs.is_empty()
    }

    /// The pass ended (interrupts raised) at `irq`: record the layers its runs share.
    pub(crate) fn pass_ends(&mut self, irq: u64) {
        let runs = std::mem::take(&mut self.runs);
        for r in &runs {
            if let Some(set) = set_of(
                &mut self.queues,
                &self.ns_on,
                self.granularity,
                (r.qid, r.nsid),
            ) {
                set.record_run(
                    irq.saturating_sub(r.post),
                    irq.saturating_sub(r.seen),
                    r.bound,
                    r.count,
                );
            }
        }
        self.runs = runs;
        self.runs.clear();
    }
}

/// The histograms of (`qid`, `nsid`) in `queues`, made on first use; None if the
/// namespace is not timed (`ns_on`).
fn set_of<'a>(
    queues: &'a mut [QueueTiming],
    ns_on: &[bool],
    granularity: u32,
    (qid, nsid): (u16, u32),
) -> Option<&'a mut LayerSet> {
    let on = ns_slot(nsid)
        .and_then(|i| ns_on.get(i))
        .copied()
        .unwrap_or(false);
    let q = queues.get_mut(usize::from(qid)).filter(|_| on)?;
    let at = match q.namespaces.iter().position(|n| n.nsid == nsid) {
        Some(at) => at,
        None => {
            // Once per (queue, namespace) pair while enabled.
            q.namespaces.push(NsTiming {
                nsid,
                layers: Box::new(LayerSet::new(granularity)),
            });
            q.namespaces.len() - 1
        }
    };
    q.namespaces.get_mut(at).map(|n| &mut *n.layers)
}

/// Hand the backend times of `cmds` (of namespace `nsid`) to its bdev channel: one sum,
/// minimum and maximum per kind of operation.
fn note_bdev_latencies(nsid: u32, cmds: &[Cmd], namespaces: &[Option<Namespace>]) {
    let Some(ns) = ns_slot(nsid)
        .and_then(|s| namespaces.get(s))
        .and_then(Option::as_ref)
    else {
        return;
    };
    for op in [BdevOp::Read, BdevOp::Write, BdevOp::Deallocate] {
        let mut ticks = cmds
            .iter()
            .filter(|c| c.op == Some(op))
            .map(|c| c.done.saturating_sub(c.fetch));
        if let Some(first) = ticks.next() {
            let (sum, min, max) = ticks.fold((first, first, first), |(s, lo, hi), t| {
                (s.wrapping_add(t), lo.min(t), hi.max(t))
            });
            ns.io().record_latencies(op, (sum, min, max));
        }
    }
}

/// The slot of `nsid` in per-namespace tables (NSID - 1).
fn ns_slot(nsid: u32) -> Option<usize> {
    usize::try_from(nsid.checked_sub(1)?).ok()
}
