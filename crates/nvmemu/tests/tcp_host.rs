// SPDX-License-Identifier: Apache-2.0
//! nvmemu's own host side over NVMe/TCP: `identify --tcp` and `bench --tcp` against an
//! NVMe/TCP target in this process.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::sync::Arc;

use nvmemu_bdev::{Bdev, MallocBacking};
use nvmemu_ctrl::Namespace;
use nvmemu_spec::Nsid;
use nvmemu_tcp::{Subsystems, TcpOptions, TcpSubsystem, TcpTarget};

const NQN: &str = "nqn.2019-07.io.nvmemu:tcp-host-test";

/// A target on 127.0.0.1 with one 8 MiB namespace of 512-byte blocks, any host allowed.
fn target() -> (TcpTarget, SocketAddr) {
    let bdev = Bdev::malloc_with("tcph0", 512, 1 << 14, MallocBacking::Lazy, &|_| {}).unwrap();
    let subs = Subsystems::default();
    subs.lock().insert(
        NQN.into(),
        TcpSubsystem {
            serial: "TCPHOST01".into(),
            model: "nvmemu tcp host test".into(),
            allow_any_host: true,
            hosts: vec![],
            max_namespaces: 32,
            namespaces: vec![Namespace::new(Nsid(1), Arc::new(bdev))],
            listeners: vec![],
        },
    );
    let t = TcpTarget::start(TcpOptions::default(), subs, &[None]).unwrap();
    let addr = t.listen("127.0.0.1:0".parse().unwrap()).unwrap();
    (t, addr)
}

fn nvmemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmemu"))
        .args(args)
        .output()
        .expect("nvmemu runs")
}

fn stdout_ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "nvmemu failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn identify_over_tcp_prints_what_it_prints_over_vfio_user() {
    let (_t, addr) = target();
    let a = addr.to_string();
    for digests in [&[][..], &["--hdr-digest", "--data-digest"][..]] {
        let mut args = vec!["identify", "--tcp", &a, "--subnqn", NQN];
        args.extend_from_slice(digests);
        let out = stdout_ok(&nvmemu(&args));
        assert!(
            out.starts_with("NVME Identify Controller:\nvid       : 0x4e58\n"),
            "{out}"
        );
        for needle in [
            "\nsn        : TCPHOST01",
            "\nmn        : nvmemu tcp host test",
            "\ncntrltype : 1\n",
            &format!("\nsubnqn    : {NQN}\n"),
            "\nNVME Identify Namespace 1:\nnsze    : 0x4000\n",
            "\nlbaf  0 : ms:0   lbads:9  rp:0 (in use)\n",
        ] {
            assert!(out.contains(needle), "missing {needle:?} in\n{out}");
        }
    }
}

#[test]
fn identify_over_tcp_of_an_unknown_subsystem_is_one_clear_line() {
    let (_t, addr) = target();
    let out = nvmemu(&[
        "identify",
        "--tcp",
        &addr.to_string(),
        "--subnqn",
        "nqn.x:none",
    ]);
    assert!(!out.status.success());
    let line = common::one_line_failure(&out);
    assert!(line.contains("cannot connect to nqn.x:none"), "{line}");
    assert!(line.contains("Connect failed"), "{line}");
}

/// `nvmemu bench --tcp` on the test target with `extra` options; its JSON report.
fn bench(addr: SocketAddr, extra: &[&str]) -> serde_json::Value {
    let a = addr.to_string();
    let mut args = vec![
        "bench",
        "--tcp",
        &a,
        "--subnqn",
        NQN,
        "--size",
        "2M",
        "--output-format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = stdout_ok(&nvmemu(&args));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn job(v: &serde_json::Value) -> &serde_json::Value {
    let j = &v["jobs"][0];
    assert_eq!(j["error"], 0, "{j}");
    j
}

#[test]
fn bench_over_tcp_writes_and_verifies_every_block_size_and_depth() {
    let (_t, addr) = target();
    for (bs, depth) in [("512", "1"), ("512", "32"), ("128k", "1"), ("128k", "32")] {
        let v = bench(
            addr,
            &[
                "--rw",
                "randwrite",
                "--bs",
                bs,
                "--iodepth",
                depth,
                "--verify",
                "crc32c",
            ],
        );
        let j = job(&v);
        assert_eq!(j["write"]["io_bytes"], 2 << 20, "bs {bs} QD{depth}: {j}");
        assert_eq!(
            j["read"]["io_bytes"],
            2 << 20,
            "verify read back, bs {bs} QD{depth}: {j}"
        );
    }
}

#[test]
fn bench_over_tcp_reads_at_every_block_size_and_depth_with_digests() {
    let (_t, addr) = target();
    for (bs, depth) in [("512", "1"), ("512", "32"), ("128k", "1"), ("128k", "32")] {
        let v = bench(
            addr,
            &[
                "--rw",
                "randread",
                "--bs",
                bs,
                "--iodepth",
                depth,
                "--hdr-digest",
                "--data-digest",
            ],
        );
        let j = job(&v);
        assert_eq!(j["read"]["io_bytes"], 2 << 20, "bs {bs} QD{depth}: {j}");
        assert!(j["read"]["clat_ns"]["mean"].as_f64().unwrap() > 0.0, "{j}");
    }
}

#[test]
fn bench_over_tcp_refuses_a_depth_the_target_cannot_queue() {
    let (_t, addr) = target();
    let a = addr.to_string();
    let out = nvmemu(&[
        "bench",
        "--tcp",
        &a,
        "--subnqn",
        NQN,
        "--size",
        "1M",
        "--iodepth",
        "4096",
    ]);
    let line = common::one_line_failure(&out);
    assert!(line.contains("iodepth"), "{line}");
}
