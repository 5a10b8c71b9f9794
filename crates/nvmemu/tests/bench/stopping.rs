// SPDX-License-Identifier: Apache-2.0
//! Stopping a run: Ctrl-C and repeated SIGINTs, a server that goes away, falls silent or
//! stops mid-run, and a stop that cannot finish within its grace. Each still reports.

use std::process::Stdio;

use serde_json::Value;

use super::{common, dir_ios, nvmemu, report_of};

/// A running `nvmemu bench --eta=always`: the child, the thread collecting its stderr
/// (returns all of it), and the read IOPS of each status line as it arrives.
struct Running {
    child: std::process::Child,
    reader: std::thread::JoinHandle<String>,
    iops: std::sync::mpsc::Receiver<u64>,
}

impl Running {
    /// Wait (up to 60 s, however slow the machine) for a status line whose read IOPS
    /// satisfy `want`.
    fn wait_for(&self, what: &str, want: impl Fn(u64) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.iops.recv_timeout(left) {
                Ok(v) if want(v) => return,
                Ok(_) => {}
                Err(_) => panic!("no status line with {what} within 60 s"),
            }
        }
    }
}

/// Start `nvmemu bench ARGS --eta=always` and return once its job has done I/O (a status
/// line on stderr shows a non-zero `[r=... IOPS]`).
fn spawn_running(args: &[&str]) -> Running {
    spawn_running_in(args, &std::env::temp_dir())
}

/// [`spawn_running`] with `TMPDIR` set to `tmp` (where the in-process target's socket
/// directory goes).
fn spawn_running_in(args: &[&str], tmp: &std::path::Path) -> Running {
    use std::io::Read;
    let mut child = nvmemu()
        .env("TMPDIR", tmp)
        .arg("bench")
        .arg("--eta=always")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nvmemu starts");
    let mut stderr = child.stderr.take().unwrap();
    let (tx, iops) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 256];
        let mut parsed = 0;
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            let values = status_iops(&text);
            for &v in values.get(parsed..).unwrap_or_default() {
                let _ = tx.send(v);
            }
            parsed = values.len();
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let r = Running {
        child,
        reader,
        iops,
    };
    r.wait_for("non-zero IOPS", |v| v > 0);
    r
}

/// The read IOPS of every complete status line so far (`Jobs: 1 ...][r=782k IOPS][...`,
/// each ended by a carriage return); a line without an IOPS field (fio leaves zero rates
/// out) counts as 0. fio's k/M suffixes only need to stay non-zero here.
fn status_iops(stderr: &str) -> Vec<u64> {
    let mut lines: Vec<&str> = stderr.split('\r').collect();
    lines.pop(); // not ended yet
    lines
        .iter()
        .filter_map(|l| l.find("Jobs: ").map(|at| &l[at..]))
        .map(|line| {
            line.split('[')
                .filter_map(|f| f.strip_prefix("r=")?.strip_suffix(" IOPS]"))
                .find_map(|v| {
                    let v = v.trim();
                    let digits: String = v.chars().take_while(|c| c.is_ascii_digit()).collect();
                    let n: u64 = digits.parse().ok()?;
                    Some(if v.len() > digits.len() {
                        n.max(1) * 1000
                    } else {
                        n
                    })
                })
                .unwrap_or(0)
        })
        .collect()
}

#[test]
fn ctrl_c_stops_the_run_and_still_reports() {
    let Running { child, reader, .. } = spawn_running(&[
        "--output-format=json",
        "--runtime=60",
        "--time_based",
        "--ns=malloc:size=64M,lba=512",
    ]);
    // Interrupt it as a terminal would.
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = reader.join().unwrap();
    // fio's status for an interrupted run: scripts can tell it from a complete one.
    assert_eq!(out.status.code(), Some(128), "{err}");
    assert!(
        err.ends_with(
            "nvmemu: SIGINT stopped the run before it completed; the report covers it until then\n"
        ),
        "{err}"
    );
    let v = report_of(&out);
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "{err}");
    assert!(dir_ios(job, "read") > 0);
    // Stopped well before the 60 s it was asked for.
    assert!(job["read"]["runtime"].as_u64().unwrap() < 30_000);
}

