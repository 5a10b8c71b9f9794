// SPDX-License-Identifier: Apache-2.0
//! What SPDK's `nvmf_subsystem_get_controllers` and `nvmf_subsystem_get_qpairs` say of
//! NVMe/TCP hosts: each connected controller with the host NQN and host ID of its Connect
//! and its I/O queue count, each queue with its poll group and the addresses of both ends of
//! its connection; gone once the host disconnects. Configured by RPC, driven by the tcp
//! crate's test initiator (whose Connect data carries host ID 07h bytes).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::tcp_rpc::{call, handler, serve_over_tcp};
use nvmemu::rpc_handler::NvmemuHandler;
use nvmemu_spec::Status;
use nvmemu_tcp::test_utils::{connect_pair, pattern, rw, sgl};
use serde_json::{Value, json};

const NQN: &str = "nqn.2016-06.io.spdk:cnode1";
const HOST: &str = "nqn.2014-08.org.nvmexpress:uuid:tcp-connected";
/// The host ID the test initiator's Connect sends.
const HOST_ID: &str = "07070707-0707-0707-0707-070707070707";

fn controllers(h: &NvmemuHandler) -> Vec<Value> {
    let v = call(h, "nvmf_subsystem_get_controllers", json!({"nqn": NQN}));
    v.as_array().unwrap().clone()
}

fn qpairs(h: &NvmemuHandler) -> Vec<Value> {
    let v = call(h, "nvmf_subsystem_get_qpairs", json!({"nqn": NQN}));
    v.as_array().unwrap().clone()
}

/// An address as SPDK writes a queue pair's: `{trtype, adrfam, traddr, trsvcid}`.
fn address(port: u16) -> Value {
    json!({"trtype": "TCP", "adrfam": "IPv4", "traddr": "127.0.0.1", "trsvcid": port.to_string()})
}

#[test]
fn tcp_hosts_are_listed_with_their_queues_until_they_disconnect() {
    let h = handler(&[0]);
    let addr = serve_over_tcp(&h, NQN);
    assert!(controllers(&h).is_empty());
    assert!(qpairs(&h).is_empty());

    let (admin, mut io) = connect_pair(addr, NQN, HOST, false, 32);
    // The queue works: a block written, read back and compared.
    let data = pattern(4096, 9);
    let (c, _) = io.exec(rw(0x01, 0, 8, sgl(0x01, 4096)), &data, &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
    let (c, back) = io.exec(rw(0x02, 0, 8, sgl(0x5A, 4096)), &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
    assert!(back == data);

    let ctrls = controllers(&h);
    assert_eq!(ctrls.len(), 1, "{ctrls:?}");
    let cntlid = ctrls[0]["cntlid"].as_u64().unwrap();
    assert_eq!(
        ctrls[0],
        json!({"cntlid": cntlid, "hostnqn": HOST, "hostid": HOST_ID, "num_io_qpairs": 1})
    );

    let queues = qpairs(&h);
    assert_eq!(queues.len(), 2, "{queues:?}");
    for (q, (qid, host_end)) in queues.iter().zip([(0, &admin), (1, &io)]) {
        let expected = json!({
            "cntlid": cntlid,
            "qid": qid,
            "state": "enabled",
            "thread": "nvmf_tgt_poll_group_tcp",
            "hostnqn": HOST,
            "listen_address": address(addr.port()),
            "peer_address": address(host_end.sock.local_addr().unwrap().port()),
        });
        assert_eq!(q, &expected);
    }

    // Gone with the host's connections.
    drop(io);
    drop(admin);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !controllers(&h).is_empty() {
        assert!(
            Instant::now() < deadline,
            "still listed: {:?}",
            controllers(&h)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(qpairs(&h).is_empty());
}
