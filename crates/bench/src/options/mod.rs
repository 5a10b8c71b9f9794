// SPDX-License-Identifier: Apache-2.0
//! Job options with fio's names, spellings and defaults (`HOWTO.rst`), as a clap
//! `Args` struct the `nvmemu bench` subcommand embeds.

use std::time::Duration;

use clap::{Args, ValueEnum};

pub use crate::workload_options::WorkloadOptions;

pub use crate::option_values::{
    BsSpec, CpuList, OptionError, OutputFormat, PercentileList, SizeSpec, parse_bool, parse_bs,
    parse_cpu_list, parse_cpu_list_arg, parse_output_format, parse_percentile_list, parse_size,
    parse_size_spec, parse_time, size_to_string,
};
use crate::pasted::PastedOptions;
pub use crate::rw_spec::{RwMode, RwSpec, parse_rw};

/// The seed used when neither `randseed` nor `randrepeat=0` says otherwise.
pub const DEFAULT_RANDSEED: u64 = 0x89;

/// `verify=` methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VerifyMode {
    /// No verification (fio's `verify=0`).
    #[value(name = "0", alias = "none")]
    Off,
    /// Per-block header {magic, LBA, generation} plus crc32c of the block (fio's
    /// `crc32c-intel` and `meta`, which checks only the header, are taken as this).
    #[value(alias = "crc32c-intel", alias = "meta")]
    Crc32c,
    /// The same header with an MD5 digest.
    Md5,
    /// The same header with a SHA-256 digest.
    Sha256,
    /// The same header with an xxHash64 digest.
    Xxhash,
    /// `verify_pattern` repeated over every block, no header.
    Pattern,
}

impl VerifyMode {
    /// fio's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyMode::Off => "0",
            VerifyMode::Crc32c => "crc32c",
            VerifyMode::Md5 => "md5",
            VerifyMode::Sha256 => "sha256",
            VerifyMode::Xxhash => "xxhash",
            VerifyMode::Pattern => "pattern",
        }
    }
}

