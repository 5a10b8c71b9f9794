// SPDX-License-Identifier: Apache-2.0
//! Runs the stages of a [`RunPlan`] one after the other, against a server on a socket, a
//! PCI function or (`embedded.rs`) the in-process target. Each stage attaches afresh,
//! with one I/O queue pair per job clone, deep and large enough for its deepest job and
//! largest block, and detaches when its jobs are done.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, anyhow};
use nvmemu_bench::{
    BenchError, BenchOptions, BenchResult, EngineError, IoQueue, NoTarget, StageJob, run_stage,
};
use nvmemu_driver::AttachedController;

use nvmemu::error_chain;

use super::args::BenchArgs;
use super::attach::{attach_socket, make_queues};
use super::jobs::{JobSpec, RunPlan};

/// What a stage's controller must offer: a queue pair per clone, the deepest queue and
/// the largest block of its jobs.
pub(super) fn stage_needs(stage: &[JobSpec]) -> BenchOptions {
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
pub(super) fn stage_jobs(stage: &[JobSpec], queues: Vec<Box<dyn IoQueue>>) -> Vec<StageJob> {
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
pub(super) fn shutdown(ctrl: &mut AttachedController, result: &Result<BenchResult, BenchError>) {
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
