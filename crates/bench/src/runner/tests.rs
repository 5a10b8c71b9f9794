// SPDX-License-Identifier: Apache-2.0
//! Tests of `run_bench` and `run_stage` on in-memory devices.

use super::*;
use crate::engine::{EngineError, Geometry, Op};
use crate::mem_queue::{MemDevice, MemQueue};
use crate::options::{EtaMode, OutputFormat, RwMode, SizeSpec, VerifyMode};
use crate::report::render;
use crate::result::NoTarget;
use crate::verify;
use std::sync::Mutex;
use std::time::Duration;

fn run(opts: &BenchOptions, dev: &Arc<MemDevice>) -> BenchResult {
    let queues: Vec<Box<dyn IoQueue>> = (0..opts.numjobs)
        .map(|_| Box::new(dev.queue()) as Box<dyn IoQueue>)
        .collect();
    run_bench(
        opts,
        queues,
        &NoTarget,
        &[],
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap()
}

fn opts(rw: RwMode, size: u64) -> BenchOptions {
    BenchOptions {
        rw: rw.into(),
        size: Some(SizeSpec::Bytes(size)),
        iodepth: 8,
        eta: EtaMode::Never,
        ..BenchOptions::default()
    }
}

#[test]
fn a_stage_runs_its_jobs_together_and_reports_each_group() {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let job = |name: &str, rw, groupid| StageJob {
        opts: BenchOptions {
            name: name.into(),
            ..opts(rw, 1 << 20)
        },
        groupid,
        queues: vec![Box::new(dev.queue()) as Box<dyn IoQueue>],
    };
    let r = run_stage(
        vec![job("a", RwMode::Randread, 0), job("b", RwMode::Write, 1)],
        &NoTarget,
        &[],
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    let names: Vec<(&str, u32)> = r
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), j.groupid))
        .collect();
    assert_eq!(names, [("a", 0), ("b", 1)]);
    assert_eq!(r.jobs[0].output.stats.dirs[0].total_ios, 256);
    assert_eq!(r.jobs[1].output.stats.dirs[1].total_ios, 256);
    let t = render(&r, OutputFormat::NORMAL);
    assert!(t.starts_with("a: (groupid=0, jobs=1)"), "{t}");
    assert!(t.contains("\nb: (groupid=1, jobs=1)"), "{t}");
    let g0 = t
        .find("Run status group 0 (all jobs):\n   READ: bw=")
        .unwrap();
    let g1 = t
        .find("Run status group 1 (all jobs):\n  WRITE: bw=")
        .unwrap();
    assert!(g0 < g1);
    let v: serde_json::Value = serde_json::from_str(&render(&r, OutputFormat::JSON)).unwrap();
    assert_eq!(v["jobs"][1]["jobname"], "b");
    assert_eq!(v["jobs"][1]["job options"]["rw"], "write");
}

#[test]
fn short_run_produces_fio_json() {
    let dev = MemDevice::new(512, 1 << 14, 128 * 1024);
    let r = run(&opts(RwMode::Randread, 4 << 20), &dev);
    let text = render(&r, OutputFormat::JSON);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    // fio's keys in fio's order, then ours.
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "fio version",
            "timestamp",
            "timestamp_ms",
            "time",
            "jobs",
            "nvmemu version",
            "target",
            "machine",
        ]
    );
    assert_eq!(v["fio version"], "fio-3.33");
    assert!(v["nvmemu version"].as_str().unwrap().starts_with("nvmemu-"));
    let job = &v["jobs"][0];
    for k in [
        "jobname",
        "groupid",
        "error",
        "eta",
        "elapsed",
        "job options",
        "read",
        "write",
        "trim",
        "sync",
        "job_runtime",
        "usr_cpu",
        "sys_cpu",
        "ctx",
        "majf",
        "minf",
        "iodepth_level",
        "iodepth_submit",
        "iodepth_complete",
        "latency_ns",
        "latency_us",
        "latency_ms",
        "latency_depth",
        "latency_target",
        "latency_percentile",
        "latency_window",
        "verify_errors",
    ] {
        assert!(job.get(k).is_some(), "missing job field {k}");
    }
    let read = &job["read"];
    for k in [
        "io_bytes",
        "io_kbytes",
        "bw_bytes",
        "bw",
        "iops",
        "runtime",
        "total_ios",
        "short_ios",
        "drop_ios",
        "slat_ns",
        "clat_ns",
        "lat_ns",
        "bw_min",
        "bw_max",
        "bw_agg",
        "bw_mean",
        "bw_dev",
        "bw_samples",
        "iops_min",
        "iops_max",
        "iops_mean",
        "iops_stddev",
        "iops_samples",
    ] {
        assert!(read.get(k).is_some(), "missing read field {k}");
    }
    assert_eq!(read["total_ios"], 1024);
    assert_eq!(read["io_bytes"], 4 << 20);
    assert_eq!(job["write"]["total_ios"], 0);
    assert!(read["clat_ns"]["percentile"].get("99.000000").is_some());
    assert!(read["clat_ns"].get("bins").is_none());
    assert_eq!(read["clat_ns"]["N"], 1024);
    assert!(read["iops"].as_f64().unwrap() > 0.0 || read["runtime"] == 0);
    assert_eq!(job["latency_depth"], 8);
    assert!(v["machine"]["cpus"].as_u64().unwrap() >= 1);
}

