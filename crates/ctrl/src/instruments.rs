// SPDX-License-Identifier: Apache-2.0
//! What a controller measures about itself, behind one hook the poll loop calls: SMART's
//! Controller Busy Time, the per-layer timing of `bdev_enable_histogram` ([`crate::timing`])
//! and a per-command trace an in-process client can install ([`crate::latency`], used by
//! `nvmemu bench --lat-breakdown`).
//!
//! Cost when off: per command, one test of a flag the batch computed; no clock read. Busy
//! time reads the clock at the two ends of a busy stretch (a run of passes that found
//! work), never per command or per pass: two readings per pass cost malloc 512 B QD16 4 %.
//! Timing reads it when a command is done (its fetch is the reading before, see
//! `timing/record.rs`); the trace when a command is fetched, done and posted; both share
//! the readings when both are on.

use nvmemu_mem::{TscClock, global_clock};
use nvmemu_spec::{Cid, Qid, Sqe};

use crate::Namespace;
use crate::latency::{LatencyHook, Stage};
use crate::timing::{HeldStamps, PassMarks, Timing};

/// Which per-command readings one batch takes (decided once per batch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stamps {
    timed: bool,
    traced: bool,
}

impl Stamps {
    /// No readings (admin work outside the poll loop, aborts, set-aside commands).
    pub(crate) const OFF: Stamps = Stamps {
        timed: false,
        traced: false,
    };
}

/// A controller's instruments (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Instruments {
    /// Per-layer timing; None (the default) while no bdev's histogram is enabled.
    pub(crate) timing: Option<Box<Timing>>,
    /// The per-command trace; None unless an in-process client installed one.
    trace: Option<LatencyHook>,
    /// Who marks the passes of the timing (the poll, or a transport around it).
    pub(crate) marks: PassMarks,
    /// TSC when the open busy stretch began (0: none open).
    pub(crate) busy_since: u64,
    /// Closed busy stretches, summed.
    pub(crate) busy_nanos: u128,
}

impl Instruments {
    /// Install or remove the per-command trace.
    pub(crate) fn set_trace(&mut self, trace: Option<LatencyHook>) {
        self.trace = trace;
    }

    /// A poll pass begins (the controller is ready). Where a transport marks the passes,
    /// its pass began earlier; this reading is then only the first command's *fetch*.
    #[inline(always)]
    pub(crate) fn pass_begins(&mut self) {
        if let Some(t) = self.timing.as_deref_mut() {
            let now = TscClock::ticks();
            match t.marks {
                PassMarks::Poll => t.pass_begins(now),
                PassMarks::Transport => t.poll_begins(now),
            }
        }
    }

    /// A poll pass ends (interrupts raised); a transport that marks the passes ends them
    /// once its completions are sent.
    #[inline(always)]
    pub(crate) fn pass_ends(&mut self) {
        if let Some(t) = self.timing.as_deref_mut()
            && t.marks == PassMarks::Poll
            && t.awaits_pass_end()
        {
            t.pass_ends(TscClock::ticks());
        }
    }

    /// SQ `qid` shows `queued` commands (at least one) this pass: the readings its batch
    /// takes are decided (timing covers I/O queues only).
    #[inline(always)]
    pub(crate) fn batch_begins(&mut self, qid: Qid, queued: u32) -> Stamps {
        let timed = match self.timing.as_deref_mut() {
            Some(t) if qid != Qid::ADMIN => {
                t.sq_seen(qid, queued);
                true
            }
            _ => false,
        };
        Stamps {
            timed,
            traced: self.trace.is_some(),
        }
    }

    /// A batch was found: the busy stretch opens if none is open. Called once the batch's
    /// command and data reads are on their way: RDTSC is microcoded (13-20 ns on the
    /// development VM), and before them it would delay the first command of every stretch,
    /// i.e. every command at iodepth 1, by that much.
    #[inline(always)]
    pub(crate) fn busy(&mut self) {
        if self.busy_since == 0 {
            self.busy_since = TscClock::ticks();
        }
    }

    /// The fetch reading of command `cid` if the batch takes readings (0 if not): the trace
    /// reads the clock; timing alone takes the batch's previous reading.
    #[inline(always)]
    pub(crate) fn fetched(&self, s: Stamps, (qid, cid): (Qid, Cid)) -> u64 {
        if !(s.timed || s.traced) {
            return 0;
        }
        if s.traced
            && let Some(l) = &self.trace
        {
            let now = TscClock::ticks();
            l.0.fetched(qid.0, cid.0, now);
            return now;
        }
        match self.timing.as_deref() {
            Some(t) if s.timed => t.last(),
            _ => 0,
        }
    }

