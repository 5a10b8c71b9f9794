// SPDX-License-Identifier: Apache-2.0
//! `nvmemu identify` against our target on a socket: nvme-cli's id-ctrl and
//! id-ns text and JSON.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::process::{Command, Output};

use serde_json::Value;

fn identify(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmemu"))
        .arg("identify")
        .args(args)
        .output()
        .expect("nvmemu runs")
}

fn stdout_ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "nvmemu identify failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

#[test]
fn text_matches_nvme_cli_id_ctrl_and_id_ns() {
    let t = common::start(&[("malloc", 512, 2048), ("null", 4096, 1024)]);
    let out = stdout_ok(&identify(&["--socket", t.dir().to_str().unwrap()]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "NVME Identify Controller:");
    assert_eq!(lines[1], "vid       : 0x4e58");
    assert_eq!(lines[2], "ssvid     : 0x4e58");
    assert!(lines[3].starts_with("sn        : TESTSERIAL01"), "{out}");
    assert!(lines[4].starts_with("mn        : nvmemu test controller"));
    assert!(lines[5].starts_with("fr        : "));
    for needle in [
        "\nmdts      : 8\n",
        "\nnn        : ",
        "\nsqes      : 0x66\n",
        "\ncqes      : 0x44\n",
        "\nsubnqn    : nqn.",
        "\nps    0 : mp:",
        "\nNVME Identify Namespace 1:\nnsze    : 0x800\nncap    : 0x800\n",
        "\nlbaf  0 : ms:0   lbads:9  rp:0 (in use)\n",
        "\nNVME Identify Namespace 2:\nnsze    : 0x400\n",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
    // Namespace 2 uses 4 KiB blocks: its in-use format says so.
    let ns2 = out.split("NVME Identify Namespace 2:").nth(1).unwrap();
    let in_use: Vec<&str> = ns2.lines().filter(|l| l.ends_with("(in use)")).collect();
    assert_eq!(in_use.len(), 1);
    assert!(in_use[0].contains("lbads:12"), "{ns2}");
}

#[test]
fn json_has_nvme_cli_keys() {
    let t = common::start(&[("malloc", 512, 2048), ("null", 4096, 1024)]);
    let out = stdout_ok(&identify(&[
        "--socket",
        t.dir().to_str().unwrap(),
        "--output-format",
        "json",
    ]));
    let v: Value = serde_json::from_str(&out).expect("JSON");
    let c = &v["controller"];
    assert_eq!(c["vid"], 0x4e58);
    assert_eq!(c["ssvid"], 0x4e58);
    assert_eq!(c["sn"].as_str().unwrap().trim_end(), "TESTSERIAL01");
    assert_eq!(c["mdts"], 8);
    assert_eq!(c["sqes"], 0x66);
    assert!(c["nn"].as_u64().unwrap() >= 2);
    assert!(!c["psds"].as_array().unwrap().is_empty());
    let ns = v["namespaces"].as_array().unwrap();
    assert_eq!(ns.len(), 2);
    assert_eq!(ns[0]["nsid"], 1);
    assert_eq!(ns[0]["nsze"], 2048);
    assert_eq!(ns[1]["nsze"], 1024);
    for (n, ds) in [(&ns[0], 9), (&ns[1], 12)] {
        let flbas = usize::try_from(n["flbas"].as_u64().unwrap() & 0xF).unwrap();
        assert_eq!(n["lbafs"][flbas]["ds"], ds);
        assert_eq!(n["lbafs"][flbas]["ms"], 0);
    }
}

#[test]
fn nsid_selects_one_namespace() {
    let t = common::start(&[("malloc", 512, 2048), ("null", 4096, 1024)]);
    let out = stdout_ok(&identify(&[
        "--socket",
        t.dir().to_str().unwrap(),
        "--nsid",
        "2",
    ]));
    assert!(out.contains("NVME Identify Namespace 2:"));
    assert!(!out.contains("NVME Identify Namespace 1:"));
}

#[test]
fn inactive_namespace_reports_the_nvme_status() {
    let t = common::start(&[("malloc", 512, 2048)]);
    let out = identify(&["--socket", t.dir().to_str().unwrap(), "--nsid", "0xFFFF"]);
    // Not a number clap accepts: usage error.
    assert_eq!(out.status.code(), Some(2));
    let out = identify(&[
        "--socket",
        t.dir().to_str().unwrap(),
        "--nsid",
        "4000000000",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Identify Namespace 4000000000 failed"),
        "{err}"
    );
}

#[test]
fn missing_server_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = identify(&["--socket", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot attach to"), "{err}");
    assert!(
        err.trim_end().ends_with("(is nvmemu serve running?)"),
        "{err}"
    );
}

#[test]
fn a_controller_in_use_is_one_clear_line_not_a_hang() {
    let t = common::start_default();
    let _attached = common::attach(&t, 1);
    let dir = t.dir().to_str().unwrap();
    // The server makes a second client wait; identify's own limit ends the wait.
    let out = identify(&["--socket", dir, "--reply-timeout=300ms"]);
    let err = common::one_line_failure(&out);
    assert!(
        err.contains("Server did not answer Version within 300ms (another client may be attached"),
        "{err}"
    );
}

#[test]
fn a_silent_server_is_a_timeout_with_one_clear_line() {
    let server = common::silent_server();
    let started = std::time::Instant::now();
    let out = identify(&[
        "--socket",
        server.dir.path().to_str().unwrap(),
        "--reply-timeout=300ms",
    ]);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let err = common::one_line_failure(&out);
    assert!(
        err.contains("Server did not answer Version within 300ms (another client may be attached"),
        "{err}"
    );
}
