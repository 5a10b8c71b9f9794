// SPDX-License-Identifier: Apache-2.0
//! `run_bench`: plans the jobs ([`plan_jobs`]), runs one pinned thread per job,
//! shows the status line and gathers a [`BenchResult`].

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::engine::IoQueue;
use crate::error::BenchError;
use crate::job::run_job;
use crate::job_output::{JobOutput, Progress};
use crate::options::BenchOptions;
use crate::plan::{JobPlan, plan_jobs};
use crate::result::{BenchResult, JobResult, MachineInfo, TargetProbe, TargetReport};
use crate::status_loop::status_loop;
use crate::sysinfo;

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
}

/// One job definition of a stage: its options, its reporting group and one queue per
/// `numjobs` clone.
pub struct StageJob {
    /// The job's options.
    pub opts: BenchOptions,
    /// fio's reporting group (`g=N`).
    pub groupid: u32,
    /// One queue per clone (`opts.numjobs` of them).
    pub queues: Vec<Box<dyn IoQueue>>,
}

impl std::fmt::Debug for StageJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageJob")
            .field("name", &self.opts.name)
            .field("groupid", &self.groupid)
            .field("queues", &self.queues.len())
            .finish()
    }
}

/// Runs the benchmark: one job thread per queue (`queues.len()` must equal
/// `--numjobs`), pinned round-robin to `--cpus_allowed`. `target` is read
/// before and after the run; `target_cpus` is recorded in the machine section.
/// `stop` ends every job early (Ctrl-C), as reaching the runtime would.
pub fn run_bench(
    opts: &BenchOptions,
    queues: Vec<Box<dyn IoQueue>>,
    target: &dyn TargetProbe,
    target_cpus: &[usize],
    stop: Arc<AtomicBool>,
) -> Result<BenchResult, BenchError> {
    let job = StageJob {
        opts: opts.clone(),
        groupid: 0,
        queues,
    };
    run_stage(vec![job], target, target_cpus, stop)
}

/// Runs the jobs of one stage (fio: the jobs between two `stonewall`s) at the same
/// time, each clone on its own thread, pinned round-robin to its job's `cpus_allowed`
/// (counting across the stage, so two jobs on `0,1` take one CPU each).
pub fn run_stage(
    jobs: Vec<StageJob>,
    target: &dyn TargetProbe,
    target_cpus: &[usize],
    stop: Arc<AtomicBool>,
) -> Result<BenchResult, BenchError> {
    let Some(lead) = jobs.first().map(|j| j.opts.clone()) else {
        return Err(BenchError::QueueCount {
            queues: 0,
            numjobs: 0,
        });
    };
    let threads = job_threads(jobs)?;
    let plans: Vec<JobPlan> = threads.iter().map(|t| t.plan.clone()).collect();
    let cpus: Vec<Option<usize>> = threads.iter().map(|t| t.cpu).collect();
    // The target's counters are charged to the I/Os measured after ramp_time, so with a ramp
    // they are read again once every job is past it (see `status_loop`).
    let mut before = target.snapshot();
    let ramping = lead.ramp_time.is_some_and(|r| !r.is_zero());
    let progress: Vec<Arc<Progress>> = plans
        .iter()
        .map(|_| Arc::new(Progress::default()))
        .collect();
    let started = Instant::now();
    let start_ms = unix_ms();
    let mut handles = Vec::with_capacity(plans.len());
    let mut meta = Vec::with_capacity(plans.len());
    for (t, prog) in threads.into_iter().zip(&progress) {
        meta.push((Arc::clone(&t.opts), t.groupid, t.plan.job, t.cpu));
        handles.push(t.spawn(Arc::clone(prog), Arc::clone(&stop))?);
    }
    status_loop(&lead, &plans, &progress, &handles, started, &mut || {
        if ramping {
            before = target.snapshot();
        }
    });
    let results = join_jobs(handles, meta, start_ms)?;
    let total_ios: u64 = results
        .iter()
        .flat_map(|j| j.output.stats.dirs.iter())
        .map(|d| d.total_ios)
        .sum();
    let target_report = match (before, target.snapshot()) {
        (Some(b), Some(a)) => Some(TargetReport::from_snapshots(&b, &a, total_ios)),
        _ => None,
    };
    Ok(BenchResult {
        version: format!("nvmemu-{}", env!("CARGO_PKG_VERSION")),
        timestamp_ms: unix_ms(),
        options: lead,
        jobs: results,
        global_options: None,
        target: target_report,
        machine: MachineInfo {
            cpu_model: sysinfo::cpu_model(),
            cpus: sysinfo::online_cpus(),
            jobs_cpus: cpus,
            target_cpus: target_cpus.to_vec(),
            namespace: String::new(),
            numa: String::new(),
        },
    })
}

