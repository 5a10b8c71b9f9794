// SPDX-License-Identifier: Apache-2.0
//! One job's I/O loop: keeps `iodepth` I/Os in flight on one [`IoQueue`],
//! batches submissions behind one doorbell, polls completions, records fio's
//! statistics and, in verify mode, writes self-describing blocks and checks
//! every read against the job's generation table.
//!
//! Offsets come from [`Offsets`]: sequential, fio's random map (every unit of the
//! range once per pass, so a random write then verify checks every block written)
//! or, with `norandommap`, independent draws.
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
//! Hook for a per-layer latency breakdown (issue 5): every slot carries its
//! `start_ns` (before `submit`) and `issue_ns` (after `ring`); an engine that can
//! report device-side timestamps would add them to [`Slot`] at reap.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use crate::engine::{EngineError, IoQueue, Op};
use crate::offsets::Offsets;
pub use crate::offsets::Rng;
use crate::plan::JobPlan;
use crate::stats::{IoLatency, JobStats, PendingLatencies};
use crate::sysinfo::{ThreadUsage, thread_usage};
use crate::verify::{self, VerifyFailure};

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
    /// Bytes completed per direction since the job started.
    pub bytes: [AtomicU64; 2],
    /// I/Os completed per direction since the job started.
    pub ios: [AtomicU64; 2],
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
    /// Reads of blocks with no known content (never written by this job).
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
    lba: u64,
    op_write: bool,
    generation: u32,
    start_ns: u64,
    issue_ns: u64,
}

fn next_gen(g: u32) -> u32 {
    if g == 0 || g >= GEN_UNKNOWN - 1 {
        1
    } else {
        g + 1
    }
}

struct Busy(Vec<u64>);

