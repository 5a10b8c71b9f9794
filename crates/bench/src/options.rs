// SPDX-License-Identifier: Apache-2.0
//! Job options with fio's names, spellings and defaults (`HOWTO.rst`), as a clap
//! `Args` struct the `nvmemu bench` subcommand embeds.

use std::time::Duration;

use clap::{Args, ValueEnum};
use thiserror::Error;

/// An option value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OptionError {
    /// A size such as `4k`, `1m`, `512` or `50%` did not parse.
    #[error("Invalid size {0:?}")]
    Size(String),
    /// A time such as `10`, `500ms` or `2m` did not parse.
    #[error("Invalid time {0:?}")]
    Time(String),
    /// A CPU list such as `0,2-3` did not parse.
    #[error("Invalid CPU list {0:?}")]
    CpuList(String),
    /// A boolean other than 1/0, true/false, on/off, yes/no.
    #[error("Invalid boolean {0:?} (use 1 or 0)")]
    Bool(String),
    /// An output format other than normal, json, json+.
    #[error("Invalid output format {0:?}")]
    OutputFormat(String),
}

/// fio's `rw=` workload kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RwMode {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    Randread,
    /// Random writes.
    Randwrite,
    /// Sequential mixed reads and writes (`rw`/`readwrite`).
    #[value(alias = "readwrite")]
    Rw,
    /// Random mixed reads and writes.
    Randrw,
}

impl RwMode {
    /// Offsets are random rather than sequential.
    pub fn is_random(self) -> bool {
        matches!(self, RwMode::Randread | RwMode::Randwrite | RwMode::Randrw)
    }

    /// Percentage of I/Os that are reads, given `rwmixread`.
    pub fn read_pct(self, rwmixread: u8) -> u8 {
        match self {
            RwMode::Read | RwMode::Randread => 100,
            RwMode::Write | RwMode::Randwrite => 0,
            RwMode::Rw | RwMode::Randrw => rwmixread,
        }
    }

    /// fio's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
            RwMode::Randread => "randread",
            RwMode::Randwrite => "randwrite",
            RwMode::Rw => "rw",
            RwMode::Randrw => "randrw",
        }
    }
}

/// `verify=` methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VerifyMode {
    /// No verification (fio's `verify=0`).
    #[value(name = "0", alias = "none")]
    Off,
    /// Per-block header {magic, LBA, generation} plus crc32c of the block.
    Crc32c,
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

/// A size that may be a percentage of the namespace (fio's `size=50%`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeSpec {
    /// Bytes.
    Bytes(u64),
    /// Percent of the namespace, 1..=100.
    Percent(u8),
}

impl SizeSpec {
    /// Bytes given a namespace of `total` bytes.
    pub fn resolve(self, total: u64) -> u64 {
        match self {
            SizeSpec::Bytes(b) => b,
            SizeSpec::Percent(p) => total / 100 * u64::from(p) + total % 100 * u64::from(p) / 100,
        }
    }
}

/// `--output-format`: any combination of normal, json and json+.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputFormat {
    /// fio's human-readable report.
    pub normal: bool,
    /// fio's JSON report.
    pub json: bool,
    /// JSON with latency histogram bins (implies json).
    pub json_plus: bool,
}

impl OutputFormat {
    /// The normal text report only.
    pub const NORMAL: OutputFormat = OutputFormat {
        normal: true,
        json: false,
        json_plus: false,
    };
    /// JSON only.
    pub const JSON: OutputFormat = OutputFormat {
        normal: false,
        json: true,
        json_plus: false,
    };
    /// JSON+ only.
    pub const JSON_PLUS: OutputFormat = OutputFormat {
        normal: false,
        json: true,
        json_plus: true,
    };
}

/// Parses fio's comma list `normal,json,json+`.
pub fn parse_output_format(s: &str) -> Result<OutputFormat, OptionError> {
    let mut f = OutputFormat::default();
    for part in s.split(',') {
        match part.trim() {
            "normal" => f.normal = true,
            "json" => f.json = true,
            "json+" => {
                f.json = true;
                f.json_plus = true
            }
            _ => return Err(OptionError::OutputFormat(s.to_string())),
        }
    }
    Ok(f)
}

