// SPDX-License-Identifier: Apache-2.0
//! fio's terse output, version 3: one `;`-separated line per job (or group, with
//! group_reporting) of 121 fields: version, fio version, name, group, error; for read
//! then write: KiB, KiB/s, IOPS, runtime, slat/clat/lat min/max/mean/stddev (usec), 20
//! clat percentiles (`P%=usec`, unused ones `0%=0`), bandwidth min/max/share/mean/stddev;
//! then CPU, the 7 depth buckets and the 10 usec and 12 msec latency buckets.

use std::fmt::Write as _;

use super::groups::{Shown, shown_jobs};
use super::num::percentiles;
use super::{FIO_VERSION, GroupStats, cpu_pct, group_stats, pct_dist};
use crate::result::BenchResult;
use crate::stats::{DirStats, RunningStat};

/// Percentile columns in a terse line.
const PERCENTILE_FIELDS: usize = 20;

/// Every job's terse line.
pub fn render_terse(r: &BenchResult) -> String {
    let mut out = String::new();
    let shown = shown_jobs(r);
    for s in &shown {
        out.push_str(&terse_line(s, &group_stats(&shown, s.job.groupid)));
        out.push('\n');
    }
    out
}

/// min;max;mean;stddev in usec (fio's `%llu;%llu;%f;%f` of ns / 1000).
fn lat(out: &mut String, s: &RunningStat) {
    if s.n == 0 {
        out.push_str(";0;0;0.000000;0.000000");
    } else {
        let _ = write!(
            out,
            ";{};{};{:.6};{:.6}",
            s.min / 1000,
            s.max / 1000,
            s.mean() / 1000.0,
            s.stddev() / 1000.0
        );
    }
}

fn dir(out: &mut String, d: &DirStats, runtime_ms: u64, agg: u64, list: &[f64]) {
    let (bw, iops, runt) = if runtime_ms > 0 && d.total_ios > 0 {
        (
            d.io_bytes.saturating_mul(1000) / runtime_ms / 1024,
            (d.total_ios as f64 * 1000.0 / runtime_ms as f64).round(),
            runtime_ms,
        )
    } else {
        (0, 0.0, 0)
    };
    let _ = write!(out, ";{};{bw};{iops:.0};{runt}", d.io_bytes >> 10);
    lat(out, &d.slat);
    lat(out, &d.clat.stat);
    let vals = if d.clat.stat.n > 0 {
        percentiles(&d.clat.hist, list)
    } else {
        Vec::new()
    };
    for i in 0..PERCENTILE_FIELDS {
        match (list.get(i), vals.get(i)) {
            (Some(p), Some(v)) => {
                let _ = write!(out, ";{p:.6}%={}", v / 1000);
            }
            _ => out.push_str(";0%=0"),
        }
    }
    lat(out, &d.lat);
    let b = &d.bw;
    let share = if b.n == 0 {
        0.0
    } else if agg > 1024 {
        (b.mean() * 100.0 / (agg as f64 / 1024.0)).min(100.0)
    } else {
        100.0
    };
    let _ = write!(
        out,
        ";{};{};{share:.6}%;{:.6};{:.6}",
        b.min,
        b.max,
        b.mean(),
        b.stddev()
    );
}

fn terse_line(s: &Shown, g: &GroupStats) -> String {
    let j = &s.job;
    let o = &j.output;
    let st = &o.stats;
    let list = j.options.percentiles();
    let mut out = format!("3;{FIO_VERSION};{};{};{}", j.name, j.groupid, j.errno());
    for (i, d) in st.dirs.iter().enumerate().take(2) {
        let runt = o.dir_runtime_ms.get(i).copied().unwrap_or(0);
        dir(&mut out, d, runt, g.agg[i], list);
    }
    let (usr, sys) = cpu_pct(s);
    let _ = write!(
        out,
        ";{usr:.6}%;{sys:.6}%;{};{};{}",
        o.usage.ctx, o.usage.majf, o.usage.minf
    );
    let depth_total: u64 = st.depth_map.iter().sum();
    for p in pct_dist(&st.depth_map, depth_total, 0.1) {
        let _ = write!(out, ";{p:3.1}%");
    }
    let total: u64 = st.dirs.iter().map(|d| d.total_ios).sum();
    for p in pct_dist(&st.lat_buckets.u, total, 0.01)
        .into_iter()
        .chain(pct_dist(&st.lat_buckets.m, total, 0.01))
    {
        let _ = write!(out, ";{p:3.2}%");
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::engine::IoQueue;
    use crate::mem_queue::MemDevice;
    use crate::options::{BenchOptions, EtaMode, PercentileList, RwMode, SizeSpec};
    use crate::result::NoTarget;

    fn run(o: &BenchOptions) -> BenchResult {
        let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
        let queues: Vec<Box<dyn IoQueue>> = (0..o.numjobs)
            .map(|_| Box::new(dev.queue()) as Box<dyn IoQueue>)
            .collect();
        crate::runner::run_bench(o, queues, &NoTarget, &[], Arc::new(AtomicBool::new(false)))
            .unwrap()
    }

    #[test]
    fn terse_lines_have_fio_v3_fields() {
        let o = BenchOptions {
            name: "tj".into(),
            rw: RwMode::Randread.into(),
            size: Some(SizeSpec::Bytes(1 << 20)),
            numjobs: 2,
            eta: EtaMode::Never,
            percentile_list: Some(PercentileList(vec![50.0, 99.0])),
            ..BenchOptions::default()
        };
        let r = run(&o);
        let t = render_terse(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2);
        let f: Vec<&str> = lines[0].split(';').collect();
        assert_eq!(f.len(), 121, "{}", lines[0]);
        assert_eq!(&f[..5], ["3", "fio-3.33", "tj", "0", "0"]);
        // 1 MiB read in 4 KiB blocks.
        assert_eq!(f[5], "1024");
        assert!(f[17].starts_with("50.000000%="), "{}", f[17]);
        assert!(f[18].starts_with("99.000000%="), "{}", f[18]);
        assert_eq!(f[19], "0%=0");
        // Nothing written.
        assert_eq!(f[46], "0");
        // group_reporting: one line for both jobs, with both jobs' I/O.
        let r = run(&BenchOptions {
            group_reporting: true,
            ..o
        });
        let t = render_terse(&r);
        assert_eq!(t.lines().count(), 1);
        assert_eq!(t.split(';').nth(5), Some("2048"));
    }
}
