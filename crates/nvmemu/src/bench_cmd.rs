// SPDX-License-Identifier: Apache-2.0
//! `nvmemu bench`: fio-style jobs through our userspace driver, against an
//! external vfio-user server (`--socket DIR`) or, by default, a target started
//! in this process and reached over a real socket in a temporary directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use nvmemu_bench::{
    BenchOptions, BenchResult, CeilingOptions, CeilingResult, Comparison, CpuList, IoQueue,
    RunSummary, RwMode, render, render_header, run_ceiling,
};
use nvmemu_driver::{AttachOptions, Controller, IO_CQ_DEPTH_FACTOR};
use nvmemu_spec::Nsid;

use crate::bench_checks::{
    check_cpus, check_depth, check_embedded, check_queues, check_writable, shared_cpus_warning,
};
use crate::bench_jobs::{JobSpec, RunPlan, plan_run};
use crate::bench_output::{Output, notes};
use crate::bench_stages::{run_embedded, run_on_socket, run_stages};
use crate::bench_target::{TargetPlacement, allowed_cpus};
use crate::engine::DriverQueue;
use crate::ns_spec::NsSpec;

/// Run length when none of --runtime, --size and --time_based is given.
pub const DEFAULT_RUNTIME: Duration = Duration::from_secs(10);

/// Options of `nvmemu bench`.
///
/// With no options it runs a quick check: 4 KiB random reads, iodepth 32, one
/// job, 10 s, against an in-process target with a 1 GiB malloc namespace
/// whose poller is pinned to the last CPU (jobs on the others).
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("rw", |a| a.default_value("randread")),
    mut_arg("iodepth", |a| a.default_value("32")),
    after_help = "Without a job file, --runtime, --size or --time_based the run is time based and \
                  lasts 10 s.\n\
                  Job files take fio's format and option names; options given on the command line \
                  apply to every job and win over the files'.\n\
                  Without --socket the target runs in this process: one poller pinned to \
                  --target-cpus (default: the last CPU), jobs on the other CPUs."
)]
pub struct BenchArgs {
    /// fio job files to run (`[global]` and job sections), one after the other.
    #[arg(value_name = "JOBFILE")]
    pub job_files: Vec<PathBuf>,
    /// fio job options.
    #[command(flatten)]
    pub opts: BenchOptions,
    /// Write the report to FILE instead of standard output (fio's --output).
    #[arg(long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Accepted for fio's command lines; nvmemu prints its report once, at the end.
    #[arg(long = "status-interval", value_name = "TIME", value_parser = nvmemu_bench::parse_time)]
    pub status_interval: Option<Duration>,
    /// Drive the vfio-user NVMe server at DIR/cntrl (nvmemu serve or SPDK) instead of an
    /// in-process target.
    #[arg(long, value_name = "DIR")]
    pub socket: Option<PathBuf>,
    /// Drive the NVMe PCI function at ADDR (e.g. 0000:01:00.0) of this machine, bound to
    /// uio_pci_generic or vfio-pci (see `nvmemu bind`), instead of an in-process target.
    #[arg(long, value_name = "ADDR", conflicts_with = "socket")]
    pub device: Option<nvmemu_driver::PciAddress>,
    /// Namespace to run against.
    #[arg(long, default_value_t = 1)]
    pub nsid: u32,
    /// Namespace of the in-process target, as `serve --ns` takes it (ignored with --socket).
    /// A malloc namespace is backed before the run; `lazy=on` reads unwritten blocks from
    /// the kernel's zero page instead, which overstates read rates.
    #[arg(
        long = "ns",
        value_name = "SPEC",
        default_value = "malloc:size=1G,lba=512"
    )]
    pub ns: NsSpec,
    /// CPUs for the in-process target's poller (default: the last CPU).
    #[arg(long = "target-cpus", value_name = "LIST", value_parser = nvmemu_bench::parse_cpu_list_arg)]
    pub target_cpus: Option<CpuList>,
    /// Also draw the run as an SVG: clat percentiles (and the latency breakdown, when the
    /// report has one).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Run only the ceiling probe: two pinned threads (client on the job CPU, "device" on the
    /// target CPU) moving 64-byte commands and 16-byte completions through shared-memory rings
    /// at --iodepth, the device copying --bs bytes from a random offset of a buffer as large as
    /// the namespace (copy) or copying nothing (nocopy). The limit of this machine for the run.
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "copy")]
    pub ceiling: Option<CeilingMode>,
    /// Alternate the ceiling probe and the real run N times and print both medians and their
    /// ratio (IOPS fraction of the probe, latency multiple of the probe's round trip). The
    /// probe mode is --ceiling's (default: copy, nocopy for a null namespace).
    #[arg(long = "ceiling-compare", value_name = "N")]
    pub ceiling_compare: Option<u32>,
    /// In-process target only: time every command at client submit, doorbell write, target
    /// SQE fetch, backend done, CQE post and client reap (calibrated TSC) and print the mean
    /// per layer (cumulative ns, delta ns, % of total). Runs once without tracing first and
    /// reports both IOPS as the tracing overhead. Without the flag nothing is timed.
    #[arg(long = "lat-breakdown")]
    pub lat_breakdown: bool,
    /// How long to wait for the server to accept the connection, for each of its
    /// vfio-user replies, and, mid-run, for any completion while commands are in flight
    /// (then the job fails and the controller is given up).
    #[arg(long = "reply-timeout", value_name = "TIME", default_value = "5s", value_parser = nvmemu_bench::parse_time)]
    pub reply_timeout: Duration,
    /// In-process target only: serve N controllers (one namespace, one bdev) from the one
    /// poller; each job spreads its --iodepth evenly over a queue pair on every controller.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub controllers: u32,
}

