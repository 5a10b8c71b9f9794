// SPDX-License-Identifier: Apache-2.0
//! fio's options that shape a job's workload and its verification beyond `rw`, `bs`
//! and `verify`: block size mixes, offset distributions, how much I/O, pacing, and
//! the verify variants. Flattened into [`crate::BenchOptions`] as `workload`.

use std::time::Duration;

use clap::Args;

use crate::option_values::{parse_bool, parse_size, parse_time, size_to_string};
use crate::think::{BlocksType, parse_blocks_type};
use crate::workload_values::{
    DirBlockSizes, DirRates, RandomDistribution, VerifyPattern, parse_bsrange, parse_bssplit,
    parse_random_distribution, parse_rate, parse_rate_iops, parse_time_us, parse_verify_pattern,
};

/// Workload and verify options with fio's names and defaults.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct WorkloadOptions {
    /// Percentage of writes in a mixed workload (overrides rwmixread: reads are the rest).
    #[arg(long = "rwmixwrite", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub rwmixwrite: Option<u8>,
    /// Block sizes and their shares, e.g. 4k/50:64k/40:1m/10; a comma separates the read,
    /// write and trim lists. Overrides bs.
    #[arg(long = "bssplit", value_parser = parse_bssplit)]
    pub bssplit: Option<DirBlockSizes>,
    /// Block sizes drawn between two sizes (multiples of the smaller), e.g. 4k-64k; a comma
    /// separates reads and writes. Overrides bs.
    #[arg(long = "bsrange", alias = "blocksize_range", value_parser = parse_bsrange)]
    pub bsrange: Option<DirBlockSizes>,
    /// Spread of random offsets: random (uniform, every block once per pass), zipf:THETA,
    /// pareto:H or normal:STDDEV% of the range, each with an optional :CENTER (0..1), or
    /// zoned:ACCESS%/RANGE%:... Skewed distributions draw with replacement (as norandommap).
    #[arg(long = "random_distribution", default_value = "random", value_parser = parse_random_distribution)]
    pub random_distribution: RandomDistribution,
    /// Bytes of I/O per job (and per loop) before it ends; may exceed size (offsets wrap).
    #[arg(long = "io_size", alias = "io_limit", value_parser = parse_size)]
    pub io_size: Option<u64>,
    /// Stop after this many I/Os per job, if nothing else ended it first.
    #[arg(long = "number_ios")]
    pub number_ios: Option<u64>,
    /// Run the job this many times (each loop: size or io_size bytes, then the verify pass).
    #[arg(long = "loops", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub loops: u32,
    /// Idle this long (microseconds unless suffixed) after every thinktime_blocks I/Os,
    /// once those have completed.
    #[arg(long = "thinktime", value_parser = parse_time_us)]
    pub thinktime: Option<Duration>,
    /// I/Os between two thinktime pauses (default 1, or none with thinktime_iotime).
    #[arg(long = "thinktime_blocks", value_parser = clap::value_parser!(u32).range(1..))]
    pub thinktime_blocks: Option<u32>,
    /// What thinktime_blocks counts: complete (I/Os completed; the depth still reaches
    /// iodepth) or issue (I/Os issued; caps the depth at thinktime_blocks).
    #[arg(long = "thinktime_blocks_type", default_value = "complete", value_parser = parse_blocks_type)]
    pub thinktime_blocks_type: BlocksType,
    /// Also pause after this much time of I/O (seconds unless suffixed).
    #[arg(long = "thinktime_iotime", value_parser = parse_time)]
    pub thinktime_iotime: Option<Duration>,
    /// Busy part of the pause (microseconds unless suffixed); the pause is always
    /// busy-polled, so this lengthens it only when longer than thinktime.
    #[arg(long = "thinktime_spin", value_parser = parse_time_us)]
    pub thinktime_spin: Option<Duration>,
    /// Bandwidth cap per job in bytes/s: `READ[,WRITE[,TRIM]]`; the last value also applies to
    /// the directions after it unless a comma ends the list, an empty part is unlimited
    /// (rate=1m: all, rate=,1m: writes and trims, rate=1m,: reads). Submissions are paced.
    #[arg(long = "rate", value_parser = parse_rate)]
    pub rate: Option<DirRates>,
    /// IOPS cap per job, per direction as rate.
    #[arg(long = "rate_iops", value_parser = parse_rate_iops)]
    pub rate_iops: Option<DirRates>,
    /// Pattern for verify=pattern (0xdeadbeef, a number or "text"); implies verify=pattern
    /// when verify is not set.
    #[arg(long = "verify_pattern", value_parser = parse_verify_pattern)]
    pub verify_pattern: Option<VerifyPattern>,
    /// Do not write: replay the job's writes (same seed, size and options) and check that
    /// the namespace holds what a previous run with verify wrote.
    #[arg(long = "verify_only", default_value = "0", value_parser = parse_bool, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "1")]
    pub verify_only: bool,
    /// 0: write verify headers but skip the read-back (and read checks).
    #[arg(long = "do_verify", default_value = "1", value_parser = parse_bool, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "1")]
    pub do_verify: bool,
    /// Verify after every N blocks written instead of once after the write phase.
    #[arg(long = "verify_backlog", value_parser = clap::value_parser!(u64).range(1..))]
    pub verify_backlog: Option<u64>,
}

