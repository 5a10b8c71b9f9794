// SPDX-License-Identifier: Apache-2.0
//! `nvmemu bench` end to end: the built binary against its in-process target and
//! against a target on a socket, parsed from its fio-shaped JSON. Stopping a run (signals,
//! lost or silent servers) is in `stopping.rs`.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

#[path = "../common/mod.rs"]
mod common;
mod stopping;

use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn nvmemu() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nvmemu"));
    c.stdin(Stdio::null());
    c
}

fn bench(args: &[&str]) -> Output {
    nvmemu()
        .arg("bench")
        .args(["--eta=never", "--output-format=json"])
        .args(args)
        .output()
        .expect("nvmemu runs")
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "nvmemu failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "output is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The JSON report on stdout, whatever the exit status.
fn report_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "output is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn dir_ios(job: &Value, dir: &str) -> u64 {
    job[dir]["total_ios"].as_u64().expect("total_ios")
}

#[test]
fn short_embedded_run_reports_fio_json_with_target_and_machine() {
    let v = json_of(&bench(&["--runtime=1"]));
    assert_eq!(v["fio version"], "fio-3.33");
    assert!(v["nvmemu version"].as_str().unwrap().starts_with("nvmemu-"));
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job["error"], 0);
    assert_eq!(job["verify_errors"], 0);
    assert_eq!(job["job options"]["rw"], "randread");
    assert_eq!(job["job options"]["iodepth"], "32");
    let read = &job["read"];
    for k in [
        "iops", "bw", "bw_bytes", "io_bytes", "runtime", "clat_ns", "lat_ns", "slat_ns",
    ] {
        assert!(read.get(k).is_some(), "read.{k} missing");
    }
    assert!(read["iops"].as_f64().unwrap() > 0.0);
    assert!(dir_ios(job, "read") > 0);
    assert_eq!(dir_ios(job, "write"), 0);
    assert_eq!(read["clat_ns"]["N"].as_u64(), Some(dir_ios(job, "read")));
    // The in-process target's poller was observed and did the work.
    let target = &v["target"];
    assert!(target["poller_busy_pct"].as_f64().unwrap() > 0.0);
    assert!(target["target_ns_per_io"].as_f64().unwrap() > 0.0);
    assert_eq!(target["cores"].as_array().unwrap().len(), 1);
    let m = &v["machine"];
    let cpus = m["cpus"].as_u64().unwrap();
    assert!(cpus >= 1);
    let target_cpus = m["target_cpus"].as_array().unwrap();
    assert_eq!(target_cpus.len(), 1);
    if cpus > 1 {
        // Jobs stay off the poller's CPU.
        assert_ne!(m["jobs_cpus"][0], target_cpus[0]);
    }
}

/// The report says which NUMA node the jobs, the poller and the namespace's memory are on;
/// `--ns ...,numa=N` binds the namespace, and a node the machine lacks is refused.
#[test]
fn the_report_names_the_numa_nodes_and_numa_binds_the_namespace() {
    let v = json_of(&bench(&["--runtime=1", "--ns=malloc:size=16M,numa=0"]));
    let numa = v["machine"]["numa"].as_str().unwrap();
    assert!(
        numa.contains("target on node 0, namespace memory bound to node 0; machine: node 0"),
        "{numa}"
    );
    // And how much of the namespace is in transparent huge pages (a 16 MiB one: some).
    let ns = v["machine"]["namespace"].as_str().unwrap();
    assert!(ns.starts_with("in-process malloc 16"), "{ns}");
    assert!(ns.contains(" MiB in transparent huge pages"), "{ns}");
    let out = bench(&["--runtime=1", "--ns=malloc:size=16M,numa=999"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("NUMA node 999 does not exist"), "{err}");
}

#[test]
fn randwrite_verify_reads_back_every_block_it_wrote() {
    let v = json_of(&bench(&[
        "--rw=randwrite",
        "--verify=crc32c",
        "--size=8m",
        "--bs=4k",
        "--iodepth=16",
    ]));
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    assert_eq!(job["verify_errors"], 0);
    assert_eq!(dir_ios(job, "write"), 2048);
    // The random map writes each of the 2048 units once; each is read back once.
    assert_eq!(job["verify"]["verified_ios"], 2048);
    assert_eq!(job["verify"]["unverifiable_ios"], 0);
    assert_eq!(dir_ios(job, "read"), 2048);
}

/// The CPUs this process may run on, from `Cpus_allowed_list` (`0-3,6`).
fn allowed_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    list.split(',')
        .flat_map(|r| match r.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<usize>>(),
            None => vec![r.parse().unwrap()],
        })
        .collect()
}

