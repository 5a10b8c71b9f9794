// SPDX-License-Identifier: Apache-2.0
//! `nvmemu bench` with fio job files, the options people paste from fio command lines,
//! and fio's output files and formats, end to end through the built binary.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// A small namespace keeps the target's start-up short.
const NS: &str = "--ns=malloc:size=16M";

/// One run at a time: each starts a target whose poller spins, and on a small machine
/// several at once starve each other's pollers past the control path's 3 s limit.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn bench_in(dir: &Path, args: &[&str]) -> Output {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Command::new(env!("CARGO_BIN_EXE_nvmemu"))
        .current_dir(dir)
        .stdin(Stdio::null())
        .arg("bench")
        .args(["--eta=never", NS])
        .args(args)
        .output()
        .expect("nvmemu runs")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "nvmemu failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).unwrap()
}

const PAPER: &str = "; as published\n[global]\nioengine=libaio\ndirect=1\nbs=4k\niodepth=32\n\
                     runtime=60\ntime_based\ngroup_reporting\nfilename=/dev/nvme0n1\n\n\
                     [randread]\nrw=randread\n";

#[test]
fn a_paper_job_file_runs_unchanged_with_one_note_per_option() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("paper.fio"), PAPER).unwrap();
    // The command line wins over the file, so the 60 s job runs for 1 s.
    let out = bench_in(
        dir.path(),
        &["paper.fio", "--runtime=1", "--output-format=json"],
    );
    let v = json(&out);
    let job = &v["jobs"][0];
    assert_eq!(v["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(job["jobname"], "randread");
    // As fio lists them: [global] once, each job's own section in its job options.
    assert_eq!(v["global options"]["ioengine"], "libaio");
    assert_eq!(v["global options"]["iodepth"], "32");
    assert_eq!(v["global options"]["time_based"], "");
    assert_eq!(job["job options"], serde_json::json!({ "rw": "randread" }));
    assert!(job["read"]["total_ios"].as_u64().unwrap() > 0);
    assert!((900..3000).contains(&job["job_runtime"].as_u64().unwrap()));
    let err = String::from_utf8_lossy(&out.stderr);
    for note in [
        "nvmemu: ioengine=libaio ignored: ",
        "nvmemu: direct=1 ignored: ",
        "nvmemu: filename=/dev/nvme0n1 ignored: the jobs run against the in-process target",
    ] {
        assert_eq!(err.matches(note).count(), 1, "{note} in\n{err}");
    }
}

#[test]
fn two_jobs_run_together_and_a_stonewalled_group_runs_after_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("two.fio"),
        "[global]\nsize=2m\n[reader]\nrw=randread\n[writer]\nrw=write\nbs=8k\n\
         [after]\nstonewall\nrw=read\n",
    )
    .unwrap();
    let v = json(&bench_in(dir.path(), &["two.fio", "--output-format=json"]));
    let jobs = v["jobs"].as_array().unwrap();
    let shape: Vec<(&str, u64)> = jobs
        .iter()
        .map(|j| {
            (
                j["jobname"].as_str().unwrap(),
                j["groupid"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(shape, [("reader", 0), ("writer", 0), ("after", 1)]);
    assert_eq!(jobs[0]["read"]["total_ios"], 512);
    assert_eq!(jobs[1]["write"]["total_ios"], 256);
    assert_eq!(jobs[1]["job options"]["bs"], "8k");
    assert_eq!(jobs[2]["read"]["total_ios"], 512);
    // The first two started together; the third once both were done.
    assert_eq!(jobs[0]["job_start"], jobs[1]["job_start"]);
    let end = |j: &Value| j["job_start"].as_u64().unwrap() + j["job_runtime"].as_u64().unwrap();
    let start2 = jobs[2]["job_start"].as_u64().unwrap();
    assert!(start2 >= end(&jobs[0]) && start2 >= end(&jobs[1]), "{v}");
    // The text report has each job and each group.
    let t = ok(&bench_in(dir.path(), &["two.fio"]));
    assert!(
        t.starts_with("reader: (g=0): rw=randread, bs=(R) 4096B-4096B"),
        "{t}"
    );
    assert!(
        t.contains("\nwriter: (g=0): rw=write, bs=(R) 8192B-8192B"),
        "{t}"
    );
    assert!(t.contains("\nafter: (g=1): rw=read, "), "{t}");
    assert!(
        t.contains("\nfio-3.33\nStarting 3 threads\n\nreader: (groupid=0, jobs=1): err= 0"),
        "{t}"
    );
    assert!(
        t.contains("\nRun status group 0 (all jobs):\n   READ: bw="),
        "{t}"
    );
    assert!(t.contains("\n  WRITE: bw="), "{t}");
    assert!(
        t.contains("\nRun status group 1 (all jobs):\n   READ: bw="),
        "{t}"
    );
}

#[test]
fn options_pasted_from_fio_command_lines_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    for opt in [
        "--direct=1",
        "--ioengine=libaio",
        "--ioengine=io_uring",
        "--filename=/dev/nvme0n1",
        "--thread",
        "--name=pasted",
        "--iodepth_batch=4",
        "--iodepth_batch_submit=4",
        "--iodepth_batch_complete=2",
        "--iodepth_batch_complete_min=2",
        "--iodepth_batch_complete_max=4",
        "--group_reporting",
        "--percentile_list=50:99:99.9",
        "--status-interval=1",
        "--output-format=normal,json",
        "--output-format=terse",
        "--description=from a paper",
        "--norandommap",
        "--randrepeat=0",
    ] {
        let out = bench_in(dir.path(), &["--size=256k", "--iodepth=8", opt]);
        assert!(
            out.status.success(),
            "{opt}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.stdout.is_empty(), "{opt}: no report");
    }
}

#[test]
fn percentile_list_and_group_reporting_shape_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let v = json(&bench_in(
        dir.path(),
        &[
            "--size=256k",
            "--numjobs=2",
            "--group_reporting",
            "--percentile_list=50:99.9",
            "--output-format=json",
        ],
    ));
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "group_reporting makes one entry");
    assert_eq!(jobs[0]["read"]["total_ios"], 128);
    let p = jobs[0]["read"]["clat_ns"]["percentile"]
        .as_object()
        .unwrap();
    let keys: Vec<&str> = p.keys().map(String::as_str).collect();
    assert_eq!(keys, ["50.000000", "99.900000"]);
}

#[test]
fn output_writes_the_report_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = bench_in(dir.path(), &["--size=256k", "--output=report.txt"]);
    assert!(ok(&out).is_empty(), "nothing on stdout");
    let t = std::fs::read_to_string(dir.path().join("report.txt")).unwrap();
    assert!(t.starts_with("nvmemu: (g=0): rw=randread, "), "{t}");
    assert!(t.contains("\nRun status group 0 (all jobs):\n"), "{t}");
    // A path that cannot be written fails before the run, in one line.
    let out = bench_in(dir.path(), &["--size=256k", "--output=no/such/dir/r.txt"]);
    assert_eq!(out.status.code(), Some(1));
    let err = common::one_line_failure(&out);
    assert!(
        err.contains("--output no/such/dir/r.txt: cannot write there"),
        "{err}"
    );
}

