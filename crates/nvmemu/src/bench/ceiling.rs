// SPDX-License-Identifier: Apache-2.0
//! `--ceiling` (the probe alone) and `--ceiling-compare=N` (probe and real run in turns).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Result, bail};
use nvmemu_bench::{
    BenchOptions, CeilingOptions, CeilingResult, Comparison, RunSummary, RwMode, run_ceiling,
};

use super::DEFAULT_RUNTIME;
use super::args::{BenchArgs, CeilingMode};
use super::embedded::run_embedded;
use super::jobs::{JobSpec, RunPlan};
use super::target::{TargetPlacement, allowed_cpus};

/// The probe's options for this run: its block size, depth, footprint and CPUs; with
/// `--controllers=N`, N queue pairs sharing --iodepth as the job's spread queue does
/// (`spread_queue.rs`: a queue pair per controller, each of `iodepth / N` rounded up).
fn ceiling_options(args: &BenchArgs, opts: &BenchOptions) -> CeilingOptions {
    let placement = TargetPlacement::choose(
        &allowed_cpus(),
        args.target_cpus.as_ref().map(|c| c.0.as_slice()),
        opts.cpus_allowed.as_ref().map(|c| c.0.as_slice()),
    );
    let client_cpu = opts
        .cpus_allowed
        .as_ref()
        .and_then(|c| c.0.first().copied())
        .or_else(|| placement.job_cpus.first().copied());
    let copy = match args.ceiling {
        Some(m) => m == CeilingMode::Copy,
        None => args.ns.kind != crate::ns_spec::NsKind::Null,
    };
    let queues = args.controllers.max(1);
    CeilingOptions {
        bs: *opts.bs,
        depth: u16::try_from(opts.iodepth.max(1).div_ceil(queues)).unwrap_or(u16::MAX - 1),
        queues: u16::try_from(queues).unwrap_or(u16::MAX),
        footprint: args.ns.size.max(*opts.bs),
        copy,
        write: matches!(opts.rw.mode, RwMode::Write | RwMode::Randwrite),
        runtime: opts.time_limit().unwrap_or(DEFAULT_RUNTIME),
        client_cpu,
        device_cpu: placement.target_cpus.first().copied(),
    }
}

/// `--ceiling` and `--ceiling-compare`.
pub fn run(args: &BenchArgs, opts: &mut BenchOptions, stop: Arc<AtomicBool>) -> Result<()> {
    let copts = ceiling_options(args, opts);
    let json = opts.output_format.json;
    let Some(n) = args.ceiling_compare else {
        let r = run_ceiling(&copts, &stop)?;
        return print_ceiling(&r, json);
    };
    if args.socket.is_some() || args.device.is_some() {
        bail!("--ceiling-compare runs the in-process target; drop --socket/--device");
    }
    let mut cmp = Comparison::default();
    for i in 0..n.max(1) {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let p = run_ceiling(&copts, &stop)?;
        let mut one = args.clone();
        one.opts = opts.clone();
        let plan = RunPlan {
            stages: vec![vec![JobSpec {
                args: one,
                groupid: 0,
                written: None,
            }]],
        };
        let (r, _) = run_embedded(args, &plan, &stop, false)?;
        if let Some(j) = r.jobs.iter().find(|j| j.errno() != 0) {
            bail!("run {i}: job {} failed", j.job);
        }
        cmp.probe.push(p);
        cmp.real.push(RunSummary::from_result(&r));
        if !json {
            nvmemu::say!(
                "run {i}: probe {:.0} ops/s, real {:.0} IOPS",
                p.ops_per_sec(),
                cmp.real.last().map_or(0.0, |r| r.iops)
            );
        }
    }
    if json {
        let v = serde_json::json!({ "ceiling_compare": cmp.to_json() });
        nvmemu::console::print(&(serde_json::to_string_pretty(&v)? + "\n"))
    } else {
        nvmemu::console::print(&cmp.render_text())
    }
}

fn print_ceiling(r: &CeilingResult, json: bool) -> Result<()> {
    if json {
        let v = serde_json::json!({ "ceiling": r.to_json() });
        nvmemu::console::print(&(serde_json::to_string_pretty(&v)? + "\n"))
    } else {
        nvmemu::console::print(&r.render_text())
    }
}