#[test]
fn json_plus_adds_bins() {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let r = run(&opts(RwMode::Read, 1 << 20), &dev);
    let v: serde_json::Value = serde_json::from_str(&render(&r, OutputFormat::JSON_PLUS)).unwrap();
    let bins = v["jobs"][0]["read"]["clat_ns"]["bins"].as_object().unwrap();
    assert_eq!(bins.values().map(|c| c.as_u64().unwrap()).sum::<u64>(), 256);
}

#[test]
fn text_report_has_fio_lines() {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let r = run(&opts(RwMode::Randwrite, 1 << 20), &dev);
    let t = render(&r, OutputFormat::NORMAL);
    assert!(
        t.starts_with("nvmemu: (groupid=0, jobs=1): err= 0: pid="),
        "{t}"
    );
    for needle in [
        "  write: IOPS=",
        "    slat (",
        "    clat (",
        "     lat (",
        "    clat percentiles (",
        "     |  1.00th=[",
        "  cpu          : usr=",
        "  IO depths    : 1=",
        "     submit    : 0=",
        "     complete  : 0=",
        "     issued rwts: total=0,256,0,0",
        "     latency   : target=0, window=0, percentile=100.00%, depth=8",
        "\nRun status group 0 (all jobs):\n  WRITE: bw=",
        ", io=1024KiB (1049kB), run=",
    ] {
        assert!(t.contains(needle), "missing {needle:?} in\n{t}");
    }
}

#[test]
fn randrw_honours_rwmixread() {
    let dev = MemDevice::new(512, 1 << 15, 128 * 1024);
    let o = BenchOptions {
        rwmixread: 70,
        ..opts(RwMode::Randrw, 16 << 20)
    };
    let r = run(&o, &dev);
    let d = &r.jobs[0].output.stats.dirs;
    let (reads, writes) = (d[0].total_ios, d[1].total_ios);
    assert_eq!(reads + writes, 4096);
    let frac = reads as f64 / 4096.0;
    assert!((0.65..0.75).contains(&frac), "read fraction {frac}");
}

#[test]
fn randrw_rates_per_direction_override_the_mix_as_fio_does() {
    let dev = MemDevice::new(512, 1 << 15, 128 * 1024);
    let o = BenchOptions {
        runtime: Some(Duration::from_millis(500)),
        time_based: true,
        workload: crate::WorkloadOptions {
            rate_iops: Some(crate::parse_rate_iops("2000,1000").unwrap()),
            ..Default::default()
        },
        ..opts(RwMode::Randrw, 16 << 20)
    };
    let r = run(&o, &dev);
    let d = &r.jobs[0].output.stats.dirs;
    let (reads, writes) = (d[0].total_ios, d[1].total_ios);
    // 50/50 mix, but reads may go twice as fast: about 1000 reads and 500 writes.
    assert!(reads * 10 >= writes * 17, "{reads} reads, {writes} writes");
    assert!(
        reads <= 1020 && writes <= 520,
        "{reads} reads, {writes} writes"
    );
}

#[test]
fn write_then_verify_reads_back_everything() {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let o = BenchOptions {
        verify: VerifyMode::Crc32c,
        bs: 4096.into(),
        ..opts(RwMode::Write, 1 << 20)
    };
    let r = run(&o, &dev);
    let j = &r.jobs[0];
    assert_eq!(j.output.stats.dirs[1].total_ios, 256);
    assert_eq!(j.output.stats.dirs[0].total_ios, 256);
    assert_eq!(j.output.verify.errors, 0);
    assert_eq!(j.output.verify.verified_ios, 256);
    assert_eq!(j.errno(), 0);
    // The device holds self-describing blocks.
    let blk = dev.read_blocks(17, 1).unwrap();
    let v = verify::Verifier::new(verify::Method::Header(verify::Checksum::Crc32c), 0);
    assert_eq!(v.check_block(&blk, 17, 1), Ok(()));
}

