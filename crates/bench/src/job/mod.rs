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
//! An I/O's latencies start where fio's do: after its offset is chosen and its verify
//! payload staged, as the command goes to the queue (fio reads `start_time` at the end of
//! `get_io_u`). The clock is read once per batch there (at its first command), once after
//! each doorbell and once per reap call (first completion); the loop's own time checks
//! take the last reap's reading, and read the clock only when that reap found nothing.
//! Completions with equal latencies are recorded together ([`PendingLatencies`]).
//! Nothing else on the hot path allocates, locks or makes a syscall.
//!
//! Hook for a per-layer latency breakdown: every slot carries its
//! `start_ns` (before `submit`) and `issue_ns` (after `ring`); an engine that can
//! report device-side timestamps would add them to [`Slot`] at reap.

mod reap;
mod submit;

use std::sync::atomic::{AtomicBool, Ordering};

use nvmemu_mem::TscClock;

use crate::dir_clock::DirClock;
use crate::engine::{EngineError, IoQueue};
use crate::generations::{Slot, VerifyState};
use crate::job_output::{JobOutput, JobState, Progress, VerifySummary};
use crate::next_io::{IoSource, NextIo, SourceSpec};
use crate::pace::Pacer;
use crate::plan::JobPlan;
use crate::stats::JobStats;
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
    /// The last reap's completion time, while nothing newer was read: the next turn's
    /// time checks take it instead of a clock reading of their own.
    reaped_at: Option<u64>,
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
    // ramp_time and runtime count from here, as fio's do from the end of a job's setup:
    // a queue slow to set up (a remote target, a loaded machine) shortens no measured I/O.
    job.clock = TscClock::new();
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
            reaped_at: None,
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
            // A reap that completed something read the clock a moment ago.
            let mut t = self.reaped_at.take().unwrap_or_else(|| self.now());
            if !self.recording && t >= self.ramp_ns {
                self.start_recording(t);
                // It reads the thread's CPU time (a system call): not inside the next
                // batch's latencies.
                t = self.now();
            }
            let issuing = self.issuing(t);
            // thinktime: a due stall drains the I/Os in flight, then idles.
            let inflight = self.inflight;
            let thinking = self.thinker.as_mut().is_some_and(|th| th.wait(inflight, t));
            if issuing && !thinking && self.free.len() >= self.plan.batching.refill_min {
                self.submit(q, t);
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
