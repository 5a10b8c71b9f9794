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
    let t = TcpTarget::start(TcpOptions::default(), subs, None).unwrap();
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
