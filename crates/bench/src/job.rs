// SPDX-License-Identifier: Apache-2.0
//! One job's I/O loop: keeps `iodepth` I/Os in flight on one [`IoQueue`],
//! batches submissions behind one doorbell, polls completions, records fio's
//! statistics and, in verify mode, writes self-describing blocks and checks
//! every read against the job's generation table.
//!
//! What to issue comes from [`IoSource`]: direction, size and offset, sequential,
//! fio's random map (every unit of the range once per pass, so a random write then
//! verify checks every block written), `norandommap` or a skewed distribution. An
//! I/O that cannot go yet (its units in flight under verify, `rate` not yet due)
//! is held and issued next, so the stream does not depend on timing.
//!
//! Verify keeps a generation per unit: a write stores the next one in each block's
//! header, a trim makes the unit read as zeroes; after each loop's main phase every
//! unit written is read back and checked once (or, with `verify_backlog`, after every
//! N writes). `verify_only` replays the stream without writing, then reads back.
//! `thinktime` pauses as fio does ([`Thinker`]); `rate` and
//! `rate_iops` hold an I/O until its direction is due. Both wait by polling.
//!
//! Batching follows fio's options: a doorbell per `iodepth_batch_submit` commands,
//! a refill once `iodepth_batch_complete_min` slots are free, at most
//! `iodepth_batch_complete_max` completions taken per poll. Taking only part of
//! the completions before refilling lets the device work on the refilled slots
//! while the job handles the rest, instead of the two taking turns.
//!
//! Per batch the loop reads the clock twice (issue start, doorbell) and per reap
//! call once (first completion); completions with equal latencies are recorded
//! together ([`PendingLatencies`]). Nothing else on the hot path allocates, locks or
//! makes a syscall.
//!
//! Hook for a per-layer latency breakdown: every slot carries its
//! `start_ns` (before `submit`) and `issue_ns` (after `ring`); an engine that can
//! report device-side timestamps would add them to [`Slot`] at reap.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use nvmemu_mem::TscClock;

use crate::dir_clock::DirClock;
use crate::engine::{EngineError, IoQueue, Op};
use crate::generations::{
    Busy, GEN_UNKNOWN, Slot, apply, check_read, gen_at, next_gen, reads_only, set_gen,
};
use crate::job_output::{JobOutput, JobState, Progress, VerifySummary};
use crate::next_io::{IoSource, NextIo, SourceSpec};
use crate::pace::Pacer;
use crate::plan::JobPlan;
use crate::stats::{IoLatency, JobStats, PendingLatencies};
use crate::sysinfo::{ThreadUsage, thread_usage};
use crate::think::Thinker;
use crate::verify::{Checksum, Method, Verifier};

/// Whether an I/O in direction `dir` counts toward `size`: in a trimwrite job only the
/// trims do (fio trims `size` bytes and writes each trimmed range).
fn sized(plan: &JobPlan, dir: usize) -> bool {
    !plan.rw.is_trimwrite() || dir == 2
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Main,
    Verify { cursor: u64 },
}

/// Verify's state: the checker, what it does, and the generation of every unit.
struct VerifyState {
    verifier: Option<Verifier>,
    /// Reads are checked. fio checks a read-only job's reads even with do_verify=0
    /// (that option only drops the read-back phase after writes).
    checking: bool,
    /// `verify_only`: the writes are replayed without I/O, then read back.
    dry_run: bool,
    /// `verify_backlog`: written units are read back after this many.
    backlog_len: Option<u64>,
    gens: Vec<u32>,
    busy: Busy,
    /// Written units waiting for their backlog check; room for a full backlog plus what
    /// completes while it drains, so it never grows on the hot path.
    backlog: VecDeque<(u64, u64)>,
}