/// What the ceiling probe's device does per command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CeilingMode {
    /// Copy --bs bytes between the buffer and the client's slot.
    Copy,
    /// Move the command and completion only.
    Nocopy,
}

/// Fills in what the user left open: a 10 s time-based run when nothing bounds it.
pub fn apply_defaults(opts: &mut BenchOptions) {
    if opts.runtime.is_none() && opts.size.is_none() && !opts.time_based {
        opts.runtime = Some(DEFAULT_RUNTIME);
        opts.time_based = true;
    }
}

/// DMA memory for `numjobs` queues of `depth` entries moving `bs`-byte I/Os: data
/// slots, SQ/CQ rings (the CQ `IO_CQ_DEPTH_FACTOR` times deeper) and PRP list space
/// (at most 16 KiB per slot), plus the admin queue and scratch page.
pub fn dma_pool_bytes(numjobs: u32, depth: u16, bs: u64) -> u64 {
    let page = 4096u64;
    let slot = bs.div_ceil(page).saturating_mul(page);
    let depth = u64::from(depth);
    let per_job = depth
        .saturating_mul(slot)
        .saturating_add(depth * (64 + 16 * u64::from(IO_CQ_DEPTH_FACTOR) + 16 * 1024))
        .saturating_add(64 * 1024);
    let total = u64::from(numjobs)
        .saturating_mul(per_job)
        .saturating_add(2 << 20);
    total.div_ceil(2 << 20).saturating_mul(2 << 20)
}

/// Attaches to `dir`, one I/O queue pair per job, waiting at most `reply_timeout` for
/// each reply; fails before any queue is used if the controller's queues cannot hold
/// `--iodepth` commands.
pub fn attach(
    dir: &Path,
    opts: &BenchOptions,
    hint: bool,
    reply_timeout: Duration,
) -> Result<Controller> {
    let io_queues = u16::try_from(opts.numjobs)
        .map_err(|_| anyhow!("numjobs {} is too large", opts.numjobs))?;
    let queue_depth = u16::try_from(opts.iodepth.saturating_add(1)).unwrap_or(u16::MAX);
    let attach = AttachOptions {
        io_queues,
        queue_depth,
        dma_pool_bytes: dma_pool_bytes(opts.numjobs, queue_depth, opts.max_bs()),
        reply_timeout,
    };
    let ctrl = Controller::attach(dir, attach).map_err(|e| {
        anyhow!(
            "cannot attach to {}: {}{}",
            dir.join("cntrl").display(),
            error_chain(&e),
            if hint {
                crate::identify::attach_hint(&e)
            } else {
                ""
            }
        )
    })?;
    check_depth(opts.iodepth, ctrl.cap().max_queue_entries())?;
    Ok(ctrl)
}

