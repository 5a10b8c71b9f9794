// SPDX-License-Identifier: Apache-2.0
//! One subsystem, two transports: a namespace written over vfio-user reads back the same
//! over NVMe/TCP, and the other way, with the subsystem configured by RPC as for SPDK.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use common::tcp_rpc::{call, handler};
use nvmemu::rpc_handler::NvmemuHandler;
use nvmemu_driver::{AttachOptions, AttachedController};
use nvmemu_spec::{Lba, Nsid, Status};
use nvmemu_tcp::test_utils::{connect_pair, pattern, rw, sgl};
use serde_json::{Value, json};

const NQN: &str = "nqn.2016-06.io.spdk:cnode1";
const HOST: &str = "nqn.2014-08.org.nvmexpress:uuid:tcp-shared";

/// A handler serving Malloc0 in subsystem [`NQN`] over vfio-user (in the returned
/// directory) and TCP (on the returned loopback port).
fn both_transports() -> (NvmemuHandler, tempfile::TempDir, u16) {
    let h = handler(&[0]);
    let dir = tempfile::tempdir().unwrap();
    call(&h, "nvmf_create_transport", json!({"trtype": "VFIOUSER"}));
    call(
        &h,
        "nvmf_create_transport",
        json!({"trtype": "TCP", "in_capsule_data_size": 8192}),
    );
    call(
        &h,
        "nvmf_create_subsystem",
        json!({"nqn": NQN, "allow_any_host": true}),
    );
    call(
        &h,
        "nvmf_subsystem_add_ns",
        json!({"nqn": NQN, "namespace": {"bdev_name": "Malloc0"}}),
    );
    for (trtype, traddr, port) in [
        ("VFIOUSER", dir.path().to_str().unwrap(), "0"),
        ("TCP", "127.0.0.1", "0"),
    ] {
        call(
            &h,
            "nvmf_subsystem_add_listener",
            json!({"nqn": NQN, "listen_address":
            {"trtype": trtype, "adrfam": "IPv4", "traddr": traddr, "trsvcid": port}}),
        );
    }
    let listeners = call(&h, "nvmf_subsystem_get_listeners", json!({"nqn": NQN}));
    let tcp = listeners
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["address"]["trtype"] == "TCP")
        .unwrap();
    let port: u16 = tcp["address"]["trsvcid"].as_str().unwrap().parse().unwrap();
    assert_ne!(port, 0, "the listener shows the port it got");
    (h, dir, port)
}

