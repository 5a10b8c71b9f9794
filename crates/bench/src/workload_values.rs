// SPDX-License-Identifier: Apache-2.0
//! Values of fio's workload-shaping options, parsed with fio's syntax: `bssplit`,
//! `bsrange`, `random_distribution`, `rate`/`rate_iops`, `thinktime` (microseconds
//! by default) and `verify_pattern`.

use std::time::Duration;

use crate::option_values::{OptionError, parse_size};

/// Block sizes of one direction: `(size, percent)` pairs. A fixed size is one pair at
/// 100 %; a range is [`BlockSizes::Range`].
#[derive(Debug, Clone, PartialEq)]
pub enum BlockSizes {
    /// `bssplit`: each size with its share; shares are relative weights (fio gives
    /// entries without a share what is left of 100 %).
    Split(Vec<(u64, u32)>),
    /// `bsrange=min-max`: multiples of `min` between the two, drawn uniformly.
    Range {
        /// Smallest size.
        min: u64,
        /// Largest size.
        max: u64,
    },
}

impl BlockSizes {
    /// Every size this can produce (the two ends for a range).
    pub fn sizes(&self) -> Vec<u64> {
        match self {
            BlockSizes::Split(v) => v.iter().map(|&(s, _)| s).collect(),
            BlockSizes::Range { min, max } => vec![*min, *max],
        }
    }

    fn to_fio(&self) -> String {
        match self {
            BlockSizes::Split(v) => v
                .iter()
                .map(|&(s, p)| format!("{}/{p}", crate::option_values::size_to_string(s)))
                .collect::<Vec<_>>()
                .join(":"),
            BlockSizes::Range { min, max } => format!(
                "{}-{}",
                crate::option_values::size_to_string(*min),
                crate::option_values::size_to_string(*max)
            ),
        }
    }
}

/// Per-direction block sizes (read, write, trim), as fio's comma lists give them.
#[derive(Debug, Clone, PartialEq)]
pub struct DirBlockSizes(pub [BlockSizes; 3]);

impl DirBlockSizes {
    /// fio's spelling (all three lists).
    pub fn to_fio(&self) -> String {
        let [r, w, t] = &self.0;
        if r == w && w == t {
            r.to_fio()
        } else {
            format!("{},{},{}", r.to_fio(), w.to_fio(), t.to_fio())
        }
    }
}

/// fio's comma form: `A` for every direction, `A,B` reads then writes (trims as
/// writes), `A,B,C`; an empty part takes the first one.
/// fio's comma form: `A` for every direction, `A,B` reads then writes (trims as
/// writes: the last value applies to the directions after it), `A,B,C`; an empty part
/// takes the first one.
fn per_direction<T: Clone>(
    s: &str,
    parse: impl Fn(&str) -> Result<T, OptionError>,
) -> Result<[T; 3], OptionError> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let first = parse(parts.first().copied().unwrap_or(""))?;
    let at = |d: usize| -> Result<T, OptionError> {
        match parts.get(d).or(parts.last()) {
            Some(p) if !p.is_empty() => parse(p),
            _ => Ok(first.clone()),
        }
    };
    Ok([first.clone(), at(1)?, at(2)?])
}

fn parse_split(s: &str) -> Result<BlockSizes, OptionError> {
    let err = || OptionError::Size(s.to_string());
    let mut given = 0u32;
    let mut blanks = 0u32;
    let mut v: Vec<(u64, Option<u32>)> = Vec::new();
    for part in s.split(':').map(str::trim).filter(|p| !p.is_empty()) {
        let (size, pct) = match part.split_once('/') {
            Some((a, b)) if !b.trim().is_empty() => {
                let p: u32 = b.trim().parse().map_err(|_| err())?;
                given = given.checked_add(p).ok_or_else(err)?;
                (parse_size(a)?, Some(p))
            }
            Some((a, _)) => (parse_size(a)?, None),
            None => (parse_size(part)?, None),
        };
        if pct.is_none() {
            blanks += 1;
        }
        if size == 0 {
            return Err(err());
        }
        v.push((size, pct));
    }
    if v.is_empty() || given > 100 {
        return Err(err());
    }
    let share = 100u32
        .saturating_sub(given)
        .checked_div(blanks)
        .unwrap_or(0);
    let v: Vec<(u64, u32)> = v
        .into_iter()
        .map(|(s, p)| (s, p.unwrap_or(share)))
        .collect();
    if v.iter().all(|&(_, p)| p == 0) {
        return Err(err());
    }
    Ok(BlockSizes::Split(v))
}