#[test]
fn terse_lines_have_fio_field_count() {
    let dir = tempfile::tempdir().unwrap();
    let t = ok(&bench_in(
        dir.path(),
        &["--size=256k", "--numjobs=2", "--output-format=terse"],
    ));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 2, "{t}");
    for l in lines {
        let f: Vec<&str> = l.split(';').collect();
        assert_eq!(f.len(), 121, "{l}");
        assert_eq!(f[0], "3");
        assert_eq!(f[2], "nvmemu");
        // 256 KiB read per job.
        assert_eq!(f[5], "256");
    }
}

#[test]
fn a_filename_naming_a_socket_drives_that_server() {
    let t = common::start(&[("malloc", 512, 1 << 15)]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("srv.fio"),
        format!(
            "[global]\nfilename={}\nsize=64k\n[r]\nrw=read\n",
            t.dir().display()
        ),
    )
    .unwrap();
    let out = bench_in(dir.path(), &["srv.fio", "--output-format=json"]);
    let v = json(&out);
    assert_eq!(v["jobs"][0]["read"]["total_ios"], 16);
    // No in-process target was started.
    assert!(v["target"].is_null(), "{v}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("filename="));
}

/// The entries of a log file: time, value, direction, block size, priority.
fn log_entries(path: &Path) -> Vec<[u64; 5]> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| {
            let f: Vec<u64> = l.split(", ").map(|v| v.parse().unwrap()).collect();
            f.try_into()
                .unwrap_or_else(|f| panic!("{l}: {f:?} is not 5 fields"))
        })
        .collect()
}