pub use nvmemu::error_chain;

/// One [`DriverQueue`] per job on namespace `nsid`; `stop` is the run's stop flag, and
/// a queue on which nothing completes for `stall` is given up.
pub fn make_queues(
    ctrl: &mut Controller,
    nsid: u32,
    numjobs: u32,
    stop: &Arc<AtomicBool>,
    stall: Duration,
) -> Result<Vec<Box<dyn IoQueue>>> {
    Ok(make_driver_queues(ctrl, nsid, numjobs, stop, stall)?
        .into_iter()
        .map(|q| Box::new(q) as Box<dyn IoQueue>)
        .collect())
}

/// `make_queues` without the boxing.
pub fn make_driver_queues(
    ctrl: &mut Controller,
    nsid: u32,
    numjobs: u32,
    stop: &Arc<AtomicBool>,
    stall: Duration,
) -> Result<Vec<DriverQueue>> {
    let qpairs = ctrl.qpairs();
    check_queues(numjobs, u32::try_from(qpairs.len()).unwrap_or(u32::MAX))?;
    let pool = ctrl.dma_pool().clone();
    qpairs
        .into_iter()
        .map(|qp| {
            DriverQueue::new(qp, pool.clone(), Nsid(nsid), Arc::clone(stop), stall)
                .map_err(anyhow::Error::from)
        })
        .collect()
}

/// The checks that need no target: CPUs, output paths, options that contradict each
/// other, and (for the in-process target, before it starts) block size and depth.
fn check_inputs(args: &BenchArgs, opts: &BenchOptions) -> Result<()> {
    let allowed = allowed_cpus();
    let cpus_allowed = opts.cpus_allowed.as_ref().map(|c| c.0.as_slice());
    check_cpus("--cpus_allowed", cpus_allowed, &allowed)?;
    let external = args.socket.is_some() || args.device.is_some();
    if external {
        if args.lat_breakdown {
            bail!("--lat-breakdown needs the in-process target (drop --socket)");
        }
    } else {
        let target_cpus = args.target_cpus.as_ref().map(|c| c.0.as_slice());
        check_cpus("--target-cpus", target_cpus, &allowed)?;
    }
    if let Some(path) = &args.plot {
        check_writable("--plot", path)?;
    }
    let probe_only = args.ceiling.is_some() && args.ceiling_compare.is_none();
    if !external && !probe_only {
        check_embedded(opts, &args.ns)?;
    }
    Ok(())
}

/// Warns when a stage has more job threads than CPUs to pin them to (jobs are pinned
/// round-robin; unpinned, they share the allowed CPUs).
fn warn_shared_cpus(args: &BenchArgs, plan: &RunPlan) {
    let allowed = allowed_cpus();
    for stage in &plan.stages {
        let threads: u32 = stage.iter().map(|j| j.args.opts.numjobs).sum();
        let cpus_allowed = stage
            .first()
            .and_then(|j| j.args.opts.cpus_allowed.as_ref())
            .map(|c| c.0.as_slice());
        let external = args.socket.is_some() || args.device.is_some();
        let job_cpus = match (cpus_allowed, external) {
            (Some(c), _) => c.to_vec(),
            (None, true) => allowed.clone(),
            (None, false) => {
                let target_cpus = args.target_cpus.as_ref().map(|c| c.0.as_slice());
                TargetPlacement::choose(&allowed, target_cpus, None).job_cpus
            }
        };
        if let Some(w) = shared_cpus_warning(threads, &job_cpus) {
            eprintln!("nvmemu: {w}");
            return;
        }
    }
}

