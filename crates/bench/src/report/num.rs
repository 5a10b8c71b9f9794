// SPDX-License-Identifier: Apache-2.0
//! fio's number formatting: `num2str` (`2589k`, `1264MiB/s`, `12.3GiB`), the
//! latency unit switch and the percentile computation over a histogram.

use hdrhistogram::Histogram;

/// Unit suffix of a formatted number (fio's `N2S_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// No unit.
    None,
    /// Bytes: `B`.
    Byte,
    /// Bytes per second: `B/s`.
    BytePerSec,
}

fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Formats `num` (in units of `base`) in at most `maxlen` digits with an SI
/// (`pow2 == false`: k, M, G) or IEC (Ki, Mi, Gi) prefix, as fio's `num2str`:
/// integer division by 1000/1024 until it fits, then as many decimals of the
/// last remainder as the width allows.
pub fn num2str(mut num: u64, maxlen: usize, base: u64, pow2: bool, unit: Unit) -> String {
    const SI: [&str; 6] = ["", "k", "M", "G", "T", "P"];
    const IEC: [&str; 6] = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
    let prefixes = if pow2 { IEC } else { SI };
    let unit_str = match unit {
        Unit::None => "",
        Unit::Byte => "B",
        Unit::BytePerSec => "B/s",
    };
    let thousand: u64 = if pow2 { 1024 } else { 1000 };
    let mut post = 0usize;
    let mut b = base;
    while b > 1 {
        b /= thousand;
        post += 1;
    }
    let mut modulo: Option<u64> = None;
    let mut carry = false;
    while post < prefixes.len() {
        if digits(num) <= maxlen {
            break;
        }
        let m = num % thousand;
        modulo = Some(m);
        num /= thousand;
        carry = m >= thousand / 2;
        post += 1;
    }
    let prefix = |p: usize| prefixes.get(p).copied().unwrap_or("");
    let Some(m) = modulo else {
        return format!("{num}{}{unit_str}", prefix(post));
    };
    let len = digits(num);
    if maxlen <= len + 1 {
        if carry {
            num += 1;
        }
        return format!("{num}{}{unit_str}", prefix(post));
    }
    let decimals = maxlen - len - 1;
    let frac = format!("{:.*}", decimals, m as f64 / thousand as f64);
    format!(
        "{num}.{}{}{unit_str}",
        frac.get(2..).unwrap_or("0"),
        prefix(post)
    )
}

/// Chooses fio's unit for a latency line: `(msec)`, `(usec)` or `(nsec)`, and
/// returns the scaled min, max, mean, stddev.
pub fn scale_lat(min: u64, max: u64, mean: f64, dev: f64) -> (&'static str, u64, u64, f64, f64) {
    if min > 2_000_000 && max > 99_999_999 && dev > 1_000_000.0 {
        (
            "msec",
            min / 1_000_000,
            max / 1_000_000,
            mean / 1e6,
            dev / 1e6,
        )
    } else if min > 2000 && max > 99_999 && dev > 1000.0 {
        ("usec", min / 1000, max / 1000, mean / 1e3, dev / 1e3)
    } else {
        ("nsec", min, max, mean, dev)
    }
}

/// The value at each percentile of `list`, fio's way: walking the buckets in
/// order, the first bucket whose cumulative count reaches `p% * N` (value:
/// the bucket's midpoint).
pub fn percentiles(hist: &Histogram<u64>, list: &[f64]) -> Vec<u64> {
    let n = hist.len() as f64;
    let mut out = Vec::with_capacity(list.len());
    if hist.is_empty() {
        return out;
    }
    let mut sum = 0u64;
    let mut last = 0;
    for v in hist.iter_recorded() {
        sum += v.count_since_last_iteration();
        last = hist.median_equivalent(v.value_iterated_to());
        while let Some(p) = list.get(out.len()) {
            if (sum as f64) < p / 100.0 * n {
                break;
            }
            out.push(last);
        }
        if out.len() == list.len() {
            break;
        }
    }
    while out.len() < list.len() {
        out.push(last);
    }
    out
}