#[test]
fn per_io_logs_have_fio_names_format_and_one_entry_per_io() {
    let dir = tempfile::tempdir().unwrap();
    let v = json(&bench_in(
        dir.path(),
        &[
            "--size=1m",
            "--rw=randwrite",
            "--write_lat_log=run",
            "--write_iops_log",
            "--write_bw_log",
            "--output-format=json",
        ],
    ));
    let job = &v["jobs"][0];
    let ios = job["write"]["total_ios"].as_u64().unwrap();
    assert_eq!(ios, 256);
    let runtime = job["job_runtime"].as_u64().unwrap();
    for name in [
        "run_lat.1.log",
        "run_clat.1.log",
        "run_slat.1.log",
        "nvmemu_iops.1.log",
        "nvmemu_bw.1.log",
    ] {
        let e = log_entries(&dir.path().join(name));
        assert_eq!(e.len() as u64, ios, "{name}");
        assert!(
            e.windows(2).all(|w| w[0][0] <= w[1][0]),
            "{name}: time goes back"
        );
        assert!(
            e.iter().all(|x| x[0] <= runtime + 1),
            "{name}: after the run"
        );
        assert!(
            e.iter().all(|x| x[2] == 1 && x[3] == 4096 && x[4] == 0),
            "{name}"
        );
    }
    let lat = log_entries(&dir.path().join("run_lat.1.log"));
    let clat = log_entries(&dir.path().join("run_clat.1.log"));
    assert!(lat.iter().zip(&clat).all(|(l, c)| l[1] >= c[1] && c[1] > 0));
    let iops = log_entries(&dir.path().join("nvmemu_iops.1.log"));
    assert_eq!(iops.iter().map(|x| x[1]).sum::<u64>(), ios);
}

#[test]
fn averaged_iops_logs_add_up_to_the_ios_done() {
    let dir = tempfile::tempdir().unwrap();
    let v = json(&bench_in(
        dir.path(),
        &[
            "--runtime=1",
            "--time_based",
            "--write_iops_log=avg",
            "--log_avg_msec=100",
            "--output-format=json",
        ],
    ));
    let ios = v["jobs"][0]["read"]["total_ios"].as_u64().unwrap() as f64;
    let e = log_entries(&dir.path().join("avg_iops.1.log"));
    // A window per 100 ms of the run, however long a loaded machine makes it; the last
    // ends at the last completion, rounded up to a whole millisecond.
    let runtime = v["jobs"][0]["job_runtime"].as_u64().unwrap();
    assert!(e.len() >= 3, "{} windows in a 1 s run", e.len());
    assert!(
        e.last().unwrap()[0] <= runtime + 1,
        "windows end with the run"
    );
    // Each entry is the rate over the window ending at its time, so rate times span
    // counts every I/O: the closed windows' exactly, the last one's less the fraction
    // its whole-number rate drops (under 0.1 I/O for a window of 100 ms at most).
    let mut prev = 0;
    let mut sum = 0.0;
    for x in &e {
        assert!(x[0] > prev, "windows end in order: {e:?}");
        sum += x[1] as f64 * (x[0] - prev) as f64 / 1000.0;
        prev = x[0];
    }
    assert!(
        sum <= ios + 1e-6 && sum > ios - 0.1,
        "log {sum} vs {ios} I/Os"
    );
}

#[test]
fn plots_draw_time_and_overlay_saved_runs() {
    let dir = tempfile::tempdir().unwrap();
    for (name, depth) in [("a.json", "--iodepth=8"), ("b.json", "--iodepth=2")] {
        let out = bench_in(
            dir.path(),
            &[
                "--runtime=1200ms",
                "--time_based",
                depth,
                "--output-format=json",
                "--plot=one.svg",
            ],
        );
        std::fs::write(dir.path().join(name), ok(&out)).unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let ts = &v["jobs"][0]["time_series"]["read"];
        assert!(!ts["t_ms"].as_array().unwrap().is_empty(), "{ts}");
        assert!(
            v["machine"]["namespace"]
                .as_str()
                .unwrap()
                .contains("malloc")
        );
    }
    let one = std::fs::read_to_string(dir.path().join("one.svg")).unwrap();
    assert!(one.contains("IOPS over time"), "the run over time");
    assert!(one.contains(" IOPS · "), "the run's line");
    assert!(
        one.contains("in-process malloc 16.0MiB, 512 B LBA"),
        "its namespace"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_nvmemu"))
        .current_dir(dir.path())
        .args(["plot", "a.json", "b.json", "-o", "ab.svg"])
        .output()
        .unwrap();
    ok(&out);
    let ab = std::fs::read_to_string(dir.path().join("ab.svg")).unwrap();
    assert!(ab.contains("nvmemu bench: 2 runs"));
    for run in ["a.json: ", "b.json: "] {
        assert!(ab.contains(&format!(">{run}")), "{run} has its line");
    }
    // Two runs, one job each: a percentile curve and two time curves per run.
    assert_eq!(ab.matches("<path ").count(), 6, "{ab}");
    let err = Command::new(env!("CARGO_BIN_EXE_nvmemu"))
        .current_dir(dir.path())
        .args(["plot", "missing.json"])
        .output()
        .unwrap();
    assert!(common::one_line_failure(&err).contains("cannot read missing.json"));
}