    /// Read the clock when command `cid` is done, if the batch takes readings (0 if not).
    #[inline(always)]
    pub(crate) fn done(&mut self, s: Stamps, (qid, cid): (Qid, Cid)) -> u64 {
        if !(s.timed || s.traced) {
            return 0;
        }
        let now = TscClock::ticks();
        if s.traced
            && let Some(l) = &self.trace
        {
            l.0.record(qid.0, cid.0, Stage::Done, now);
        }
        if s.timed
            && let Some(t) = self.timing.as_deref_mut()
        {
            t.done_at(now);
        }
        now
    }

    /// The completion of command `cid` is about to be posted (traced only).
    #[inline(always)]
    pub(crate) fn posting(&self, s: Stamps, (qid, cid): (Qid, Cid)) {
        if s.traced
            && let Some(l) = &self.trace
        {
            l.0.record(qid.0, cid.0, Stage::Post, TscClock::ticks());
        }
    }

    /// The readings of a completion posted outside a batch (a command set aside): the
    /// trace's only, as timing covers what `poll_sq` posts and what is held.
    pub(crate) fn untimed(&self) -> Stamps {
        Stamps {
            timed: false,
            traced: self.trace.is_some(),
        }
    }

    /// Record `stage` of command `cid` now in the trace, if one is installed: for a command
    /// whose backend finishes or whose CQE is posted after the batch that fetched it (file
    /// I/O, held and set-aside completions). One test of the trace when none is.
    #[inline]
    pub(crate) fn trace_now(&self, (qid, cid): (Qid, Cid), stage: Stage) {
        if let Some(l) = &self.trace {
            l.0.record(qid.0, cid.0, stage, TscClock::ticks());
        }
    }

    /// A timed command (`sqe`, successful or not) was staged for posting: keep its readings
    /// for the batch flush.
    #[inline(always)]
    pub(crate) fn posted(&mut self, s: Stamps, sqe: &Sqe, ok: bool, (fetched, done): (u64, u64)) {
        if s.timed
            && let Some(t) = self.timing.as_deref_mut()
        {
            t.command(sqe.nsid, (sqe.opcode(), ok), fetched, done);
        }
    }

    /// The readings of a timed command whose CQE is held (`hold.rs`).
    #[inline]
    pub(crate) fn held(
        &self,
        s: Stamps,
        nsid: u32,
        op: (u8, bool),
        (fetched, done): (u64, u64),
    ) -> Option<HeldStamps> {
        match self.timing.as_deref() {
            Some(t) if s.timed => Some(t.held(nsid, op, fetched, done)),
            _ => None,
        }
    }

    /// The readings of a file command being taken in the open batch (None when its
    /// namespace is not timed): no clock read; *done* comes when its I/O is reaped.
    #[inline]
    pub(crate) fn file_taken(&self, nsid: u32, opcode: u8) -> Option<HeldStamps> {
        self.timing.as_deref()?.taken(nsid, opcode)
    }

    /// A timed file command was queued: the next command of the batch is fetched now,
    /// after its submission work (which is the queued layer of the commands behind it).
    #[inline]
    pub(crate) fn file_queued(&mut self) {
        if let Some(t) = self.timing.as_deref_mut() {
            t.done_at(TscClock::ticks());
        }
    }

    /// A held timed command of SQ `qid` was posted (its CQE written to the ring).
    pub(crate) fn held_posted(
        &mut self,
        qid: Qid,
        h: HeldStamps,
        namespaces: &[Option<Namespace>],
    ) {
        if let Some(t) = self.timing.as_deref_mut() {
            t.held_posted(qid, h, TscClock::ticks(), namespaces);
        }
    }

    /// The batch's completions were written to the ring.
    #[inline(always)]
    pub(crate) fn batch_flushed(&mut self, s: Stamps, namespaces: &[Option<Namespace>]) {
        if s.timed
            && let Some(t) = self.timing.as_deref_mut()
        {
            t.batch_posted(TscClock::ticks(), namespaces);
        }
    }

    /// A pass found nothing (or the controller is not ready): close the busy stretch.
    pub(crate) fn idle(&mut self) {
        let since = std::mem::take(&mut self.busy_since);
        if since != 0 {
            let ns = global_clock().ticks_to_ns(TscClock::ticks().wrapping_sub(since));
            self.busy_nanos += u128::from(ns);
        }
    }

    /// Busy time so far, the open stretch included (SMART Controller Busy Time).
    pub(crate) fn busy_nanos_now(&self) -> u128 {
        let open = match self.busy_since {
            0 => 0,
            since => global_clock().ticks_to_ns(TscClock::ticks().wrapping_sub(since)),
        };
        self.busy_nanos + u128::from(open)
    }
}
