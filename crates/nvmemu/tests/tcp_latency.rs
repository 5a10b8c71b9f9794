// SPDX-License-Identifier: Apache-2.0
//! Target-side timing over NVMe/TCP: `bdev_enable_histogram` reaches the TCP poll groups'
//! controllers (those connected before and after it), `nvmemu_get_latency_breakdown` and
//! `bdev_get_histogram` count every command a TCP host ran, layer by layer, and nothing is
//! recorded while the histogram is off; its `pollers` list the TCP poll groups' load. Configured by RPC as for SPDK, driven by the tcp
//! crate's test initiator.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use base64::Engine as _;
use common::tcp_rpc::{call, handler, serve_over_tcp};
use nvmemu::rpc_handler::NvmemuHandler;
use nvmemu_spec::Status;
use nvmemu_tcp::test_utils::{Initiator, connect_pair, pattern, rw, sgl};
use serde_json::{Value, json};

const NQN: &str = "nqn.2016-06.io.spdk:cnode1";
const HOST_A: &str = "nqn.2014-08.org.nvmexpress:uuid:tcp-latency-a";
const HOST_B: &str = "nqn.2014-08.org.nvmexpress:uuid:tcp-latency-b";
/// Bytes per command: eight 512-byte blocks.
const IO: usize = 4096;
/// The layers a command is counted in (`sq_wait_bound` skips a controller's first pass).
const LAYERS: [&str; 5] = ["queued", "backend", "complete", "interrupt", "total"];

fn histogram(h: &NvmemuHandler, enable: bool) {
    call(
        h,
        "bdev_enable_histogram",
        json!({"name": "Malloc0", "enable": enable}),
    );
}

/// `n` writes of 4 KiB (every other one's data in the capsule, the others' sent on R2T),
/// each read back and compared: `2 * n` commands.
fn verified_io(io: &mut Initiator, n: u64, seed: u8) -> u64 {
    for i in 0..n {
        let data = pattern(IO, seed.wrapping_add(i as u8));
        let lba = (i % 64) * 8;
        let (c, _) = if i % 2 == 0 {
            io.exec(rw(0x01, lba, 8, sgl(0x01, IO as u32)), &data, &[], 0)
        } else {
            io.exec(rw(0x01, lba, 8, sgl(0x5A, IO as u32)), &[], &data, 1024)
        };
        assert_eq!(c.status(), Status::SUCCESS, "write {i}");
        let (c, back) = io.exec(rw(0x02, lba, 8, sgl(0x5A, IO as u32)), &[], &[], 0);
        assert_eq!(c.status(), Status::SUCCESS, "read {i}");
        assert!(back == data, "block {i} read back differs");
    }
    2 * n
}

/// The breakdown's entry for the TCP controller of `host`.
fn tcp_controller(h: &NvmemuHandler, host: &str) -> Value {
    let b = call(h, "nvmemu_get_latency_breakdown", json!({}));
    let found: Vec<&Value> = b["controllers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["hostnqn"] == host)
        .collect();
    assert_eq!(found.len(), 1, "one controller of {host} in {b}");
    let c = found[0].clone();
    assert_eq!(c["trtype"], "TCP", "{c}");
    assert_eq!(c["subnqn"], NQN, "{c}");
    assert!(c["cntlid"].as_u64().is_some(), "{c}");
    assert!(
        c["traddr"].as_str().unwrap().starts_with("127.0.0.1:"),
        "the host's address: {c}"
    );
    c
}

fn layer<'a>(layers: &'a Value, name: &str) -> &'a Value {
    layers
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["layer"] == name)
        .unwrap_or_else(|| panic!("no layer {name} in {layers}"))
}

/// Every layer of `layers` counts `n` commands, and the four parts add up to the total
/// (each sum is converted to ns on its own, so they may differ by its rounding).
fn assert_counted(layers: &Value, n: u64) {
    for name in LAYERS {
        assert_eq!(layer(layers, name)["count"], n, "{name}: {layers}");
    }
    let sum = |name| layer(layers, name)["sum_ns"].as_u64().unwrap();
    let parts: u64 = LAYERS[..4].iter().map(|l| sum(l)).sum();
    let total = sum("total");
    assert!(total > 0, "{layers}");
    assert!(
        parts.abs_diff(total) <= 4,
        "{parts} ns in parts, {total} in total"
    );
}