/// fio's `clat percentiles (unit):` block for `vals` at `list` (precision 2).
pub fn percentile_block(name: &str, list: &[f64], vals: &[u64]) -> String {
    let minv = vals.iter().copied().min().unwrap_or(0);
    let maxv = vals.iter().copied().max().unwrap_or(0);
    let (unit, scale, divisor) = if minv > 2_000_000 && maxv > 99_999_999 {
        ("msec", 2, 1_000_000)
    } else if minv > 2000 && maxv > 99_999 {
        ("usec", 1, 1000)
    } else {
        ("nsec", 0, 1)
    };
    let time_width = digits(maxv / divisor).max(5);
    let per_line = (80 - 7) / (2 + 10 + time_width);
    let mut s = format!("    {name} percentiles ({unit}):\n     |");
    for (j, (p, v)) in list.iter().zip(vals).enumerate() {
        if j != 0 && j % per_line == 0 {
            s.push_str("     |");
        }
        let mut v = *v;
        for _ in 0..scale {
            v = v.div_ceil(1000);
        }
        let last = j + 1 == list.len().min(vals.len());
        s.push_str(&format!(
            " {p:5.2}th=[{v:>time_width$}]{}",
            if last { '\n' } else { ',' }
        ));
        if last {
            break;
        }
        if j % per_line == per_line - 1 {
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::option_values::DEFAULT_PERCENTILES;

    #[test]
    fn num2str_matches_fio_examples() {
        // 2589k IOPS, 1264MiB/s (1326MB/s), 12.3GiB as in fio's manual.
        assert_eq!(num2str(2_589_123, 4, 1, false, Unit::None), "2589k");
        assert_eq!(
            num2str(1_325_400_064, 4, 1, true, Unit::BytePerSec),
            "1264MiB/s"
        );
        assert_eq!(
            num2str(1_325_400_064, 4, 1, false, Unit::BytePerSec),
            "1325MB/s"
        );
        assert_eq!(num2str(13_207_024_435, 4, 1, true, Unit::Byte), "12.3GiB");
        assert_eq!(num2str(4096, 4, 1, true, Unit::Byte), "4096B");
        assert_eq!(num2str(12_000, 4, 1, true, Unit::BytePerSec), "11.7KiB/s");
        assert_eq!(num2str(3068, 4, 1, false, Unit::None), "3068");
        assert_eq!(num2str(10_300, 4, 1, false, Unit::None), "10.3k");
        assert_eq!(num2str(0, 4, 1024, true, Unit::BytePerSec), "0KiB/s");
        assert_eq!(num2str(105, 6, 1, false, Unit::None), "105");
    }

    #[test]
    fn latency_units_switch_like_fio() {
        assert_eq!(scale_lat(300, 5000, 400.0, 50.0).0, "nsec");
        assert_eq!(
            scale_lat(359_000, 45_445_000, 1_294_120.0, 1_983_670.0).0,
            "usec"
        );
        assert_eq!(
            scale_lat(17_000_000, 107_000_000, 25.97e6, 8.55e6).0,
            "msec"
        );
    }

    #[test]
    fn percentiles_follow_fio_rule() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
        for v in 1..=100u64 {
            h.record(v * 10).unwrap();
        }
        let p = percentiles(&h, &DEFAULT_PERCENTILES);
        assert_eq!(p[0], 10); // 1st of 100 samples
        assert_eq!(p[6], 500); // median
        assert_eq!(p[12], 990); // 99th
        assert_eq!(p[16], 1000);
    }

    #[test]
    fn percentile_block_is_formatted_like_fio() {
        let vals = [
            11584, 11712, 11840, 12096, 12352, 12480, 12608, 12992, 13632, 13888, 15424, 18560,
            23168, 27264, 38656, 43264, 58112,
        ];
        let expected = "    clat percentiles (nsec):\n\
             \x20    |  1.00th=[11584],  5.00th=[11712], 10.00th=[11840], 20.00th=[12096],\n\
             \x20    | 30.00th=[12352], 40.00th=[12480], 50.00th=[12608], 60.00th=[12992],\n\
             \x20    | 70.00th=[13632], 80.00th=[13888], 90.00th=[15424], 95.00th=[18560],\n\
             \x20    | 99.00th=[23168], 99.50th=[27264], 99.90th=[38656], 99.95th=[43264],\n\
             \x20    | 99.99th=[58112]\n";
        assert_eq!(
            percentile_block("clat", &DEFAULT_PERCENTILES, &vals),
            expected
        );
    }

    #[test]
    fn percentile_block_switches_to_usec() {
        let vals = [
            445_000u64, 482_000, 506_000, 553_000, 603_000, 725_000, 1_188_000, 1_254_000,
            1_287_000, 1_319_000, 1_369_000, 1_467_000, 13_435_000, 14_222_000, 18_482_000,
            21_627_000, 28_181_000,
        ];
        let s = percentile_block("clat", &DEFAULT_PERCENTILES, &vals);
        assert!(
            s.starts_with("    clat percentiles (usec):\n     |  1.00th=[  445],  5.00th=[  482],")
        );
        assert!(s.ends_with("     | 99.99th=[28181]\n"));
    }
}