impl Busy {
    fn get(&self, u: u64) -> bool {
        let i = usize::try_from(u / 64).unwrap_or(usize::MAX);
        self.0.get(i).is_some_and(|w| w & (1 << (u % 64)) != 0)
    }
    fn set(&mut self, u: u64, on: bool) {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Main,
    Verify { cursor: u64 },
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
    let bs = u64::from(plan.blocks_per_io) * u64::from(plan.block_size);
    let bs_usize = usize::try_from(bs).unwrap_or(0);
    let block_size = usize::try_from(plan.block_size).unwrap_or(512);
    let mut out = JobOutput {
        stats: JobStats::with_log(plan.log),
        runtime_ms: 0,
        elapsed_ms: 0,
        error: None,
        verify: VerifySummary::default(),
        usage: ThreadUsage::default(),
    };
    progress.set(JobState::Starting);
    let mut staging = vec![0u8; bs_usize];
    if let Err(e) = q.setup(depth, bs_usize) {
        out.error = Some(e);
        progress.set(JobState::Done);
        return out;
    }
    if !plan.verify {
        // Write buffers get realistic, non-zero content once; no copies per I/O.
        verify::fill_io(&mut staging, 0, block_size, 0, plan.job);
        for slot in 0..depth {
            if let Err(e) = q.write_payload(slot, &staging) {
                out.error = Some(e);
                progress.set(JobState::Done);
                return out;
            }
        }
    }
    let units_len = usize::try_from(plan.units).unwrap_or(0);
    let mut gens: Vec<u32> = if plan.verify {
        vec![0; units_len]
    } else {
        Vec::new()
    };
    let mut busy = Busy(if plan.verify {
        vec![0; units_len.div_ceil(64)]
    } else {
        Vec::new()
    });
    let mut slots = vec![Slot::default(); depth];
    let mut free: Vec<usize> = (0..depth).rev().collect();
    let mut batch: Vec<usize> = Vec::with_capacity(depth);
    let mut to_check: Vec<(usize, Slot)> = Vec::with_capacity(depth);
    let mut rng = Rng::new(plan.seed ^ u64::from(plan.job).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut offsets = Offsets::new(
        plan.rw.is_random(),
        plan.random_map,
        plan.units.max(1),
        &mut rng,
    );
    // A unit the generator handed out that could not be issued yet (still in flight
    // under verify, or a full queue): issued next, so no unit of a pass is skipped.
    let mut held: Option<u64> = None;
    let uniform = matches!(offsets, Offsets::Uniform { .. });
    let mut inflight: usize = 0;
    let mut issued_bytes: u64 = 0;
    let mut done_bytes = [0u64; 2];
    let mut done_ios = [0u64; 2];
    let ramp_ns = u64::try_from(plan.ramp.as_nanos()).unwrap_or(u64::MAX);
    let end_ns = plan
        .runtime
        .map(|r| ramp_ns.saturating_add(u64::try_from(r.as_nanos()).unwrap_or(u64::MAX)));
    let mut recording = false;
    let mut stats_start: u64 = 0;
    let mut usage_start = ThreadUsage::default();
    let mut phase = Phase::Main;
    // Every block written is read back once the main phase ends (reads during a mixed
    // workload check only what an earlier pass wrote).
    let verify_phase = plan.verify && plan.read_pct < 100;
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
            issued_bytes = 0;
            usage_start = thread_usage();
            progress.set(JobState::Running);
        }
        let issuing = match phase {
            Phase::Main => {
                let time_up = end_ns.is_some_and(|e| t >= e) || stop.load(Ordering::Relaxed);
                let size_done = !plan.time_based && recording && issued_bytes >= plan.size_bytes;
                !(time_up || size_done || out.error.is_some())
            }
            Phase::Verify { cursor } => {
                cursor < plan.units && out.error.is_none() && !stop.load(Ordering::Relaxed)
            }
        };

        // Issue: once enough slots are free, fill them, one doorbell per `submit_batch`
        // commands. One clock reading serves as the start time of a whole batch
        // (submission takes a few ns per command).
        let mut refilling = issuing && free.len() >= plan.refill_min;
        while refilling {
            let start_ns = now();
            while batch.len() < plan.submit_batch
                && let Some(&slot) = free.last()
            {
                let next = match &mut phase {
                    Phase::Main => {
                        if !plan.time_based && recording && issued_bytes >= plan.size_bytes {
                            None
                        } else {
                            let write = plan.read_pct < 100
                                && (plan.read_pct == 0
                                    || rng.below(100) >= u64::from(plan.read_pct));
                            let mut unit = held.take().unwrap_or_else(|| offsets.next(&mut rng));
                            if plan.verify && busy.get(unit) && uniform {
                                // Independent draws: any other unit will do.
                                for _ in 0..8 {
                                    unit = offsets.next(&mut rng);
                                    if !busy.get(unit) {
                                        break;
                                    }
                                }
                            }
                            if plan.verify && busy.get(unit) {
                                if !uniform {
                                    held = Some(unit);
                                }
                                None
                            } else {
                                let g = gen_at(&gens, unit);
                                Some((write, unit, if write { next_gen(g) } else { g }))
                            }
                        }
                    }
                    Phase::Verify { cursor } => {
                        while *cursor < plan.units && gen_at(&gens, *cursor) == 0 {
                            *cursor += 1;
                        }
                        if *cursor < plan.units {
                            let u = *cursor;
                            *cursor += 1;
                            Some((false, u, gen_at(&gens, u)))
                        } else {
                            None
                        }
                    }
                };
                let Some((write, unit, generation)) = next else {
                    break;
                };
                let lba = plan.first_lba + unit * u64::from(plan.blocks_per_io);
                if plan.verify && write {
                    verify::fill_io(&mut staging, lba, block_size, generation, plan.job);
                    if let Err(e) = q.write_payload(slot, &staging) {
                        out.error = Some(e);
                        break;
                    }
                }
                let op = if write { Op::Write } else { Op::Read };
                match q.submit(slot, op, lba, plan.blocks_per_io) {
                    Ok(()) => {
                        free.pop();
                        if plan.verify {
                            busy.set(unit, true);
                        }
                        if let Some(s) = slots.get_mut(slot) {
                            *s = Slot {
                                unit,
                                lba,
                                op_write: write,
                                generation,
                                start_ns,
                                issue_ns: start_ns,
                            };
                        }
                        batch.push(slot);
                        inflight += 1;
                        if recording {
                            issued_bytes += bs;
                        }
                    }
                    Err(EngineError::QueueFull) => {
                        // Issued after the next reap, so the pass (or verify) still covers it.
                        match &mut phase {
                            Phase::Main => held = Some(unit),
                            Phase::Verify { cursor } => *cursor = unit,
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
            let n = q.reap(plan.reap_max, &mut |slot, res| {
                if t_done == 0 {
                    t_done = now();
                }
                let Some(s) = slots.get(slot).copied() else {
                    error.get_or_insert(EngineError::InvalidSlot { slot });
                    return;
                };
                inflight = inflight.saturating_sub(1);
                let d = usize::from(s.op_write);
                match res {
                    Err(e) => {
                        error.get_or_insert(e);
                        if plan.verify && s.op_write {
                            set_gen(&mut gens, s.unit, GEN_UNKNOWN);
                        }
                    }
                    Ok(()) => {
                        if let (Some(b), Some(i)) = (done_bytes.get_mut(d), done_ios.get_mut(d)) {
                            *b += bs;
                            *i += 1;
                        }
                        if recording && s.start_ns >= stats_start {
                            let io = IoLatency {
                                dir: d,
                                slat: s.issue_ns - s.start_ns,
                                clat: t_done.saturating_sub(s.issue_ns),
                                lat: t_done.saturating_sub(s.start_ns),
                                at_ns: t_done,
                            };
                            pending.add(stats, io, bs);
                        }
                        if plan.verify && s.op_write {
                            set_gen(&mut gens, s.unit, s.generation);
                        }
                    }
                }
                if plan.verify && !s.op_write {
                    // Checked (and the slot freed) after reap returns the queue.
                    to_check.push((slot, s));
                } else {
                    if plan.verify {
                        busy.set(s.unit, false);
                    }
                    free.push(slot);
                }
            });
            if n > 0 {
                pending.flush(&mut out.stats, bs);
                if recording {
                    out.stats.count_complete(n);
                }
                for d in 0..2 {
                    if let (Some(p), Some(v)) = (progress.bytes.get(d), done_bytes.get(d)) {
                        p.store(*v, Ordering::Relaxed);
                    }
                    if let (Some(p), Some(v)) = (progress.ios.get(d), done_ios.get(d)) {
                        p.store(*v, Ordering::Relaxed);
                    }
                }
            }
            for (slot, s) in to_check.drain(..) {
                let g = s.generation;
                if g == 0 || g == GEN_UNKNOWN {
                    out.verify.unverifiable_ios += 1;
                } else if let Err(e) = q.read_payload(slot, &mut staging) {
                    out.error.get_or_insert(e);
                } else if let Err(f) = verify::check_io(&staging, s.lba, block_size, g) {
                    out.verify.errors += 1;
                    if out.verify.first.len() < MAX_VERIFY_DETAILS {
                        out.verify.first.push(f);
                    }
                } else {
                    out.verify.verified_ios += 1;
                }
                busy.set(s.unit, false);
                free.push(slot);
            }
        }
        if recording {
            let verifying = matches!(phase, Phase::Verify { .. });
            let active = [
                plan.read_pct > 0 || verifying,
                plan.read_pct < 100 && !verifying,
            ];
            for (ds, on) in out.stats.dirs.iter_mut().zip(active) {
                if on {
                    ds.maybe_sample(t);
                }
            }
        }

        if inflight == 0 && !issuing {
            if phase == Phase::Main
                && verify_phase
                && out.error.is_none()
                && !stop.load(Ordering::Relaxed)
            {
                phase = Phase::Verify { cursor: 0 };
                progress.set(JobState::Verifying);
                continue;
            }
            break;
        }
    }
    let t_end = now();
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
