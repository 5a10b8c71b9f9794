// SPDX-License-Identifier: Apache-2.0
//! A latency model as a client sees it: `nvmemu bench` at QD1 against a namespace with the
//! `tlc` preset. A benchmark-style check with wide bounds, never a tight timing assertion:
//! nothing completes before it is due, so the client's median cannot fall below the
//! model's; a loaded machine only adds to it (the upper bound is five times). The exact
//! schedule's determinism is checked by the model's own unit tests.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};

use nvmemu_bdev::model::{Model, OpClass, preset};
use serde_json::Value;

/// The client's median 4 KiB random-read completion latency at QD1, in microseconds.
fn client_p50_us(ns: &str) -> f64 {
    let out = Command::new(env!("CARGO_BIN_EXE_nvmemu"))
        .stdin(Stdio::null())
        .args(["bench", "--eta=never", "--output-format=json", "--name=qd1"])
        .args([
            "--rw=randread",
            "--bs=4k",
            "--iodepth=1",
            "--runtime=2",
            "--time_based",
        ])
        .arg(format!("--ns={ns}"))
        .output()
        .expect("nvmemu runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p50 = &j["jobs"][0]["read"]["clat_ns"]["percentile"]["50.000000"];
    p50.as_f64().unwrap() / 1000.0
}

/// The model's own median read service time, in microseconds (from its seeded schedule).
fn model_p50_us(name: &str) -> f64 {
    let mut m = Model::new(&preset(name, 1).unwrap());
    let mut s: Vec<u64> = (0..20_001)
        .map(|_| m.service_ns(OpClass::Read, 4096))
        .collect();
    s.sort_unstable();
    s[10_000] as f64 / 1000.0
}

#[test]
fn qd1_reads_take_the_modelled_time() {
    let model = model_p50_us("tlc");
    let client = client_p50_us("malloc:size=16M,model=tlc,seed=1");
    assert!(
        client >= model * 0.9 && client <= model * 5.0,
        "client p50 {client:.1} us, model p50 {model:.1} us"
    );
}
