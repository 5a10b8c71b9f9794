// SPDX-License-Identifier: Apache-2.0
//! `nvmemu bench`'s command line: fio's job options plus the target's and the probe's.

use std::path::PathBuf;
use std::time::Duration;

use nvmemu_bench::{BenchOptions, CpuList};

use crate::ns_spec::NsSpec;

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
                  Without --socket the target runs in this process: one poller pinned to each of \
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
    #[arg(long, value_name = "DIR", conflicts_with = "tcp")]
    pub socket: Option<PathBuf>,
    /// Drive the NVMe PCI function at ADDR (e.g. 0000:01:00.0) of this machine, bound to
    /// uio_pci_generic or vfio-pci (see `nvmemu bind`), instead of an in-process target.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["socket", "tcp"])]
    pub device: Option<nvmemu_driver::PciAddress>,
    /// Drive the NVMe/TCP target at --tcp ADDR (subsystem --subnqn NQN; nvmemu serve --tcp
    /// or SPDK's nvmf_tgt) instead of an in-process target.
    #[command(flatten)]
    pub tcp: crate::tcp_host::TcpHostArgs,
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
    /// CPUs for the in-process target's pollers, one pinned to each (default: the last CPU).
    /// Each poller serves its own controllers; job clone j is served by poller j mod N, so
    /// --numjobs=N with N CPUs here gives every job a poller of its own.
    #[arg(long = "target-cpus", value_name = "LIST", value_parser = nvmemu_bench::parse_cpu_list_arg)]
    pub target_cpus: Option<CpuList>,
    /// Also draw the run as an SVG: clat percentiles (and the latency breakdown, when the
    /// report has one).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Run only the ceiling probe: two pinned threads (client on the job CPU, "device" on the
    /// target CPU) moving 64-byte commands and 16-byte completions through shared-memory rings
    /// at --iodepth, the device copying --bs bytes from a random offset of a buffer as large as
    /// the namespace (copy) or copying nothing (nocopy); with --controllers=N, over N queue
    /// pairs sharing --iodepth. The limit of this machine for the run.
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
    /// In-process target only: serve N controllers (one namespace, one bdev) from each
    /// poller; each job spreads its --iodepth evenly over a queue pair on every controller
    /// of its poller. The ceiling probe then runs N queue pairs the same way.
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
