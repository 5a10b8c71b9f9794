// SPDX-License-Identifier: Apache-2.0
//! `nvmemu bench`: fio-style jobs through our userspace driver, against an
//! external vfio-user server (`--socket DIR`) or, by default, a target started
//! in this process and reached over a real socket in a temporary directory.
//!
//! `args` holds the command line, `jobs` turns it and any job files into stages of
//! jobs, `checks` refuses what cannot run before anything starts, `target` is the
//! in-process target, `attach` connects the driver and makes one queue per job,
//! `driver_queue` is the bench's `IoQueue` over the driver's queue pair (`spread_queue`
//! over several controllers' pairs), `stages` runs the stages (`embedded` against the
//! in-process target), `ceiling` the probe, and `output` writes the report.

mod args;
mod attach;
mod ceiling;
mod checks;
mod driver_queue;
mod embedded;
mod jobs;
mod output;
mod spread_queue;
mod stages;
mod stall;
mod target;
mod tcp;
mod tcp_queue;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use nvmemu_bench::{BenchOptions, BenchResult, RunSummary, render, render_header};
use nvmemu_device::NumaTopology;

pub use args::BenchArgs;
use checks::{check_cpus, check_embedded, check_writable, shared_cpus_warning};
use embedded::run_embedded;
use jobs::{RunPlan, plan_run};
use output::{Output, notes};
use stages::{run_on_socket, run_stages};
use target::{TargetPlacement, allowed_cpus};

/// Run length when none of --runtime, --size and --time_based is given.
pub const DEFAULT_RUNTIME: Duration = Duration::from_secs(10);

/// Fills in what the user left open: a 10 s time-based run when nothing bounds it.
pub fn apply_defaults(opts: &mut BenchOptions) {
    if opts.runtime.is_none() && opts.size.is_none() && !opts.time_based {
        opts.runtime = Some(DEFAULT_RUNTIME);
        opts.time_based = true;
    }
}

/// The checks that need no target: CPUs, output paths, options that contradict each
/// other, and (for the in-process target, before it starts) block size and depth.
fn check_inputs(args: &BenchArgs, opts: &BenchOptions) -> Result<()> {
    let allowed = allowed_cpus();
    let cpus_allowed = opts.cpus_allowed.as_ref().map(|c| c.0.as_slice());
    check_cpus("--cpus_allowed", cpus_allowed, &allowed)?;
    let external = args.socket.is_some() || args.device.is_some() || args.tcp.tcp.is_some();
    if external {
        if args.lat_breakdown {
            bail!("--lat-breakdown needs the in-process target (drop --socket, --device or --tcp)");
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
        let external = args.socket.is_some() || args.device.is_some() || args.tcp.tcp.is_some();
        let job_cpus = match (cpus_allowed, external) {
            (Some(c), _) => c.to_vec(),
            (None, true) => allowed.clone(),
            (None, false) => {
                let target_cpus = args.target_cpus.as_ref().map(|c| c.0.as_slice());
                TargetPlacement::choose(&allowed, target_cpus, None).job_cpus
            }
        };
        if let Some(w) = shared_cpus_warning(threads, &job_cpus) {
            nvmemu::say!("nvmemu: {w}");
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
        nvmemu::say!("nvmemu: {note}");
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
        return ceiling::run(&lead, &mut opts, stop);
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
        _ if let Some(addr) = lead.tcp.tcp => tcp::run_on_tcp(&lead, &plan, addr, &stop)?,
        _ if let Some(addr) = lead.device => {
            run_stages(&plan, &stop, &lead, &addr.to_string(), |needs| {
                attach::attach_device(addr, needs)
            })?
        }
        Some(dir) => run_on_socket(&lead, &plan, dir, &stop)?,
        None if lead.lat_breakdown => {
            let (plain, _) = run_embedded(&lead, &plan, &Arc::clone(&stop), false)?;
            let (mut result, sums) = run_embedded(&lead, &plan, &stop, true)?;
            describe_placement(&mut result, &lead);
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
    describe_placement(&mut result, &lead);
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

/// The report's namespace and NUMA descriptions; an in-process run left what backs its
/// namespace in `machine.namespace`.
fn describe_placement(result: &mut BenchResult, args: &BenchArgs) {
    result.machine.namespace = match std::mem::take(&mut result.machine.namespace) {
        memory if memory.is_empty() => namespace_of(args),
        memory => format!("{}, {memory}", namespace_of(args)),
    };
    result.machine.numa = numa_of(args, &result.machine);
}

/// What the run measured, for the report's machine section and the plot.
fn namespace_of(args: &BenchArgs) -> String {
    if let Some(addr) = &args.device {
        return format!("nsid {} on PCI {addr}", args.nsid);
    }
    if let (Some(addr), Some(nqn)) = (&args.tcp.tcp, &args.tcp.subnqn) {
        return format!("nsid {} of {nqn} over NVMe/TCP at {addr}", args.nsid);
    }
    match &args.socket {
        Some(dir) => format!("nsid {} at {}", args.nsid, dir.join("cntrl").display()),
        None => {
            let kind = match args.ns.kind {
                crate::ns_spec::NsKind::Null => "null",
                crate::ns_spec::NsKind::Malloc => "malloc",
                crate::ns_spec::NsKind::File => "file",
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

/// Which NUMA nodes the jobs, the pollers and the in-process namespace's memory are on.
fn numa_of(args: &BenchArgs, m: &nvmemu_bench::MachineInfo) -> String {
    let topology = NumaTopology::read();
    let pinned: Vec<usize> = m.jobs_cpus.iter().flatten().copied().collect();
    let mut parts = vec![if pinned.len() < m.jobs_cpus.len() {
        "jobs not pinned".to_owned()
    } else {
        format!("jobs on node {}", topology.nodes_of(&pinned))
    }];
    if !m.target_cpus.is_empty() {
        parts.push(format!(
            "target on node {}",
            topology.nodes_of(&m.target_cpus)
        ));
    }
    let embedded = args.socket.is_none() && args.device.is_none() && args.tcp.tcp.is_none();
    if embedded && args.ns.kind == crate::ns_spec::NsKind::Malloc {
        parts.push(
            match target::namespace_node(&args.ns, &m.target_cpus, &topology) {
                Ok(Some(n)) => format!("namespace memory bound to node {n}"),
                _ => "namespace memory where the kernel puts it".into(),
            },
        );
    }
    format!("{}; machine: {}", parts.join(", "), topology.describe())
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
}