/// Parses `bssplit`: `4k/50:64k/40:1m/10`, with `,` between the read, write and
/// trim lists (`4k/90:8k/10,64k/100`).
pub fn parse_bssplit(s: &str) -> Result<DirBlockSizes, OptionError> {
    per_direction(s, parse_split).map(DirBlockSizes)
}

/// Parses `bsrange`: `4k-64k`, or `4k-16k,64k-128k` for reads then writes.
pub fn parse_bsrange(s: &str) -> Result<DirBlockSizes, OptionError> {
    per_direction(s, |p| {
        let err = || OptionError::Size(p.to_string());
        let (a, b) = p.split_once('-').ok_or_else(err)?;
        let (min, max) = (parse_size(a)?, parse_size(b)?);
        if min == 0 || min > max {
            return Err(err());
        }
        Ok(BlockSizes::Range { min, max })
    })
    .map(DirBlockSizes)
}

/// fio's `random_distribution`: how random offsets are spread over the range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RandomDistribution {
    /// Uniform (fio's default), with the random map unless `norandommap`.
    Random,
    /// Zipf with exponent `theta`; the hottest blocks are scattered over the range.
    Zipf {
        /// Exponent, > 0.
        theta: f64,
        /// Fraction of the range the hot spot is moved by, `0..1`.
        center: f64,
    },
    /// Pareto: a fraction `h` of the blocks gets `1 - h` of the accesses.
    Pareto {
        /// In `0..1`.
        h: f64,
        /// Fraction of the range the hot spot is moved by, `0..1`.
        center: f64,
    },
    /// Normal around `center` of the range with a standard deviation of
    /// `stddev_pct` percent of the range.
    Normal {
        /// Standard deviation, percent of the range, > 0.
        stddev_pct: f64,
        /// Mean as a fraction of the range (fio's default is the middle).
        center: f64,
    },
    /// fio's `zoned`: consecutive zones, each with its share of the accesses.
    Zoned(crate::zones::Zones),
}

impl RandomDistribution {
    /// fio's spelling.
    pub fn to_fio(&self) -> String {
        match *self {
            RandomDistribution::Random => "random".into(),
            RandomDistribution::Zipf { theta, center } => with_center("zipf", theta, center, 0.0),
            RandomDistribution::Pareto { h, center } => with_center("pareto", h, center, 0.0),
            RandomDistribution::Normal { stddev_pct, center } => {
                with_center("normal", stddev_pct, center, 0.5)
            }
            RandomDistribution::Zoned(z) => z.to_fio(),
        }
    }
}

fn with_center(name: &str, v: f64, center: f64, default: f64) -> String {
    if center == default {
        format!("{name}:{v}")
    } else {
        format!("{name}:{v}:{center}")
    }
}

/// Parses `random_distribution`: `random`, `zipf:THETA`, `pareto:H`,
/// `normal:STDDEV` (percent of the range), each with an optional `:CENTER` (`0..1`), or
/// `zoned:A/R:...` (`zones.rs`).
pub fn parse_random_distribution(s: &str) -> Result<RandomDistribution, OptionError> {
    if let Some(zones) = s.trim().strip_prefix("zoned:") {
        return crate::zones::parse_zones(zones, s).map(RandomDistribution::Zoned);
    }
    let err = || OptionError::Distribution(s.to_string());
    let mut parts = s.trim().split(':');
    let kind = parts.next().unwrap_or("");
    let num = |p: Option<&str>| -> Result<Option<f64>, OptionError> {
        p.map(|v| v.trim().parse::<f64>().map_err(|_| err()))
            .transpose()
    };
    let value = num(parts.next())?;
    let center = num(parts.next())?;
    if parts.next().is_some() || center.is_some_and(|c| !(0.0..1.0).contains(&c)) {
        return Err(err());
    }
    let d = match (kind, value) {
        ("random", None) => RandomDistribution::Random,
        ("zipf", Some(theta)) if theta > 0.0 && theta.is_finite() => RandomDistribution::Zipf {
            theta,
            center: center.unwrap_or(0.0),
        },
        ("pareto", Some(h)) if h > 0.0 && h < 1.0 => RandomDistribution::Pareto {
            h,
            center: center.unwrap_or(0.0),
        },
        ("normal", Some(sd)) if sd > 0.0 && sd.is_finite() => RandomDistribution::Normal {
            stddev_pct: sd,
            center: center.unwrap_or(0.5),
        },
        _ => return Err(err()),
    };
    Ok(d)
}

