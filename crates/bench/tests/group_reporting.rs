// SPDX-License-Identifier: Apache-2.0
//! fio's `group_reporting` on two jobs run side by side: the group's bandwidth and IOPS
//! are the jobs' added up (fio's `sum_stat` with `pure_sum`), its `job_runtime` is the
//! sum of the jobs' and each direction's runtime the longest, and "Run status" shows the
//! group as one entry (its minimum and maximum are the total).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use nvmemu_bench::{
    BenchOptions, BenchResult, EtaMode, IoQueue, MemDevice, NoTarget, RwMode, render_json,
    render_text, run_bench,
};
use serde_json::Value;

fn two_jobs() -> BenchResult {
    let dev = MemDevice::new(512, 1 << 12, 1 << 20);
    let o = BenchOptions {
        rw: RwMode::Randread.into(),
        numjobs: 2,
        iodepth: 4,
        runtime: Some(Duration::from_millis(1600)),
        time_based: true,
        eta: EtaMode::Never,
        ..BenchOptions::default()
    };
    let queues: Vec<Box<dyn IoQueue>> = (0..2)
        .map(|_| Box::new(dev.queue()) as Box<dyn IoQueue>)
        .collect();
    run_bench(&o, queues, &NoTarget, &[], Arc::new(AtomicBool::new(false))).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn a_group_adds_up_its_jobs_as_fio_does() {
    let mut r = two_jobs();
    let each: Value = serde_json::from_str(&render_json(&r, false)).unwrap();
    r.options.group_reporting = true;
    let group: Value = serde_json::from_str(&render_json(&r, false)).unwrap();
    let (a, b) = (&each["jobs"][0], &each["jobs"][1]);
    let g = &group["jobs"][0];
    assert_eq!(group["jobs"].as_array().unwrap().len(), 1);
    for key in [
        "bw_min",
        "bw_max",
        "bw_samples",
        "iops_min",
        "iops_max",
        "iops_samples",
    ] {
        assert_eq!(
            f(&g["read"][key]),
            f(&a["read"][key]) + f(&b["read"][key]),
            "{key}"
        );
    }
    for key in ["bw_mean", "iops_mean"] {
        let sum = f(&a["read"][key]) + f(&b["read"][key]);
        assert!((f(&g["read"][key]) - sum).abs() <= sum * 1e-9, "{key}");
    }
    assert!(f(&a["read"]["bw_samples"]) >= 2.0, "{a}");
    assert_eq!(
        f(&g["job_runtime"]),
        f(&a["job_runtime"]) + f(&b["job_runtime"])
    );
    assert_eq!(
        f(&g["read"]["runtime"]),
        f(&a["read"]["runtime"]).max(f(&b["read"]["runtime"]))
    );
    // "Run status": one entry, so one bandwidth and one runtime, as fio prints them.
    let text = render_text(&r);
    let line = text
        .lines()
        .find(|l| l.starts_with("   READ: bw="))
        .unwrap();
    let field = |name: &str| {
        let at = line.find(name).unwrap() + name.len();
        line[at..].split([',', ' ']).next().unwrap().to_owned()
    };
    let range = line.split(", ").nth(1).unwrap();
    let (lo, hi) = range.split_once('-').unwrap();
    assert_eq!(lo, hi.split(' ').next().unwrap(), "{line}");
    let run = field("run=");
    let (lo, hi) = run.trim_end_matches("msec").split_once('-').unwrap();
    assert_eq!(lo, hi, "{line}");
}
