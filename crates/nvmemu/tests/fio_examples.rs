// SPDX-License-Identifier: Apache-2.0
//! Every job file fio ships as an example (Debian's `fio-examples`, installed here when
//! missing and the test runs as root; never copied into the repository) run by
//! `nvmemu bench` against its in-process target, each stage capped at 50 ms. The outcomes
//! are counted and printed; no file may stop on an option name or value unless real fio's
//! `--parse-only` rejects the file too.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const EXAMPLES: &str = "/usr/share/doc/fio/examples";

fn examples() -> Option<Vec<PathBuf>> {
    if !Path::new(EXAMPLES).is_dir() && rustix::process::geteuid().is_root() {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-qq", "fio", "fio-examples"])
            .stdout(Stdio::null())
            .status();
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(EXAMPLES)
        .ok()?
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "fio"))
        .collect();
    files.sort();
    Some(files)
}

/// `Some(true)` if real fio parses the file, `None` without fio.
fn fio_accepts(file: &Path) -> Option<bool> {
    let status = Command::new("fio")
        .arg("--parse-only")
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    Some(status.success())
}

/// `nvmemu bench` on one job file, once.
fn run_once(file: &Path, dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmemu"))
        .current_dir(dir)
        .args(["bench", "--eta=never", "--ns=malloc:size=64M"])
        .arg(file)
        .args(["--runtime=50ms", "--output-format=terse"])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The line of a failed run's stderr that says why it stopped.
fn error_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .find(|l| !l.contains(" ignored: ") && !l.contains("warning:"))
        .unwrap_or("")
        .to_string()
}

/// An option name or value `nvmemu bench` does not take.
fn is_parse_error(line: &str) -> bool {
    line.contains("unexpected argument") || line.contains("invalid value")
}

/// Whether a failure can come from a loaded machine: a deadline missed (a reply, a
/// completion, a controller's ready bit), or a write stage cut at 50 ms before it wrote
/// what a later stage verifies. Everything else (an option refused, a geometry the
/// namespace cannot hold, data that reads back wrong) fails alike on every try.
fn may_be_load(line: &str) -> bool {
    const OUT_OF_TIME: [&str; 5] = [
        "within",
        "in time",
        "timed out",
        "no completion on queue",
        "no verify header",
    ];
    let line = line.to_lowercase();
    !is_parse_error(&line) && OUT_OF_TIME.iter().any(|w| line.contains(w))
}

/// `nvmemu bench` on one job file: a failure that may be the machine's load is tried
/// twice more, so a job that only ran out of time still counts as run; any other
/// failure is final at once, and a job that fails on every try is a real failure.
fn run_with_retries(file: &Path, dir: &Path) -> Output {
    let mut out = run_once(file, dir);
    for _ in 0..2 {
        if out.status.success() || !may_be_load(&error_line(&out)) {
            break;
        }
        out = run_once(file, dir);
    }
    out
}

#[test]
fn fio_example_job_files_run_or_stop_only_where_fio_would() {
    let Some(files) = examples() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{EXAMPLES} missing: apt-get install fio fio-examples"
        );
        eprintln!("skipped: {EXAMPLES} missing (apt-get install fio fio-examples)");
        return;
    };
    let (mut ran, mut other) = (Vec::new(), Vec::new());
    let mut wrong = Vec::new();
    // Some jobs write fio's log files into the working directory.
    let scratch = tempfile::tempdir().unwrap();
    for file in &files {
        let out = run_with_retries(file, scratch.path());
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        if out.status.success() {
            ran.push(name);
            continue;
        }
        let line = error_line(&out);
        if is_parse_error(&line) && fio_accepts(file) != Some(false) {
            wrong.push(format!("{name}: {line}"));
        } else {
            other.push(format!("{name}: {line}"));
        }
    }
    eprintln!(
        "fio examples: {} of {} ran; {} stopped where fio stops too or on what the \
         namespace cannot hold (an offset past its end, an I/O above its transfer limit):",
        ran.len(),
        files.len(),
        other.len()
    );
    for o in &other {
        eprintln!("  {o}");
    }
    assert!(
        wrong.is_empty(),
        "rejected what fio accepts:\n{}",
        wrong.join("\n")
    );
    // 63 of fio 3.33's 86 run here (mtd.fio's trimwrite among them; surface-scan.fio's
    // read-verify finds the blocks its write phase, cut at 50 ms, left unwritten); fewer
    // is a regression.
    assert!(ran.len() * 86 >= files.len() * 63, "only {} ran", ran.len());
}

/// The retry rule read against the messages themselves: what a deadline or a cut write
/// stage prints is retried, what a refusal or corrupt data prints is final.
#[test]
fn only_failures_that_ran_out_of_time_are_retried() {
    use nvmemu_bench::verify::{VerifyFailure, VerifyFailureKind};
    use nvmemu_bench::{BenchError, EngineError};
    use nvmemu_driver::{DriverError, NvmeError};
    use nvmemu_vfio_user::{ClientError, Command as VfioCommand, FrameError};
    use std::time::Duration;

    let limit = Duration::from_secs(5);
    let verify = |kind| VerifyFailure { lba: 1920, kind }.to_string();
    let retried = [
        NvmeError::Timeout {
            qid: nvmemu_spec::Qid(1),
            millis: 5000,
        }
        .to_string(),
        DriverError::Timeout {
            what: "CSTS.RDY=1",
            millis: 5000,
        }
        .to_string(),
        ClientError::ConnectTimedOut { limit }.to_string(),
        ClientError::TimedOut {
            command: VfioCommand::DmaMap,
            limit,
        }
        .to_string(),
        FrameError::ReadTimedOut { what: "message" }.to_string(),
        EngineError::Stalled {
            qid: 1,
            waited_ms: 5000,
            in_flight: 16,
        }
        .to_string(),
        verify(VerifyFailureKind::BadMagic { found: 0 }),
    ];
    let final_at_once = [
        "x.fio:4: unexpected argument '--cont' found".to_string(),
        "x.fio:70: invalid value 'within' for '--rw <RW>'".to_string(),
        BenchError::BlockSize {
            bs: 2 << 20,
            block_size: 512,
            max_transfer: 1 << 20,
        }
        .to_string(),
        BenchError::Range {
            offset: 64 << 20,
            size: 0,
            capacity: 64 << 20,
        }
        .to_string(),
        verify(VerifyFailureKind::BadChecksum {
            method: "crc32c",
            stored: 1,
            computed: 2,
        }),
        verify(VerifyFailureKind::WrongLba { found: 7 }),
    ];
    for m in &retried {
        assert!(
            may_be_load(&format!("nvmemu: job 0 failed: {m}")),
            "not retried: {m}"
        );
    }
    for m in &final_at_once {
        assert!(!may_be_load(&format!("nvmemu: {m}")), "retried: {m}");
    }
}
