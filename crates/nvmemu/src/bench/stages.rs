// SPDX-License-Identifier: Apache-2.0
//! Runs the stages of a [`RunPlan`] one after the other, against a server on a socket or
//! the in-process target (started once for the whole run). Each stage attaches afresh,
//! with one I/O queue pair per job clone, deep and large enough for its deepest job and
//! largest block, and detaches when its jobs are done.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, anyhow};
use nvmemu_bench::{
    BenchError, BenchOptions, BenchResult, CpuList, EngineError, IoQueue, LatBreakdown, NoTarget,
    StageJob, TargetProbe, run_stage,
};
use nvmemu_ctrl::{LatencyHook, LatencyTable};
use nvmemu_driver::AttachedController;

use nvmemu::error_chain;

use super::args::BenchArgs;
use super::attach::{attach_socket, make_driver_queues, make_queues};
use super::driver_queue::{DriverQueue, Trace};
use super::jobs::{JobSpec, RunPlan};
use super::spread_queue::SpreadQueue;
use super::target::{EmbeddedTarget, TargetPlacement, allowed_cpus};

/// What a stage's controller must offer: a queue pair per clone, the deepest queue and
/// the largest block of its jobs.
pub fn stage_needs(stage: &[JobSpec]) -> BenchOptions {
    let mut o = stage
        .first()
        .map(|j| j.args.opts.clone())
        .unwrap_or_default();
    o.numjobs = stage.iter().map(|j| j.args.opts.numjobs).sum();
    o.iodepth = stage.iter().map(|j| j.args.opts.iodepth).max().unwrap_or(1);
    o.bs = stage
        .iter()
        .map(|j| j.args.opts.max_bs())
        .max()
        .unwrap_or(*o.bs)
        .into();
    o
}

/// Deals `queues` out to the stage's jobs, `numjobs` each, in order.
fn stage_jobs(stage: &[JobSpec], queues: Vec<Box<dyn IoQueue>>) -> Vec<StageJob> {
    let mut queues = queues.into_iter();
    stage
        .iter()
        .map(|j| StageJob {
            opts: j.args.opts.clone(),
            groupid: j.groupid,
            queues: queues
                .by_ref()
                .take(usize::try_from(j.args.opts.numjobs).unwrap_or(0))
                .collect(),
        })
        .collect()
}

/// Detaches from `ctrl`: a clean shutdown, or none at all when a job found the device
/// not completing commands (every shutdown step would wait out its timeout, so one
/// silent server would cost several `--reply-timeout`s after the job already failed).
fn shutdown(ctrl: &mut AttachedController, result: &Result<BenchResult, BenchError>) {
    let stalled = result.as_ref().is_ok_and(|r| {
        r.jobs
            .iter()
            .any(|j| matches!(j.output.error, Some(EngineError::Stalled { .. })))
    });
    if stalled {
        ctrl.abandon();
    } else if let Err(e) = ctrl.shutdown() {
        tracing::warn!("controller shutdown: {}", error_chain(&e));
    }
}

/// Runs every stage against the server at `dir`; a stop (Ctrl-C) ends the current stage
/// and skips the rest.
pub fn run_on_socket(
    lead: &BenchArgs,
    plan: &RunPlan,
    dir: &Path,
    stop: &Arc<AtomicBool>,
) -> Result<BenchResult> {
    let place = dir.join("cntrl").display().to_string();
    run_stages(plan, stop, lead, &place, |needs| {
        attach_socket(dir, needs, true, lead.reply_timeout)
    })
}

/// Runs every stage on namespace `--nsid` of the controller `attach` gives for the
/// stage's needs (a socket's, a PCI function's), named `place` in errors.
pub fn run_stages(
    plan: &RunPlan,
    stop: &Arc<AtomicBool>,
    lead: &BenchArgs,
    place: &str,
    attach: impl Fn(&BenchOptions) -> Result<AttachedController>,
) -> Result<BenchResult> {
    let mut runs = Vec::new();
    for stage in &plan.stages {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let needs = stage_needs(stage);
        let mut ctrl = attach(&needs)?;
        let queues = make_queues(
            &mut ctrl,
            lead.nsid,
            needs.numjobs,
            stop,
            lead.reply_timeout,
        )
        .with_context(|| format!("on {place}"))?;
        let result = run_stage(stage_jobs(stage, queues), &NoTarget, &[], Arc::clone(stop));
        // A controller that does not shut down cleanly must not cost the report.
        shutdown(&mut ctrl, &result);
        runs.push(result?);
    }
    BenchResult::merge_stages(runs).ok_or_else(|| anyhow!("stopped before any job ran"))
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
        eprintln!("nvmemu: {w}");
    }
    let most = plan
        .stages
        .iter()
        .map(|s| stage_needs(s))
        .fold(BenchOptions::default(), |a, b| BenchOptions {
            numjobs: a.numjobs.max(b.numjobs),
            iodepth: a.iodepth.max(b.iodepth),
            ..a
        });
    let sums = trace.then(|| Arc::new(LatBreakdown::default()));
    let table = trace.then(|| {
        let queues = u16::try_from(most.numjobs.saturating_add(1)).unwrap_or(u16::MAX);
        let cids = u16::try_from(most.iodepth.saturating_add(2)).unwrap_or(u16::MAX);
        Arc::new(LatencyTable::new(queues, cids))
    });
    let target = EmbeddedTarget::start_with(
        &lead.ns,
        &placement,
        lead.controllers,
        table.clone().map(LatencyHook),
    )?;
    let mut runs = Vec::new();
    for stage in &plan.stages {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut stage = stage.clone();
        // Jobs without CPUs of their own go on the CPUs the poller leaves free.
        for j in &mut stage {
            if j.args.opts.cpus_allowed.is_none() && !placement.job_cpus.is_empty() {
                j.args.opts.cpus_allowed = Some(CpuList(placement.job_cpus.clone()));
            }
        }
        let needs = stage_needs(&stage);
        let mut ctrls = Vec::new();
        let mut per_ctrl: Vec<std::vec::IntoIter<DriverQueue>> = Vec::new();
        for dir in target.dirs() {
            let mut ctrl = attach_socket(dir, &needs, false, lead.reply_timeout)?;
            let mut qs = make_driver_queues(
                &mut ctrl,
                lead.nsid,
                needs.numjobs,
                stop,
                lead.reply_timeout,
            )?;
            if let (Some(t), Some(b), true) = (&table, &sums, per_ctrl.is_empty()) {
                qs = qs
                    .into_iter()
                    .map(|q| q.with_trace(Trace::new(Arc::clone(t), Arc::clone(b))))
                    .collect();
            }
            per_ctrl.push(qs.into_iter());
            ctrls.push(ctrl);
        }
        let mut queues: Vec<Box<dyn IoQueue>> = Vec::new();
        for _ in 0..needs.numjobs {
            let mut spread: Vec<DriverQueue> =
                per_ctrl.iter_mut().filter_map(Iterator::next).collect();
            if spread.len() == 1 {
                if let Some(q) = spread.pop() {
                    queues.push(Box::new(q));
                }
            } else {
                queues.push(Box::new(SpreadQueue::new(spread)));
            }
        }
        drop(per_ctrl);
        let probe: &dyn TargetProbe = &target;
        let result = run_stage(
            stage_jobs(&stage, queues),
            probe,
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
    target.shutdown();
    let all =
        BenchResult::merge_stages(runs).ok_or_else(|| anyhow!("stopped before any job ran"))?;
    Ok((all, sums))
}
