// SPDX-License-Identifier: Apache-2.0
//! The RPC harness's checks on fixed traffic.

use serde_json::{Value, json};

use super::check;
use super::server::{ABSURD, Server, confine, sandbox};

#[test]
fn an_absurd_malloc_bdev_is_refused_and_a_good_one_is_made() {
    let mut s = Server::default();
    let req = json!({"jsonrpc": "2.0", "method": "bdev_malloc_create", "id": 1,
        "params": {"name": "big", "num_blocks": ABSURD / 512, "block_size": 512}});
    s.receive(req.to_string().as_bytes());
    let listed = s.call("bdev_get_bdevs", json!({}));
    assert_eq!(listed["result"], json!([]), "{listed}");
    let r = s.call(
        "bdev_malloc_create",
        json!({"name": "ok", "num_blocks": 8, "block_size": 512}),
    );
    assert_eq!(r["result"], "ok");
    s.finish();
}

#[test]
#[should_panic(expected = "absurdly large malloc bdev was created")]
fn an_absurd_bdev_that_was_made_is_caught() {
    let req = json!({"jsonrpc": "2.0", "method": "bdev_malloc_create", "id": 1,
        "params": {"name": "big", "num_blocks": u64::MAX, "block_size": 512}});
    let r = json!({"jsonrpc": "2.0", "id": 1, "result": "big"});
    check::reply(&req, Some(&r));
}

#[test]
fn listeners_stay_in_the_sandbox_and_waits_stay_short() {
    let mut v = json!([{"params": {"listen_address": {"traddr": "/etc"}, "timeout": 3600000}}]);
    confine(&mut v);
    let traddr = v[0]["params"]["listen_address"]["traddr"].as_str().unwrap();
    assert!(traddr.starts_with(&sandbox()), "{traddr}");
    assert_eq!(v[0]["params"]["timeout"], 1);
}

#[test]
fn tcp_listeners_bind_loopback_port_zero_only() {
    let mut v = json!({"params": {"listen_address":
        {"trtype": "tcp", "traddr": "0.0.0.0", "trsvcid": "4420", "adrfam": "IPv4"}}});
    confine(&mut v);
    let a = &v["params"]["listen_address"];
    assert_eq!(
        (&a["traddr"], &a["trsvcid"]),
        (&json!("127.0.0.1"), &json!("0"))
    );
    // Without an address or port of its own, it still gets them.
    let mut v = json!({"listen_address": {"trtype": "TCP", "trsvcid": 4420}});
    confine(&mut v);
    let a = &v["listen_address"];
    assert_eq!(
        (&a["traddr"], &a["trsvcid"]),
        (&json!("127.0.0.1"), &json!("0"))
    );
}

#[test]
fn a_whole_subsystem_with_a_listener_and_batches() {
    let mut s = Server::default();
    let dir = format!("{}/l0", sandbox());
    let batch = json!([
        {"jsonrpc": "2.0", "method": "bdev_malloc_create", "id": 1,
            "params": {"name": "M", "num_blocks": 64, "block_size": 512}},
        {"jsonrpc": "2.0", "method": "nvmf_create_transport", "params": {"trtype": "VFIOUSER"}},
        {"jsonrpc": "2.0", "method": "nvmf_create_subsystem", "id": "s",
            "params": {"nqn": "nqn.2016-06.io.spdk:cnode0", "allow_any_host": true}},
        {"jsonrpc": "2.0", "method": "nvmf_subsystem_add_ns", "id": null,
            "params": {"nqn": "nqn.2016-06.io.spdk:cnode0", "namespace": {"bdev_name": "M"}}},
        {"jsonrpc": "2.0", "method": "nvmf_subsystem_add_listener", "id": 4,
            "params": {"nqn": "nqn.2016-06.io.spdk:cnode0",
                "listen_address": {"trtype": "VFIOUSER", "traddr": dir}}},
        {"method": "no envelope"},
        7
    ]);
    // In 3-byte pieces, as a slow client would send it.
    for part in batch.to_string().as_bytes().chunks(3) {
        s.receive(part);
    }
    let subs = s.call("nvmf_get_subsystems", json!({}));
    let listeners = &subs["result"][1]["listen_addresses"];
    assert_eq!(listeners.as_array().map(Vec::len), Some(1), "{subs}");
    s.finish();
}

#[test]
#[should_panic(expected = "no reply to")]
fn a_missing_reply_is_caught() {
    check::reply(&json!({"jsonrpc": "2.0", "method": "x", "id": 1}), None);
}

#[test]
#[should_panic(expected = "not JSON-RPC's or -errno")]
fn a_made_up_error_code_is_caught() {
    let r = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": 5, "message": "m"}});
    check::reply(&json!({"jsonrpc": "2.0", "method": "x", "id": 1}), Some(&r));
}

#[test]
fn a_notification_gets_nothing() {
    check::reply(&json!({"jsonrpc": "2.0", "method": "x"}), None::<&Value>);
}