/// `nvmemu bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    // The command line after `bench`, given to every job of the job files again.
    let cli: Vec<std::ffi::OsString> = std::env::args_os().skip(2).collect();
    let mut plan = plan_run(args, &cli)?;
    if args.job_files.is_empty() {
        for j in plan.stages.iter_mut().flatten() {
            apply_defaults(&mut j.args.opts);
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    crate::signals::install(&stop)?;
    let mut lead = plan
        .lead()
        .map(|j| j.args.clone())
        .context("no jobs to run")?;
    for note in notes(&mut lead, &plan)? {
        eprintln!("nvmemu: {note}");
    }
    for j in plan.jobs() {
        check_inputs(&lead, &j.args.opts)?;
    }
    warn_shared_cpus(&lead, &plan);
    let single = plan.jobs().count() == 1;
    if lead.ceiling.is_some() || lead.ceiling_compare.is_some() {
        if !single {
            bail!("--ceiling and --ceiling-compare run one job; the job files define more");
        }
        let mut opts = lead.opts.clone();
        return run_ceiling_cmd(&lead, &mut opts, stop);
    }
    if lead.lat_breakdown && !single {
        bail!("--lat-breakdown runs one job; the job files define more");
    }
    let format = lead.opts.output_format;
    let mut out = Output::open(lead.output.as_deref())?;
    // fio's job lines head the report (printed with it, so a run that fails to start
    // prints nothing on stdout).
    let header = if format.normal {
        let defs: Vec<(u32, &BenchOptions)> =
            plan.jobs().map(|j| (j.groupid, &j.args.opts)).collect();
        render_header(&defs)
    } else {
        String::new()
    };
    let mut result = match &lead.socket {
        _ if let Some(addr) = lead.device => {
            run_stages(&plan, &stop, &lead, &addr.to_string(), |needs| {
                crate::bench_device::attach(addr, needs)
            })?
        }
        Some(dir) => run_on_socket(&lead, &plan, dir, &stop)?,
        None if lead.lat_breakdown => {
            let (plain, _) = run_embedded(&lead, &plan, &Arc::clone(&stop), false)?;
            let (result, sums) = run_embedded(&lead, &plan, &stop, true)?;
            let overhead = Some((
                RunSummary::from_result(&plain).iops,
                RunSummary::from_result(&result).iops,
            ));
            out.write(&(header + &render(&result, format)))?;
            if let Some(path) = &lead.plot {
                let mut v: serde_json::Value =
                    serde_json::from_str(&nvmemu_bench::render_json(&result, true))?;
                if let Some(b) = &sums {
                    v["lat_breakdown"] = b.to_json(overhead);
                }
                nvmemu_bench::plot::write_svg(&v.to_string(), path).context("--plot")?;
            }
            if let Some(b) = sums {
                if format.json {
                    let v = serde_json::json!({ "lat_breakdown": b.to_json(overhead) });
                    out.write(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
                } else {
                    out.write(&b.render_text(overhead))?;
                }
            }
            return finish(&result);
        }
        None => run_embedded(&lead, &plan, &stop, false)?.0,
    };
    result.machine.namespace = namespace_of(&lead);
    attach_written_options(&mut result, &plan);
    out.write(&(header + &render(&result, format)))?;
    if let Some(path) = &lead.plot {
        let json = nvmemu_bench::render_json(&result, true);
        nvmemu_bench::plot::write_svg(&json, path).context("--plot")?;
    }
    nvmemu_bench::write_logs(&result, Path::new("."))
        .map_err(|e| anyhow!("cannot write the job logs in the current directory ({e})"))?;
    // As fio: the report is printed either way, the exit status says a job failed.
    finish(&result)
}

/// The probe's options for this run: its block size, depth, footprint and CPUs.
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
    CeilingOptions {
        bs: *opts.bs,
        depth: u16::try_from(opts.iodepth.max(1)).unwrap_or(u16::MAX - 1),
        footprint: args.ns.size.max(*opts.bs),
        copy,
        write: matches!(opts.rw.mode, RwMode::Write | RwMode::Randwrite),
        runtime: opts.time_limit().unwrap_or(DEFAULT_RUNTIME),
        client_cpu,
        device_cpu: placement.target_cpus.first().copied(),
    }
}

/// `--ceiling` and `--ceiling-compare`.
fn run_ceiling_cmd(args: &BenchArgs, opts: &mut BenchOptions, stop: Arc<AtomicBool>) -> Result<()> {
    let copts = ceiling_options(args, opts);
    let json = opts.output_format.json;
    let Some(n) = args.ceiling_compare else {
        let r = run_ceiling(&copts, &stop)?;
        print_ceiling(&r, json);
        return Ok(());
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
            eprintln!(
                "run {i}: probe {:.0} ops/s, real {:.0} IOPS",
                p.ops_per_sec(),
                cmp.real.last().map_or(0.0, |r| r.iops)
            );
        }
    }
    if json {
        let v = serde_json::json!({ "ceiling_compare": cmp.to_json() });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", cmp.render_text());
    }
    Ok(())
}

