// SPDX-License-Identifier: Apache-2.0
//! Target-side timing end to end: `nvmemu serve` with a command-line namespace, our driver
//! as the client, and `bdev_enable_histogram` / `bdev_get_histogram` /
//! `nvmemu_get_latency_breakdown` / `nvmemu stat` over the RPC socket. Counts are checked
//! against the commands the client itself submitted.

#![allow(clippy::cast_possible_truncation)] // test patterns wrap on purpose

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use nvmemu_driver::{AttachedController, DmaBuf, IoQpair};
use nvmemu_rpc::{Client, ClientError};
use nvmemu_spec::{Lba, Nsid};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_nvmemu");
/// The bdev of the first `--ns` of `nvmemu serve`.
const BDEV: &str = "ns0n1";

struct Serve {
    child: Child,
    dir: tempfile::TempDir,
}

impl Serve {
    fn start() -> Serve {
        Serve::start_ns("malloc:size=8M,lba=512")
    }

    /// `nvmemu serve` with the namespace `ns` (an `--ns` spec).
    fn start_ns(ns: &str) -> Serve {
        let dir = tempfile::tempdir().expect("tempdir");
        let traddr = dir.path().join("ctrl0");
        std::fs::create_dir(&traddr).expect("socket dir");
        let child = Command::new(BIN)
            .arg("serve")
            .arg("-r")
            .arg(dir.path().join("rpc.sock"))
            .arg("--socket-dir")
            .arg(&traddr)
            .args(["-m", "0x1", "--ns", ns])
            .stdin(Stdio::null())
            .spawn()
            .expect("nvmemu serve starts");
        let s = Serve { child, dir };
        common::wait_for_rpc_socket(&s.sock());
        s
    }

    fn sock(&self) -> PathBuf {
        self.dir.path().join("rpc.sock")
    }

    fn traddr(&self) -> PathBuf {
        self.dir.path().join("ctrl0")
    }

    fn call(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        call(&self.sock(), method, params)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call(sock: &Path, method: &str, params: Value) -> Result<Value, ClientError> {
    let mut c = Client::connect(sock, Duration::from_secs(30)).expect("connect");
    c.call(method, params)
}

/// The driver with its one queue pair and two buffers.
struct Host {
    c: AttachedController,
    q: IoQpair,
    w: DmaBuf,
    r: DmaBuf,
}

fn host(s: &Serve) -> Host {
    let mut c = AttachedController::attach(&s.traddr(), common::opts(1)).expect("driver attaches");
    let q = c.take_qpair().expect("queue pair");
    let w = c.alloc_dma(4096).expect("DMA buffer");
    let r = c.alloc_dma(4096).expect("DMA buffer");
    Host { c, q, w, r }
}

/// `n` writes of 4 KiB, each read back and compared: `2 * n` commands.
fn verified_io(h: &mut Host, n: u64, seed: u8) -> u64 {
    let Host { q, w, r, .. } = h;
    for i in 0..n {
        let data: Vec<u8> = (0..4096u64).map(|b| (b + i) as u8 ^ seed).collect();
        w.copy_from(0, &data).expect("fill");
        let lba = Lba((i % 1024) * 8);
        q.write_blocking(Nsid(1), lba, 8, w).expect("write");
        q.read_blocking(Nsid(1), lba, 8, r).expect("read");
        let mut back = vec![0u8; 4096];
        r.copy_to(0, &mut back).expect("read back");
        assert!(back == data, "block {i} read back differs");
    }
    2 * n
}

fn histogram_count(s: &Serve) -> u64 {
    let h = s
        .call("bdev_get_histogram", json!({"name": BDEV}))
        .expect("bdev_get_histogram");
    let raw = base64::engine::general_purpose::STANDARD
        .decode(h["histogram"].as_str().expect("histogram string"))
        .expect("base64");
    let g = h["granularity"].as_u64().expect("granularity");
    assert_eq!(h["bucket_shift"].as_u64(), Some(g));
    assert_eq!(h["min_range"].as_u64(), Some(0));
    assert_eq!(h["max_range"].as_u64(), Some(64 - g));
    assert!(h["tsc_rate"].as_u64().expect("tsc_rate") > 0);
    assert_eq!(raw.len() as u64, ((65 - g) << g) * 8);
    raw.chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .sum()
}

fn layer<'a>(layers: &'a Value, name: &str) -> &'a Value {
    layers
        .as_array()
        .expect("layers array")
        .iter()
        .find(|l| l["layer"] == name)
        .unwrap_or_else(|| panic!("layer {name} missing in {layers}"))
}