impl VerifyState {
    fn new(plan: &JobPlan, depth: usize) -> VerifyState {
        let vplan = plan.verify.as_ref();
        let verifier = vplan.map(|v| Verifier::new(v.method.clone(), plan.job));
        let checking = vplan.is_some_and(|v| v.do_verify || reads_only(plan));
        let backlog_len = vplan.and_then(|v| v.backlog).filter(|_| checking);
        let units_len = usize::try_from(plan.units).unwrap_or(0);
        let table = verifier.is_some();
        VerifyState {
            verifier,
            checking,
            dry_run: vplan.is_some_and(|v| v.verify_only),
            backlog_len,
            gens: if table {
                vec![0; units_len]
            } else {
                Vec::new()
            },
            busy: Busy(if table {
                vec![0; units_len.div_ceil(64)]
            } else {
                Vec::new()
            }),
            backlog: VecDeque::with_capacity(backlog_len.map_or(0, |n| {
                usize::try_from(n.min(plan.units)).unwrap_or(0) + depth
            })),
        }
    }
}

/// One job's loop over its queue: the state kept between submissions and completions.
/// The queue itself is passed to each step, so a completion callback can update the rest.
struct JobLoop<'a> {
    plan: &'a JobPlan,
    progress: &'a Progress,
    stop: &'a AtomicBool,
    /// Calibrated TSC: a few ns per reading instead of clock_gettime's 20-50.
    clock: TscClock,
    unit_bytes: u64,
    max_units: u64,
    block_size: usize,
    out: JobOutput,
    /// One slot's payload, for filling writes and checking reads.
    staging: Vec<u8>,
    v: VerifyState,
    slots: Vec<Slot>,
    free: Vec<usize>,
    /// Slots submitted since the last doorbell.
    batch: Vec<usize>,
    /// Completed reads to check once the reap returns.
    to_check: Vec<(usize, Slot)>,
    inflight: usize,
    source: IoSource,
    /// The next workload I/O when it could not be issued yet; issued before any other.
    held: Option<NextIo>,
    pacer: Option<Pacer>,
    /// A paced mixed job lets a direction that must wait give way to the other (fio's
    /// rule); not with verify, whose verify_only replay issues the same I/Os unpaced.
    mixed_paced: bool,
    thinker: Option<Thinker>,
    loop_bytes: u64,
    workload_ios: u64,
    loop_no: u32,
    done_bytes: [u64; 3],
    done_ios: [u64; 3],
    ramp_ns: u64,
    end_ns: Option<u64>,
    recording: bool,
    stats_start: u64,
    usage_start: ThreadUsage,
    phase: Phase,
    dir_clock: DirClock,
}

/// Runs one job to completion on `q`. `stop` ends it early (as runtime would).
pub fn run_job(
    plan: &JobPlan,
    q: &mut dyn IoQueue,
    progress: &Progress,
    stop: &AtomicBool,
) -> JobOutput {
    progress.set(JobState::Starting);
    let mut job = JobLoop::new(plan, progress, stop);
    if let Err(e) = job.prepare(q) {
        job.out.error = Some(e);
        progress.set(JobState::Done);
        return job.out;
    }
    job.run(q);
    job.finish()
}

