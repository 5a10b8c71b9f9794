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

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use crate::engine::{EngineError, IoQueue, Op};
use std::collections::VecDeque;

use crate::next_io::{IoSource, NextIo, SourceSpec};
pub use crate::offsets::Rng;
use crate::plan::JobPlan;
use crate::stats::{IoLatency, JobStats, PendingLatencies};
use crate::sysinfo::{ThreadUsage, thread_usage};
use crate::think::Thinker;
use crate::verify::{Checksum, GEN_ANY, GEN_TRIMMED, Method, Verifier, VerifyFailure};

/// Generation value meaning "content unknown" (a failed write); never checked.
const GEN_UNKNOWN: u32 = u32::MAX;
/// Failures kept with details per job.
pub const MAX_VERIFY_DETAILS: usize = 8;

/// Where a job is, for the status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum JobState {
    /// Setting up buffers.
    Starting = 0,
    /// In `ramp_time`: I/O runs, statistics are discarded.
    Ramping = 1,
    /// Measuring.
    Running = 2,
    /// Reading back and checking what was written.
    Verifying = 3,
    /// Finished.
    Done = 4,
}

/// Counters a job publishes for the live status line (Relaxed: display only).
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes completed per direction (read, write, trim) since the job started.
    pub bytes: [AtomicU64; 3],
    /// I/Os completed per direction since the job started.
    pub ios: [AtomicU64; 3],
    /// A [`JobState`] as `u8`.
    pub state: AtomicU8,
}

impl Progress {
    /// The published state.
    pub fn state(&self) -> JobState {
        match self.state.load(Ordering::Relaxed) {
            0 => JobState::Starting,
            1 => JobState::Ramping,
            2 => JobState::Running,
            3 => JobState::Verifying,
            _ => JobState::Done,
        }
    }

    fn set(&self, s: JobState) {
        self.state.store(s as u8, Ordering::Relaxed);
    }
}

/// Verify results of one job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifySummary {
    /// Reads whose data failed a check.
    pub errors: u64,
    /// Reads checked and found good.
    pub verified_ios: u64,
    /// Logical blocks checked and found good.
    pub verified_blocks: u64,
    /// Reads of a mixed job's main phase that touched no block this job wrote (as
    /// fio, they are not checked; a read-only job checks every block it reads).
    pub unverifiable_ios: u64,
    /// The first few failures.
    pub first: Vec<VerifyFailure>,
}

/// What a finished job hands back.
#[derive(Debug, Clone)]
pub struct JobOutput {
    /// Statistics since ramp end.
    pub stats: JobStats,
    /// Milliseconds from ramp end to the last completion.
    pub runtime_ms: u64,
    /// Per direction (read, write, trim), the milliseconds of the phases in which it
    /// completed I/O (fio's per-direction runtime): in a write job with verify, write
    /// counts the writing and read the read-back.
    pub dir_runtime_ms: [u64; 3],
    /// Milliseconds from job start to the last completion.
    pub elapsed_ms: u64,
    /// The first engine error; the job stops issuing after it.
    pub error: Option<EngineError>,
    /// Verify results.
    pub verify: VerifySummary,
    /// CPU time, context switches and faults of the job thread since ramp end.
    pub usage: ThreadUsage,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    unit: u64,
    units: u64,
    lba: u64,
    /// 0 read, 1 write, 2 trim.
    dir: usize,
    start_ns: u64,
    issue_ns: u64,
}

/// Whether an I/O in direction `dir` counts toward `size`: in a trimwrite job only the
/// trims do (fio trims `size` bytes and writes each trimmed range).
fn sized(plan: &JobPlan, dir: usize) -> bool {
    !plan.rw.is_trimwrite() || dir == 2
}

/// Whether a trimwrite job still has to write part of a range it trimmed: it is written
/// in full, also past `size`.
fn trimmed_to_write(plan: &JobPlan, source: &IoSource, held: Option<NextIo>) -> bool {
    source.writing_trimmed() || (plan.rw.is_trimwrite() && held.is_some_and(|h| h.dir == 1))
}

fn next_gen(g: u32) -> u32 {
    if g == 0 || g >= GEN_TRIMMED { 1 } else { g + 1 }
}

/// One bit per unit: in flight (verify never has two I/Os on one unit).
struct Busy(Vec<u64>);