#[test]
fn normal_output_is_fio_text() {
    let out = nvmemu()
        .args(["bench", "--eta=never", "--runtime=200ms", "--iodepth=4"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let t = String::from_utf8_lossy(&out.stdout);
    // fio's job line says what ran, then the job's report.
    assert!(
        t.starts_with(
            "nvmemu: (g=0): rw=randread, bs=(R) 4096B-4096B, (W) 4096B-4096B, \
             (T) 4096B-4096B, ioengine=nvmemu, iodepth=4\nfio-3.33\nStarting 1 thread\n\n\
             nvmemu: (groupid=0, jobs=1): err= 0: pid="
        ),
        "{t}"
    );
    assert!(t.contains("\n  read: IOPS="), "{t}");
    let w = nvmemu()
        .args(["bench", "--eta=never", "--runtime=200ms", "--rw=randwrite"])
        .output()
        .unwrap();
    let w = String::from_utf8_lossy(&w.stdout);
    let line = w.lines().find(|l| l.starts_with("  write: IOPS=")).unwrap();
    assert!(line.ends_with("msec); 0 zone resets"), "{w}");
    assert!(
        t.contains("\nRun status group 0 (all jobs):\n   READ: bw="),
        "{t}"
    );
}

#[test]
fn server_gone_mid_run_ends_the_job_with_an_error_and_the_report() {
    let t = common::start(&[("malloc", 512, 1 << 15)]);
    let dir = t.dir().to_str().unwrap().to_owned();
    // Only once I/O flows: a run stopped before its first command has nothing to fail.
    let run = spawn_running(&[
        "--output-format=json",
        "--runtime=60",
        "--time_based",
        "--socket",
        &dir,
    ]);
    // The server goes away: its socket closes and nothing completes any more.
    t.target.remove_controller(t.id).unwrap();
    // Wait until the job is stuck on commands the server will never complete. Right after
    // the removal it may still be reaping completions posted just before, and on a loaded
    // machine those can be every command it had: stopped then, it would rightly end clean.
    while run.iops.try_recv().is_ok() {} // lines from before the removal
    run.wait_for("zero IOPS", |v| v == 0);
    // Then the run is interrupted (as `timeout` would): it must end, not wait forever.
    let pid = rustix::process::Pid::from_raw(i32::try_from(run.child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = run.child.wait_with_output().unwrap();
    let err = run.reader.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("job 0 failed: "), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("report still printed");
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 5, "EIO: {job}");
    assert!(dir_ios(job, "read") > 0);
}

fn signal(child: &std::process::Child, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

/// The entries of `dir` (a test's private TMPDIR).
fn entries(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn two_quick_sigints_still_print_the_report_and_remove_the_socket_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let run = spawn_running_in(
        &[
            "--output-format=json",
            "--runtime=60",
            "--time_based",
            "--ns=null:size=64M,lba=512",
        ],
        tmp.path(),
    );
    let socket_dirs = || {
        entries(tmp.path())
            .into_iter()
            .filter(|e| e.starts_with("nvmemu-bench-"))
            .collect::<Vec<_>>()
    };
    assert_eq!(socket_dirs().len(), 1, "the socket directory exists");
    // What GNU timeout does (child, then its group): two signals in a row.
    signal(&run.child, rustix::process::Signal::INT);
    signal(&run.child, rustix::process::Signal::INT);
    let out = run.child.wait_with_output().unwrap();
    let err = run.reader.join().unwrap();
    assert_eq!(out.status.code(), Some(128), "{err}");
    assert!(err.contains("nvmemu: SIGINT: stopping the run"), "{err}");
    let v = report_of(&out);
    let job = &v["jobs"][0];
    assert_eq!(job["error"], 0, "{err}");
    assert!(dir_ios(job, "read") > 0);
    assert!(job["read"]["runtime"].as_u64().unwrap() < 30_000);
    assert_eq!(socket_dirs(), Vec::<String>::new(), "left behind");
}

#[test]
fn a_silent_server_fails_the_run_within_the_reply_timeout() {
    let server = common::silent_server();
    let tmp = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = nvmemu()
        .env("TMPDIR", tmp.path())
        .args([
            "bench",
            "--eta=never",
            "--size=64k",
            "--reply-timeout=300ms",
        ])
        .arg("--socket")
        .arg(server.dir.path())
        .output()
        .unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let err = common::one_line_failure(&out);
    assert!(
        err.contains("Server did not answer Version within 300ms"),
        "{err}"
    );
    assert!(server.accepted.try_recv().is_ok(), "it did connect");
    assert_eq!(entries(tmp.path()), Vec::<String>::new());
}

#[test]
fn a_stop_that_cannot_finish_ends_after_the_grace_with_a_message() {
    let server = common::silent_server();
    let mut child = nvmemu()
        .args(["bench", "--eta=never", "--size=64k", "--reply-timeout=120s"])
        .arg("--socket")
        .arg(server.dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Connected (so the signal handling is in place), now waiting for VERSION's reply.
    server
        .accepted
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap();
    let started = std::time::Instant::now();
    signal(&child, rustix::process::Signal::TERM);
    let deadline = started + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "still running");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 15), "{err}");
    assert!(err.contains("did not stop within 5 s of SIGTERM"), "{err}");
}

#[test]
fn a_server_stopped_mid_run_fails_it_within_the_reply_timeout_in_one_line() {
    // A real `nvmemu serve` in its own process, so that it can be SIGSTOPped.
    let tmp = tempfile::tempdir().unwrap();
    let ctrl = tmp.path().join("ctrl");
    std::fs::create_dir(&ctrl).unwrap();
    let mut server = nvmemu()
        .args([
            "serve",
            "-m",
            "0x1",
            "--ns",
            "malloc:size=64M,lba=512",
            "-r",
        ])
        .arg(tmp.path().join("rpc.sock"))
        .arg("--socket-dir")
        .arg(&ctrl)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    common::wait_for("the server's socket", || {
        ctrl.join("cntrl").exists().then_some(())
    });
    let run = spawn_running(&[
        "--output-format=json",
        "--runtime=60",
        "--time_based",
        "--reply-timeout=1s",
        "--socket",
        ctrl.to_str().unwrap(),
    ]);
    signal(&server, rustix::process::Signal::STOP);
    let stopped = std::time::Instant::now();
    let out = run.child.wait_with_output().unwrap();
    let took = stopped.elapsed();
    let err = run.reader.join().unwrap();
    signal(&server, rustix::process::Signal::CONT);
    server.kill().unwrap();
    server.wait().unwrap();
    // Was: a 10 s stall limit whatever --reply-timeout said, then three more timeouts
    // detaching, with a WARN line each.
    assert!(took < std::time::Duration::from_secs(6), "took {took:?}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err
        .split(['\n', '\r'])
        .filter(|l| !l.trim().is_empty() && !l.starts_with("Jobs: "))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("nvmemu: job 0 failed: No completion on queue 1 for "),
        "{err}"
    );
    let v = report_of(&out);
    assert_eq!(v["jobs"][0]["error"], 5, "EIO");
}