#[test]
fn data_written_over_one_transport_reads_back_over_the_other() {
    let (_h, dir, port) = both_transports();
    // Written over vfio-user.
    let mut vfu = AttachedController::attach(
        dir.path(),
        AttachOptions {
            io_queues: 1,
            queue_depth: 16,
            dma_pool_bytes: 1 << 20,
            ..AttachOptions::default()
        },
    )
    .unwrap();
    let mut q = vfu.qpairs().pop().unwrap();
    let buf = vfu.alloc_dma(8192).unwrap();
    let a = pattern(8192, 0x5A);
    buf.copy_from(0, &a).unwrap();
    q.write_blocking(Nsid(1), Lba(0), 16, &buf).unwrap();

    // Read over TCP, then written there.
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (_admin, mut io) = connect_pair(addr, NQN, HOST, false, 32);
    let (c, data) = io.exec(rw(0x02, 0, 16, sgl(0x5A, 8192)), &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
    assert!(data == a, "TCP reads what vfio-user wrote");
    let b = pattern(8192, 0xC3);
    let (c, _) = io.exec(rw(0x01, 16, 16, sgl(0x01, 8192)), &b, &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);

    // Read back over vfio-user.
    q.read_blocking(Nsid(1), Lba(16), 16, &buf).unwrap();
    let mut back = vec![0u8; 8192];
    buf.copy_to(0, &mut back).unwrap();
    assert!(back == b, "vfio-user reads what TCP wrote");
}

/// Poll group 0's `nvmf_get_stats` entry once its qpair and command counts reach the
/// wanted ones (the TCP poll group publishes its counters at the end of each pass).
fn stats_reaching(h: &NvmemuHandler, io_qpairs: u64, commands: u64) -> Value {
    for _ in 0..500 {
        let s = call(h, "nvmf_get_stats", json!({}));
        let g = &s["poll_groups"][0];
        if g["current_io_qpairs"] == io_qpairs && g["completed_nvme_io"].as_u64() >= Some(commands)
        {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    call(h, "nvmf_get_stats", json!({}))
}

#[test]
fn nvmf_get_stats_shows_the_tcp_poll_group_as_spdk_does() {
    let (h, _dir, port) = both_transports();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (admin, mut io) = connect_pair(addr, NQN, HOST, false, 32);
    for lba in 0..4 {
        let (c, _) = io.exec(rw(0x02, lba, 1, sgl(0x5A, 512)), &[], &[], 0);
        assert_eq!(c.status(), Status::SUCCESS);
    }
    let s = stats_reaching(&h, 1, 4);
    for g in s["poll_groups"].as_array().unwrap() {
        let tcp: Vec<&Value> = g["transports"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["trtype"] == "TCP")
            .collect();
        // SPDK's entry is the type alone; nvmemu's adds its TCP poll group's counters.
        assert_eq!(tcp.len(), 1, "{g}");
        let keys: Vec<&String> = tcp[0].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["trtype", "polls", "socket_reads", "socket_writes"],
            "{g}"
        );
    }
    let g = &s["poll_groups"][0];
    assert_eq!(
        (
            &g["admin_qpairs"],
            &g["io_qpairs"],
            &g["current_admin_qpairs"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "{g}"
    );
    assert_eq!(g["current_io_qpairs"], 1, "{g}");
    assert!(g["completed_nvme_io"].as_u64() >= Some(4), "{g}");

    drop((admin, io));
    let s = stats_reaching(&h, 0, 4);
    let g = &s["poll_groups"][0];
    assert_eq!(
        (&g["current_admin_qpairs"], &g["current_io_qpairs"]),
        (&json!(0), &json!(0)),
        "the qpairs closed: {g}"
    );
    assert_eq!(
        (&g["admin_qpairs"], &g["io_qpairs"]),
        (&json!(1), &json!(1))
    );
}

/// Poll group 0's TCP transport counter `key`.
fn tcp_counter(s: &Value, key: &str) -> u64 {
    let transports = s["poll_groups"][0]["transports"].as_array().unwrap();
    let tcp = transports.iter().find(|t| t["trtype"] == "TCP").unwrap();
    tcp[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in {tcp}"))
}

#[test]
fn nvmf_get_stats_counts_the_tcp_poll_groups_socket_calls() {
    let (h, _dir, port) = both_transports();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (_admin, mut io) = connect_pair(addr, NQN, HOST, false, 32);
    let (c, _) = io.exec(rw(0x02, 0, 1, sgl(0x5A, 512)), &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
    let before = stats_reaching(&h, 1, 1);
    // One command at a time: each capsule is the only PDU on the wire until its answer
    // comes back, so each needs a `recv` of its own and its answer a `send`.
    let n = 64u64;
    for lba in 0..n {
        let (c, data) = io.exec(rw(0x02, lba, 1, sgl(0x5A, 512)), &[], &[], 0);
        assert_eq!(c.status(), Status::SUCCESS);
        assert_eq!(data.len(), 512);
    }
    let delta = |s: &Value, key| tcp_counter(s, key) - tcp_counter(&before, key);
    let mut after = stats_reaching(&h, 1, 1 + n);
    // The pass that sent the last answer publishes after sending it.
    for _ in 0..100 {
        if delta(&after, "socket_writes") >= n {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        after = call(&h, "nvmf_get_stats", json!({}));
    }
    let (reads, writes, polls) = (
        delta(&after, "socket_reads"),
        delta(&after, "socket_writes"),
        delta(&after, "polls"),
    );
    // At least one call per command; no more than one per PDU each way, give or take a
    // spurious readiness event or an answer counted just before `before` was published.
    assert!(
        (n..=n + 8).contains(&reads),
        "{reads} reads for {n} capsules"
    );
    assert!(
        (n..=n + 8).contains(&writes),
        "{writes} sends for {n} answers"
    );
    assert!(polls >= n, "{polls} passes for {n} commands, one at a time");
}
