// SPDX-License-Identifier: Apache-2.0
//! The stages of a run against the in-process target, started once for the whole run:
//! every stage attaches to each of its controllers and deals their queue pairs out to
//! the jobs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Result, anyhow};
use nvmemu_bench::{BenchOptions, BenchResult, CpuList, IoQueue, LatBreakdown, run_stage};
use nvmemu_ctrl::{LatencyHook, LatencyTable};
use nvmemu_driver::AttachedController;

use super::args::BenchArgs;
use super::attach::{attach_socket, make_driver_queues};
use super::driver_queue::{DriverQueue, Trace};
use super::jobs::{JobSpec, RunPlan};
use super::spread_queue::SpreadQueue;
use super::stages::{shutdown, stage_jobs, stage_needs};
use super::target::{EmbeddedTarget, TargetPlacement, allowed_cpus};

/// `--lat-breakdown`: the table the first controller stamps and the sums the first
/// controller's queues add each command's layers to.
struct Tracing {
    table: Arc<LatencyTable>,
    sums: Arc<LatBreakdown>,
}

impl Tracing {
    /// Room for the most queues and the deepest queue of any stage.
    fn new(plan: &RunPlan) -> Tracing {
        let most =
            plan.stages
                .iter()
                .map(|s| stage_needs(s))
                .fold(BenchOptions::default(), |a, b| BenchOptions {
                    numjobs: a.numjobs.max(b.numjobs),
                    iodepth: a.iodepth.max(b.iodepth),
                    ..a
                });
        let queues = u16::try_from(most.numjobs.saturating_add(1)).unwrap_or(u16::MAX);
        let cids = u16::try_from(most.iodepth.saturating_add(2)).unwrap_or(u16::MAX);
        Tracing {
            table: Arc::new(LatencyTable::new(queues, cids)),
            sums: Arc::new(LatBreakdown::default()),
        }
    }
}

/// Runs every stage against an in-process target; with `trace`, the first controller's
/// queues time every command for the latency breakdown.
pub fn run_embedded(
    lead: &BenchArgs,
    plan: &RunPlan,
    stop: &Arc<AtomicBool>,
    trace: bool,
) -> Result<(BenchResult, Option<Arc<LatBreakdown>>)> {
    let cpus = allowed_cpus();
    let lead_cpus = lead.opts.cpus_allowed.as_ref().map(|c| c.0.as_slice());
    let placement = TargetPlacement::choose(
        &cpus,
        lead.target_cpus.as_ref().map(|c| c.0.as_slice()),
        lead_cpus,
    );
    if let Some(w) = &placement.warning {
        nvmemu::say!("nvmemu: {w}");
    }
    let tracing = trace.then(|| Tracing::new(plan));
    let target = EmbeddedTarget::start_with(
        &lead.ns,
        &placement,
        lead.controllers,
        tracing.as_ref().map(|t| LatencyHook(Arc::clone(&t.table))),
    )?;
    let mut runs = Vec::new();
    for stage in &plan.stages {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let stage = with_job_cpus(stage, &placement);
        let needs = stage_needs(&stage);
        let Attached { ctrls, queues } = attach_all(&target, &needs, lead, stop, tracing.as_ref())?;
        let result = run_stage(
            stage_jobs(&stage, queues),
            &target,
            &placement.target_cpus,
            Arc::clone(stop),
        );
        for mut ctrl in ctrls {
            shutdown(&mut ctrl, &result);
        }
        match result {
            Ok(r) => runs.push(r),
            Err(e) => {
                target.shutdown();
                return Err(e.into());
            }
        }
    }
    let memory = target.memory_line();
    target.shutdown();
    let mut all =
        BenchResult::merge_stages(runs).ok_or_else(|| anyhow!("stopped before any job ran"))?;
    all.machine.namespace = memory.unwrap_or_default();
    Ok((all, tracing.map(|t| t.sums)))
}

/// The stage with its jobs that have no CPUs of their own put on the CPUs the pollers
/// leave free.
fn with_job_cpus(stage: &[JobSpec], placement: &TargetPlacement) -> Vec<JobSpec> {
    let mut stage = stage.to_vec();
    for j in &mut stage {
        if j.args.opts.cpus_allowed.is_none() && !placement.job_cpus.is_empty() {
            j.args.opts.cpus_allowed = Some(CpuList(placement.job_cpus.clone()));
        }
    }
    stage
}

/// A stage's controllers and its jobs' queues on them.
struct Attached {
    ctrls: Vec<AttachedController>,
    queues: Vec<Box<dyn IoQueue>>,
}

/// Attaches to every controller of the target that serves a job clone and gives each clone
/// one queue: clone j is served by poller j mod P, through a queue pair on each of that
/// poller's controllers (spread over them when there are several).
fn attach_all(
    target: &EmbeddedTarget,
    needs: &BenchOptions,
    lead: &BenchArgs,
    stop: &Arc<AtomicBool>,
    tracing: Option<&Tracing>,
) -> Result<Attached> {
    let pollers = target.pollers();
    let jobs = usize::try_from(needs.numjobs).unwrap_or(0);
    let mut ctrls = Vec::new();
    let mut per_ctrl: Vec<std::vec::IntoIter<DriverQueue>> = Vec::new();
    for (i, dir) in target.dirs().iter().enumerate() {
        let poller = target.poller_of(i);
        let served = (0..jobs).filter(|j| j % pollers == poller).count();
        if served == 0 {
            per_ctrl.push(Vec::new().into_iter());
            continue;
        }
        let mine = BenchOptions {
            numjobs: u32::try_from(served).unwrap_or(u32::MAX),
            ..needs.clone()
        };
        let mut ctrl = attach_socket(dir, &mine, false, lead.reply_timeout)?;
        let mut qs =
            make_driver_queues(&mut ctrl, lead.nsid, mine.numjobs, stop, lead.reply_timeout)?;
        // Only the first controller stamps commands (it holds the latency table).
        if let (Some(t), 0) = (tracing, i) {
            qs = qs
                .into_iter()
                .map(|q| q.with_trace(Trace::new(Arc::clone(&t.table), Arc::clone(&t.sums))))
                .collect();
        }
        per_ctrl.push(qs.into_iter());
        ctrls.push(ctrl);
    }
    let mut queues: Vec<Box<dyn IoQueue>> = Vec::new();
    for j in 0..jobs {
        let mut spread: Vec<DriverQueue> = per_ctrl
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| target.poller_of(*i) == j % pollers)
            .filter_map(|(_, qs)| qs.next())
            .collect();
        if spread.len() == 1 {
            if let Some(q) = spread.pop() {
                queues.push(Box::new(q));
            }
        } else {
            queues.push(Box::new(SpreadQueue::new(spread)));
        }
    }
    Ok(Attached { ctrls, queues })
}