impl Default for WorkloadOptions {
    fn default() -> Self {
        WorkloadOptions {
            rwmixwrite: None,
            bssplit: None,
            bsrange: None,
            random_distribution: RandomDistribution::Random,
            io_size: None,
            number_ios: None,
            loops: 1,
            thinktime: None,
            thinktime_blocks: None,
            thinktime_blocks_type: BlocksType::Complete,
            thinktime_iotime: None,
            thinktime_spin: None,
            rate: None,
            rate_iops: None,
            verify_pattern: None,
            verify_only: false,
            do_verify: true,
            verify_backlog: None,
        }
    }
}

impl WorkloadOptions {
    /// The options that differ from their defaults, as fio's `"job options"` pairs.
    pub fn job_options(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        if let Some(w) = self.rwmixwrite {
            v.push(("rwmixwrite", w.to_string()));
        }
        if let Some(s) = &self.bssplit {
            v.push(("bssplit", s.to_fio()));
        }
        if let Some(s) = &self.bsrange {
            v.push(("bsrange", s.to_fio()));
        }
        if self.random_distribution != RandomDistribution::Random {
            v.push(("random_distribution", self.random_distribution.to_fio()));
        }
        if let Some(b) = self.io_size {
            v.push(("io_size", size_to_string(b)));
        }
        if let Some(n) = self.number_ios {
            v.push(("number_ios", n.to_string()));
        }
        if self.loops != 1 {
            v.push(("loops", self.loops.to_string()));
        }
        if let Some(t) = self.thinktime {
            v.push(("thinktime", t.as_micros().to_string()));
            if let Some(b) = self.thinktime_blocks {
                v.push(("thinktime_blocks", b.to_string()));
            }
            if self.thinktime_blocks_type != BlocksType::Complete {
                v.push((
                    "thinktime_blocks_type",
                    self.thinktime_blocks_type.to_fio().into(),
                ));
            }
            if let Some(t) = self.thinktime_iotime {
                v.push(("thinktime_iotime", t.as_secs().to_string()));
            }
            if let Some(t) = self.thinktime_spin {
                v.push(("thinktime_spin", t.as_micros().to_string()));
            }
        }
        if let Some(r) = self.rate {
            v.push(("rate", r.to_fio()));
        }
        if let Some(r) = self.rate_iops {
            v.push(("rate_iops", r.to_fio()));
        }
        if let Some(p) = &self.verify_pattern {
            let hex: String = p.0.iter().map(|b| format!("{b:02x}")).collect();
            v.push(("verify_pattern", format!("0x{hex}")));
        }
        if self.verify_only {
            v.push(("verify_only", "1".into()));
        }
        if !self.do_verify {
            v.push(("do_verify", "0".into()));
        }
        if let Some(n) = self.verify_backlog {
            v.push(("verify_backlog", n.to_string()));
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
        w: WorkloadOptions,
    }

    fn parse(args: &[&str]) -> Result<WorkloadOptions, clap::Error> {
        let mut v = vec!["bench"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map(|c| c.w)
    }

    #[test]
    fn defaults_are_fio_defaults() {
        assert_eq!(parse(&[]).unwrap(), WorkloadOptions::default());
        assert!(WorkloadOptions::default().job_options().is_empty());
    }

    #[test]
    fn fio_names_parse_and_are_listed() {
        let o = parse(&[
            "--rwmixwrite=30",
            "--bssplit=4k/50:64k/50",
            "--random_distribution=zipf:1.1",
            "--io_limit=8m",
            "--number_ios=100",
            "--loops=3",
            "--thinktime=50",
            "--thinktime_blocks=4",
            "--thinktime_blocks_type=issue",
            "--thinktime_iotime=2",
            "--rate=,1m",
            "--rate_iops=1000",
            "--verify_pattern=0xabcd",
            "--verify_only",
            "--do_verify=0",
            "--verify_backlog=16",
        ])
        .unwrap();
        assert_eq!(o.io_size, Some(8 << 20));
        assert_eq!(o.thinktime, Some(Duration::from_micros(50)));
        assert_eq!(o.loops, 3);
        assert!(o.verify_only && !o.do_verify);
        let names: Vec<&str> = o.job_options().iter().map(|(k, _)| *k).collect();
        for k in [
            "rwmixwrite",
            "bssplit",
            "random_distribution",
            "io_size",
            "number_ios",
            "loops",
            "thinktime",
            "thinktime_blocks",
            "thinktime_blocks_type",
            "thinktime_iotime",
            "rate",
            "rate_iops",
            "verify_pattern",
            "verify_only",
            "do_verify",
            "verify_backlog",
        ] {
            assert!(names.contains(&k), "{k} missing from {names:?}");
        }
        assert!(parse(&["--loops=0"]).is_err());
        assert!(parse(&["--random_distribution=zipf"]).is_err());
        assert!(parse(&["--rwmixwrite=101"]).is_err());
    }
}