fn print_ceiling(r: &CeilingResult, json: bool) {
    if json {
        let v = serde_json::json!({ "ceiling": r.to_json() });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", r.render_text());
    }
}

/// What the run measured, for the report's machine section and the plot.
fn namespace_of(args: &BenchArgs) -> String {
    if let Some(addr) = &args.device {
        return format!("nsid {} on PCI {addr}", args.nsid);
    }
    match &args.socket {
        Some(dir) => format!("nsid {} at {}", args.nsid, dir.join("cntrl").display()),
        None => {
            let kind = match args.ns.kind {
                crate::ns_spec::NsKind::Null => "null",
                crate::ns_spec::NsKind::Malloc => "malloc",
            };
            format!(
                "in-process {kind} {}, {} B LBA",
                nvmemu_bench::report::num::num2str(
                    args.ns.size,
                    4,
                    1,
                    true,
                    nvmemu_bench::report::num::Unit::Byte
                ),
                args.ns.lba
            )
        }
    }
}

/// A job-file run's options as the files wrote them, for the JSON report: `[global]`
/// once, each job's own section with each of its clones (results follow the plan's job
/// order, clones together).
fn attach_written_options(result: &mut BenchResult, plan: &RunPlan) {
    let per_clone = plan.jobs().flat_map(|j| {
        let clones = usize::try_from(j.args.opts.numjobs).unwrap_or(0);
        std::iter::repeat_n(j.written.as_ref(), clones)
    });
    for (r, w) in result.jobs.iter_mut().zip(per_clone) {
        r.written_options = w.map(|w| w.own.clone());
    }
    result.global_options = plan
        .lead()
        .and_then(|j| j.written.as_ref())
        .filter(|w| !w.global.is_empty())
        .map(|w| w.global.clone());
}

/// The exit status of a finished run, as fio: a failed job fails the command, and so
/// does a run a signal stopped (exit status 128).
fn finish(result: &BenchResult) -> Result<()> {
    match result.jobs.iter().find(|j| j.errno() != 0) {
        Some(j) => bail!(
            "job {} failed: {}",
            j.job,
            j.error_text()
                .unwrap_or_else(|| format!("err={}", j.errno()))
        ),
        None => Ok(crate::signals::check_interrupted()?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }

    #[test]
    fn no_options_mean_a_ten_second_random_read_quick_check() {
        let mut a = Cli::try_parse_from(["bench"]).unwrap().args;
        apply_defaults(&mut a.opts);
        assert_eq!(a.opts.rw, nvmemu_bench::RwMode::Randread);
        assert_eq!(a.opts.iodepth, 32);
        assert_eq!(*a.opts.bs, 4096);
        assert_eq!(a.opts.runtime, Some(DEFAULT_RUNTIME));
        assert!(a.opts.time_based);
        assert_eq!(a.ns.size, 1 << 30);
        assert_eq!(a.ns.lba, 512);
        assert_eq!(a.nsid, 1);
        assert!(a.socket.is_none());
    }

    #[test]
    fn explicit_bounds_are_kept() {
        let mut a = Cli::try_parse_from(["bench", "--size=16m", "--rw=write", "--iodepth=4"])
            .unwrap()
            .args;
        apply_defaults(&mut a.opts);
        assert_eq!(a.opts.runtime, None);
        assert!(!a.opts.time_based);
        assert_eq!(a.opts.rw, nvmemu_bench::RwMode::Write);
        assert_eq!(a.opts.iodepth, 4);
        let mut a = Cli::try_parse_from(["bench", "--runtime=2"]).unwrap().args;
        apply_defaults(&mut a.opts);
        assert_eq!(a.opts.runtime, Some(Duration::from_secs(2)));
        assert!(!a.opts.time_based);
    }

    #[test]
    fn dma_pool_covers_slots_and_rings() {
        let b = dma_pool_bytes(2, 129, 128 * 1024);
        assert!(b >= 2 * 129 * 128 * 1024);
        assert_eq!(b % (2 << 20), 0);
        assert!(dma_pool_bytes(1, 2, 512) >= 2 << 20);
    }
}
