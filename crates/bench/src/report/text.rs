// SPDX-License-Identifier: Apache-2.0
//! fio's normal text report (`show_thread_status_normal`, `show_group_stats`).

use std::fmt::Write as _;

use super::groups::{Shown, group_ids, shown_jobs};
use super::num::{Unit, num2str, percentile_block, percentiles, scale_lat};
use super::{GroupStats, cpu_pct, group_stats, pct_dist};
use crate::result::{BenchResult, JobResult, ctime_utc};
use crate::stats::{DirStats, RunningStat};

const DIR_NAMES: [&str; 3] = ["read", "write", "trim"];
const GROUP_NAMES: [&str; 3] = ["   READ", "  WRITE", "   TRIM"];
const LAT_RANGES: [&str; 12] = [
    "2=", "4=", "10=", "20=", "50=", "100=", "250=", "500=", "750=", "1000=", "2000=", ">=2000=",
];

fn lat_line(out: &mut String, name: &str, s: &RunningStat) {
    if s.n == 0 {
        return;
    }
    let (unit, min, max, mean, dev) = scale_lat(s.min, s.max, s.mean(), s.stddev());
    let _ = writeln!(
        out,
        "    {name} ({unit}): min={}, max={}, avg={mean:5.2}, stdev={dev:5.2}",
        num2str(min, 6, 1, false, Unit::None),
        num2str(max, 6, 1, false, Unit::None)
    );
}

fn sample_line_bw(out: &mut String, bw: &RunningStat, agg_bytes: u64) {
    if bw.n == 0 {
        return;
    }
    let mean = bw.mean();
    let per = if agg_bytes > 1024 {
        (mean * 100.0 / (agg_bytes as f64 / 1024.0)).min(100.0)
    } else {
        100.0
    };
    let (unit, min, max, avg, dev) = if mean > 1024.0 * 1024.0 {
        (
            "MiB",
            bw.min / 1024,
            bw.max / 1024,
            mean / 1024.0,
            bw.stddev() / 1024.0,
        )
    } else {
        ("KiB", bw.min, bw.max, mean, bw.stddev())
    };
    let _ = writeln!(
        out,
        "   bw ({unit:>5}/s): min={min:5}, max={max:5}, per={per:3.2}%, avg={avg:5.2}, stdev={dev:5.2}, samples={}",
        bw.n
    );
}

fn dir_status(
    out: &mut String,
    name: &str,
    d: &DirStats,
    runtime_ms: u64,
    agg_bytes: u64,
    list: &[f64],
) {
    let runt = runtime_ms.max(1);
    let bw = d.io_bytes.saturating_mul(1000) / runt;
    let iops = d.total_ios.saturating_mul(1000) / runt;
    // fio counts zone resets on every write line; nvmemu's namespaces are not zoned.
    let zones = if name == "write" {
        "; 0 zone resets"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "  {name}: IOPS={}, BW={} ({})({}/{runtime_ms}msec){zones}",
        num2str(iops, 4, 1, false, Unit::None),
        num2str(bw, 4, 1, true, Unit::BytePerSec),
        num2str(bw, 4, 1, false, Unit::BytePerSec),
        num2str(d.io_bytes, 4, 1, true, Unit::Byte)
    );
    lat_line(out, "slat", &d.slat);
    lat_line(out, "clat", &d.clat.stat);
    lat_line(out, " lat", &d.lat);
    if d.clat.stat.n > 0 {
        let vals = percentiles(&d.clat.hist, list);
        out.push_str(&percentile_block("clat", list, &vals));
    }
    sample_line_bw(out, &d.bw, agg_bytes);
    if d.iops.n > 0 {
        let i = &d.iops;
        let _ = writeln!(
            out,
            "   iops        : min={:5}, max={:5}, avg={:5.2}, stdev={:5.2}, samples={}",
            i.min,
            i.max,
            i.mean(),
            i.stddev(),
            i.n
        );
    }
}

fn lat_dist(out: &mut String, unit: &str, counts: &[u64], total: u64) {
    let mut line = 0;
    let mut shown = false;
    for (range, pct) in LAT_RANGES.iter().zip(pct_dist(counts, total, 0.01)) {
        if pct <= 0.0 {
            continue;
        }
        if line == 0 {
            if shown {
                out.push('\n');
            }
            let _ = write!(out, "  lat ({unit})   : ");
        } else {
            out.push_str(", ");
        }
        shown = true;
        let _ = write!(out, "{range}{pct:3.2}%");
        line = (line + 1) % 5;
    }
    if shown {
        out.push('\n');
    }
}