#[test]
fn numjobs_over_as_many_target_cpus_give_each_job_its_own_poller() {
    let cpus = allowed_cpus();
    let [a, b, ..] = cpus[..] else {
        eprintln!("skipped: needs two CPUs, this process may use {cpus:?}");
        return;
    };
    let target_cpus = format!("--target-cpus={a},{b}");
    let v = json_of(&bench(&[
        "--numjobs=2",
        &target_cpus,
        "--rw=randwrite",
        "--verify=crc32c",
        "--size=8m",
        "--bs=4k",
        "--iodepth=16",
        "--ns=malloc:size=16M",
    ]));
    // Each job verifies its own half of the range: 1024 units written, each read back.
    for job in v["jobs"].as_array().unwrap() {
        assert_eq!(job["error"], 0, "{job}");
        assert_eq!(job["verify_errors"], 0);
        assert_eq!(dir_ios(job, "write"), 1024);
        assert_eq!(job["verify"]["verified_ios"], 1024);
    }
    // Two pollers, and each executed one job's commands: its writes and their read-back.
    let cores = v["target"]["cores"].as_array().unwrap();
    assert_eq!(cores.len(), 2, "{cores:?}");
    for core in cores {
        assert_eq!(core["commands"], 2048, "{cores:?}");
    }
}

#[test]
fn bssplit_and_sha256_verify_every_block_through_the_driver() {
    let v = json_of(&bench(&[
        "--rw=randwrite",
        "--verify=sha256",
        "--bssplit=4k/50:16k/30:64k/20",
        "--size=8m",
        "--iodepth=16",
    ]));
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    assert_eq!(job["verify_errors"], 0);
    assert_eq!(job["write"]["io_bytes"], 8 << 20);
    // Every 512-byte block of the 8 MiB is read back and checked once.
    assert_eq!(job["verify"]["verified_blocks"], 16384);
    assert_eq!(job["job options"]["bssplit"], "4k/50:16k/30:64k/20");
}

#[test]
fn dma_memory_is_sized_for_the_largest_bssplit_size_not_bs() {
    // 32 slots of 512 KiB need 16 MiB of DMA memory; sized from bs (4 KiB) it was ~3 MiB
    // and the queue could not be set up.
    let v = json_of(&bench(&[
        "--rw=randwrite",
        "--verify=crc32c",
        "--bssplit=4k/50:512k/50",
        "--size=32m",
        "--iodepth=32",
    ]));
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    assert_eq!(job["verify_errors"], 0);
    assert_eq!(job["write"]["io_bytes"], 32 << 20);
}

#[test]
fn trim_deallocates_on_the_device_and_the_blocks_read_back_zeroes() {
    // One external target, three clients: write 4 MiB, trim its first 2 MiB, then replay
    // the trim job with verify_only, which reads the range back expecting zeroes (DLFEAT).
    let t = common::start(&[("malloc", 512, 1 << 15)]);
    let dir = t.dir().to_str().unwrap().to_owned();
    let on = |args: &[&str]| {
        let mut a = vec!["--socket", dir.as_str(), "--bs=64k", "--iodepth=8"];
        a.extend_from_slice(args);
        bench(&a)
    };
    let w = json_of(&on(&["--rw=write", "--size=4m"]));
    assert_eq!(dir_ios(&w["jobs"][0], "write"), 64);
    let zeroes = ["--rw=trim", "--size=2m", "--verify=crc32c", "--verify_only"];
    // Before the trim the blocks hold data: the check fails, naming the first LBA.
    let before = on(&zeroes);
    assert!(!before.status.success());
    let v: Value = serde_json::from_slice(&before.stdout).unwrap();
    assert_eq!(v["jobs"][0]["error"], 84);
    let trim = json_of(&on(&["--rw=randtrim", "--size=2m"]));
    assert_eq!(dir_ios(&trim["jobs"][0], "trim"), 32);
    let after = json_of(&on(&zeroes));
    let job = &after["jobs"][0];
    assert_eq!(job["verify_errors"], 0, "{job}");
    assert_eq!(job["verify"]["verified_blocks"], 4096);
    assert_eq!(dir_ios(job, "write"), 0);
}