#[test]
fn histograms_count_exactly_the_commands_the_client_submitted() {
    let s = Serve::start();
    let mut c = host(&s);
    // Not enabled yet: empty buckets (as SPDK answers); an unknown bdev is ENODEV.
    assert_eq!(histogram_count(&s), 0);
    let e = s.call("bdev_get_histogram", json!({"name": "nope"}));
    assert!(matches!(e, Err(ClientError::Rpc(e)) if e.code == -19));
    let e = s.call(
        "bdev_enable_histogram",
        json!({"name": "nope", "enable": true}),
    );
    assert!(matches!(e, Err(ClientError::Rpc(e)) if e.code == -19));
    // Commands before enabling are not counted.
    verified_io(&mut c, 5, 1);
    let on = s.call(
        "bdev_enable_histogram",
        json!({"name": BDEV, "enable": true}),
    );
    assert_eq!(on.unwrap(), json!(true));
    assert_eq!(histogram_count(&s), 0);
    let submitted = verified_io(&mut c, 100, 2);
    assert_eq!(histogram_count(&s), submitted);

    let b = s
        .call("nvmemu_get_latency_breakdown", json!({}))
        .expect("breakdown");
    let ctrl = &b["controllers"][0];
    assert_eq!(ctrl["timing"], json!(true));
    assert_eq!(ctrl["untimed"], json!(0));
    for name in [
        "queued",
        "backend",
        "complete",
        "interrupt",
        "total",
        "sq_wait_bound",
    ] {
        let l = layer(&ctrl["layers"], name);
        assert_eq!(l["count"].as_u64(), Some(submitted), "{name}");
        let ns = |key: &str| {
            l[key]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: no {key}: {l}"))
        };
        let (p50, p99, max) = (ns("p50_ns"), ns("p99_ns"), ns("max_ns"));
        assert!(p50 <= p99 && p99 <= max, "{l}");
    }
    // The layers add up to the target total (each sum is converted from ticks on its own,
    // so allow a nanosecond of rounding per layer).
    let sum = |n: &str| layer(&ctrl["layers"], n)["sum_ns"].as_u64().unwrap();
    let parts = sum("queued") + sum("backend") + sum("complete") + sum("interrupt");
    assert!(
        parts.abs_diff(sum("total")) <= 4,
        "{parts} vs {}",
        sum("total")
    );
    assert!(sum("backend") > 0);
    // Per queue and namespace: the same commands.
    let q = &ctrl["queues"][0];
    assert_eq!(q["qid"], json!(1));
    assert_eq!(
        layer(&q["layers"], "total")["count"].as_u64(),
        Some(submitted)
    );
    // QD1 client: every look found exactly one command.
    assert_eq!(q["depth_mean"].as_f64(), Some(1.0));
    let ns = &ctrl["namespaces"][0];
    assert_eq!(
        (ns["nsid"].clone(), ns["bdev"].clone()),
        (json!(1), json!(BDEV))
    );
    assert_eq!(
        layer(&ns["layers"], "total")["count"].as_u64(),
        Some(submitted)
    );
    assert!(!b["pollers"].as_array().unwrap().is_empty());

    // Disabling drops the histogram; enabling again starts from zero.
    s.call(
        "bdev_enable_histogram",
        json!({"name": BDEV, "enable": false}),
    )
    .unwrap();
    assert_eq!(histogram_count(&s), 0);
    let b = s.call("nvmemu_get_latency_breakdown", json!({})).unwrap();
    assert_eq!(b["controllers"][0]["timing"], json!(false));
    s.call(
        "bdev_enable_histogram",
        json!({"name": BDEV, "enable": true}),
    )
    .unwrap();
    let more = verified_io(&mut c, 7, 3);
    assert_eq!(histogram_count(&s), more);
    drop(c.q);
    c.c.shutdown().unwrap();
    // The client is gone and its queues deleted: what was timed on them is still there.
    let b = s.call("nvmemu_get_latency_breakdown", json!({})).unwrap();
    let ctrl = &b["controllers"][0];
    assert_eq!(
        layer(&ctrl["layers"], "total")["count"].as_u64(),
        Some(more)
    );
    let q = &ctrl["queues"][0];
    assert_eq!(
        (q["qid"].clone(), q["commands"].clone()),
        (json!(1), json!(0))
    );
    assert_eq!(layer(&q["layers"], "total")["count"].as_u64(), Some(more));
    assert_eq!(histogram_count(&s), more);
}

