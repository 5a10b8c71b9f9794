// SPDX-License-Identifier: Apache-2.0
//! `nvmemu bench`'s JSON against real fio's on the same jobs: every key fio writes is
//! there, in fio's order, at the same place (structure and order, not values); the
//! percentile keys are the same strings; json+ bins ascend as fio's do. What nvmemu adds
//! is a known list, and what it leaves out (`disk_util`) is documented in docs/bench.md. fio comes from Debian's package: installed here under CI
//! (`CI=true`), skipped in one line elsewhere when it is missing.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Keys nvmemu adds to fio's (paths as [`paths`] writes them).
const ADDED: [&str; 10] = [
    "/jobs[]/job_start",
    "/jobs[]/verify_errors",
    "/jobs[]/verify",
    "/jobs[]/cpu",
    "/jobs[]/time_series",
    "/jobs[]/error_text",
    "/nvmemu version",
    "/target",
    "/machine",
    "/jobs[]/job options/",
];

/// Keys fio writes that nvmemu leaves out on purpose (docs/bench.md).
const LEFT_OUT: [&str; 2] = ["/disk_util", "/jobs[]/job options/"];

/// Whether fio can run, installing Debian's package under CI.
fn fio_ready() -> bool {
    let present = || {
        Command::new("fio")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if present() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        for args in [&["update"][..], &["install", "-y", "fio"]] {
            let s = Command::new("apt-get").args(args).status().unwrap();
            assert!(s.success(), "apt-get {args:?} failed");
        }
        assert!(present(), "fio installed but does not run");
        return true;
    }
    eprintln!("fio_json: skipped, fio is not installed (CI installs it: apt-get install -y fio)");
    false
}

/// Every key path of `v` in document order: objects by key, arrays by their first element
/// (`[]`); `bins` and `job options` contents are checked apart (values, not structure).
fn paths(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{at}/{k}");
                out.push(p.clone());
                if k == "job options" {
                    out.push(format!("{p}/"));
                } else if k != "bins" {
                    paths(x, &p, out);
                }
            }
        }
        Value::Array(a) => {
            if let Some(first) = a.first() {
                paths(first, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

/// Whether `p` is one of `list` or lies under one (a trailing `/` means "under only").
fn under_any(p: &str, list: &[&str]) -> bool {
    list.iter().any(|l| {
        p.starts_with(l)
            && (l.ends_with('/') || p.len() == l.len() || p[l.len()..].starts_with(['/', '[']))
    })
}

/// fio's paths must appear in nvmemu's in the same order; nvmemu's extra paths must be
/// known additions.
fn compare(job: &str, fio: &Value, ours: &Value) {
    let (mut f, mut n) = (Vec::new(), Vec::new());
    paths(fio, "", &mut f);
    paths(ours, "", &mut n);
    let f: Vec<&String> = f.iter().filter(|p| !under_any(p, &LEFT_OUT)).collect();
    let n: Vec<&String> = n.iter().filter(|p| !under_any(p, &ADDED)).collect();
    let entries = |v: &Value| v["jobs"].as_array().map_or(0, Vec::len);
    assert_eq!(entries(fio), entries(ours), "{job}: job entries");
    if let Some(at) = (0..f.len().max(n.len())).find(|&i| f.get(i) != n.get(i)) {
        let around = |v: &[&String]| -> Vec<String> {
            v.iter()
                .skip(at.saturating_sub(2))
                .take(5)
                .map(|p| (*p).clone())
                .collect()
        };
        panic!(
            "{job}: key {at} differs; fio has {:?}, nvmemu {:?}",
            around(&f),
            around(&n)
        );
    }
    // json+ bins: ascending latencies, as fio writes them.
    for v in [fio, ours] {
        if let Some(bins) = v["jobs"][0]["read"]["clat_ns"]["bins"].as_object() {
            let keys: Vec<u64> = bins.keys().map(|k| k.parse().unwrap()).collect();
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "{job}: bins {keys:?}");
        }
    }
}

/// The JSON report `cmd` prints, which must succeed.
fn report_of(mut cmd: Command) -> Value {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fio_json(args: &[&str], dir: &Path) -> Value {
    let mut cmd = Command::new("fio");
    cmd.current_dir(dir).arg("--output-format=json+").args(args);
    report_of(cmd)
}

fn nvmemu_json(args: &[&str]) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvmemu"));
    cmd.args(["bench", "--eta=never", "--output-format=json+"])
        .args(["--ns=malloc:size=64M,lba=512"])
        .args(args);
    report_of(cmd)
}

#[test]
fn bench_json_has_fios_keys_in_fios_order() {
    if !fio_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let file_arg = format!("--filename={}", file.display());
    let jobs: [(&str, &[&str]); 4] = [
        (
            "randread",
            &["--rw=randread", "--bs=4k", "--iodepth=8", "--size=8m"],
        ),
        (
            "randrw 70/30",
            &["--rw=randrw", "--rwmixread=70", "--size=8m"],
        ),
        (
            "two jobs, group_reporting",
            &["--rw=read", "--numjobs=2", "--group_reporting", "--size=4m"],
        ),
        (
            "write and verify",
            &["--rw=write", "--verify=crc32c", "--size=4m"],
        ),
    ];
    for (name, args) in jobs {
        let mut args = args.to_vec();
        args.insert(0, "--name=job");
        // fio on the null engine, or on a file where the job needs data (verify).
        let mut fio_args = args.clone();
        if args.iter().any(|a| a.starts_with("--verify")) {
            fio_args.push(&file_arg);
        } else {
            fio_args.push("--ioengine=null");
        }
        compare(name, &fio_json(&fio_args, dir.path()), &nvmemu_json(&args));
    }
    // A job file: [global] once under "global options", each job's own section under
    // its "job options", as written.
    let job_file = dir.path().join("two.fio");
    std::fs::write(
        &job_file,
        "[global]\nioengine=null\nsize=4m\nbs=8k\n[a]\nrw=read\n[b]\nrw=write\nbs=4k\n",
    )
    .unwrap();
    let path = job_file.to_str().unwrap();
    let (fio, ours) = (fio_json(&[path], dir.path()), nvmemu_json(&[path]));
    compare("job file", &fio, &ours);
    assert_eq!(ours["global options"], fio["global options"]);
    for (f, n) in fio["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .zip(ours["jobs"].as_array().unwrap())
    {
        assert_eq!(f["job options"], n["job options"]);
    }
}
