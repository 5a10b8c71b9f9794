// SPDX-License-Identifier: Apache-2.0
//! Handler tests against a real target (one unpinned poller), through `dispatch` exactly as
//! the server calls it.

use std::sync::Arc;

use nvmemu_rpc::{Request, StopHandle, dispatch, load_config};
use nvmemu_target::{Backoff, Target, TargetConfig};
use serde_json::{Value, json};

use super::{HandlerOptions, NvmemuHandler};

const NQN: &str = "nqn.2016-06.io.spdk:cnode1";

fn handler() -> (NvmemuHandler, StopHandle) {
    let target = Target::start(TargetConfig {
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
        },
    );
    (h, stop)
}

fn call(h: &NvmemuHandler, method: &str, params: Value) -> Result<Value, (i32, String)> {
    Request::decode(method, Some(params))
        .and_then(|r| dispatch(h, r))
        .map_err(|e| (e.code, e.message))
}

fn code(r: Result<Value, (i32, String)>) -> i32 {
    r.expect_err("an error").0
}

fn setup(h: &NvmemuHandler, traddr: &str) {
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

#[test]
fn malloc_names_are_generated_and_unique() {
    let (h, _) = handler();
    let p = json!({"num_blocks": 8, "block_size": 4096});
    assert_eq!(
        call(&h, "bdev_malloc_create", p.clone()),
        Ok(json!("Malloc0"))
    );
    assert_eq!(
        call(&h, "bdev_malloc_create", p.clone()),
        Ok(json!("Malloc1"))
    );
    assert_eq!(
        call(&h, "bdev_malloc_delete", json!({"name": "Malloc0"})),
        Ok(json!(true))
    );
    assert_eq!(call(&h, "bdev_malloc_create", p), Ok(json!("Malloc0")));
    // Deleting with the wrong method's kind is "No such device".
    assert_eq!(
        code(call(&h, "bdev_null_delete", json!({"name": "Malloc0"}))),
        -19
    );
    let bad_uuid = json!({"num_blocks": 8, "block_size": 512, "uuid": "xyz"});
    let (c, msg) = call(&h, "bdev_malloc_create", bad_uuid).unwrap_err();
    assert_eq!(c, -32602);
    assert!(msg.contains("uuid"));
    let md = json!({"num_blocks": 8, "block_size": 512, "md_size": 8});
    assert_eq!(code(call(&h, "bdev_malloc_create", md)), -95);
}

#[test]
fn claims_follow_namespaces() {
    let (h, _) = handler();
    let dir = tempfile::tempdir().unwrap();
    setup(&h, dir.path().to_str().unwrap());
    assert!(dir.path().join("cntrl").exists());
    let b = call(&h, "bdev_get_bdevs", json!({"name": "Malloc0"})).unwrap();
    assert_eq!(b[0]["claimed"], json!(true));
    assert_eq!(b[0]["claim_type"], json!("exclusive_write"));
    assert_eq!(
        code(call(&h, "bdev_malloc_delete", json!({"name": "Malloc0"}))),
        -16
    );
    let rm = json!({"nqn": NQN, "nsid": 1});
    assert_eq!(
        call(&h, "nvmf_subsystem_remove_ns", rm.clone()),
        Ok(json!(true))
    );
    assert_eq!(code(call(&h, "nvmf_subsystem_remove_ns", rm)), -2);
    let b = call(&h, "bdev_get_bdevs", json!({"name": "Malloc0"})).unwrap();
    assert_eq!(b[0]["claimed"], json!(false));
    assert_eq!(
        call(&h, "bdev_malloc_delete", json!({"name": "Malloc0"})),
        Ok(json!(true))
    );
    // Deleting the subsystem stops its controller and removes the socket.
    assert_eq!(
        call(&h, "nvmf_delete_subsystem", json!({"nqn": NQN})),
        Ok(json!(true))
    );
    assert!(!dir.path().join("cntrl").exists());
}

#[test]
fn namespace_ids_are_allocated_within_max_namespaces() {
    let (h, _) = handler();
    call(
        &h,
        "nvmf_create_subsystem",
        json!({"nqn": NQN, "max_namespaces": 2}),
    )
    .unwrap();
    for name in ["A", "B", "C"] {
        call(
            &h,
            "bdev_null_create",
            json!({"name": name, "num_blocks": 8, "block_size": 512}),
        )
        .unwrap();
    }
    let add = |b: &str, nsid: u32| {
        call(
            &h,
            "nvmf_subsystem_add_ns",
            json!({"nqn": NQN, "namespace": {"bdev_name": b, "nsid": nsid}}),
        )
    };
    assert_eq!(add("A", 2), Ok(json!(2)));
    assert_eq!(code(add("B", 3)), -32602);
    assert_eq!(add("B", 0), Ok(json!(1)));
    assert_eq!(code(add("C", 0)), -28);
    assert_eq!(code(add("Nope", 0)), -19);
    let bad_nguid = json!({"nqn": NQN, "namespace": {"bdev_name": "C", "nguid": "12"}});
    call(
        &h,
        "nvmf_subsystem_remove_ns",
        json!({"nqn": NQN, "nsid": 1}),
    )
    .unwrap();
    let (c, msg) = call(&h, "nvmf_subsystem_add_ns", bad_nguid).unwrap_err();
    assert_eq!(c, -32602);
    assert!(msg.contains("namespace.nguid"), "{msg}");
}

#[test]
fn listeners_need_the_transport_and_an_existing_directory() {
    let (h, _) = handler();
    call(&h, "nvmf_create_subsystem", json!({"nqn": NQN})).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let listen = |traddr: &str| {
        call(
            &h,
            "nvmf_subsystem_add_listener",
            json!({"nqn": NQN, "listen_address": {"trtype": "VFIOUSER", "traddr": traddr}}),
        )
    };
    let d = dir.path().to_str().unwrap();
    assert_eq!(code(listen(d)), -22);
    assert_eq!(
        code(call(&h, "nvmf_create_transport", json!({"trtype": "TCP"}))),
        -32602
    );
    call(
        &h,
        "nvmf_create_transport",
        json!({"trtype": "VFIOUSER", "max_io_size": 65536}),
    )
    .unwrap();
    assert_eq!(
        code(call(
            &h,
            "nvmf_create_transport",
            json!({"trtype": "VFIOUSER"})
        )),
        -32602
    );
    let t = call(&h, "nvmf_get_transports", json!({})).unwrap();
    assert_eq!(t[0]["max_io_size"], json!(65536));
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(code(listen(file.to_str().unwrap())), -2);
    assert_eq!(code(listen("")), -2);
    assert_eq!(listen(d), Ok(json!(true)));
    assert_eq!(code(listen(d)), -17);
    let s = call(&h, "nvmf_get_subsystems", json!({"nqn": NQN})).unwrap();
    assert_eq!(s[0]["listen_addresses"][0]["traddr"], json!(d));
    let rm = json!({"nqn": NQN, "listen_address": {"trtype": "VFIOUSER", "traddr": d}});
    assert_eq!(
        call(&h, "nvmf_subsystem_remove_listener", rm.clone()),
        Ok(json!(true))
    );
    assert!(!dir.path().join("cntrl").exists());
    assert_eq!(code(call(&h, "nvmf_subsystem_remove_listener", rm)), -2);
}

#[test]
fn subsystem_parameters_are_validated() {
    let (h, _) = handler();
    let create = |p: Value| call(&h, "nvmf_create_subsystem", p);
    assert_eq!(code(create(json!({"nqn": "cnode1"}))), -32602);
    assert_eq!(
        code(create(json!({"nqn": format!("nqn.{}", "x".repeat(250))}))),
        -32602
    );
    assert_eq!(
        code(create(json!({"nqn": NQN, "model_number": "m".repeat(41)}))),
        -32602
    );
    assert_eq!(
        code(create(json!({"nqn": NQN, "serial_number": "a\u{7}b"}))),
        -32602
    );
    assert_eq!(
        code(create(
            json!({"nqn": NQN, "min_cntlid": 9, "max_cntlid": 3})
        )),
        -32602
    );
    assert_eq!(
        code(create(json!({"nqn": NQN, "max_namespaces": 100_000}))),
        -32602
    );
    assert_eq!(create(json!({"nqn": NQN})), Ok(json!(true)));
    assert_eq!(code(create(json!({"nqn": NQN}))), -17);
    let s = call(&h, "nvmf_get_subsystems", json!({})).unwrap();
    assert_eq!(s[0]["subtype"], json!("Discovery"));
    assert_eq!(s[1]["serial_number"], json!("00000000000000000000"));
    assert_eq!(s[1]["model_number"], json!("SPDK bdev Controller"));
    assert_eq!(
        code(call(&h, "nvmf_get_subsystems", json!({"nqn": "nqn.x"}))),
        -19
    );
}

#[test]
fn save_config_replays_to_the_same_state() {
    let (a, _) = handler();
    let dir = tempfile::tempdir().unwrap();
    setup(&a, dir.path().to_str().unwrap());
    call(
        &a,
        "bdev_null_create",
        json!({"name": "N", "num_blocks": 8, "block_size": 4096}),
    )
    .unwrap();
    let saved = dispatch(&a, Request::SaveConfig).unwrap();
    let subs = call(&a, "nvmf_get_subsystems", json!({})).unwrap();
    let bdevs = call(&a, "bdev_get_bdevs", json!({})).unwrap();
    drop(a);
    let (b, _) = handler();
    let report = load_config(&b, &saved).unwrap();
    assert_eq!((report.applied, report.skipped.len()), (6, 0));
    assert_eq!(call(&b, "nvmf_get_subsystems", json!({})).unwrap(), subs);
    assert_eq!(call(&b, "bdev_get_bdevs", json!({})).unwrap(), bdevs);
    assert_eq!(dispatch(&b, Request::SaveConfig).unwrap(), saved);
}

#[test]
fn stats_and_kill_instance() {
    let (h, stop) = handler();
    let r = call(&h, "framework_get_reactors", json!({})).unwrap();
    assert_eq!(r["reactors"][0]["lcore"], json!(0));
    assert_eq!(r["reactors"][0]["lw_threads"][0]["cpumask"], json!("1"));
    let s = call(&h, "nvmf_get_stats", json!({})).unwrap();
    assert_eq!(s["poll_groups"].as_array().map(Vec::len), Some(1));
    let v = call(&h, "spdk_get_version", json!({})).unwrap();
    assert_eq!(
        v["version"],
        json!(format!("nvmemu v{}", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(
        call(&h, "bdev_get_iostat", json!({})).unwrap()["bdevs"],
        json!([])
    );
    assert_eq!(code(call(&h, "bdev_get_iostat", json!({"name": "x"}))), -19);
    assert!(!stop.is_stopped());
    assert_eq!(
        call(&h, "spdk_kill_instance", json!({"sig_name": "SIGINT"})),
        Ok(json!(true))
    );
    assert!(stop.is_stopped());
}

#[test]
fn get_bdevs_waits_up_to_timeout_for_the_name() {
    let (h, _) = handler();
    let h = Arc::new(h);
    assert_eq!(
        code(call(
            &h,
            "bdev_get_bdevs",
            json!({"name": "Late", "timeout": 20})
        )),
        -19
    );
    let creator = {
        let h = Arc::clone(&h);
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            call(
                &h,
                "bdev_null_create",
                json!({"name": "Late", "num_blocks": 8, "block_size": 512}),
            )
        })
    };
    // Generous timeout: the wait ends when the bdev appears, not when the timeout expires.
    let found = call(
        &h,
        "bdev_get_bdevs",
        json!({"name": "Late", "timeout": 60_000}),
    )
    .unwrap();
    assert_eq!(found[0]["name"], json!("Late"));
    assert_eq!(creator.join().unwrap(), Ok(json!("Late")));
}
