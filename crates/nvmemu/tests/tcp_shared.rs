// SPDX-License-Identifier: Apache-2.0
//! One subsystem, two transports: a namespace written over vfio-user reads back the same
//! over NVMe/TCP, and the other way, with the subsystem configured by RPC as for SPDK.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::sync::Arc;

use nvmemu::rpc_handler::{HandlerOptions, NvmemuHandler};
use nvmemu_driver::{AttachOptions, AttachedController};
use nvmemu_rpc::{Request, StopHandle, dispatch};
use nvmemu_spec::{Lba, Nsid, Status};
use nvmemu_tcp::test_utils::{connect_pair, rw, sgl};
use serde_json::{Value, json};

const NQN: &str = "nqn.2016-06.io.spdk:cnode1";
const HOST: &str = "nqn.2014-08.org.nvmexpress:uuid:tcp-shared";

fn call(h: &NvmemuHandler, method: &str, params: Value) -> Value {
    Request::decode(method, Some(params))
        .and_then(|r| dispatch(h, r))
        .map_err(|e| e.message)
        .unwrap()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed)
        .collect()
}

#[test]
fn data_written_over_one_transport_reads_back_over_the_other() {
    let target = common::test_target(Default::default(), Default::default());
    let h = NvmemuHandler::new(
        Arc::new(target),
        StopHandle::new().unwrap(),
        HandlerOptions {
            socket_mode: 0o600,
            cores: vec![0],
            log: None,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    call(
        &h,
        "bdev_malloc_create",
        json!({"num_blocks": 4096, "block_size": 512}),
    );
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