#[test]
fn randrw_verify_is_clean_and_checks_reads() {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let o = BenchOptions {
        verify: VerifyMode::Crc32c,
        numjobs: 2,
        ..opts(RwMode::Randrw, 1 << 20)
    };
    let r = run(&o, &dev);
    for j in &r.jobs {
        assert_eq!(j.output.verify.errors, 0);
        assert!(j.output.verify.verified_ios > 0);
    }
}

/// A [`MemQueue`] that flips one byte of the n-th read payload (never when 0) and takes
/// time to set up, to stage a write payload and to submit.
struct Rigged {
    inner: MemQueue,
    reads: u32,
    corrupt_at: u32,
    setup_delay: Duration,
    stage_delay: Duration,
    submit_delay: Duration,
}

/// `o` run on the one queue `q`.
fn run_one(o: &BenchOptions, q: Box<dyn IoQueue>) -> BenchResult {
    run_bench(o, vec![q], &NoTarget, &[], Arc::new(AtomicBool::new(false))).unwrap()
}

/// A [`Rigged`] queue on `dev` that does nothing unusual yet.
fn rigged(dev: &Arc<MemDevice>) -> Rigged {
    Rigged {
        inner: dev.queue(),
        reads: 0,
        corrupt_at: 0,
        setup_delay: Duration::ZERO,
        stage_delay: Duration::ZERO,
        submit_delay: Duration::ZERO,
    }
}

impl IoQueue for Rigged {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }
    fn setup(&mut self, slots: usize, slot_bytes: usize) -> Result<(), EngineError> {
        std::thread::sleep(self.setup_delay);
        self.inner.setup(slots, slot_bytes)
    }
    fn write_payload(&mut self, slot: usize, src: &[u8]) -> Result<(), EngineError> {
        std::thread::sleep(self.stage_delay);
        self.inner.write_payload(slot, src)
    }
    fn read_payload(&mut self, slot: usize, dst: &mut [u8]) -> Result<(), EngineError> {
        self.inner.read_payload(slot, dst)?;
        self.reads += 1;
        if self.reads == self.corrupt_at {
            dst[100] ^= 0x40;
        }
        Ok(())
    }
    fn submit(&mut self, slot: usize, op: Op, lba: u64, blocks: u32) -> Result<(), EngineError> {
        std::thread::sleep(self.submit_delay);
        self.inner.submit(slot, op, lba, blocks)
    }
    fn ring(&mut self) -> Result<(), EngineError> {
        self.inner.ring()
    }
    fn reap(&mut self, max: usize, done: &mut dyn FnMut(usize, Result<(), EngineError>)) -> usize {
        self.inner.reap(max, done)
    }
}

#[test]
fn verify_reports_corruption_with_eilseq() {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let o = BenchOptions {
        verify: VerifyMode::Crc32c,
        ..opts(RwMode::Randwrite, 1 << 20)
    };
    let q: Box<dyn IoQueue> = Box::new(Rigged {
        corrupt_at: 5,
        ..rigged(&dev)
    });
    let r = run_one(&o, q);
    let j = &r.jobs[0];
    assert_eq!(j.output.verify.errors, 1);
    assert!(matches!(
        j.output.verify.first[0].kind,
        verify::VerifyFailureKind::BadChecksum { .. }
    ));
    assert_eq!(j.errno(), crate::result::EILSEQ);
    let v: serde_json::Value = serde_json::from_str(&render(&r, OutputFormat::JSON)).unwrap();
    assert_eq!(v["jobs"][0]["verify_errors"], 1);
    assert!(render(&r, OutputFormat::NORMAL).contains("err=84 (verify failed at lba"));
}

#[test]
fn device_errors_stop_the_job_with_eio() {
    let dev = MemDevice::new(512, 64, 128 * 1024);
    // Offset the job past the end via a plan the device rejects: use a
    // second, smaller device for the queue than the plan assumes.
    let small = MemDevice::new(512, 8, 128 * 1024);
    let plan = plan_jobs(&opts(RwMode::Read, 32 * 512), dev.geometry())
        .unwrap()
        .remove(0);
    let mut q = small.queue();
    let out = run_job(&plan, &mut q, &Progress::default(), &AtomicBool::new(false));
    assert!(matches!(out.error, Some(EngineError::OutOfRange { .. })));
}

