// SPDX-License-Identifier: Apache-2.0
//! fio's JSON and JSON+ report (`show_thread_status_json`, `add_ddir_status_json`):
//! fio's keys in fio's order (serde_json keeps insertion order), then our additions:
//! per job `verify_errors`, `verify`, `cpu`, `time_series`, `error_text`; at the top
//! `nvmemu version`, `target` and `machine`. `"fio version"` is [`FIO_VERSION`].
//! `disk_util` is left out, as fio leaves it out when no kernel block device is behind
//! the job (ioengine=null): a vfio-user controller has none. A job file's options are
//! listed as written, as fio does: `[global]` once under `global options`, each job's
//! own section under its `job options`; command-line jobs list their effective options.

use serde_json::{Map, Value, json};

use super::groups::{Shown, shown_jobs};
use super::num::percentiles;
use super::{FIO_VERSION, GroupStats, cpu_pct, group_stats, pct_dist};
use crate::result::{BenchResult, JobResult};
use crate::stats::{DirStats, LatStat, RunningStat};

/// fio's min/max/mean/stddev/N object.
fn moments(s: &RunningStat) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("min".into(), json!(s.min));
    o.insert("max".into(), json!(s.max));
    o.insert("mean".into(), json!(s.mean()));
    o.insert("stddev".into(), json!(s.stddev()));
    o.insert("N".into(), json!(s.n));
    o
}

/// The moments plus fio's percentiles (and, for JSON+, the histogram bins).
fn lat_json(l: &LatStat, bins: bool, list: &[f64]) -> Value {
    let s = &l.stat;
    let mut o = moments(s);
    if s.n > 0 {
        let vals = percentiles(&l.hist, list);
        let p: Map<String, Value> = list
            .iter()
            .zip(vals)
            .map(|(p, v)| (format!("{p:.6}"), json!(v)))
            .collect();
        o.insert("percentile".into(), Value::Object(p));
        if bins {
            let b: Map<String, Value> = l
                .hist
                .iter_recorded()
                .map(|v| {
                    (
                        l.hist.median_equivalent(v.value_iterated_to()).to_string(),
                        json!(v.count_at_value()),
                    )
                })
                .collect();
            o.insert("bins".into(), Value::Object(b));
        }
    }
    Value::Object(o)
}

fn dir_json(d: &DirStats, runtime_ms: u64, agg: u64, bins: bool, list: &[f64]) -> Value {
    let (bw_bytes, iops) = if runtime_ms > 0 && d.total_ios > 0 {
        (
            d.io_bytes.saturating_mul(1000) / runtime_ms,
            d.total_ios as f64 * 1000.0 / runtime_ms as f64,
        )
    } else {
        (0, 0.0)
    };
    let runtime = if d.total_ios > 0 { runtime_ms } else { 0 };
    let bw_mean = d.bw.mean();
    let bw_agg = if d.bw.n == 0 {
        0.0
    } else if agg > 1024 {
        (bw_mean * 100.0 / (agg as f64 / 1024.0)).min(100.0)
    } else {
        100.0
    };
    json!({
        "io_bytes": d.io_bytes,
        "io_kbytes": d.io_bytes >> 10,
        "bw_bytes": bw_bytes,
        "bw": bw_bytes / 1024,
        "iops": iops,
        "runtime": runtime,
        "total_ios": d.total_ios,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": Value::Object(moments(&d.slat)),
        "clat_ns": lat_json(&d.clat, bins, list),
        "lat_ns": Value::Object(moments(&d.lat)),
        "bw_min": d.bw.min,
        "bw_max": d.bw.max,
        "bw_agg": bw_agg,
        "bw_mean": bw_mean,
        "bw_dev": d.bw.stddev(),
        "bw_samples": d.bw.n,
        "iops_min": d.iops.min,
        "iops_max": d.iops.max,
        "iops_mean": d.iops.mean(),
        "iops_stddev": d.iops.stddev(),
        "iops_samples": d.iops.n,
    })
}

/// Our addition: each direction's 500 ms samples (`t_ms`, `iops`, `clat_mean_ns`), which
/// `--plot` and `nvmemu plot` draw over time.
fn time_series(dirs: &[DirStats]) -> Value {
    let mut o = Map::new();
    for (name, d) in ["read", "write"].iter().zip(dirs) {
        if d.series.is_empty() {
            continue;
        }
        let col = |f: fn(&crate::stats::SeriesPoint) -> u64| -> Vec<u64> {
            d.series.iter().map(f).collect()
        };
        o.insert(
            (*name).to_string(),
            json!({
                "t_ms": col(|p| p.t_ms),
                "iops": col(|p| p.iops),
                "clat_mean_ns": col(|p| p.clat_ns),
            }),
        );
    }
    Value::Object(o)
}

fn keyed(labels: &[&str], vals: Vec<f64>) -> Value {
    Value::Object(
        labels
            .iter()
            .zip(vals)
            .map(|(l, v)| ((*l).to_string(), json!(v)))
            .collect(),
    )
}