/// One job clone to run on its own thread.
struct JobThread {
    opts: Arc<BenchOptions>,
    groupid: u32,
    plan: JobPlan,
    queue: Box<dyn IoQueue>,
    cpu: Option<usize>,
}

/// What a joined job thread is reported with: its options, group, number and CPU.
type JobMeta = (Arc<BenchOptions>, u32, u32, Option<usize>);

type JobHandle = thread::JoinHandle<Result<JobOutput, BenchError>>;

/// Plans every clone of the stage's jobs, each with its queue and its CPU (round-robin
/// over its job's `cpus_allowed`, counting across the stage).
fn job_threads(jobs: Vec<StageJob>) -> Result<Vec<JobThread>, BenchError> {
    let mut threads = Vec::new();
    for j in jobs {
        if j.queues.len() != usize::try_from(j.opts.numjobs).unwrap_or(0) {
            return Err(BenchError::QueueCount {
                queues: j.queues.len(),
                numjobs: j.opts.numjobs,
            });
        }
        let Some(first) = j.queues.first() else {
            return Err(BenchError::QueueCount {
                queues: 0,
                numjobs: j.opts.numjobs,
            });
        };
        let plans = plan_jobs(&j.opts, first.geometry())?;
        let opts = Arc::new(j.opts);
        for (plan, queue) in plans.into_iter().zip(j.queues) {
            let i = threads.len();
            let cpu = opts
                .cpus_allowed
                .as_ref()
                .and_then(|c| c.0.get(i % c.0.len().max(1)).copied());
            threads.push(JobThread {
                opts: Arc::clone(&opts),
                groupid: j.groupid,
                plan,
                queue,
                cpu,
            });
        }
    }
    Ok(threads)
}

impl JobThread {
    /// Starts the job's thread, pinned to its CPU if it has one.
    fn spawn(self, prog: Arc<Progress>, stop: Arc<AtomicBool>) -> Result<JobHandle, BenchError> {
        let JobThread {
            plan,
            mut queue,
            cpu,
            ..
        } = self;
        thread::Builder::new()
            .name(format!("bench-job{}", plan.job))
            .spawn(move || {
                if let Some(cpu) = cpu {
                    sysinfo::pin_to(cpu).map_err(|source| BenchError::Pin {
                        job: plan.job,
                        cpu,
                        source,
                    })?;
                }
                Ok::<_, BenchError>(run_job(&plan, queue.as_mut(), &prog, &stop))
            })
            .map_err(BenchError::Spawn)
    }
}

/// Waits for every job thread; the first error (or panic) fails the stage.
fn join_jobs(
    handles: Vec<JobHandle>,
    meta: Vec<JobMeta>,
    start_ms: u64,
) -> Result<Vec<JobResult>, BenchError> {
    let mut results = Vec::with_capacity(handles.len());
    let mut first_err = None;
    for (h, (opts, groupid, job, cpu)) in handles.into_iter().zip(meta) {
        match h.join() {
            Ok(Ok(output)) => results.push(JobResult {
                name: opts.name.clone(),
                groupid,
                job,
                pid: std::process::id(),
                cpu,
                job_start_ms: start_ms,
                options: (*opts).clone(),
                written_options: None,
                output,
            }),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(BenchError::JobPanicked { job });
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(results),
    }
}

#[cfg(test)]
mod tests;