#[test]
fn a_later_read_verify_job_passes_on_intact_data_and_fails_on_lost_data() {
    // Write with verify headers and no read-back, then check from other clients (new
    // processes) as fio users do: a read job with the same --verify.
    let t = common::start(&[("malloc", 512, 1 << 15)]);
    let dir = t.dir().to_str().unwrap().to_owned();
    let on = |args: &[&str]| {
        let mut a = vec!["--socket", dir.as_str(), "--bs=64k"];
        a.extend_from_slice(args);
        bench(&a)
    };
    let read_verify = ["--rw=randread", "--verify=md5", "--size=2m"];
    // Nothing written yet: nothing to verify is a failure, as fio's bad magic header.
    let blank = on(&read_verify);
    assert_eq!(blank.status.code(), Some(1));
    let err = String::from_utf8_lossy(&blank.stderr);
    assert!(err.contains("bad magic 0x00000000"), "{err}");
    json_of(&on(&[
        "--rw=write",
        "--verify=md5",
        "--do_verify=0",
        "--size=2m",
    ]));
    let v = json_of(&on(&read_verify));
    let job = &v["jobs"][0];
    assert_eq!(job["verify"]["verified_blocks"], 4096, "{job}");
    assert_eq!(job["verify"]["unverifiable_ios"], 0, "{job}");
    // Lost: 64 KiB trimmed in the middle.
    json_of(&on(&["--rw=trim", "--offset=1m", "--size=64k"]));
    let lost = on(&read_verify);
    assert_eq!(lost.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&lost.stdout).unwrap();
    assert_eq!(v["jobs"][0]["error"], 84);
    let err = String::from_utf8_lossy(&lost.stderr);
    assert!(
        err.contains("verify failed at lba 2048: bad magic"),
        "{err}"
    );
}

#[test]
fn two_jobs_verify_on_two_queue_pairs() {
    let v = json_of(&bench(&[
        "--numjobs=2",
        "--rw=randrw",
        "--verify=crc32c",
        "--size=8m",
        "--bs=8k",
        "--iodepth=8",
    ]));
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    for job in jobs {
        assert_eq!(job["error"], 0, "{job}");
        assert_eq!(job["verify_errors"], 0);
        assert!(job["verify"]["verified_ios"].as_u64().unwrap() > 0);
        assert!(dir_ios(job, "write") > 0);
    }
}

#[test]
fn prp_list_sized_verify_on_4k_namespace() {
    let v = json_of(&bench(&[
        "--ns=malloc:size=64M,lba=4096",
        "--rw=write",
        "--verify=crc32c",
        "--size=16m",
        "--bs=128k",
        "--iodepth=4",
    ]));
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    assert_eq!(job["verify_errors"], 0);
    assert_eq!(dir_ios(job, "write"), 128);
    assert_eq!(job["verify"]["verified_ios"], 128);
}

#[test]
fn socket_run_drives_an_external_target() {
    let t = common::start(&[("malloc", 512, 1 << 15)]);
    let dir = t.dir().to_str().unwrap().to_owned();
    let v = json_of(&bench(&[
        "--socket",
        &dir,
        "--rw=randrw",
        "--verify=crc32c",
        "--size=4m",
        "--iodepth=8",
    ]));
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "{job}");
    assert_eq!(job["verify_errors"], 0);
    assert!(job["verify"]["verified_ios"].as_u64().unwrap() > 0);
    // No in-process target to observe.
    assert!(v["target"].is_null());
    assert!(v["machine"]["target_cpus"].as_array().unwrap().is_empty());
    // The target serves the next client after the bench detached cleanly.
    let again = json_of(&bench(&["--socket", &dir, "--rw=read", "--size=64k"]));
    assert_eq!(dir_ios(&again["jobs"][0], "read"), 16);
}