fn job_json(shown: &Shown, g: &GroupStats, bins: bool) -> Value {
    let j: &JobResult = &shown.job;
    let o = &j.output;
    let st = &o.stats;
    let list = j.options.percentiles();
    let opts: Map<String, Value> = match &j.written_options {
        Some(written) => written.iter().map(|(k, v)| (k.clone(), json!(v))).collect(),
        None => j
            .options
            .job_options()
            .into_iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect(),
    };
    let empty = DirStats::default();
    let runt = o.dir_runtime_ms;
    let (usr, sys) = cpu_pct(shown);
    let total: u64 = st.dirs.iter().map(|d| d.total_ios).sum();
    let depth_total: u64 = st.depth_map.iter().sum();
    let ranges = [
        "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
    ];
    let sub = ["0", "4", "8", "16", "32", "64", ">=64"];
    let first: Vec<Value> = o
        .verify
        .first
        .iter()
        .map(|f| json!(f.to_string()))
        .collect();
    json!({
        "jobname": j.name,
        "groupid": j.groupid,
        "job_start": j.job_start_ms,
        "error": j.errno(),
        "eta": 0,
        "elapsed": o.elapsed_ms.div_ceil(1000),
        "job options": Value::Object(opts),
        "read": dir_json(&st.dirs[0], runt[0], g.agg[0], bins, list),
        "write": dir_json(&st.dirs[1], runt[1], g.agg[1], bins, list),
        "trim": dir_json(&st.dirs[2], runt[2], g.agg[2], bins, list),
        "sync": { "total_ios": 0, "lat_ns": Value::Object(moments(&empty.lat)) },
        "job_runtime": shown.job_runtime_ms,
        "usr_cpu": usr,
        "sys_cpu": sys,
        "ctx": o.usage.ctx,
        "majf": o.usage.majf,
        "minf": o.usage.minf,
        "iodepth_level": keyed(&["1", "2", "4", "8", "16", "32", ">=64"], pct_dist(&st.depth_map, depth_total, 0.1)),
        "iodepth_submit": keyed(&sub, pct_dist(&st.submit_map, st.total_submit, 0.1)),
        "iodepth_complete": keyed(&sub, pct_dist(&st.complete_map, st.total_complete, 0.1)),
        "latency_ns": keyed(&ranges[..10], pct_dist(&st.lat_buckets.n, total, 0.01)),
        "latency_us": keyed(&ranges[..10], pct_dist(&st.lat_buckets.u, total, 0.01)),
        "latency_ms": keyed(&ranges, pct_dist(&st.lat_buckets.m, total, 0.01)),
        "latency_depth": j.options.iodepth,
        "latency_target": 0,
        "latency_percentile": 100.0,
        "latency_window": 0,
        "verify_errors": o.verify.errors,
        "verify": {
            "verified_ios": o.verify.verified_ios,
            "verified_blocks": o.verify.verified_blocks,
            "unverifiable_ios": o.verify.unverifiable_ios,
            "first_errors": first,
        },
        "cpu": j.cpu,
        "time_series": time_series(&st.dirs),
        "error_text": j.error_text().filter(|_| j.errno() != 0),
    })
}

/// The JSON (or, with `plus`, JSON+) report.
pub fn render_json(r: &BenchResult, plus: bool) -> String {
    let shown = shown_jobs(r);
    let jobs: Vec<Value> = shown
        .iter()
        .map(|s| job_json(s, &group_stats(&shown, s.job.groupid), plus))
        .collect();
    let target = r.target.as_ref().map(|t| {
        let cores: Vec<Value> = t
            .cores
            .iter()
            .map(|c| json!({"cpu": c.cpu, "busy_pct": c.busy_pct, "busy_ns": c.busy_ns, "commands": c.commands}))
            .collect();
        json!({
            "poller_busy_pct": t.poller_busy_pct,
            "target_ns_per_io": t.target_ns_per_io,
            "cores": cores,
        })
    });
    let m = &r.machine;
    let mut root = json!({
        "fio version": FIO_VERSION,
        "timestamp": r.timestamp_ms / 1000,
        "timestamp_ms": r.timestamp_ms,
        "time": crate::result::ctime_utc(r.timestamp_ms / 1000),
    });
    if let (Some(global), Some(o)) = (&r.global_options, root.as_object_mut()) {
        let g: Map<String, Value> = global.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        o.insert("global options".into(), Value::Object(g));
    }
    let rest = json!({
        "jobs": jobs,
        "nvmemu version": r.version,
        "target": target,
        "machine": {
            "cpu_model": m.cpu_model,
            "cpus": m.cpus,
            "jobs_cpus": m.jobs_cpus,
            "target_cpus": m.target_cpus,
            "namespace": m.namespace,
            "numa": m.numa,
        },
    });
    if let (Some(o), Value::Object(rest)) = (root.as_object_mut(), rest) {
        o.extend(rest);
    }
    serde_json::to_string_pretty(&root).unwrap_or_else(|_| "{}".into())
}