impl Busy {
    fn get(&self, u: u64) -> bool {
        let i = usize::try_from(u / 64).unwrap_or(usize::MAX);
        self.0.get(i).is_some_and(|w| w & (1 << (u % 64)) != 0)
    }
    fn any(&self, unit: u64, units: u64) -> bool {
        (unit..unit + units).any(|u| self.get(u))
    }
    fn set(&mut self, unit: u64, units: u64, on: bool) {
        for u in unit..unit + units {
            let i = usize::try_from(u / 64).unwrap_or(usize::MAX);
            if let Some(w) = self.0.get_mut(i) {
                if on {
                    *w |= 1 << (u % 64);
                } else {
                    *w &= !(1 << (u % 64));
                }
            }
        }
    }
}

fn gen_at(gens: &[u32], u: u64) -> u32 {
    usize::try_from(u)
        .ok()
        .and_then(|i| gens.get(i))
        .copied()
        .unwrap_or(0)
}

fn set_gen(gens: &mut [u32], u: u64, g: u32) {
    if let Some(slot) = usize::try_from(u).ok().and_then(|i| gens.get_mut(i)) {
        *slot = g;
    }
}

/// What a completed write or trim leaves in each of its units.
fn apply(gens: &mut [u32], io: NextIo) {
    for u in io.unit..io.unit + io.units {
        let g = match io.dir {
            1 => next_gen(gen_at(gens, u)),
            2 => GEN_TRIMMED,
            _ => continue,
        };
        set_gen(gens, u, g);
    }
}

/// Each direction's active time: a phase (a loop's workload, its verify read-back)
/// counts for the directions that completed I/O in it, from the ramp's end on.
#[derive(Debug, Default)]
struct DirClock {
    phase_start: u64,
    ios_at_start: [u64; 3],
    ns: [u64; 3],
}

impl DirClock {
    /// Ends the phase at `t` with `ios` completed so far per direction; `from` is when
    /// statistics started (None: still ramping, nothing counts).
    fn end_phase(&mut self, t: u64, from: Option<u64>, ios: &[u64; 3]) {
        if let Some(from) = from {
            let took = t.saturating_sub(self.phase_start.max(from));
            for ((ns, now), then) in self.ns.iter_mut().zip(ios).zip(self.ios_at_start) {
                if *now > then {
                    *ns += took;
                }
            }
        }
        self.phase_start = t;
        self.ios_at_start = *ios;
    }