#[test]
fn switching_timing_under_load_loses_no_command() {
    let s = Serve::start();
    let mut c = host(&s);
    let stop = AtomicBool::new(false);
    let sock = s.sock();
    let toggles = std::thread::scope(|scope| {
        let toggler = scope.spawn(|| {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let on = n.is_multiple_of(2);
                call(
                    &sock,
                    "bdev_enable_histogram",
                    json!({"name": BDEV, "enable": on}),
                )
                .expect("toggle");
                n += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            n
        });
        // Every write is read back and compared: a lost command fails here (the driver's
        // wait times out), a doubled or misplaced one fails the comparison.
        verified_io(&mut c, 400, 4);
        stop.store(true, Ordering::Relaxed);
        toggler.join().expect("toggler")
    });
    assert!(
        toggles >= 2,
        "the histogram was switched while I/O ran ({toggles})"
    );
    // Left in a known state: on, fresh, exact again.
    s.call(
        "bdev_enable_histogram",
        json!({"name": BDEV, "enable": false}),
    )
    .unwrap();
    s.call(
        "bdev_enable_histogram",
        json!({"name": BDEV, "enable": true}),
    )
    .unwrap();
    let n = verified_io(&mut c, 20, 5);
    assert_eq!(histogram_count(&s), n);
    drop(c.q);
    c.c.shutdown().unwrap();
}