/// Parses a fio size: a number with an optional `k`, `m`, `g`, `t`, `p` suffix
/// (any case, optionally followed by `i`/`b`, e.g. `4KiB`), all powers of 1024
/// as fio's default `kb_base=1024`; a bare number is bytes; hex `0x` allowed.
pub fn parse_size(s: &str) -> Result<u64, OptionError> {
    let err = || OptionError::Size(s.to_string());
    let t = s.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| err());
    }
    let (num, suffix) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let value: u64 = num.parse().map_err(|_| err())?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        "p" | "pb" | "pib" => 50,
        _ => return Err(err()),
    };
    value.checked_mul(1u64 << shift).ok_or_else(err)
}

/// Parses a size or a percentage of the namespace (`50%`).
pub fn parse_size_spec(s: &str) -> Result<SizeSpec, OptionError> {
    match s.trim().strip_suffix('%') {
        Some(p) => match p.parse::<u8>() {
            Ok(p @ 1..=100) => Ok(SizeSpec::Percent(p)),
            _ => Err(OptionError::Size(s.to_string())),
        },
        None => parse_size(s).map(SizeSpec::Bytes),
    }
}

/// Parses a fio time: seconds by default, or with a `us`/`usec`, `ms`/`msec`,
/// `s`/`sec`, `m`/`min`, `h` or `d` suffix.
pub fn parse_time(s: &str) -> Result<Duration, OptionError> {
    let err = || OptionError::Time(s.to_string());
    let t = s.trim();
    let (num, suffix) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = num.parse().map_err(|_| err())?;
    let mul_us: u64 = match suffix.to_ascii_lowercase().as_str() {
        "us" | "usec" => 1,
        "ms" | "msec" => 1_000,
        "" | "s" | "sec" => 1_000_000,
        "m" | "min" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        _ => return Err(err()),
    };
    n.checked_mul(mul_us)
        .map(Duration::from_micros)
        .ok_or_else(err)
}

/// The seed used when neither `randseed` nor `randrepeat=0` says otherwise.
pub const DEFAULT_RANDSEED: u64 = 0x89;

/// Parses fio's boolean values: `1`/`0`, `true`/`false`, `on`/`off`, `yes`/`no`.
pub fn parse_bool(s: &str) -> Result<bool, OptionError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(OptionError::Bool(s.to_string())),
    }
}

/// A parsed `cpus_allowed` list, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// Parses fio's `cpus_allowed` list: `0,2,4-7`.
pub fn parse_cpu_list_arg(s: &str) -> Result<CpuList, OptionError> {
    parse_cpu_list(s).map(CpuList)
}

/// Parses fio's `cpus_allowed` list: `0,2,4-7`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, OptionError> {
    let err = || OptionError::CpuList(s.to_string());
    let max = rustix::thread::CpuSet::MAX_CPU;
    let mut cpus = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (
                a.parse::<usize>().map_err(|_| err())?,
                b.parse::<usize>().map_err(|_| err())?,
            ),
            None => {
                let c = part.parse::<usize>().map_err(|_| err())?;
                (c, c)
            }
        };
        if lo > hi || hi >= max {
            return Err(err());
        }
        cpus.extend(lo..=hi);
    }
    Ok(cpus)
}

/// `nvmemu bench` options, named and spelled as fio's.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct BenchOptions {
    /// Job name (fio `--name`).
    #[arg(long = "name", default_value = "nvmemu")]
    pub name: String,
    /// I/O pattern.
    #[arg(long = "rw", alias = "readwrite", value_enum, default_value = "read")]
    pub rw: RwMode,
    /// Percentage of reads in a mixed workload.
    #[arg(long = "rwmixread", default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub rwmixread: u8,
    /// Block size per I/O (`4k`, `128k`, `1m`).
    #[arg(long = "bs", alias = "blocksize", default_value = "4k", value_parser = parse_size)]
    pub bs: u64,
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
    #[arg(long = "runtime", value_parser = parse_time)]
    pub runtime: Option<Duration>,
    /// Run this long before statistics are collected.
    #[arg(long = "ramp_time", value_parser = parse_time)]
    pub ramp_time: Option<Duration>,
    /// Keep running for `runtime` even when `size` bytes are done.
    #[arg(long = "time_based")]
    pub time_based: bool,
    /// Bytes per job (or `N%` of the namespace); default the whole namespace.
    #[arg(long = "size", value_parser = parse_size_spec)]
    pub size: Option<SizeSpec>,
    /// Start of the I/O range in bytes (or `N%`).
    #[arg(long = "offset", default_value = "0", value_parser = parse_size_spec)]
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
    #[arg(long = "randrepeat", default_value = "1", value_parser = parse_bool, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "1")]
    pub randrepeat: bool,
    /// Random offsets drawn independently (units may repeat or be missed) instead of
    /// touching every block of the range once per pass.
    #[arg(long = "norandommap", default_value = "0", value_parser = parse_bool, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "1")]
    pub norandommap: bool,
    /// Report formats: comma list of normal, json, json+.
    #[arg(long = "output-format", default_value = "normal", value_parser = parse_output_format)]
    pub output_format: OutputFormat,
    /// Live status line: auto (only on a terminal), always or never.
    #[arg(long = "eta", value_enum, default_value = "auto")]
    pub eta: EtaMode,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            name: "nvmemu".into(),
            rw: RwMode::Read,
            rwmixread: 50,
            bs: 4096,
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
        }
    }
}