fn dist7(labels: [&str; 7], counts: &[u64], total: u64) -> String {
    labels
        .iter()
        .zip(pct_dist(counts, total, 0.1))
        .map(|(l, p)| format!("{l}={p:3.1}%"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn job_status(out: &mut String, shown: &Shown, g: &GroupStats) {
    let (j, jobs): (&JobResult, u32) = (&shown.job, shown.jobs);
    let o = &j.output;
    let st = &o.stats;
    let time = ctime_utc(j.job_start_ms / 1000 + o.elapsed_ms / 1000);
    match j.error_text().filter(|_| j.errno() != 0) {
        None => {
            let _ = writeln!(
                out,
                "{}: (groupid={}, jobs={jobs}): err={:2}: pid={}: {time}",
                j.name,
                j.groupid,
                j.errno(),
                j.pid
            );
        }
        Some(e) => {
            let _ = writeln!(
                out,
                "{}: (groupid={}, jobs={jobs}): err={:2} ({e}): pid={}: {time}",
                j.name,
                j.groupid,
                j.errno(),
                j.pid
            );
        }
    }
    for (i, d) in st.dirs.iter().enumerate() {
        if d.io_bytes > 0 {
            let agg = g.agg.get(i).copied().unwrap_or(0);
            dir_status(
                out,
                DIR_NAMES.get(i).copied().unwrap_or("read"),
                d,
                o.dir_runtime_ms.get(i).copied().unwrap_or(0),
                agg,
                j.options.percentiles(),
            );
        }
    }
    let total: u64 = st.dirs.iter().map(|d| d.total_ios).sum();
    lat_dist(out, "nsec", &st.lat_buckets.n, total);
    lat_dist(out, "usec", &st.lat_buckets.u, total);
    lat_dist(out, "msec", &st.lat_buckets.m, total);
    let (usr, sys) = cpu_pct(shown);
    let _ = writeln!(
        out,
        "  cpu          : usr={usr:3.2}%, sys={sys:3.2}%, ctx={}, majf={}, minf={}",
        o.usage.ctx, o.usage.majf, o.usage.minf
    );
    let depth_total: u64 = st.depth_map.iter().sum();
    let _ = writeln!(
        out,
        "  IO depths    : {}",
        dist7(
            ["1", "2", "4", "8", "16", "32", ">=64"],
            &st.depth_map,
            depth_total
        )
    );
    let sub = ["0", "4", "8", "16", "32", "64", ">=64"];
    let _ = writeln!(
        out,
        "     submit    : {}",
        dist7(sub, &st.submit_map, st.total_submit)
    );
    let _ = writeln!(
        out,
        "     complete  : {}",
        dist7(sub, &st.complete_map, st.total_complete)
    );
    let [r_ios, w_ios, t_ios] = st.dirs.each_ref().map(|d| d.total_ios);
    let _ = writeln!(
        out,
        "     issued rwts: total={r_ios},{w_ios},{t_ios},0 short=0,0,0,0 dropped=0,0,0,0"
    );
    let _ = writeln!(
        out,
        "     latency   : target=0, window=0, percentile=100.00%, depth={}",
        j.options.iodepth
    );
    if j.options.verify != crate::options::VerifyMode::Off
        || j.options.workload.verify_pattern.is_some()
    {
        let v = &o.verify;
        let _ = writeln!(
            out,
            "     verify    : errors={}, verified={} ({} blocks), unverifiable={}",
            v.errors, v.verified_ios, v.verified_blocks, v.unverifiable_ios
        );
        for f in &v.first {
            let _ = writeln!(out, "     verify    : {f}");
        }
    }
}

/// The whole normal report: every job (or group, with group_reporting), then each
/// group's totals.
pub fn render_text(r: &BenchResult) -> String {
    let mut out = String::new();
    let shown = shown_jobs(r);
    for s in &shown {
        job_status(&mut out, s, &group_stats(&shown, s.job.groupid));
    }
    for gid in group_ids(r) {
        group_status(&mut out, gid, &group_stats(&shown, gid));
    }
    machine_status(&mut out, r);
    out
}

/// fio's "Run status group N (all jobs):" block.
fn group_status(out: &mut String, gid: u32, g: &GroupStats) {
    let _ = writeln!(out, "\nRun status group {gid} (all jobs):");
    for (i, group_name) in GROUP_NAMES.iter().enumerate() {
        let (Some(&max_run), Some(&min_run)) = (g.max_run.get(i), g.min_run.get(i)) else {
            continue;
        };
        if max_run == 0 {
            continue;
        }
        let f = |v: u64, p: bool, u: Unit| num2str(v, 4, 1, p, u);
        let (agg, min_bw, max_bw, io) = (g.agg[i], g.min_bw[i], g.max_bw[i], g.io_bytes[i]);
        let _ = writeln!(
            out,
            "{}: bw={} ({}), {}-{} ({}-{}), io={} ({}), run={min_run}-{max_run}msec",
            group_name,
            f(agg, true, Unit::BytePerSec),
            f(agg, false, Unit::BytePerSec),
            f(min_bw, true, Unit::BytePerSec),
            f(max_bw, true, Unit::BytePerSec),
            f(min_bw, false, Unit::BytePerSec),
            f(max_bw, false, Unit::BytePerSec),
            f(io, true, Unit::Byte),
            f(io, false, Unit::Byte),
        );
    }
}

/// Our additions after fio's report: the target's cost and the machine.
fn machine_status(out: &mut String, r: &BenchResult) {
    if let Some(t) = &r.target {
        let _ = writeln!(
            out,
            "\nTarget: poller busy={:.2}%, target ns/io={:.1}, cores={}",
            t.poller_busy_pct,
            t.target_ns_per_io,
            t.cores.len()
        );
    }
    let m = &r.machine;
    let cpus = |v: &[Option<usize>]| {
        v.iter()
            .map(|c| c.map_or_else(|| "-".to_string(), |c| c.to_string()))
            .collect::<Vec<_>>()
            .join(",")
    };
    let tc: Vec<Option<usize>> = m.target_cpus.iter().copied().map(Some).collect();
    let _ = writeln!(
        out,
        "\nMachine: {}, cpus={}, jobs on [{}], target on [{}]",
        m.cpu_model,
        m.cpus,
        cpus(&m.jobs_cpus),
        cpus(&tc)
    );
    if !m.numa.is_empty() {
        let _ = writeln!(out, "NUMA: {}", m.numa);
    }
}