impl<'a> JobLoop<'a> {
    fn new(plan: &'a JobPlan, progress: &'a Progress, stop: &'a AtomicBool) -> JobLoop<'a> {
        let depth = plan.iodepth.max(1);
        let unit_bytes = u64::from(plan.unit_blocks) * u64::from(plan.block_size);
        let max_units = plan.sizes.max();
        let ramp_ns = u64::try_from(plan.ramp.as_nanos()).unwrap_or(u64::MAX);
        let source = IoSource::new(SourceSpec {
            seed: plan.seed ^ u64::from(plan.job).wrapping_mul(0x2545_f491_4f6c_dd1d),
            random: plan.rw.is_random(),
            random_map: plan.random_map,
            distribution: plan.distribution,
            units: plan.units.max(1),
            sizes: plan.sizes.clone(),
            read_pct: plan.read_pct,
            trim: plan.rw.is_trim(),
            trim_write: plan.rw.is_trimwrite(),
            seq_add: plan.seq_add_units,
        });
        JobLoop {
            plan,
            progress,
            stop,
            clock: TscClock::new(),
            unit_bytes,
            max_units,
            block_size: usize::try_from(plan.block_size).unwrap_or(512),
            out: JobOutput {
                stats: JobStats::with_log(plan.log),
                runtime_ms: 0,
                dir_runtime_ms: [0; 3],
                elapsed_ms: 0,
                error: None,
                verify: VerifySummary::default(),
                usage: ThreadUsage::default(),
            },
            staging: vec![0u8; usize::try_from(unit_bytes * max_units).unwrap_or(0)],
            v: VerifyState::new(plan, depth),
            slots: vec![Slot::default(); depth],
            free: (0..depth).rev().collect(),
            batch: Vec::with_capacity(depth),
            to_check: Vec::with_capacity(depth),
            inflight: 0,
            source,
            held: None,
            pacer: plan.pacer.clone(),
            mixed_paced: (1..100).contains(&plan.read_pct) && plan.verify.is_none(),
            thinker: plan.thinktime.map(Thinker::new),
            loop_bytes: 0,
            workload_ios: 0,
            loop_no: 0,
            done_bytes: [0; 3],
            done_ios: [0; 3],
            ramp_ns,
            end_ns: plan
                .runtime
                .map(|r| ramp_ns.saturating_add(u64::try_from(r.as_nanos()).unwrap_or(u64::MAX))),
            recording: false,
            stats_start: 0,
            usage_start: ThreadUsage::default(),
            phase: Phase::Main,
            dir_clock: DirClock::default(),
        }
    }

    #[inline]
    fn now(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Sets up the queue's slots. Without verify, write buffers get realistic,
    /// non-zero content once, so no copies are made per I/O.
    fn prepare(&mut self, q: &mut dyn IoQueue) -> Result<(), EngineError> {
        let depth = self.slots.len();
        q.setup(depth, self.staging.len())?;
        if self.v.verifier.is_none() {
            Verifier::new(Method::Header(Checksum::Crc32c), self.plan.job).fill_io(
                &mut self.staging,
                0,
                self.block_size,
                0,
            );
            for slot in 0..depth {
                q.write_payload(slot, &self.staging)?;
            }
        }
        Ok(())
    }

    /// Issues and reaps until the job's workload, verify and loops are done.
    fn run(&mut self, q: &mut dyn IoQueue) {
        self.progress.set(if self.ramp_ns > 0 {
            JobState::Ramping
        } else {
            JobState::Running
        });
        loop {
            let t = self.now();
            if !self.recording && t >= self.ramp_ns {
                self.start_recording(t);
            }
            let issuing = self.issuing(t);
            // thinktime: a due stall drains the I/Os in flight, then idles.
            let inflight = self.inflight;
            let thinking = self.thinker.as_mut().is_some_and(|th| th.wait(inflight, t));
            if issuing && !thinking && self.free.len() >= self.plan.refill_min {
                self.submit(q);
            }
            if self.inflight > 0 {
                self.reap(q);
            }
            if self.recording {
                self.sample(t);
            }
            if self.inflight == 0 && !issuing && !self.next_pass() {
                break;
            }
        }
    }

    /// Ramp time is over: statistics start from here.
    fn start_recording(&mut self, t: u64) {
        self.out.stats.reset(t);
        self.recording = true;
        self.stats_start = t;
        self.loop_bytes = 0;
        self.workload_ios = 0;
        self.usage_start = thread_usage();
        self.progress.set(JobState::Running);
    }

    /// Whether the current phase has more to issue at `t`.
    fn issuing(&self, t: u64) -> bool {
        let stopped = self.stop.load(Ordering::Relaxed);
        self.out.error.is_none()
            && match self.phase {
                Phase::Main => {
                    let time_up = self.end_ns.is_some_and(|e| t >= e) || stopped;
                    !time_up && (!self.main_done() || !self.v.backlog.is_empty())
                }
                Phase::Verify { cursor } => cursor < self.plan.units && !stopped,
            }
    }

    /// Whether this loop's workload is complete: `size` (or `io_size`) issued, or
    /// `number_ios` reached. Checked per command: a batch must not run past either.
    fn main_done(&self) -> bool {
        let plan = self.plan;
        // A trimwrite job writes every range it trimmed in full, also past `size`.
        let trimmed_to_write = self.source.writing_trimmed()
            || (plan.rw.is_trimwrite() && self.held.is_some_and(|h| h.dir == 1));
        (!plan.time_based && self.loop_bytes >= plan.loop_bytes && !trimmed_to_write)
            || plan.number_ios.is_some_and(|n| self.workload_ios >= n)
    }

    /// Fills free slots, one doorbell per `submit_batch` commands; only a batch cut
    /// short by `submit_batch` may be followed by another. One clock reading serves as
    /// the start time of a whole batch (submission takes a few ns per command).
    fn submit(&mut self, q: &mut dyn IoQueue) {
        loop {
            let start_ns = self.now();
            while self.batch.len() < self.plan.submit_batch
                && let Some(&slot) = self.free.last()
            {
                let pick = match self.phase {
                    Phase::Main => self.pick_main(start_ns),
                    Phase::Verify { .. } => self.pick_verify(),
                };
                let Some((io, check)) = pick else {
                    break;
                };
                if !self.issue(q, slot, io, check, start_ns) {
                    break;
                }
            }
            let full = self.batch.len() == self.plan.submit_batch;
            if !self.batch.is_empty() {
                self.ring(q);
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
    fn issue(
        &mut self,
        q: &mut dyn IoQueue,
        slot: usize,
        io: NextIo,
        check: bool,
        start_ns: u64,
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
        match q.submit(slot, op, lba, blocks) {
            Ok(()) => {
                self.issued(slot, io, check, lba, start_ns);
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

    /// Rings the doorbell for the batch and stamps its issue time.
    fn ring(&mut self, q: &mut dyn IoQueue) {
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
    }

    /// Takes up to `reap_max` completions. One clock reading, at the first, serves as
    /// the completion time of all; equal latencies are recorded together.
    fn reap(&mut self, q: &mut dyn IoQueue) {
        let mut t_done = 0u64;
        let mut pending = PendingLatencies::default();
        let n = q.reap(self.plan.reap_max, &mut |slot, res| {
            if t_done == 0 {
                t_done = self.now();
            }
            self.complete(slot, res, t_done, &mut pending);
        });
        if n > 0 {
            if let Some(th) = &mut self.thinker {
                th.completed(n as u64);
            }
            pending.flush(&mut self.out.stats);
            if self.recording {
                self.out.stats.count_complete(n);
            }
            self.publish_progress();
        }
        self.verify_reads(q);
    }

    /// Books one completion: counters, latencies, and what a write or trim left.
    fn complete(
        &mut self,
        slot: usize,
        res: Result<(), EngineError>,
        t_done: u64,
        pending: &mut PendingLatencies,
    ) {
        let Some(s) = self.slots.get(slot).copied() else {
            self.out
                .error
                .get_or_insert(EngineError::InvalidSlot { slot });
            return;
        };
        self.inflight = self.inflight.saturating_sub(1);
        let bytes = s.units * self.unit_bytes;
        let verifying = self.v.verifier.is_some();
        match res {
            Err(e) => {
                self.out.error.get_or_insert(e);
                if verifying && s.dir != 0 {
                    for u in s.unit..s.unit + s.units {
                        set_gen(&mut self.v.gens, u, GEN_UNKNOWN);
                    }
                }
            }
            Ok(()) => {
                if let (Some(b), Some(i)) =
                    (self.done_bytes.get_mut(s.dir), self.done_ios.get_mut(s.dir))
                {
                    *b += bytes;
                    *i += 1;
                }
                if self.recording && s.start_ns >= self.stats_start {
                    let lat = IoLatency {
                        dir: s.dir,
                        slat: s.issue_ns - s.start_ns,
                        clat: t_done.saturating_sub(s.issue_ns),
                        lat: t_done.saturating_sub(s.start_ns),
                        at_ns: t_done,
                    };
                    pending.add(&mut self.out.stats, lat, bytes);
                }
                if verifying && s.dir != 0 {
                    let io = NextIo {
                        dir: s.dir,
                        unit: s.unit,
                        units: s.units,
                    };
                    apply(&mut self.v.gens, io);
                    if self.v.backlog_len.is_some() {
                        self.v.backlog.push_back((s.unit, s.units));
                    }
                }
            }
        }
        if self.v.checking && s.dir == 0 {
            // Checked (and the slot freed) after reap returns the queue.
            self.to_check.push((slot, s));
        } else {
            if verifying {
                self.v.busy.set(s.unit, s.units, false);
            }
            self.free.push(slot);
        }
    }

    /// Counters for the live status line.
    fn publish_progress(&self) {
        let counters = [
            (&self.progress.bytes, &self.done_bytes),
            (&self.progress.ios, &self.done_ios),
        ];
        for (shown, done) in counters {
            for (p, v) in shown.iter().zip(done) {
                p.store(*v, Ordering::Relaxed);
            }
        }
    }

    /// Checks the reads the last reap completed and frees their slots.
    fn verify_reads(&mut self, q: &mut dyn IoQueue) {
        for (slot, s) in self.to_check.drain(..) {
            let len = usize::try_from(s.units * self.unit_bytes).unwrap_or(0);
            let buf = self.staging.get_mut(..len).unwrap_or(&mut []);
            if let Err(e) = q.read_payload(slot, buf) {
                self.out.error.get_or_insert(e);
            } else if let Some(v) = &self.v.verifier {
                check_read(self.plan, v, &self.v.gens, &s, buf, &mut self.out.verify);
            }
            self.v.busy.set(s.unit, s.units, false);
            self.free.push(slot);
        }
    }

    /// Samples the bandwidth and IOPS logs of the directions active in this phase.
    fn sample(&mut self, t: u64) {
        let rw = self.plan.rw;
        let main = self.phase == Phase::Main;
        let verifying = !main || !self.v.backlog.is_empty();
        let active = [
            self.plan.read_pct > 0 || verifying,
            self.plan.read_pct < 100 && !rw.is_trim() && main,
            (rw.is_trim() || rw.is_trimwrite()) && main,
        ];
        for (ds, on) in self.out.stats.dirs.iter_mut().zip(active) {
            if on {
                ds.maybe_sample(t);
            }
        }
    }

    /// Nothing in flight and nothing to issue: moves to the verify phase or the next
    /// loop; false when the job is over.
    fn next_pass(&mut self) -> bool {
        let plan = self.plan;
        let go_on = self.out.error.is_none() && !self.stop.load(Ordering::Relaxed);
        // verify_only checks once, after replaying every loop: the device holds
        // only what the last loop left.
        let last_loop = self.loop_no + 1 >= plan.loops;
        if self.phase == Phase::Main
            && self.v.checking
            && self.v.backlog_len.is_none()
            && go_on
            && (!self.v.dry_run || last_loop)
        {
            self.end_phase(self.now());
            self.phase = Phase::Verify { cursor: 0 };
            self.progress.set(JobState::Verifying);
            return true;
        }
        self.loop_no += 1;
        let ios_done = plan.number_ios.is_some_and(|n| self.workload_ios >= n);
        let more = self.loop_no < plan.loops && !plan.time_based && !ios_done;
        if more && go_on && self.end_ns.is_none_or(|e| self.now() < e) {
            if matches!(self.phase, Phase::Verify { .. }) {
                self.end_phase(self.now());
            }
            self.phase = Phase::Main;
            self.loop_bytes = 0;
            self.held = None;
            self.progress.set(JobState::Running);
            return true;
        }
        false
    }

    fn end_phase(&mut self, t: u64) {
        let from = self.recording.then_some(self.stats_start);
        self.dir_clock.end_phase(t, from, &self.done_ios);
    }

    /// The job's output: runtimes, thread usage, and statistics (reset at the end if
    /// the job never left its ramp).
    fn finish(mut self) -> JobOutput {
        let t_end = self.now();
        self.end_phase(t_end);
        self.out.dir_runtime_ms = self.dir_clock.ms();
        if !self.recording {
            self.out.stats.reset(t_end);
            self.stats_start = t_end;
            self.usage_start = thread_usage();
        }
        self.out.usage = thread_usage().since(&self.usage_start);
        // Whole milliseconds as fio reports them, but never 0 once I/O completed
        // (a sub-millisecond run would otherwise vanish from the report).
        let did_io = self.out.stats.dirs.iter().any(|d| d.total_ios > 0);
        self.out.runtime_ms = ((t_end - self.stats_start) / 1_000_000).max(u64::from(did_io));
        self.out.elapsed_ms = t_end / 1_000_000;
        self.progress.set(JobState::Done);
        self.out
    }
}