/// `--eta=` : when to show the live status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EtaMode {
    /// Only when stderr is a terminal.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// `nvmemu bench` options, named and spelled as fio's.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct BenchOptions {
    /// Job name (fio `--name`).
    #[arg(long = "name", default_value = "nvmemu")]
    pub name: String,
    /// I/O pattern: read, write, randread, randwrite, rw (readwrite), randrw, trim,
    /// randtrim, trimwrite or randtrimwrite (each trimmed range then written); a sequential
    /// one may add `:N` bytes (negative: backwards) after each I/O.
    #[arg(long = "rw", alias = "readwrite", default_value = "read", value_parser = parse_rw)]
    pub rw: RwSpec,
    /// Percentage of reads in a mixed workload.
    #[arg(long = "rwmixread", default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub rwmixread: u8,
    /// Block size per I/O (`4k`, `128k`, `1m`), or per direction: `READ,WRITE[,TRIM]`.
    #[arg(long = "bs", alias = "blocksize", default_value = "4k", value_parser = parse_bs)]
    pub bs: BsSpec,
    /// I/Os kept in flight per job.
    #[arg(long = "iodepth", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65535))]
    pub iodepth: u32,
    /// Commands queued before the doorbell is rung; 0 (the default) rings once after
    /// filling every free slot (fio's default is 1: a doorbell per command).
    #[arg(
        long = "iodepth_batch_submit",
        alias = "iodepth_batch",
        default_value_t = 0
    )]
    pub iodepth_batch_submit: u32,
    /// Completions to collect before the job refills the queue.
    #[arg(
        long = "iodepth_batch_complete_min",
        alias = "iodepth_batch_complete",
        default_value_t = 1
    )]
    pub iodepth_batch_complete_min: u32,
    /// Most completions taken per poll before refilling; 0 (the default) is half of
    /// iodepth, so the device works on refilled slots while the job handles the rest
    /// (fio's default is iodepth).
    #[arg(long = "iodepth_batch_complete_max", default_value_t = 0)]
    pub iodepth_batch_complete_max: u32,
    /// Number of jobs: one pinned thread and one queue pair each.
    #[arg(long = "numjobs", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub numjobs: u32,
    /// Stop after this long (seconds, or with a us/ms/s/m/h suffix); 0 means no limit.
    #[arg(long = "runtime", alias = "timeout", value_parser = parse_time)]
    pub runtime: Option<Duration>,
    /// Run this long before statistics are collected.
    #[arg(long = "ramp_time", value_parser = parse_time)]
    pub ramp_time: Option<Duration>,
    /// Keep running for `runtime` even when `size` bytes are done.
    #[arg(long = "time_based", default_value = "0", value_parser = parse_bool, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "1")]
    pub time_based: bool,
    /// Bytes per job (or `N%` of the namespace); default the whole namespace.
    #[arg(long = "size", value_parser = parse_size_spec)]
    pub size: Option<SizeSpec>,
    /// Start of the I/O range in bytes (or `N%`).
    #[arg(long = "offset", alias = "fileoffset", default_value = "0", value_parser = parse_size_spec)]
    pub offset: SizeSpec,
    /// CPUs for the job threads; job i is pinned to the (i mod n)-th listed CPU.
    #[arg(long = "cpus_allowed", value_parser = parse_cpu_list_arg)]
    pub cpus_allowed: Option<CpuList>,
    /// Data verification method.
    #[arg(long = "verify", value_enum, default_value = "0")]
    pub verify: VerifyMode,
    /// Seed of the offset and read/write-mix generators (default: a fixed seed, or a new one
    /// each run with --randrepeat=0).
    #[arg(long = "randseed")]
    pub randseed: Option<u64>,
    /// 1 (the default): without --randseed every run uses the same seed, so it repeats the
    /// same offsets; 0: a new seed each run.
    #[arg(long = "randrepeat", default_value = "1", value_parser = parse_bool, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "1")]
    pub randrepeat: bool,
    /// Random offsets drawn independently (units may repeat or be missed) instead of
    /// touching every block of the range once per pass.
    #[arg(long = "norandommap", default_value = "0", value_parser = parse_bool, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "1")]
    pub norandommap: bool,
    /// Report formats: comma list of normal, json, json+, terse.
    #[arg(long = "output-format", default_value = "normal", value_parser = parse_output_format)]
    pub output_format: OutputFormat,
    /// Live status line: auto (only on a terminal), always or never.
    #[arg(long = "eta", value_enum, default_value = "auto")]
    pub eta: EtaMode,

    // Reports and time-series logs (job files, outputs and logs).
    /// Report each group's jobs as one (their statistics combined).
    #[arg(long = "group_reporting", default_value = "0", value_parser = parse_bool, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "1")]
    pub group_reporting: bool,
    /// Completion latency percentiles to report, colon separated (`99:99.9:99.99`).
    #[arg(long = "percentile_list", value_parser = parse_percentile_list)]
    pub percentile_list: Option<PercentileList>,
    /// Write per-job latency logs NAME_lat.N.log, NAME_clat.N.log and NAME_slat.N.log
    /// (NAME defaults to the job name).
    #[arg(long = "write_lat_log", value_name = "NAME", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub write_lat_log: Option<String>,
    /// Write per-job IOPS logs NAME_iops.N.log.
    #[arg(long = "write_iops_log", value_name = "NAME", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub write_iops_log: Option<String>,
    /// Write per-job bandwidth logs NAME_bw.N.log (KiB/s).
    #[arg(long = "write_bw_log", value_name = "NAME", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub write_bw_log: Option<String>,
    /// Average log entries over this many milliseconds (0: one entry per I/O).
    #[arg(long = "log_avg_msec", default_value_t = 0)]
    pub log_avg_msec: u64,
    /// fio options accepted without effect here (ioengine, direct, filename, ...).
    #[command(flatten)]
    pub pasted: PastedOptions,
    /// Workload shape and verify variants (bssplit, random_distribution, rate, ...).
    #[command(flatten)]
    pub workload: WorkloadOptions,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            name: "nvmemu".into(),
            rw: RwMode::Read.into(),
            rwmixread: 50,
            bs: BsSpec::from(4096),
            iodepth: 1,
            iodepth_batch_submit: 0,
            iodepth_batch_complete_min: 1,
            iodepth_batch_complete_max: 0,
            numjobs: 1,
            runtime: None,
            ramp_time: None,
            time_based: false,
            size: None,
            offset: SizeSpec::Bytes(0),
            cpus_allowed: None,
            verify: VerifyMode::Off,
            randseed: None,
            randrepeat: true,
            norandommap: false,
            output_format: OutputFormat::NORMAL,
            eta: EtaMode::Auto,
            group_reporting: false,
            percentile_list: None,
            write_lat_log: None,
            write_iops_log: None,
            write_bw_log: None,
            log_avg_msec: 0,
            pasted: PastedOptions::default(),
            workload: WorkloadOptions::default(),
        }
    }
}