#[test]
fn stat_prints_one_json_report_per_interval_with_the_commands_of_each() {
    let s = Serve::start();
    let mut c = host(&s);
    s.call(
        "bdev_enable_histogram",
        json!({"name": BDEV, "enable": true}),
    )
    .unwrap();
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|scope| {
        let io = scope.spawn(|| {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += verified_io(&mut c, 10, 6);
            }
            n
        });
        let out = Command::new(BIN)
            .arg("stat")
            .arg("-s")
            .arg(s.sock())
            .args(["-i", "0.3", "--count", "2", "--output-format=json"])
            .output()
            .expect("nvmemu stat runs");
        stop.store(true, Ordering::Relaxed);
        assert!(io.join().expect("io thread") > 0);
        out
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let reports: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON report"))
        .collect();
    assert_eq!(reports.len(), 2, "{text}");
    for r in &reports {
        assert!(r["interval_s"].as_f64().unwrap() > 0.2);
        let ctrl = &r["controllers"][0];
        assert!(ctrl["iops"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(ctrl["timing"], json!(true));
        let total = &ctrl["layers"][0];
        assert_eq!(total["layer"], json!("total"));
        assert!(total["commands"].as_u64().unwrap() > 0);
        assert!(total["mean_ns"].as_f64().unwrap() > 0.0);
        assert!(ctrl["queue_depth"].as_f64().unwrap() >= 1.0);
        let ns = &r["namespaces"][0];
        assert_eq!(ns["bdev"], json!(BDEV));
        assert!(ns["write_iops"].as_f64().unwrap() > 0.0);
        assert_eq!(r["pollers"].as_array().unwrap().len(), 1);
        let group = &r["poll_groups"][0];
        assert_eq!(group["name"], json!("nvmf_tgt_poll_group_000"), "{r}");
        assert!(group["iops"].as_f64().unwrap() > 0.0, "{r}");
        assert!(group["io_qpairs"].as_u64().unwrap() >= 1, "{r}");
    }
    // Bad arguments: one line, non-zero exit.
    let bad = Command::new(BIN)
        .arg("stat")
        .arg("-s")
        .arg(s.sock())
        .args(["-i", "0"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert_eq!(String::from_utf8_lossy(&bad.stderr).lines().count(), 1);
    drop(c.q);
    c.c.shutdown().unwrap();
}

/// The lower end of each bucket of `bdev_get_histogram`'s answer `h`, in ns at its
/// `tsc_rate`, with the bucket's count (SPDK's layout, `histogram_data.h`).
fn buckets_ns(h: &Value) -> Vec<(u64, u64)> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(h["histogram"].as_str().expect("histogram"))
        .expect("base64");
    let g = h["granularity"].as_u64().expect("granularity");
    let rate = u128::from(h["tsc_rate"].as_u64().expect("tsc_rate"));
    raw.chunks_exact(8)
        .enumerate()
        .map(|(i, b)| {
            let (range, index) = (i as u64 >> g, i as u64 & ((1 << g) - 1));
            let ticks = match range {
                0 => index,
                r => (1u64 << (r + g - 1)) + (index << (r - 1)),
            };
            let ns = (u128::from(ticks) * 1_000_000_000 / rate) as u64;
            (ns, u64::from_le_bytes(b.try_into().expect("8 bytes")))
        })
        .collect()
}

#[test]
fn a_known_hold_lands_in_the_percentiles_it_should_in_nanoseconds() {
    // Every read's completion is held 1 ms by the namespace's model (avg = p99: no tail),
    // so each command's target total is 1 ms plus the poller's few microseconds (more when
    // a loaded machine delays the poller: the checks bound the fastest command tightly and
    // the others by the client's own clock).
    const HOLD_NS: u64 = 1_000_000;
    const N: u64 = 100;
    let s = Serve::start();
    let mut c = host(&s);
    let model = json!({"name": BDEV, "avg_read_latency": 1000, "p99_read_latency": 1000});
    assert_eq!(s.call("nvmemu_bdev_set_model", model).unwrap(), json!(true));
    s.call(
        "bdev_enable_histogram",
        json!({"name": BDEV, "enable": true}),
    )
    .unwrap();
    // Each read timed by the client on its own clock: even the fastest took the hold (a
    // TSC calibration that made the model's nanoseconds short would show here).
    let mut client_min = Duration::MAX;
    for i in 0..N {
        let t = std::time::Instant::now();
        c.q.read_blocking(Nsid(1), Lba(i), 1, &c.r).expect("read");
        client_min = client_min.min(t.elapsed());
    }
    assert!(
        client_min >= Duration::from_nanos(HOLD_NS),
        "{client_min:?}"
    );
    // The histogram in ticks at its tsc_rate: the fastest command took the hold and a few
    // microseconds (its bucket's lower end is at most 1/128 below it), so a tick rate off
    // by 10 % lands outside.
    let buckets = buckets_ns(&s.call("bdev_get_histogram", json!({"name": BDEV})).unwrap());
    assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), N);
    let fastest = buckets
        .iter()
        .find(|b| b.1 > 0)
        .expect("a bucket counted")
        .0;
    assert!(
        (HOLD_NS * 98 / 100..HOLD_NS * 11 / 10).contains(&fastest),
        "the fastest command's bucket starts at {fastest} ns"
    );
    // The breakdown in ns: the same commands, converted alike (its exact mean lies within
    // the bucket width above the mean of the lower ends), none faster than the hold.
    let b = s.call("nvmemu_get_latency_breakdown", json!({})).unwrap();
    let layers = &b["controllers"][0]["layers"];
    let total = layer(layers, "total");
    assert_eq!(
        total["count"].as_u64(),
        Some(N),
        "every held read is timed: {total}"
    );
    let lower_mean = buckets.iter().map(|(ns, n)| ns * n).sum::<u64>() as f64 / N as f64;
    let mean = total["mean_ns"].as_f64().expect("mean_ns");
    assert!(
        mean >= lower_mean && mean <= lower_mean * 1.01,
        "breakdown mean {mean} ns, histogram's {lower_mean} ns"
    );
    let ns = |l: &Value, key: &str| l[key].as_u64().unwrap_or_else(|| panic!("{key}: {l}"));
    assert!(ns(total, "p50_ns") >= HOLD_NS, "{total}");
    // The hold is in every command's complete layer (done to posted).
    let complete = layer(layers, "complete");
    assert!(ns(complete, "p50_ns") >= HOLD_NS * 99 / 100, "{complete}");
    assert!(
        ns(complete, "sum_ns") >= N * HOLD_NS * 99 / 100,
        "{complete}"
    );
    drop(c.q);
    c.c.shutdown().unwrap();
}

#[test]
fn a_file_namespace_is_timed_in_every_layer_and_in_its_bdevs_latency() {
    // Its commands complete in a later pass than the one that took them (the I/O runs on
    // the controller's io_uring), and are timed all the same.
    let img = tempfile::NamedTempFile::new().expect("image file");
    img.as_file().set_len(8 << 20).expect("size");
    let s = Serve::start_ns(&format!("file:path={},lba=512", img.path().display()));
    let mut c = host(&s);
    s.call(
        "bdev_enable_histogram",
        json!({"name": BDEV, "enable": true}),
    )
    .unwrap();
    let submitted = verified_io(&mut c, 50, 7);
    assert_eq!(histogram_count(&s), submitted);
    let b = s.call("nvmemu_get_latency_breakdown", json!({})).unwrap();
    let layers = &b["controllers"][0]["layers"];
    for name in ["queued", "backend", "complete", "interrupt", "total"] {
        let l = layer(layers, name);
        assert_eq!(l["count"].as_u64(), Some(submitted), "{name}: {l}");
    }
    let sum = |n: &str| layer(layers, n)["sum_ns"].as_u64().unwrap();
    let parts = sum("queued") + sum("backend") + sum("complete") + sum("interrupt");
    assert!(
        parts.abs_diff(sum("total")) <= 4,
        "{parts} vs {}",
        sum("total")
    );
    assert!(sum("backend") > 0);
    // The bdev's latency ticks: the same commands' backend layers.
    let io = s.call("bdev_get_iostat", json!({"name": BDEV})).unwrap();
    let bdev = &io["bdevs"][0];
    assert_eq!(bdev["num_read_ops"].as_u64(), Some(submitted / 2), "{bdev}");
    for key in ["read_latency_ticks", "write_latency_ticks"] {
        assert!(bdev[key].as_u64().unwrap_or(0) > 0, "{key}: {bdev}");
    }
    drop(c.q);
    c.c.shutdown().unwrap();
}
