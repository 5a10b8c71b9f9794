// SPDX-License-Identifier: Apache-2.0
//! Option values as fio spells them: sizes (`4k`, `50%`), times (`500ms`), booleans,
//! CPU lists and output formats, each parsed by one function clap (and the job-file
//! reader) calls.

use std::time::Duration;

use thiserror::Error;
/// fio's default `percentile_list`.
pub const DEFAULT_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

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
    /// An output format other than normal, json, json+, terse.
    #[error("Invalid output format {0:?} (use normal, json, json+ or terse, comma separated)")]
    OutputFormat(String),
    /// A percentile list such as `99:99.9` did not parse.
    #[error("Invalid percentile list {0:?} (use numbers in 0..=100 separated by ':')")]
    PercentileList(String),
    /// Not `random`, `zipf:THETA`, `pareto:H` or `normal:STDDEV` (each with an optional
    /// `:CENTER`), or `zoned:` zones whose accesses do not add up to 100.
    #[error(
        "Invalid random_distribution {0:?} (use random, zipf:1.2, pareto:0.2, normal:10 or zoned:60/10:40/90)"
    )]
    Distribution(String),
    /// Not a hex number, a decimal number or a quoted string.
    #[error("Invalid verify_pattern {0:?} (use 0xdeadbeef, 255 or \"text\")")]
    Pattern(String),
}

/// `bs=` as fio writes it: one size for every direction, or `READ,WRITE[,TRIM]` (an empty
/// part takes the read size; a missing trim size the write size). Reads as the read size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BsSpec(pub [u64; 3]);

impl std::ops::Deref for BsSpec {
    type Target = u64;
    fn deref(&self) -> &u64 {
        &self.0[0]
    }
}

impl From<u64> for BsSpec {
    fn from(bs: u64) -> BsSpec {
        BsSpec([bs; 3])
    }
}

impl BsSpec {
    /// Whether the directions differ.
    pub fn per_direction(self) -> bool {
        self.0.iter().any(|&b| b != self.0[0])
    }

    /// fio's spelling.
    pub fn to_fio(self) -> String {
        let [r, w, t] = self.0;
        if self.per_direction() {
            format!(
                "{},{},{}",
                size_to_string(r),
                size_to_string(w),
                size_to_string(t)
            )
        } else {
            size_to_string(r)
        }
    }
}

/// Parses `bs`: `4k`, or `4k,64k` (reads, writes; trims as writes) or `512,512,16k`.
pub fn parse_bs(s: &str) -> Result<BsSpec, OptionError> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    // An empty read size is fio's default.
    let read = match parts.first().copied().unwrap_or("") {
        "" => 4096,
        p => parse_size(p)?,
    };
    let at = |d: usize| match parts.get(d).or(parts.last()) {
        Some(p) if !p.is_empty() => parse_size(p),
        _ => Ok(read),
    };
    if parts.len() > 3 {
        return Err(OptionError::Size(s.to_string()));
    }
    Ok(BsSpec([read, at(1)?, at(2)?]))
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

/// `--output-format`: any combination of normal, json, json+ and terse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputFormat {
    /// fio's human-readable report.
    pub normal: bool,
    /// fio's JSON report.
    pub json: bool,
    /// JSON with latency histogram bins (implies json).
    pub json_plus: bool,
    /// fio's terse (version 3) line per job.
    pub terse: bool,
}

impl OutputFormat {
    /// The normal text report only.
    pub const NORMAL: OutputFormat = OutputFormat {
        normal: true,
        json: false,
        json_plus: false,
        terse: false,
    };
    /// JSON only.
    pub const JSON: OutputFormat = OutputFormat {
        normal: false,
        json: true,
        json_plus: false,
        terse: false,
    };
    /// JSON+ only.
    pub const JSON_PLUS: OutputFormat = OutputFormat {
        normal: false,
        json: true,
        json_plus: true,
        terse: false,
    };
}

/// Parses fio's comma list `normal,json,json+,terse`.
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
            "terse" => f.terse = true,
            _ => return Err(OptionError::OutputFormat(s.to_string())),
        }
    }
    Ok(f)
}

/// fio's `percentile_list`: at most 20 percentiles (terse output has 20 columns).
#[derive(Debug, Clone, PartialEq)]
pub struct PercentileList(pub Vec<f64>);

/// Parses fio's `percentile_list`, `99:99.9:99.99` (fio keeps it sorted).
pub fn parse_percentile_list(s: &str) -> Result<PercentileList, OptionError> {
    let err = || OptionError::PercentileList(s.to_string());
    let mut v = s
        .split(':')
        .map(|p| match p.trim().parse::<f64>() {
            Ok(f) if (0.0..=100.0).contains(&f) => Ok(f),
            _ => Err(err()),
        })
        .collect::<Result<Vec<f64>, _>>()?;
    if v.is_empty() || v.len() > 20 {
        return Err(err());
    }
    v.sort_by(f64::total_cmp);
    Ok(PercentileList(v))
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

/// Formats a byte count as fio users write it (`4k`, `1m`, `512`).
pub fn size_to_string(v: u64) -> String {
    for (shift, suffix) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if v != 0 && (v >> shift) << shift == v {
            return format!("{}{suffix}", v >> shift);
        }
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_formats_and_percentile_lists_parse_like_fio() {
        let f = parse_output_format("normal,terse").unwrap();
        assert!(f.normal && f.terse && !f.json);
        assert!(parse_output_format("csv").is_err());
        assert_eq!(
            parse_percentile_list("99.9:50:99"),
            Ok(PercentileList(vec![50.0, 99.0, 99.9]))
        );
        assert!(parse_percentile_list("101").is_err());
        assert!(parse_percentile_list("a:b").is_err());
        let many = vec!["1"; 21].join(":");
        assert!(parse_percentile_list(&many).is_err());
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
}