/// A per-direction limit (read, write, trim); `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirRates(pub [Option<u64>; 3]);

impl DirRates {
    /// fio's spelling.
    pub fn to_fio(&self) -> String {
        let f = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
        let [r, w, t] = self.0;
        if r == w && w == t {
            f(r)
        } else {
            format!("{},{},{}", f(r), f(w), f(t))
        }
    }
}

fn parse_rates(
    s: &str,
    one: impl Fn(&str) -> Result<u64, OptionError>,
) -> Result<DirRates, OptionError> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    // fio's rule for per-direction lists: the last value given applies to the directions
    // after it unless a comma ends the list (`rate=1m` caps all, `rate=500k,1m` caps reads
    // at 500k and writes and trims at 1m, `rate=,1m,` only writes, `rate=1m,` only reads);
    // an empty part is unlimited.
    let mut out = [None; 3];
    for (d, slot) in out.iter_mut().enumerate() {
        let part = parts.get(d).or(parts.last()).copied().unwrap_or("");
        if !part.is_empty() {
            *slot = Some(one(part)?).filter(|&v| v > 0);
        }
    }
    Ok(DirRates(out))
}

/// Parses `rate`: bytes per second per direction (`1m`, `500k,1m`, `,1m`).
pub fn parse_rate(s: &str) -> Result<DirRates, OptionError> {
    parse_rates(s, parse_size)
}

/// Parses `rate_iops`: I/Os per second per direction (`1000`, `500,200`).
pub fn parse_rate_iops(s: &str) -> Result<DirRates, OptionError> {
    parse_rates(s, |p| {
        p.parse().map_err(|_| OptionError::Size(p.to_string()))
    })
}

/// Parses a fio time whose bare number is microseconds (`thinktime`).
pub fn parse_time_us(s: &str) -> Result<Duration, OptionError> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse::<u64>()
            .map(Duration::from_micros)
            .map_err(|_| OptionError::Time(s.to_string()));
    }
    crate::option_values::parse_time(t)
}

/// `verify_pattern`'s bytes, repeated over each block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyPattern(pub Vec<u8>);

