// SPDX-License-Identifier: Apache-2.0
//! Handler tests against a real target (one unpinned poller), through `dispatch` exactly as
//! the server calls it: the shared set-up here, the tests in one file per concern.

mod bdev;
mod framework;
mod nvmf;
mod spdk_shape;

use std::sync::Arc;

use nvmemu_device::{Backoff, Target, TargetConfig};
use nvmemu_rpc::{Request, StopHandle, dispatch, load_config};
use serde_json::{Value, json};

use super::{HandlerOptions, NvmemuHandler};

pub(super) const NQN: &str = "nqn.2016-06.io.spdk:cnode1";

pub(super) fn handler() -> (NvmemuHandler, StopHandle) {
    let target = Target::start(TargetConfig {
        poller_timeout: nvmemu_device::CALL_TIMEOUT,
        client_budget: nvmemu_device::ClientBudget::default(),
        deadlines: nvmemu_device::Deadlines::default(),
        cores: vec![0],
        pin: false,
        backoff: Backoff::default(),
    })
    .expect("target");
    let stop = StopHandle::new().expect("stop handle");
    let h = NvmemuHandler::new(
        Arc::new(target),
        stop.clone(),
        HandlerOptions {
            socket_mode: 0o600,
            cores: vec![0],
            log: None,
            numa_node: None,
        },
    );
    (h, stop)
}

pub(super) fn call(h: &NvmemuHandler, method: &str, params: Value) -> Result<Value, (i32, String)> {
    Request::decode(method, Some(params))
        .and_then(|r| dispatch(h, r))
        .map_err(|e| (e.code, e.message))
}

pub(super) fn code(r: Result<Value, (i32, String)>) -> i32 {
    r.expect_err("an error").0
}

/// A 64-block null bdev `name`.
pub(super) fn null(h: &NvmemuHandler, name: &str) {
    let p = json!({"name": name, "num_blocks": 64, "block_size": 512});
    call(h, "bdev_null_create", p).unwrap();
}

/// `bdev_get_bdevs` of `name` alone.
pub(super) fn bdev(h: &NvmemuHandler, name: &str) -> Value {
    call(h, "bdev_get_bdevs", json!({"name": name})).unwrap()[0].clone()
}

/// The methods of `save_config`'s bdev subsystem, in order.
pub(super) fn saved_bdev_methods(saved: &Value) -> Vec<String> {
    saved["subsystems"][0]["config"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["method"].as_str().unwrap().to_owned())
        .collect()
}

pub(super) fn setup(h: &NvmemuHandler, traddr: &str) {
    call(
        h,
        "bdev_malloc_create",
        json!({"num_blocks": 64, "block_size": 512}),
    )
    .unwrap();
    call(h, "nvmf_create_transport", json!({"trtype": "vfiouser"})).unwrap();
    call(
        h,
        "nvmf_create_subsystem",
        json!({"nqn": NQN, "serial_number": "SPDK00", "allow_any_host": true}),
    )
    .unwrap();
    call(
        h,
        "nvmf_subsystem_add_ns",
        json!({"nqn": NQN, "namespace": {"bdev_name": "Malloc0"}}),
    )
    .unwrap();
    call(
        h,
        "nvmf_subsystem_add_listener",
        json!({"nqn": NQN, "listen_address": {"trtype": "VFIOUSER", "traddr": traddr}}),
    )
    .unwrap();
}

pub(super) fn get_code(h: &NvmemuHandler, name: &str) -> Option<i32> {
    call(h, "bdev_get_bdevs", json!({"name": name}))
        .err()
        .map(|e| e.0)
}

pub(super) fn probe_named(name: &str) -> Value {
    json!({"name": name, "num_blocks": 0, "block_size": 512})
}