/// How a job batches doorbells and completions, each in `1..=iodepth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    /// Commands per doorbell.
    pub submit: usize,
    /// Free slots needed before refilling.
    pub refill_min: usize,
    /// Most completions taken per poll (never below `refill_min`, as in fio).
    pub reap_max: usize,
}

impl BenchOptions {
    /// The largest I/O the job can issue: `bs`, or more with `bssplit`/`bsrange` (what its
    /// buffers and DMA memory must hold).
    pub fn max_bs(&self) -> u64 {
        self.size_lists()
            .iter()
            .flat_map(|l| {
                l.0.iter()
                    .flat_map(crate::workload_values::BlockSizes::sizes)
            })
            .fold(*self.bs, u64::max)
    }

    /// The per-direction size lists: `bssplit`, else `bsrange`, else a per-direction `bs`;
    /// `None` when every I/O is `bs`.
    pub fn size_lists(&self) -> Option<crate::workload_values::DirBlockSizes> {
        let w = &self.workload;
        let fixed = |b: u64| crate::workload_values::BlockSizes::Split(vec![(b, 100)]);
        w.bssplit.clone().or_else(|| w.bsrange.clone()).or_else(|| {
            self.bs
                .per_direction()
                .then(|| crate::workload_values::DirBlockSizes(self.bs.0.map(fixed)))
        })
    }

    /// The run's time limit: `None` without `--runtime` or with `--runtime=0` (fio: no limit).
    pub fn time_limit(&self) -> Option<Duration> {
        self.runtime.filter(|r| !r.is_zero())
    }