/// Each poll group's admin queues, once every group has published a pass after them.
fn admin_qpairs(h: &NvmemuHandler) -> Vec<u64> {
    let mut last = Vec::new();
    for _ in 0..100 {
        let s = call(h, "nvmf_get_stats", json!({}));
        last = s["poll_groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["current_admin_qpairs"].as_u64().unwrap())
            .collect();
        if last.iter().all(|&n| n > 0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    last
}

/// The commands counted in `bdev_get_histogram`'s buckets.
fn histogram_count(h: &NvmemuHandler) -> u64 {
    let r = call(h, "bdev_get_histogram", json!({"name": "Malloc0"}));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(r["histogram"].as_str().unwrap())
        .unwrap();
    bytes
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        .sum()
}

#[test]
fn tcp_controllers_are_timed_layer_by_layer_only_while_enabled() {
    // Two poll groups: host A's controller is made on group 0, and host B's admin
    // connection, placed on the group with fewer connections, makes its controller on 1.
    let h = handler(&[0, 1]);
    let addr = serve_over_tcp(&h, NQN);
    let (_admin, mut io) = connect_pair(addr, NQN, HOST_A, false, 32);

    // Off: the controller is listed, its commands counted, nothing timed.
    let untimed = verified_io(&mut io, 4, 1);
    let c = tcp_controller(&h, HOST_A);
    assert_eq!(c["timing"], false, "{c}");
    assert_eq!(c["io_commands"], untimed, "{c}");
    assert_eq!(layer(&c["layers"], "total")["count"], 0, "{c}");
    assert_eq!(histogram_count(&h), 0);

    histogram(&h, true);
    let n = verified_io(&mut io, 10, 2);
    // A controller connected after the enable starts timed.
    let (_admin_b, mut io_b) = connect_pair(addr, NQN, HOST_B, false, 32);
    let n_b = verified_io(&mut io_b, 3, 3);
    assert_eq!(admin_qpairs(&h), [1, 1], "one controller per poll group");

    let c = tcp_controller(&h, HOST_A);
    assert_eq!(c["timing"], true, "{c}");
    assert_counted(&c["layers"], n);
    let q = &c["queues"][0];
    assert_eq!(q["qid"], 1, "{c}");
    assert_counted(&q["layers"], n);
    assert_eq!(c["namespaces"][0]["bdev"], "Malloc0", "{c}");
    assert_counted(&c["namespaces"][0]["layers"], n);
    let b = tcp_controller(&h, HOST_B);
    assert_eq!(b["timing"], true, "{b}");
    assert_counted(&b["layers"], n_b);
    assert_eq!(histogram_count(&h), n + n_b);

    // Off again: the histograms go, and what runs now is not recorded.
    histogram(&h, false);
    verified_io(&mut io, 2, 4);
    for host in [HOST_A, HOST_B] {
        let c = tcp_controller(&h, host);
        assert_eq!(c["timing"], false, "{c}");
        assert_eq!(layer(&c["layers"], "total")["count"], 0, "{c}");
    }
    assert_eq!(histogram_count(&h), 0);
}

#[test]
fn a_histogram_enabled_before_the_tcp_transport_exists_times_its_controllers() {
    let h = handler(&[0]);
    histogram(&h, true);
    let addr = serve_over_tcp(&h, NQN);
    let (_admin, mut io) = connect_pair(addr, NQN, HOST_A, false, 32);
    let n = verified_io(&mut io, 5, 7);
    let c = tcp_controller(&h, HOST_A);
    assert_eq!(c["timing"], true, "{c}");
    assert_counted(&c["layers"], n);
    assert_eq!(histogram_count(&h), n);
}

#[test]
fn the_breakdown_lists_each_tcp_poll_group_with_its_load() {
    let h = handler(&[0, 1]);
    let addr = serve_over_tcp(&h, NQN);
    let (_admin, mut io) = connect_pair(addr, NQN, HOST_A, false, 32);
    let n = verified_io(&mut io, 8, 5);
    let b = call(&h, "nvmemu_get_latency_breakdown", json!({}));
    let tcp: Vec<&Value> = b["pollers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["trtype"] == "TCP")
        .collect();
    assert_eq!(tcp.len(), 2, "one entry per TCP poll group: {b}");
    let names: Vec<&Value> = tcp.iter().map(|p| &p["name"]).collect();
    assert_eq!(
        names,
        ["nvmf_tgt_poll_group_tcp", "nvmf_tgt_poll_group_tcp_001"],
        "{b}"
    );
    assert_eq!(
        (&tcp[0]["cpu"], &tcp[1]["cpu"]),
        (&json!(0), &json!(1)),
        "{b}"
    );
    // Host A's queues are on group 0: its commands (and the admin ones) and busy time.
    let commands = tcp[0]["commands"].as_u64().unwrap();
    assert!(commands >= n, "{commands} < {n}: {b}");
    let (busy, elapsed) = (
        tcp[0]["busy_ns"].as_u64().unwrap(),
        tcp[0]["elapsed_ns"].as_u64().unwrap(),
    );
    assert!(busy > 0 && busy <= elapsed, "busy {busy} of {elapsed}: {b}");
    // The vfio-user pollers are listed first, as before.
    assert_eq!(b["pollers"][0]["trtype"], "VFIOUSER", "{b}");
}