    /// Whole milliseconds, never 0 for a direction that was active.
    fn ms(&self) -> [u64; 3] {
        self.ns
            .map(|ns| if ns == 0 { 0 } else { (ns / 1_000_000).max(1) })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Main,
    Verify { cursor: u64 },
}

/// Whether the job only reads: with verify, it checks every block it reads against
/// the block's own header (or the pattern), as fio does, since it wrote none of them.
fn reads_only(plan: &JobPlan) -> bool {
    plan.read_pct == 100 && !plan.rw.is_trim()
}

/// Checks a verify read of `s` (in `buf`) against the generation table; blocks the
/// job did not write are checked only in a read-only job.
fn check_read(
    plan: &JobPlan,
    verifier: &Verifier,
    gens: &[u32],
    s: &Slot,
    buf: &[u8],
    out: &mut VerifySummary,
) {
    let unit_len = usize::try_from(u64::from(plan.unit_blocks) * u64::from(plan.block_size))
        .unwrap_or(usize::MAX);
    let block_size = usize::try_from(plan.block_size).unwrap_or(512);
    let mut checked = 0u64;
    let any_writer = reads_only(plan);
    for (i, chunk) in (0u64..s.units).zip(buf.chunks(unit_len.max(1))) {
        let g = gen_at(gens, s.unit + i);
        if g == GEN_UNKNOWN || (g == GEN_ANY && !any_writer) {
            continue;
        }
        let lba = s.lba + i * u64::from(plan.unit_blocks);
        if let Err(f) = verifier.check_io(chunk, lba, block_size, g) {
            out.errors += 1;
            if out.first.len() < MAX_VERIFY_DETAILS {
                out.first.push(f);
            }
            return;
        }
        checked += u64::from(plan.unit_blocks);
    }
    if checked > 0 {
        out.verified_ios += 1;
        out.verified_blocks += checked;
    } else {
        out.unverifiable_ios += 1;
    }
}

/// Runs one job to completion on `q`. `stop` ends it early (as runtime would).
pub fn run_job(
    plan: &JobPlan,
    q: &mut dyn IoQueue,
    progress: &Progress,
    stop: &AtomicBool,
) -> JobOutput {
    // Calibrated TSC: a few ns per reading instead of clock_gettime's 20-50.
    let clock = nvmemu_mem::TscClock::new();
    let now = || clock.now_ns();
    let depth = plan.iodepth.max(1);
    let unit_bytes = u64::from(plan.unit_blocks) * u64::from(plan.block_size);
    let unit_len = usize::try_from(unit_bytes).unwrap_or(0);
    let max_units = plan.sizes.max();
    let slot_bytes = usize::try_from(unit_bytes * max_units).unwrap_or(0);
    let block_size = usize::try_from(plan.block_size).unwrap_or(512);
    let mut out = JobOutput {
        stats: JobStats::with_log(plan.log),
        runtime_ms: 0,
        dir_runtime_ms: [0; 3],
        elapsed_ms: 0,
        error: None,
        verify: VerifySummary::default(),
        usage: ThreadUsage::default(),
    };
    progress.set(JobState::Starting);
    let mut staging = vec![0u8; slot_bytes];
    if let Err(e) = q.setup(depth, slot_bytes) {
        out.error = Some(e);
        progress.set(JobState::Done);
        return out;
    }
    let vplan = plan.verify.as_ref();
    let verifier = vplan.map(|v| Verifier::new(v.method.clone(), plan.job));
    // fio checks a read-only job's reads even with do_verify=0 (that option only
    // drops the read-back phase after writes).
    let checking = vplan.is_some_and(|v| v.do_verify || reads_only(plan));
    let dry_run = vplan.is_some_and(|v| v.verify_only);
    let backlog_len = vplan.and_then(|v| v.backlog).filter(|_| checking);
    if verifier.is_none() {
        // Write buffers get realistic, non-zero content once; no copies per I/O.
        Verifier::new(Method::Header(Checksum::Crc32c), plan.job).fill_io(
            &mut staging,
            0,
            block_size,
            0,
        );
        for slot in 0..depth {
            if let Err(e) = q.write_payload(slot, &staging) {
                out.error = Some(e);
                progress.set(JobState::Done);
                return out;
            }
        }
    }
    let units_len = usize::try_from(plan.units).unwrap_or(0);
    let mut gens: Vec<u32> = if verifier.is_some() {
        vec![0; units_len]
    } else {
        Vec::new()
    };
    let mut busy = Busy(if verifier.is_some() {
        vec![0; units_len.div_ceil(64)]
    } else {
        Vec::new()
    });
    // Written units waiting for their backlog check; room for a full backlog plus what
    // completes while it drains, so it never grows on the hot path.
    let mut backlog: VecDeque<(u64, u64)> = VecDeque::with_capacity(backlog_len.map_or(0, |n| {
        usize::try_from(n.min(plan.units)).unwrap_or(0) + depth
    }));
    let mut slots = vec![Slot::default(); depth];
    let mut free: Vec<usize> = (0..depth).rev().collect();
    let mut batch: Vec<usize> = Vec::with_capacity(depth);
    let mut to_check: Vec<(usize, Slot)> = Vec::with_capacity(depth);
    let mut source = IoSource::new(SourceSpec {
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
    let mut pacer = plan.pacer.clone();
    // A paced mixed job lets a direction that must wait give way to the other (fio's rule);
    // not with verify, whose verify_only replay issues the same I/Os without pacing.
    let mixed_paced = (1..100).contains(&plan.read_pct) && plan.verify.is_none();
    // The next workload I/O when it could not be issued yet; issued before any other.
    let mut held: Option<NextIo> = None;
    let mut inflight: usize = 0;
    let mut loop_bytes: u64 = 0;
    let mut workload_ios: u64 = 0;
    let mut loop_no: u32 = 0;
    let mut thinker = plan.thinktime.map(Thinker::new);
    let mut done_bytes = [0u64; 3];
    let mut done_ios = [0u64; 3];
    let ramp_ns = u64::try_from(plan.ramp.as_nanos()).unwrap_or(u64::MAX);
    let end_ns = plan
        .runtime
        .map(|r| ramp_ns.saturating_add(u64::try_from(r.as_nanos()).unwrap_or(u64::MAX)));
    let mut recording = false;
    let mut stats_start: u64 = 0;
    let mut usage_start = ThreadUsage::default();
    let mut phase = Phase::Main;
    let mut dir_clock = DirClock::default();
    progress.set(if ramp_ns > 0 {
        JobState::Ramping
    } else {
        JobState::Running
    });

    loop {
        let t = now();
        if !recording && t >= ramp_ns {
            out.stats.reset(t);
            recording = true;
            stats_start = t;
            loop_bytes = 0;
            workload_ios = 0;
            usage_start = thread_usage();
            progress.set(JobState::Running);
        }
        let time_up = end_ns.is_some_and(|e| t >= e) || stop.load(Ordering::Relaxed);
        let ios_done = plan.number_ios.is_some_and(|n| workload_ios >= n);
        let main_done = (!plan.time_based
            && loop_bytes >= plan.loop_bytes
            && !trimmed_to_write(plan, &source, held))
            || ios_done;
        let issuing = out.error.is_none()
            && match phase {
                Phase::Main => !time_up && (!main_done || !backlog.is_empty()),
                Phase::Verify { cursor } => cursor < plan.units && !stop.load(Ordering::Relaxed),
            };
        // thinktime: a due stall drains the I/Os in flight, then idles.
        let thinking = thinker.as_mut().is_some_and(|th| th.wait(inflight, t));

        // Issue: once enough slots are free, fill them, one doorbell per `submit_batch`
        // commands. One clock reading serves as the start time of a whole batch
        // (submission takes a few ns per command).
        let mut refilling = issuing && !thinking && free.len() >= plan.refill_min;
        while refilling {
            let start_ns = now();
            while batch.len() < plan.submit_batch
                && let Some(&slot) = free.last()
            {
                let pick = match &mut phase {
                    Phase::Main => {
                        // Checked per command: a batch must not run past size or number_ios.
                        let limit = (!plan.time_based
                            && loop_bytes >= plan.loop_bytes
                            && !trimmed_to_write(plan, &source, held))
                            || plan.number_ios.is_some_and(|n| workload_ios >= n);
                        let draining =
                            backlog_len.is_some_and(|n| backlog.len() as u64 >= n || limit);
                        if draining && let Some(&(unit, units)) = backlog.front() {
                            if busy.any(unit, units) {
                                None
                            } else {
                                backlog.pop_front();
                                Some((
                                    NextIo {
                                        dir: 0,
                                        unit,
                                        units,
                                    },
                                    true,
                                ))
                            }
                        } else if limit || thinker.as_mut().is_some_and(|th| th.stalled(start_ns)) {
                            None
                        } else {
                            let mut io = held.take().unwrap_or_else(|| source.next());
                            if let Some(p) = &pacer
                                && mixed_paced
                            {
                                io.dir = p.pick(io.dir, start_ns);
                            }
                            let in_flight = verifier.is_some() && busy.any(io.unit, io.units);
                            let due = pacer.as_ref().is_none_or(|p| p.ready(io.dir, start_ns));
                            if dry_run {
                                // verify_only: what the write run left, without the I/O.
                                apply(&mut gens, io);
                                if sized(plan, io.dir) {
                                    loop_bytes += io.units * unit_bytes;
                                }
                                workload_ios += 1;
                                if (!plan.time_based
                                    && loop_bytes >= plan.loop_bytes
                                    && !source.writing_trimmed())
                                    || plan.number_ios.is_some_and(|n| workload_ios >= n)
                                {
                                    break;
                                }
                                continue;
                            }
                            if in_flight || !due {
                                held = Some(io);
                                None
                            } else {
                                Some((io, false))
                            }
                        }
                    }
                    Phase::Verify { cursor } => {
                        while *cursor < plan.units && gen_at(&gens, *cursor) == 0 {
                            *cursor += 1;
                        }
                        let u = *cursor;
                        let mut k = 0;
                        while k < max_units && u + k < plan.units && gen_at(&gens, u + k) != 0 {
                            k += 1;
                        }
                        *cursor = u + k;
                        (k > 0).then_some((
                            NextIo {
                                dir: 0,
                                unit: u,
                                units: k,
                            },
                            true,
                        ))
                    }
                };
                let Some((io, check)) = pick else {
                    break;
                };
                let lba = plan.first_lba + io.unit * u64::from(plan.unit_blocks);
                let bytes = io.units * unit_bytes;
                let blocks = u32::try_from(io.units * u64::from(plan.unit_blocks)).unwrap_or(0);
                if let Some(v) = &verifier
                    && io.dir == 1
                {
                    for (i, chunk) in (0..io.units).zip(staging.chunks_mut(unit_len.max(1))) {
                        let g = next_gen(gen_at(&gens, io.unit + i));
                        v.fill_io(chunk, lba + i * u64::from(plan.unit_blocks), block_size, g);
                    }
                    let len = usize::try_from(bytes).unwrap_or(0);
                    if let Err(e) = q.write_payload(slot, staging.get(..len).unwrap_or(&[])) {
                        out.error = Some(e);
                        break;
                    }
                }
                let op = match io.dir {
                    0 => Op::Read,
                    1 => Op::Write,
                    _ => Op::Trim,
                };
                match q.submit(slot, op, lba, blocks) {
                    Ok(()) => {
                        free.pop();
                        if verifier.is_some() {
                            busy.set(io.unit, io.units, true);
                        }
                        if let Some(s) = slots.get_mut(slot) {
                            *s = Slot {
                                unit: io.unit,
                                units: io.units,
                                lba,
                                dir: io.dir,
                                start_ns,
                                issue_ns: start_ns,
                            };
                        }
                        batch.push(slot);
                        inflight += 1;
                        if !check {
                            if recording {
                                if sized(plan, io.dir) {
                                    loop_bytes += bytes;
                                }
                                workload_ios += 1;
                            }
                            if let Some(th) = &mut thinker {
                                th.issued();
                            }
                            if let Some(p) = &mut pacer {
                                p.charge(io.dir, bytes, start_ns);
                            }
                        }
                    }
                    Err(EngineError::QueueFull) => {
                        // Issued after the next reap, so the pass (or verify) still covers it.
                        match (&mut phase, check) {
                            (Phase::Main, false) => held = Some(io),
                            (Phase::Main, true) => backlog.push_front((io.unit, io.units)),
                            (Phase::Verify { cursor }, _) => *cursor = io.unit,
                        }
                        if inflight == 0 {
                            // Nothing in flight yet the queue is full: the engine
                            // would never accept a command; end the job.
                            out.error = Some(EngineError::QueueFull);
                        }
                        break;
                    }
                    Err(e) => {
                        out.error = Some(e);
                        break;
                    }
                }
            }
            // Only a batch cut short by `submit_batch` may be followed by another.
            let full = batch.len() == plan.submit_batch;
            if !batch.is_empty() {
                if let Err(e) = q.ring() {
                    out.error.get_or_insert(e);
                }
                let t_issue = now();
                for &s in &batch {
                    if let Some(s) = slots.get_mut(s) {
                        s.issue_ns = t_issue;
                    }
                }
                if recording {
                    out.stats.count_submit(batch.len(), inflight);
                }
                batch.clear();
            }
            refilling = full && !free.is_empty() && out.error.is_none();
        }

        // Reap.
        if inflight > 0 {
            let mut t_done = 0u64;
            let mut pending = PendingLatencies::default();
            let stats = &mut out.stats;
            let error = &mut out.error;
            let verifying = verifier.is_some();
            let n = q.reap(plan.reap_max, &mut |slot, res| {
                if t_done == 0 {
                    t_done = now();
                }
                let Some(s) = slots.get(slot).copied() else {
                    error.get_or_insert(EngineError::InvalidSlot { slot });
                    return;
                };
                inflight = inflight.saturating_sub(1);
                let bytes = s.units * unit_bytes;
                let io = NextIo {
                    dir: s.dir,
                    unit: s.unit,
                    units: s.units,
                };
                match res {
                    Err(e) => {
                        error.get_or_insert(e);
                        if verifying && s.dir != 0 {
                            for u in s.unit..s.unit + s.units {
                                set_gen(&mut gens, u, GEN_UNKNOWN);
                            }
                        }
                    }
                    Ok(()) => {
                        if let (Some(b), Some(i)) =
                            (done_bytes.get_mut(s.dir), done_ios.get_mut(s.dir))
                        {
                            *b += bytes;
                            *i += 1;
                        }
                        if recording && s.start_ns >= stats_start {
                            let lat = IoLatency {
                                dir: s.dir,
                                slat: s.issue_ns - s.start_ns,
                                clat: t_done.saturating_sub(s.issue_ns),
                                lat: t_done.saturating_sub(s.start_ns),
                                at_ns: t_done,
                            };
                            pending.add(stats, lat, bytes);
                        }
                        if verifying && s.dir != 0 {
                            apply(&mut gens, io);
                            if backlog_len.is_some() {
                                backlog.push_back((s.unit, s.units));
                            }
                        }
                    }
                }
                if checking && s.dir == 0 {
                    // Checked (and the slot freed) after reap returns the queue.
                    to_check.push((slot, s));
                } else {
                    if verifying {
                        busy.set(s.unit, s.units, false);
                    }
                    free.push(slot);
                }
            });
            if n > 0 {
                if let Some(th) = &mut thinker {
                    th.completed(n as u64);
                }
                pending.flush(&mut out.stats);
                if recording {
                    out.stats.count_complete(n);
                }
                for d in 0..3 {
                    if let (Some(p), Some(v)) = (progress.bytes.get(d), done_bytes.get(d)) {
                        p.store(*v, Ordering::Relaxed);
                    }
                    if let (Some(p), Some(v)) = (progress.ios.get(d), done_ios.get(d)) {
                        p.store(*v, Ordering::Relaxed);
                    }
                }
            }
            for (slot, s) in to_check.drain(..) {
                let len = usize::try_from(s.units * unit_bytes).unwrap_or(0);
                let buf = staging.get_mut(..len).unwrap_or(&mut []);
                if let Err(e) = q.read_payload(slot, buf) {
                    out.error.get_or_insert(e);
                } else if let Some(v) = &verifier {
                    check_read(plan, v, &gens, &s, buf, &mut out.verify);
                }
                busy.set(s.unit, s.units, false);
                free.push(slot);
            }
        }
        if recording {
            let verifying = matches!(phase, Phase::Verify { .. }) || !backlog.is_empty();
            let active = [
                plan.read_pct > 0 || verifying,
                plan.read_pct < 100 && !plan.rw.is_trim() && phase == Phase::Main,
                (plan.rw.is_trim() || plan.rw.is_trimwrite()) && phase == Phase::Main,
            ];
            for (ds, on) in out.stats.dirs.iter_mut().zip(active) {
                if on {
                    ds.maybe_sample(t);
                }
            }
        }

        if inflight == 0 && !issuing {
            let go_on = out.error.is_none() && !stop.load(Ordering::Relaxed);
            // verify_only checks once, after replaying every loop: the device holds
            // only what the last loop left.
            let last_loop = loop_no + 1 >= plan.loops;
            if phase == Phase::Main
                && checking
                && backlog_len.is_none()
                && go_on
                && (!dry_run || last_loop)
            {
                dir_clock.end_phase(now(), recording.then_some(stats_start), &done_ios);
                phase = Phase::Verify { cursor: 0 };
                progress.set(JobState::Verifying);
                continue;
            }
            loop_no += 1;
            let more = loop_no < plan.loops && !plan.time_based && !ios_done;
            if more && go_on && end_ns.is_none_or(|e| now() < e) {
                if matches!(phase, Phase::Verify { .. }) {
                    dir_clock.end_phase(now(), recording.then_some(stats_start), &done_ios);
                }
                phase = Phase::Main;
                loop_bytes = 0;
                held = None;
                progress.set(JobState::Running);
                continue;
            }
            break;
        }
    }
    let t_end = now();
    dir_clock.end_phase(t_end, recording.then_some(stats_start), &done_ios);
    out.dir_runtime_ms = dir_clock.ms();
    if !recording {
        out.stats.reset(t_end);
        stats_start = t_end;
        usage_start = thread_usage();
    }
    out.usage = thread_usage().since(&usage_start);
    // Whole milliseconds as fio reports them, but never 0 once I/O completed
    // (a sub-millisecond run would otherwise vanish from the report).
    let did_io = out.stats.dirs.iter().any(|d| d.total_ios > 0);
    out.runtime_ms = ((t_end - stats_start) / 1_000_000).max(u64::from(did_io));
    out.elapsed_ms = t_end / 1_000_000;
    progress.set(JobState::Done);
    out
}