    /// The generators' seed: `--randseed`, else the fixed default, else (with
    /// `--randrepeat=0`) one drawn from the clock and the process id.
    pub fn seed(&self) -> u64 {
        match (self.randseed, self.randrepeat) {
            (Some(s), _) => s,
            (None, true) => DEFAULT_RANDSEED,
            (None, false) => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                let low = u64::try_from(nanos & u128::from(u64::MAX)).unwrap_or(0);
                crate::offsets::Rng::new(low ^ (u64::from(std::process::id()) << 32)).next_u64()
            }
        }
    }

    /// The batching options with their defaults and fio's clamping applied.
    pub fn batching(&self) -> Batching {
        let depth = usize::try_from(self.iodepth.max(1)).unwrap_or(1);
        let clamp = |v: u32| usize::try_from(v).unwrap_or(usize::MAX).clamp(1, depth);
        let submit = match self.iodepth_batch_submit {
            0 => depth,
            n => clamp(n),
        };
        let refill_min = clamp(self.iodepth_batch_complete_min);
        let reap_max = match self.iodepth_batch_complete_max {
            0 => (depth / 2).max(1),
            n => clamp(n),
        };
        Batching {
            submit,
            refill_min,
            reap_max: reap_max.max(refill_min),
        }
    }

    /// The options as fio's `"job options"` name/value pairs (only non-defaults,
    /// plus name and rw, as fio lists what the job file set).
    pub fn job_options(&self) -> Vec<(&'static str, String)> {
        let d = BenchOptions::default();
        let mut v = vec![("name", self.name.clone()), ("rw", self.rw.to_fio())];
        if self.rw.read_pct(self.rwmixread) != 100 && self.rw.read_pct(self.rwmixread) != 0 {
            v.push(("rwmixread", self.rwmixread.to_string()));
        }
        v.push(("bs", self.bs.to_fio()));
        v.push(("iodepth", self.iodepth.to_string()));
        for (name, value, default) in [
            (
                "iodepth_batch_submit",
                self.iodepth_batch_submit,
                d.iodepth_batch_submit,
            ),
            (
                "iodepth_batch_complete_min",
                self.iodepth_batch_complete_min,
                d.iodepth_batch_complete_min,
            ),
            (
                "iodepth_batch_complete_max",
                self.iodepth_batch_complete_max,
                d.iodepth_batch_complete_max,
            ),
        ] {
            if value != default {
                v.push((name, value.to_string()));
            }
        }
        if self.numjobs != d.numjobs {
            v.push(("numjobs", self.numjobs.to_string()));
        }
        let secs = |t: Duration| {
            if t.subsec_nanos() == 0 {
                t.as_secs().to_string()
            } else {
                format!("{}ms", t.as_millis())
            }
        };
        if let Some(t) = self.runtime {
            v.push(("runtime", secs(t)));
        }
        if let Some(t) = self.ramp_time {
            v.push(("ramp_time", secs(t)));
        }
        if self.time_based {
            v.push(("time_based", String::new()));
        }
        let spec = |s: SizeSpec| match s {
            SizeSpec::Bytes(b) => size_to_string(b),
            SizeSpec::Percent(p) => format!("{p}%"),
        };
        if let Some(s) = self.size {
            v.push(("size", spec(s)));
        }
        if self.offset != d.offset {
            v.push(("offset", spec(self.offset)));
        }
        if let Some(c) = &self.cpus_allowed {
            let list: Vec<String> = c.0.iter().map(usize::to_string).collect();
            v.push(("cpus_allowed", list.join(",")));
        }
        if self.verify != VerifyMode::Off {
            v.push(("verify", self.verify.as_str().into()));
        }
        if let Some(seed) = self.randseed {
            v.push(("randseed", seed.to_string()));
        }
        if self.randrepeat != d.randrepeat {
            v.push(("randrepeat", "0".into()));
        }
        if self.norandommap {
            v.push(("norandommap", String::new()));
        }
        self.push_report_options(&mut v);
        v.extend(self.workload.job_options());
        v
    }
}

impl BenchOptions {
    /// The report, log and pasted options among `job_options`, as set.
    fn push_report_options(&self, v: &mut Vec<(&'static str, String)>) {
        if self.group_reporting {
            v.push(("group_reporting", String::new()));
        }
        if let Some(p) = &self.percentile_list {
            let list: Vec<String> = p.0.iter().map(f64::to_string).collect();
            v.push(("percentile_list", list.join(":")));
        }
        for (name, value) in [
            ("write_lat_log", &self.write_lat_log),
            ("write_iops_log", &self.write_iops_log),
            ("write_bw_log", &self.write_bw_log),
        ] {
            if let Some(value) = value {
                v.push((name, value.clone()));
            }
        }
        if self.log_avg_msec != 0 {
            v.push(("log_avg_msec", self.log_avg_msec.to_string()));
        }
        v.extend(self.pasted.0.iter().cloned());
    }

    /// The logs the job writes, if any.
    pub fn log_spec(&self) -> Option<crate::iolog::LogSpec> {
        let spec = crate::iolog::LogSpec {
            lat: self.write_lat_log.is_some(),
            iops: self.write_iops_log.is_some(),
            bw: self.write_bw_log.is_some(),
            avg_ms: self.log_avg_msec,
        };
        (spec.lat || spec.iops || spec.bw).then_some(spec)
    }

    /// The completion latency percentiles to report.
    pub fn percentiles(&self) -> &[f64] {
        self.percentile_list
            .as_ref()
            .map_or(&crate::option_values::DEFAULT_PERCENTILES[..], |p| &p.0)
    }
}

#[cfg(test)]
mod tests;