#[test]
fn unknown_namespace_on_socket_is_one_clear_error() {
    let t = common::start(&[("malloc", 512, 4096)]);
    let out = bench(&[
        "--socket",
        t.dir().to_str().unwrap(),
        "--nsid=7",
        "--size=64k",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("namespace 7 is not active"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn missing_server_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = bench(&["--socket", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    let want = format!("nvmemu: cannot attach to {}/cntrl: ", dir.path().display());
    assert!(lines[0].starts_with(&want), "{err}");
    assert!(lines[0].ends_with("(is nvmemu serve running?)"), "{err}");
}

#[test]
fn block_size_the_namespace_cannot_take_is_rejected() {
    let out = bench(&["--ns=malloc:size=16M,lba=4096", "--bs=512", "--size=1m"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Block size 512"), "{err}");
}

/// `nvmemu bench ARGS` expected to fail before any I/O, with one line on stderr.
fn rejected(args: &[&str]) -> String {
    let out = nvmemu()
        .args(["bench", "--eta=never"])
        .args(args)
        .output()
        .unwrap();
    common::one_line_failure(&out)
}

#[test]
fn inputs_are_checked_before_the_run() {
    // Queue size: the in-process controller's queues hold 1023 commands.
    let e = rejected(&["--iodepth=2000"]);
    assert!(
        e.contains("--iodepth=2000 is more than the 1023 commands"),
        "{e}"
    );
    // Block size against the LBA size, before a 4 GiB namespace would be backed.
    let e = rejected(&["--bs=3", "--ns=malloc:size=4G,lba=512"]);
    assert!(e.contains("Block size 3"), "{e}");
    // An output path that cannot be written, before the run rather than after it.
    let e = rejected(&["--runtime=1", "--plot=/nonexistent-dir/run.svg"]);
    assert!(
        e.contains("--plot /nonexistent-dir/run.svg: cannot write there"),
        "{e}"
    );
    // CPUs this process cannot run on: the same fatal line for jobs and target.
    for flag in ["--cpus_allowed", "--target-cpus"] {
        let e = rejected(&["--runtime=1", &format!("{flag}=1000")]);
        assert!(
            e.contains(&format!(
                "{flag} names CPU 1000, which this process cannot run on"
            )),
            "{e}"
        );
    }
}

#[test]
fn iodepth_beyond_an_external_controllers_queues_is_rejected_before_the_jobs() {
    let t = common::start_default();
    let e = rejected(&[
        "--socket",
        t.dir().to_str().unwrap(),
        "--iodepth=4000",
        "--size=64k",
    ]);
    assert!(
        e.contains("--iodepth=4000 is more than the 1023 commands"),
        "{e}"
    );
    common::assert_serves_next_client(&t);
}

#[test]
fn what_fio_users_type_gets_fio_answers() {
    // Less than one block: fio's "size too small", not a range that "does not fit".
    let e = rejected(&["--size=1k"]);
    assert!(
        e.contains("Size too small, must not be less than minimum block size: 1024 < 4096"),
        "{e}"
    );
    // More jobs than queue pairs: one line before anything starts, no log line first.
    let e = rejected(&["--numjobs=1000", "--size=64k"]);
    assert!(e.contains("--numjobs=1000 needs 1000 I/O queues"), "{e}");
    // An option given twice: the last one wins, as in fio.
    let v = json_of(&bench(&[
        "--rw=read",
        "--size=64k",
        "--size=128k",
        "--bs=4k",
    ]));
    assert_eq!(dir_ios(&v["jobs"][0], "read"), 32);
}

#[test]
fn more_jobs_than_cpus_is_one_warning() {
    let out = nvmemu()
        .args(["bench", "--eta=never", "--output-format=json"])
        .args(["--numjobs=3", "--cpus_allowed=0", "--size=64k"])
        .args(["--ns=null:size=16M,lba=512"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nvmemu: warning: 3 jobs share 1 CPU (0); "),
        "{err}"
    );
    assert_eq!(json_of(&out)["jobs"].as_array().unwrap().len(), 3);
}

#[test]
fn runtime_zero_means_no_time_limit() {
    let v = json_of(&bench(&["--runtime=0", "--rw=read", "--size=1m"]));
    assert_eq!(dir_ios(&v["jobs"][0], "read"), 256);
}

#[test]
fn no_colour_codes_when_stderr_is_not_a_terminal() {
    let out = nvmemu()
        .env("RUST_LOG", "info")
        .args(["bench", "--eta=never", "--runtime=100ms"])
        .args(["--ns=null:size=16M,lba=512"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(" INFO "), "some log lines: {err}");
    assert!(!err.contains('\x1b'), "colour codes in {err:?}");
}

/// A reader that has gone (`| head -1`) ends the run with one error line and status 1,
/// for the report and for the probe's, not with a panic.
#[test]
fn closed_standard_output_is_an_error_line_not_a_panic() {
    for extra in [&[][..], &["--ceiling"][..]] {
        let mut child = nvmemu()
            .args(["bench", "--eta=never", "--runtime=100ms", "--iodepth=1"])
            .args(["--ns=malloc:size=1M,lba=512"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{extra:?}: {err}");
        assert!(
            err.trim_end()
                .ends_with("nvmemu: writing to standard output: Broken pipe (os error 32)"),
            "{extra:?}: {err}"
        );
    }
}

/// A note written into a standard error whose reader has gone is lost, and the run goes on
/// to its report (`eprintln!` aborted it).
#[test]
fn closed_standard_error_loses_the_notes_not_the_run() {
    let mut child = nvmemu()
        .args(["bench", "--eta=never", "--output-format=json"])
        .args(["--numjobs=3", "--cpus_allowed=0", "--size=64k"])
        .args(["--ns=null:size=16M,lba=512"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(json_of(&out)["jobs"].as_array().unwrap().len(), 3);
}