#[test]
fn time_based_run_with_ramp_ends_and_reports() {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let o = BenchOptions {
        time_based: true,
        runtime: Some(Duration::from_millis(700)),
        ramp_time: Some(Duration::from_millis(200)),
        ..opts(RwMode::Randrw, 1 << 20)
    };
    let r = run(&o, &dev);
    let j = &r.jobs[0];
    assert!(j.output.stats.dirs[0].total_ios > 0 && j.output.stats.dirs[1].total_ios > 0);
    assert!(j.output.runtime_ms > 0);
    assert!(render(&r, OutputFormat::NORMAL).contains("  write: IOPS="));
}
#[test]
fn queue_count_must_match_numjobs() {
    let o = BenchOptions {
        numjobs: 2,
        ..BenchOptions::default()
    };
    let dev = MemDevice::new(512, 64, 4096);
    let r = run_bench(
        &o,
        vec![Box::new(dev.queue())],
        &NoTarget,
        &[],
        Arc::new(AtomicBool::new(false)),
    );
    assert!(matches!(
        r,
        Err(BenchError::QueueCount {
            queues: 1,
            numjobs: 2
        })
    ));
}

#[test]
fn runtime_counts_from_the_end_of_the_queue_setup() {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let o = BenchOptions {
        time_based: true,
        runtime: Some(Duration::from_millis(300)),
        ..opts(RwMode::Randread, 1 << 20)
    };
    // Setting up takes longer than the whole runtime.
    let q: Box<dyn IoQueue> = Box::new(Rigged {
        setup_delay: Duration::from_millis(500),
        ..rigged(&dev)
    });
    let stop = Arc::new(AtomicBool::new(false));
    let r = run_bench(&o, vec![q], &NoTarget, &[], stop).unwrap();
    let out = &r.jobs[0].output;
    // All of the 300 ms but the moment before the first pass (whole ms, rounded down);
    // counted from before the setup, it would be none.
    assert!(out.runtime_ms >= 250, "{} ms of I/O", out.runtime_ms);
    assert!(out.stats.dirs[0].total_ios > 0);
}

/// A target whose one poller is busy all the time; keeps the busy time each snapshot read.
struct AlwaysBusy {
    since: Instant,
    read: Mutex<Vec<u64>>,
}

impl TargetProbe for AlwaysBusy {
    fn snapshot(&self) -> Option<crate::result::TargetSnapshot> {
        let ns = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.read.lock().unwrap().push(ns);
        Some(crate::result::TargetSnapshot {
            cores: vec![crate::result::CoreCounters {
                cpu: None,
                busy_ns: ns,
                total_ns: ns,
                commands: 0,
            }],
        })
    }
}

#[test]
fn target_time_is_charged_for_the_measured_window_only() {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let o = BenchOptions {
        time_based: true,
        runtime: Some(Duration::from_millis(400)),
        ramp_time: Some(Duration::from_millis(400)),
        ..opts(RwMode::Randread, 1 << 20)
    };
    let queues = vec![Box::new(dev.queue()) as Box<dyn IoQueue>];
    let stop = Arc::new(AtomicBool::new(false));
    let probe = AlwaysBusy {
        since: Instant::now(),
        read: Mutex::new(Vec::new()),
    };
    let r = run_bench(&o, queues, &probe, &[], stop).unwrap();
    let t = r.target.expect("a target report");
    let ios = r.jobs[0].output.stats.dirs[0].total_ios;
    // Read at the start, again once the job is past its ramp, and at the end: the busy
    // time charged to the measured I/Os is the last two readings' difference, however
    // late a loaded machine lets the status loop see the ramp end.
    let read = probe.read.lock().unwrap().clone();
    assert_eq!(read.len(), 3, "{read:?}");
    assert!(read[1] >= 400_000_000, "read during the ramp: {read:?}");
    let window = (read[2] - read[1]) as f64;
    let charged = t.target_ns_per_io * ios as f64;
    assert!(
        (charged - window).abs() <= window * 1e-9,
        "{charged} ns charged for a window of {window} ns"
    );
}

/// As fio's: the latencies start once the offset is chosen and the verify payload staged,
/// as the command goes to the queue (fio reads `start_time` at the end of `get_io_u`).
#[test]
fn submission_latency_counts_the_queueing_not_the_payload_staging() {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let o = BenchOptions {
        verify: VerifyMode::Crc32c,
        iodepth: 1,
        ..opts(RwMode::Randwrite, 16 * 1024)
    };
    let q: Box<dyn IoQueue> = Box::new(Rigged {
        stage_delay: Duration::from_millis(30),
        submit_delay: Duration::from_millis(2),
        ..rigged(&dev)
    });
    let r = run_one(&o, q);
    let writes = &r.jobs[0].output.stats.dirs[1];
    assert_eq!(writes.total_ios, 4);
    let (slat, lat) = (writes.slat.mean(), writes.lat.mean());
    assert!((2e6..25e6).contains(&slat), "slat {slat} ns");
    assert!((2e6..25e6).contains(&lat), "lat {lat} ns");
    assert_eq!(r.jobs[0].output.verify.errors, 0);
}
