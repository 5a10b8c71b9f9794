// SPDX-License-Identifier: Apache-2.0
//! A target configured by RPC, as SPDK's users do, serving one malloc bdev over NVMe/TCP on a
//! loopback port: for the tests that drive it with the tcp crate's test initiator.

use std::net::SocketAddr;
use std::sync::Arc;

use nvmemu::rpc_handler::{HandlerOptions, NvmemuHandler};
use nvmemu_rpc::{Request, StopHandle, dispatch};
use serde_json::{Value, json};

/// Call `method`; its result, or a panic with the error's message.
pub fn call(h: &NvmemuHandler, method: &str, params: Value) -> Value {
    Request::decode(method, Some(params))
        .and_then(|r| dispatch(h, r))
        .map_err(|e| e.message)
        .unwrap()
}

/// A handler with Malloc0 (4096 blocks of 512 bytes) whose TCP transport (once created)
/// has one poll group per entry of `cores`.
pub fn handler(cores: &[usize]) -> NvmemuHandler {
    let target = super::test_target(Default::default(), Default::default());
    let h = NvmemuHandler::new(
        Arc::new(target),
        StopHandle::new().unwrap(),
        HandlerOptions {
            socket_mode: 0o600,
            cores: cores.to_vec(),
            log: None,
            numa_node: None,
        },
    );
    call(
        &h,
        "bdev_malloc_create",
        json!({"num_blocks": 4096, "block_size": 512}),
    );
    h
}

/// Serve Malloc0 in subsystem `nqn` (any host) over TCP on a loopback port; its address.
pub fn serve_over_tcp(h: &NvmemuHandler, nqn: &str) -> SocketAddr {
    call(
        h,
        "nvmf_create_transport",
        json!({"trtype": "TCP", "in_capsule_data_size": 8192}),
    );
    call(
        h,
        "nvmf_create_subsystem",
        json!({"nqn": nqn, "allow_any_host": true}),
    );
    call(
        h,
        "nvmf_subsystem_add_ns",
        json!({"nqn": nqn, "namespace": {"bdev_name": "Malloc0"}}),
    );
    call(
        h,
        "nvmf_subsystem_add_listener",
        json!({"nqn": nqn, "listen_address":
            {"trtype": "TCP", "adrfam": "IPv4", "traddr": "127.0.0.1", "trsvcid": "0"}}),
    );
    let listeners = call(h, "nvmf_subsystem_get_listeners", json!({"nqn": nqn}));
    let port: u16 = listeners[0]["address"]["trsvcid"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    SocketAddr::from(([127, 0, 0, 1], port))
}