/// Parses `verify_pattern`: hex `0xdeadbeef` (bytes in the order written), a decimal
/// number (its little-endian bytes, shortest form), or a quoted string `"abc"`.
pub fn parse_verify_pattern(s: &str) -> Result<VerifyPattern, OptionError> {
    let err = || OptionError::Pattern(s.to_string());
    let t = s.trim();
    let bytes = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(err());
        }
        let padded = if hex.len() % 2 == 1 {
            format!("0{hex}")
        } else {
            hex.to_string()
        };
        (0..padded.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(padded.get(i..i + 2).unwrap_or("0"), 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| err())?
    } else if let Some(q) = t
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| t.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
    {
        q.as_bytes().to_vec()
    } else {
        let v: u64 = t.parse().map_err(|_| err())?;
        let n = (8 - v.leading_zeros() as usize / 8).max(1);
        v.to_le_bytes().get(..n).unwrap_or(&[0]).to_vec()
    };
    if bytes.is_empty() {
        return Err(err());
    }
    Ok(VerifyPattern(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bssplit_parses_shares_directions_and_blanks() {
        let d = parse_bssplit("4k/50:64k/40:1m/10").unwrap();
        let want = BlockSizes::Split(vec![(4096, 50), (65536, 40), (1 << 20, 10)]);
        assert_eq!(d.0, [want.clone(), want.clone(), want]);
        let d = parse_bssplit("4k/90:8k/10,64k").unwrap();
        assert_eq!(d.0[0], BlockSizes::Split(vec![(4096, 90), (8192, 10)]));
        assert_eq!(d.0[1], BlockSizes::Split(vec![(65536, 100)]));
        assert_eq!(d.0[2], d.0[1]);
        // Entries without a share split what is left of 100 %.
        let d = parse_bssplit("4k/40:8k:16k").unwrap();
        assert_eq!(
            d.0[0],
            BlockSizes::Split(vec![(4096, 40), (8192, 30), (16384, 30)])
        );
        assert!(parse_bssplit("4k/60:8k/50").is_err());
        assert!(parse_bssplit("4q/50").is_err());
        assert!(parse_bssplit("").is_err());
    }

    #[test]
    fn bsrange_parses_per_direction() {
        let d = parse_bsrange("4k-16k,64k-128k").unwrap();
        assert_eq!(
            d.0[0],
            BlockSizes::Range {
                min: 4096,
                max: 16384
            }
        );
        assert_eq!(
            d.0[1],
            BlockSizes::Range {
                min: 65536,
                max: 131072
            }
        );
        assert!(parse_bsrange("16k-4k").is_err());
        assert!(parse_bsrange("4k").is_err());
    }

    #[test]
    fn random_distribution_parses_fio_forms() {
        assert_eq!(
            parse_random_distribution("random"),
            Ok(RandomDistribution::Random)
        );
        assert_eq!(
            parse_random_distribution("zipf:1.2"),
            Ok(RandomDistribution::Zipf {
                theta: 1.2,
                center: 0.0
            })
        );
        assert_eq!(
            parse_random_distribution("pareto:0.2:0.5"),
            Ok(RandomDistribution::Pareto {
                h: 0.2,
                center: 0.5
            })
        );
        assert_eq!(
            parse_random_distribution("normal:10"),
            Ok(RandomDistribution::Normal {
                stddev_pct: 10.0,
                center: 0.5
            })
        );
        for bad in [
            "zipf",
            "zipf:0",
            "pareto:1",
            "normal:-1",
            "gauss:3",
            "zipf:1.2:1.5",
        ] {
            assert!(parse_random_distribution(bad).is_err(), "{bad}");
        }
        let z = parse_random_distribution("zipf:1.2:0.25").unwrap();
        assert_eq!(parse_random_distribution(&z.to_fio()), Ok(z));
        let z = parse_random_distribution("zoned:50/5:30/15:20/").unwrap();
        assert_eq!(z.to_fio(), "zoned:50/5:30/15:20/80");
        assert_eq!(parse_random_distribution(&z.to_fio()), Ok(z));
        assert!(parse_random_distribution("zoned:50/5").is_err());
    }

    #[test]
    fn rates_are_per_direction_like_fio() {
        assert_eq!(
            parse_rate("1m").unwrap(),
            DirRates([Some(1 << 20), Some(1 << 20), Some(1 << 20)])
        );
        // The last value applies to the directions after it unless a comma ends the list.
        assert_eq!(
            parse_rate("500k,1m").unwrap(),
            DirRates([Some(500 << 10), Some(1 << 20), Some(1 << 20)])
        );
        assert_eq!(
            parse_rate(",1m").unwrap(),
            DirRates([None, Some(1 << 20), Some(1 << 20)])
        );
        assert_eq!(
            parse_rate(",1m,").unwrap(),
            DirRates([None, Some(1 << 20), None])
        );
        assert_eq!(
            parse_rate_iops("1000,").unwrap(),
            DirRates([Some(1000), None, None])
        );
        assert!(parse_rate_iops("fast").is_err());
    }

    #[test]
    fn thinktime_defaults_to_microseconds() {
        assert_eq!(parse_time_us("250"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_time_us("2ms"), Ok(Duration::from_millis(2)));
        assert!(parse_time_us("2x").is_err());
    }

    #[test]
    fn verify_pattern_forms() {
        assert_eq!(
            parse_verify_pattern("0xdeadbeef").unwrap().0,
            [0xde, 0xad, 0xbe, 0xef]
        );
        assert_eq!(parse_verify_pattern("0xf").unwrap().0, [0x0f]);
        assert_eq!(parse_verify_pattern("\"ab\"").unwrap().0, b"ab");
        assert_eq!(parse_verify_pattern("258").unwrap().0, [2, 1]);
        assert_eq!(parse_verify_pattern("0").unwrap().0, [0]);
        assert!(parse_verify_pattern("0xzz").is_err());
        assert!(parse_verify_pattern("\"\"").is_err());
    }
}
