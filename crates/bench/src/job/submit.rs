// SPDX-License-Identifier: Apache-2.0
//! Issuing: which I/O goes next (the workload, a backlog check or a verify read), its
//! pacing, the write payload under verify, and one doorbell per batch.

use super::{JobLoop, Phase, sized};
use crate::engine::{EngineError, IoQueue, Op};
use crate::generations::{Slot, apply, gen_at, next_gen};
use crate::next_io::NextIo;

impl JobLoop<'_> {
    /// Fills free slots, one doorbell per `batching.submit` commands; only a batch cut
    /// short by `batching.submit` may be followed by another. `now` is the time the
    /// pacing and thinktime checks go by (then each doorbell's issue time). One clock
    /// reading, taken as the batch's first command goes to the queue, is the start time
    /// of the whole batch: a TSC read per command would cost 13-20 ns each on the
    /// development VM, and submission takes a few ns per command.
    pub(super) fn submit(&mut self, q: &mut dyn IoQueue, now: u64) {
        let mut checks_ns = now;
        loop {
            let mut start_ns = None;
            while self.batch.len() < self.plan.batching.submit
                && let Some(&slot) = self.free.last()
            {
                let pick = match self.phase {
                    Phase::Main => self.pick_main(checks_ns),
                    Phase::Verify { .. } => self.pick_verify(),
                };
                let Some((io, check)) = pick else {
                    break;
                };
                if !self.issue(q, slot, io, check, &mut start_ns) {
                    break;
                }
            }
            let full = self.batch.len() == self.plan.batching.submit;
            if !self.batch.is_empty() {
                checks_ns = self.ring(q);
            }
            if !(full && !self.free.is_empty() && self.out.error.is_none()) {
                return;
            }
        }
    }

    /// The next I/O of the main phase and whether it is a verify read (a backlog
    /// check), or None when nothing may go now.
    fn pick_main(&mut self, start_ns: u64) -> Option<(NextIo, bool)> {
        loop {
            let limit = self.main_done();
            let draining = self
                .v
                .backlog_len
                .is_some_and(|n| self.v.backlog.len() as u64 >= n || limit);
            if draining && let Some(&(unit, units)) = self.v.backlog.front() {
                if self.v.busy.any(unit, units) {
                    return None;
                }
                self.v.backlog.pop_front();
                return Some((
                    NextIo {
                        dir: 0,
                        unit,
                        units,
                    },
                    true,
                ));
            }
            if limit || self.thinker.as_mut().is_some_and(|th| th.stalled(start_ns)) {
                return None;
            }
            let io = self.held.take().unwrap_or_else(|| self.source.next());
            let (io, due) = self.pace(io, start_ns);
            if self.v.dry_run {
                self.replay(io);
                continue;
            }
            let in_flight = self.v.verifier.is_some() && self.v.busy.any(io.unit, io.units);
            if in_flight || !due {
                self.held = Some(io);
                return None;
            }
            return Some((io, false));
        }
    }

    /// `rate` / `rate_iops`: the direction a paced mixed job issues now, and whether
    /// that direction is due.
    fn pace(&self, mut io: NextIo, now_ns: u64) -> (NextIo, bool) {
        let Some(p) = &self.pacer else {
            return (io, true);
        };
        if self.mixed_paced {
            io.dir = p.pick(io.dir, now_ns);
        }
        let due = p.ready(io.dir, now_ns);
        (io, due)
    }

    /// `verify_only`: records what the write run left, without the I/O.
    fn replay(&mut self, io: NextIo) {
        apply(&mut self.v.gens, io);
        if sized(self.plan, io.dir) {
            self.loop_bytes += io.units * self.unit_bytes;
        }
        self.workload_ios += 1;
    }

    /// The next run of written units to read back in the verify phase.
    fn pick_verify(&mut self) -> Option<(NextIo, bool)> {
        let Phase::Verify { cursor } = self.phase else {
            return None;
        };
        let (units, gens) = (self.plan.units, &self.v.gens);
        let mut u = cursor;
        while u < units && gen_at(gens, u) == 0 {
            u += 1;
        }
        let mut k = 0;
        while k < self.max_units && u + k < units && gen_at(gens, u + k) != 0 {
            k += 1;
        }
        self.phase = Phase::Verify { cursor: u + k };
        (k > 0).then_some((
            NextIo {
                dir: 0,
                unit: u,
                units: k,
            },
            true,
        ))
    }

    /// Submits `io` in `slot`; false when the batch must stop (queue full or an error).
    /// `start_ns` is the batch's start time, read here at its first command.
    fn issue(
        &mut self,
        q: &mut dyn IoQueue,
        slot: usize,
        io: NextIo,
        check: bool,
        start_ns: &mut Option<u64>,
    ) -> bool {
        let plan = self.plan;
        let lba = plan.first_lba + io.unit * u64::from(plan.unit_blocks);
        let blocks = u32::try_from(io.units * u64::from(plan.unit_blocks)).unwrap_or(0);
        if io.dir == 1
            && let Err(e) = self.stage_write(q, slot, io, lba)
        {
            self.out.error = Some(e);
            return false;
        }
        let op = match io.dir {
            0 => Op::Read,
            1 => Op::Write,
            _ => Op::Trim,
        };
        // fio's start_time: the offset chosen and the payload staged, the command not yet
        // queued.
        let start = *start_ns.get_or_insert_with(|| self.clock.now_ns());
        match q.submit(slot, op, lba, blocks) {
            Ok(()) => {
                self.issued(slot, io, check, lba, start);
                true
            }
            Err(EngineError::QueueFull) => {
                // Issued after the next reap, so the pass (or verify) still covers it.
                match (&mut self.phase, check) {
                    (Phase::Main, false) => self.held = Some(io),
                    (Phase::Main, true) => self.v.backlog.push_front((io.unit, io.units)),
                    (Phase::Verify { cursor }, _) => *cursor = io.unit,
                }
                if self.inflight == 0 {
                    // Nothing in flight yet the queue is full: the engine would never
                    // accept a command; end the job.
                    self.out.error = Some(EngineError::QueueFull);
                }
                false
            }
            Err(e) => {
                self.out.error = Some(e);
                false
            }
        }
    }

    /// With verify, a write carries self-describing blocks of each unit's next generation.
    fn stage_write(
        &mut self,
        q: &mut dyn IoQueue,
        slot: usize,
        io: NextIo,
        lba: u64,
    ) -> Result<(), EngineError> {
        let Some(v) = &self.v.verifier else {
            return Ok(());
        };
        let unit_len = usize::try_from(self.unit_bytes).unwrap_or(0);
        for (i, chunk) in (0..io.units).zip(self.staging.chunks_mut(unit_len.max(1))) {
            let g = next_gen(gen_at(&self.v.gens, io.unit + i));
            let block_lba = lba + i * u64::from(self.plan.unit_blocks);
            v.fill_io(chunk, block_lba, self.block_size, g);
        }
        let len = usize::try_from(io.units * self.unit_bytes).unwrap_or(0);
        q.write_payload(slot, self.staging.get(..len).unwrap_or(&[]))
    }

    /// Books a submitted I/O: its slot, and for workload I/O the pass's counters,
    /// thinktime and pacing.
    fn issued(&mut self, slot: usize, io: NextIo, check: bool, lba: u64, start_ns: u64) {
        self.free.pop();
        if self.v.verifier.is_some() {
            self.v.busy.set(io.unit, io.units, true);
        }
        if let Some(s) = self.slots.get_mut(slot) {
            *s = Slot {
                unit: io.unit,
                units: io.units,
                lba,
                dir: io.dir,
                start_ns,
                issue_ns: start_ns,
            };
        }
        self.batch.push(slot);
        self.inflight += 1;
        if check {
            return;
        }
        let bytes = io.units * self.unit_bytes;
        if self.recording {
            if sized(self.plan, io.dir) {
                self.loop_bytes += bytes;
            }
            self.workload_ios += 1;
        }
        if let Some(th) = &mut self.thinker {
            th.issued();
        }
        if let Some(p) = &mut self.pacer {
            p.charge(io.dir, bytes, start_ns);
        }
    }

    /// Rings the doorbell for the batch and stamps its issue time, which it returns.
    fn ring(&mut self, q: &mut dyn IoQueue) -> u64 {
        if let Err(e) = q.ring() {
            self.out.error.get_or_insert(e);
        }
        let t_issue = self.now();
        for &s in &self.batch {
            if let Some(s) = self.slots.get_mut(s) {
                s.issue_ns = t_issue;
            }
        }
        if self.recording {
            self.out.stats.count_submit(self.batch.len(), self.inflight);
        }
        self.batch.clear();
        t_issue
    }
}