/// Formats a byte count as fio users write it (`4k`, `1m`, `512`).
pub fn size_to_string(v: u64) -> String {
    for (shift, suffix) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if v != 0 && (v >> shift) << shift == v {
            return format!("{}{suffix}", v >> shift);
        }
    }
    v.to_string()
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
        let mut v = vec![
            ("name", self.name.clone()),
            ("rw", self.rw.as_str().to_string()),
        ];
        if self.rw.read_pct(self.rwmixread) != 100 && self.rw.read_pct(self.rwmixread) != 0 {
            v.push(("rwmixread", self.rwmixread.to_string()));
        }
        v.push(("bs", size_to_string(self.bs)));
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
        if self.verify == VerifyMode::Crc32c {
            v.push(("verify", "crc32c".into()));
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
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        opts: BenchOptions,
    }

    fn parse(args: &[&str]) -> Result<BenchOptions, clap::Error> {
        let mut v = vec!["bench"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map(|c| c.opts)
    }

    #[test]
    fn defaults_match_fio() {
        let o = parse(&[]).unwrap();
        assert_eq!(o, BenchOptions::default());
        assert_eq!(o.bs, 4096);
        assert_eq!(o.iodepth, 1);
        assert_eq!(o.rwmixread, 50);
        assert_eq!(o.name, "nvmemu");
        assert_eq!(o.output_format, OutputFormat::NORMAL);
    }

    #[test]
    fn fio_spellings_parse() {
        let o = parse(&[
            "--rw=randrw",
            "--rwmixread=70",
            "--bs=128k",
            "--iodepth=32",
            "--numjobs=2",
            "--runtime=10",
            "--ramp_time=2s",
            "--time_based",
            "--size=1g",
            "--offset=1m",
            "--cpus_allowed=0,2-3",
            "--verify=crc32c",
            "--output-format=json,normal",
            "--name=job1",
        ])
        .unwrap();
        assert_eq!(o.rw, RwMode::Randrw);
        assert_eq!(o.rwmixread, 70);
        assert_eq!(o.bs, 128 * 1024);
        assert_eq!(o.iodepth, 32);
        assert_eq!(o.numjobs, 2);
        assert_eq!(o.runtime, Some(Duration::from_secs(10)));
        assert_eq!(o.ramp_time, Some(Duration::from_secs(2)));
        assert!(o.time_based);
        assert_eq!(o.size, Some(SizeSpec::Bytes(1 << 30)));
        assert_eq!(o.offset, SizeSpec::Bytes(1 << 20));
        assert_eq!(o.cpus_allowed, Some(CpuList(vec![0, 2, 3])));
        assert_eq!(o.verify, VerifyMode::Crc32c);
        assert_eq!(
            o.output_format,
            OutputFormat {
                normal: true,
                json: true,
                json_plus: false
            }
        );
        assert_eq!(o.name, "job1");
    }

    #[test]
    fn batching_options_take_fio_names_and_aliases() {
        let o = parse(&[
            "--iodepth=32",
            "--iodepth_batch=8",
            "--iodepth_batch_complete=2",
            "--iodepth_batch_complete_max=16",
        ])
        .unwrap();
        assert_eq!(
            (
                o.iodepth_batch_submit,
                o.iodepth_batch_complete_min,
                o.iodepth_batch_complete_max
            ),
            (8, 2, 16)
        );
        assert_eq!(
            o.batching(),
            Batching {
                submit: 8,
                refill_min: 2,
                reap_max: 16
            }
        );
        let j = o.job_options();
        assert!(j.contains(&("iodepth_batch_submit", "8".to_string())));
        assert!(j.contains(&("iodepth_batch_complete_min", "2".to_string())));
        assert!(j.contains(&("iodepth_batch_complete_max", "16".to_string())));
        // Defaults: one doorbell per refill, half of iodepth reaped per poll; not
        // listed as job options.
        let d = parse(&["--iodepth=32"]).unwrap();
        assert_eq!(
            d.batching(),
            Batching {
                submit: 32,
                refill_min: 1,
                reap_max: 16
            }
        );
        assert!(
            !d.job_options()
                .iter()
                .any(|(k, _)| k.starts_with("iodepth_batch"))
        );
    }

    #[test]
    fn dashed_spellings_are_not_fio_and_are_rejected() {
        assert!(parse(&["--ramp-time=1"]).is_err());
        assert!(parse(&["--time-based"]).is_err());
        assert!(parse(&["--cpus-allowed=1"]).is_err());
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(parse(&["--rwmixread=101"]).is_err());
        assert!(parse(&["--iodepth=0"]).is_err());
        assert!(parse(&["--bs=4q"]).is_err());
        assert!(parse(&["--output-format=terse"]).is_err());
        assert!(parse(&["--cpus_allowed=3-1"]).is_err());
        assert!(parse(&["--rw=trim"]).is_err());
    }

    #[test]
    fn random_map_options_parse_like_fio() {
        let o = parse(&[]).unwrap();
        assert!(!o.norandommap && o.randrepeat && o.randseed.is_none());
        assert_eq!(o.seed(), DEFAULT_RANDSEED);
        let o = parse(&["--norandommap", "--randrepeat=0"]).unwrap();
        assert!(o.norandommap && !o.randrepeat);
        let j = o.job_options();
        assert!(j.contains(&("norandommap", String::new())));
        assert!(j.contains(&("randrepeat", "0".to_string())));
        let o = parse(&["--norandommap=1", "--randrepeat=1", "--randseed=42"]).unwrap();
        assert!(o.norandommap && o.randrepeat);
        assert_eq!(o.seed(), 42);
        assert!(o.job_options().contains(&("randseed", "42".to_string())));
        assert!(!parse(&["--norandommap=0"]).unwrap().norandommap);
        assert!(parse(&["--randrepeat=maybe"]).is_err());
        // An explicit seed wins over randrepeat=0.
        assert_eq!(
            parse(&["--randrepeat=0", "--randseed=7"]).unwrap().seed(),
            7
        );
    }

    #[test]
    fn runtime_zero_means_no_limit() {
        let o = parse(&["--runtime=0"]).unwrap();
        assert_eq!(o.runtime, Some(Duration::ZERO));
        assert_eq!(o.time_limit(), None);
        assert_eq!(
            parse(&["--runtime=3"]).unwrap().time_limit(),
            Some(Duration::from_secs(3))
        );
    }

    #[test]
    fn sizes_parse_like_fio() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("0x1000"), Ok(4096));
        assert!(parse_size("k").is_err());
        assert!(parse_size("4kx").is_err());
        assert!(parse_size("99999999999p").is_err());
        assert_eq!(parse_size_spec("50%"), Ok(SizeSpec::Percent(50)));
        assert!(parse_size_spec("0%").is_err());
        assert_eq!(SizeSpec::Percent(50).resolve(1000), 500);
    }

    #[test]
    fn times_parse_like_fio() {
        assert_eq!(parse_time("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_time("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_time("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_time("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_time("250us"), Ok(Duration::from_micros(250)));
        assert!(parse_time("5x").is_err());
    }

    #[test]
    fn job_options_list_what_was_set() {
        let o = parse(&[
            "--rw=randread",
            "--bs=4k",
            "--iodepth=16",
            "--runtime=5",
            "--time_based",
        ])
        .unwrap();
        let j = o.job_options();
        assert!(j.contains(&("rw", "randread".to_string())));
        assert!(j.contains(&("iodepth", "16".to_string())));
        assert!(j.contains(&("runtime", "5".to_string())));
        assert!(j.contains(&("time_based", String::new())));
    }
}
