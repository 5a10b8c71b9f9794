// SPDX-License-Identifier: Apache-2.0
//! Handler tests against a real target (one unpinned poller), through `dispatch` exactly as
//! the server calls it.

use std::sync::Arc;

use nvmemu_device::{Backoff, Target, TargetConfig};
use nvmemu_rpc::{Request, StopHandle, dispatch, load_config};
use serde_json::{Value, json};

use super::{HandlerOptions, NvmemuHandler};

const NQN: &str = "nqn.2016-06.io.spdk:cnode1";

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
    // A claimed bdev cannot back a second namespace.
    assert_eq!(
        code(call(
            &h,
            "nvmf_subsystem_add_ns",
            json!({"nqn": NQN, "namespace": {"bdev_name": "Malloc0"}})
        )),
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
        code(call(&h, "nvmf_create_transport", json!({"trtype": "RDMA"}))),
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
    // Two bdevs, SPDK's closing bdev_wait_for_examine, transport, subsystem, listener, ns.
    assert_eq!((report.applied, report.skipped.len()), (7, 0));
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
    // SPDK's VFIOUSER counters: passes and the commands they took.
    let t = &s["poll_groups"][0]["transports"][0];
    assert_eq!(t["trtype"], json!("VFIOUSER"));
    for key in [
        "polls",
        "poll_reqs",
        "polls_spurious",
        "ctrlr_intr",
        "cq_full",
        "cqh_io_writes",
    ] {
        assert!(t[key].is_u64(), "{key} in {t}");
    }
    assert!(t["poll_reqs_variance"].is_f64(), "{t}");
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
        -110,
        "SPDK answers a wait that timed out with -ETIMEDOUT"
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

#[test]
fn get_bdevs_stops_waiting_when_its_caller_leaves() {
    let (h, stop) = handler();
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let leaver = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(theirs);
    });
    let caller = nvmemu_rpc::Caller::connection(std::os::fd::AsFd::as_fd(&ours), &stop);
    let t0 = std::time::Instant::now();
    let req = Request::decode(
        "bdev_get_bdevs",
        Some(json!({"name": "Never", "timeout": 60_000})),
    )
    .unwrap();
    let r = nvmemu_rpc::dispatch_for(&h, req, &caller);
    assert_eq!(r.unwrap_err().code, -19);
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    leaver.join().unwrap();
}

/// The answers' shapes that tests/peers/rpc_shape.py found different from SPDK's nvmf_tgt.
mod spdk_shape {
    use super::*;

    fn saved_call(saved: &Value, method: &str) -> Value {
        saved["subsystems"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["config"].as_array().unwrap())
            .find(|c| c["method"] == method)
            .unwrap_or_else(|| panic!("no {method} in {saved}"))["params"]
            .clone()
    }

    #[test]
    fn every_namespace_reports_its_nguid() {
        let (h, _) = handler();
        let dir = tempfile::tempdir().unwrap();
        setup(&h, dir.path().to_str().unwrap());
        let subs = call(&h, "nvmf_get_subsystems", json!({"nqn": NQN})).unwrap();
        let nguid = subs[0]["namespaces"][0]["nguid"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(nguid.len(), 32);
        assert!(
            nguid
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
        );
        assert_ne!(nguid, "0".repeat(32));
        let saved = dispatch(&h, Request::SaveConfig).unwrap();
        let ns = saved_call(&saved, "nvmf_subsystem_add_ns");
        assert_eq!(ns["namespace"]["nguid"], json!(nguid));
        // SPDK lists an EUI-64 only when one was given.
        assert_eq!(subs[0]["namespaces"][0].get("eui64"), None);
    }

    #[test]
    fn two_servers_built_by_one_script_report_different_global_ids() {
        let ids = || {
            let (h, _) = handler();
            let dir = tempfile::tempdir().unwrap();
            setup(&h, dir.path().to_str().unwrap());
            let bdev_uuid =
                call(&h, "bdev_get_bdevs", json!({"name": "Malloc0"})).unwrap()[0]["uuid"]
                    .as_str()
                    .unwrap()
                    .to_owned();
            let ns = call(&h, "nvmf_get_subsystems", json!({"nqn": NQN})).unwrap()[0]["namespaces"]
                [0]
            .clone();
            (bdev_uuid, ns)
        };
        let (uuid_a, ns_a) = ids();
        let (uuid_b, ns_b) = ids();
        // As SPDK: the namespace UUID is the bdev's and the NGUID is its 16 bytes.
        assert_eq!(ns_a["uuid"], json!(uuid_a));
        assert_eq!(ns_a["nguid"], json!(uuid_a.replace('-', "").to_uppercase()));
        assert_ne!(ns_a["uuid"], ns_b["uuid"]);
        assert_ne!(ns_a["nguid"], ns_b["nguid"]);
        assert_ne!(uuid_a, uuid_b);
        assert_eq!(ns_a.get("eui64"), None);
    }

    #[test]
    fn explicit_namespace_ids_win_and_an_eui64_is_listed_once_set() {
        let (h, _) = handler();
        let dir = tempfile::tempdir().unwrap();
        setup(&h, dir.path().to_str().unwrap());
        call(
            &h,
            "bdev_null_create",
            json!({"name": "N", "num_blocks": 8, "block_size": 512,
                   "uuid": "11111111-2222-4333-8444-555555555555"}),
        )
        .unwrap();
        let given = json!({"bdev_name": "N", "eui64": "0102030405060708",
                           "nguid": "000102030405060708090A0B0C0D0E0F",
                           "uuid": "99999999-2222-4333-8444-555555555555"});
        call(
            &h,
            "nvmf_subsystem_add_ns",
            json!({"nqn": NQN, "namespace": given}),
        )
        .unwrap();
        let ns = call(&h, "nvmf_get_subsystems", json!({"nqn": NQN})).unwrap()[0]["namespaces"][1]
            .clone();
        for key in ["eui64", "nguid", "uuid"] {
            assert_eq!(ns[key], given[key], "{key}");
        }
        let saved = dispatch(&h, Request::SaveConfig).unwrap();
        let bdev = saved_call(&saved, "bdev_null_create");
        assert_eq!(bdev["uuid"], json!("11111111-2222-4333-8444-555555555555"));
    }

    #[test]
    fn supported_io_types_agree_with_what_identify_reports() {
        use nvmemu_spec::identify::ctrl_bits;
        let (h, _) = handler();
        call(
            &h,
            "bdev_malloc_create",
            json!({"num_blocks": 8, "block_size": 512}),
        )
        .unwrap();
        call(
            &h,
            "bdev_null_create",
            json!({"name": "N", "num_blocks": 8, "block_size": 512}),
        )
        .unwrap();
        let oncs = |bit: u16| json!(nvmemu_ctrl::ONCS & bit != 0);
        for b in call(&h, "bdev_get_bdevs", json!({}))
            .unwrap()
            .as_array()
            .unwrap()
        {
            let io = &b["supported_io_types"];
            assert_eq!(io["compare"], oncs(ctrl_bits::ONCS_COMPARE), "{b}");
            assert_eq!(io["unmap"], oncs(ctrl_bits::ONCS_DSM), "{b}");
            assert_eq!(
                io["write_zeroes"],
                oncs(ctrl_bits::ONCS_WRITE_ZEROES),
                "{b}"
            );
            assert_eq!(io["copy"], oncs(ctrl_bits::ONCS_COPY), "{b}");
            // FUSES is 0: no fused Compare and Write.
            assert_eq!(io["compare_and_write"], json!(false), "{b}");
            assert_eq!(
                (&io["read"], &io["write"], &io["flush"]),
                (&json!(true), &json!(true), &json!(true))
            );
        }
    }

    #[test]
    fn answers_keep_spdks_key_order() {
        let (h, _) = handler();
        let dir = tempfile::tempdir().unwrap();
        setup(&h, dir.path().to_str().unwrap());
        let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        let bdev = &call(&h, "bdev_get_bdevs", json!({"name": "Malloc0"})).unwrap()[0];
        assert_eq!(
            keys(bdev),
            [
                "name",
                "aliases",
                "product_name",
                "block_size",
                "num_blocks",
                "uuid",
                "assigned_rate_limits",
                "claimed",
                "claim_type",
                "zoned",
                "supported_io_types",
                "driver_specific"
            ]
        );
        assert_eq!(
            keys(&bdev["supported_io_types"])[..4],
            ["read", "write", "unmap", "flush"]
        );
        let sub = &call(&h, "nvmf_get_subsystems", json!({"nqn": NQN})).unwrap()[0];
        assert_eq!(
            keys(sub),
            [
                "nqn",
                "subtype",
                "listen_addresses",
                "allow_any_host",
                "hosts",
                "serial_number",
                "model_number",
                "max_namespaces",
                "min_cntlid",
                "max_cntlid",
                "namespaces"
            ]
        );
        // The text on the wire keeps it too.
        let text = serde_json::to_string(bdev).unwrap();
        assert!(
            text.starts_with("{\"name\":\"Malloc0\",\"aliases\":"),
            "{text}"
        );
    }

    #[test]
    fn save_config_records_every_transport_option_and_the_listeners_secure_channel() {
        let (h, _) = handler();
        let dir = tempfile::tempdir().unwrap();
        setup(&h, dir.path().to_str().unwrap());
        let saved = dispatch(&h, Request::SaveConfig).unwrap();
        let transport = saved_call(&saved, "nvmf_create_transport");
        let listed = call(&h, "nvmf_get_transports", json!({})).unwrap();
        assert_eq!(transport, listed[0]);
        for key in [
            "max_queue_depth",
            "max_io_qpairs_per_ctrlr",
            "in_capsule_data_size",
            "max_io_size",
            "io_unit_size",
            "max_aq_depth",
            "num_shared_buffers",
            "buf_cache_size",
            "abort_timeout_sec",
            "ack_timeout",
            "data_wr_pool_size",
        ] {
            assert!(transport[key].is_u64(), "{key} in {transport}");
        }
        assert_eq!(transport["dif_insert_or_strip"], json!(false));
        // What nvmf_tgt accepts (it refuses units above its 135168-byte iobuf buffers).
        assert_eq!(transport["io_unit_size"], json!(131_072));
        let listener = saved_call(&saved, "nvmf_subsystem_add_listener");
        assert_eq!(listener["secure_channel"], json!(false));
    }

    #[test]
    fn reactors_report_the_poller_thread_and_its_cpu_time() {
        let (h, _) = handler();
        let r = call(&h, "framework_get_reactors", json!({})).unwrap();
        let reactor = &r["reactors"][0];
        let tid = reactor["tid"].as_u64().unwrap();
        let comm = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).unwrap();
        assert_eq!(comm.trim_end(), "nvmemu-poller0");
        for key in ["irq", "sys", "usr"] {
            assert!(reactor[key].is_u64(), "{key} in {reactor}");
        }
    }

    #[test]
    fn a_bdevs_uuid_is_its_alias() {
        let (h, _) = handler();
        let dir = tempfile::tempdir().unwrap();
        call(
            &h,
            "bdev_null_create",
            json!({"name": "N", "num_blocks": 8, "block_size": 512}),
        )
        .unwrap();
        setup(&h, dir.path().to_str().unwrap());
        let malloc = call(&h, "bdev_get_bdevs", json!({"name": "Malloc0"})).unwrap();
        let uuid = malloc[0]["uuid"].as_str().unwrap().to_owned();
        assert_eq!(malloc[0]["aliases"], json!([uuid]));
        assert_eq!(
            call(&h, "bdev_get_bdevs", json!({"name": uuid.to_uppercase()})),
            Ok(malloc.clone())
        );
        let iostat = call(&h, "bdev_get_iostat", json!({"name": uuid})).unwrap();
        assert_eq!(iostat["bdevs"][0]["name"], json!("Malloc0"));
        let null_uuid = call(&h, "bdev_get_bdevs", json!({"name": "N"})).unwrap()[0]["uuid"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            call(
                &h,
                "nvmf_subsystem_add_ns",
                json!({"nqn": NQN, "namespace": {"bdev_name": null_uuid}})
            ),
            Ok(json!(2))
        );
        let subs = call(&h, "nvmf_get_subsystems", json!({"nqn": NQN})).unwrap();
        assert_eq!(subs[0]["namespaces"][1]["bdev_name"], json!("N"));
        assert_eq!(
            call(&h, "bdev_get_bdevs", json!({"name": "N"})).unwrap()[0]["claimed"],
            json!(true)
        );
        // Deleting by the alias finds the bdev (and hot-removes its namespace).
        assert_eq!(
            call(&h, "bdev_malloc_delete", json!({"name": uuid})),
            Ok(json!(true))
        );
        assert_eq!(
            code(call(&h, "bdev_get_bdevs", json!({"name": "nope"}))),
            -19
        );
    }
}

#[test]
fn deleting_a_claimed_bdev_hot_removes_its_namespace() {
    let (h, _) = handler();
    let dir = tempfile::tempdir().unwrap();
    setup(&h, dir.path().to_str().unwrap());
    // The wrong kind is no such device, and nothing changes.
    assert_eq!(
        code(call(&h, "bdev_null_delete", json!({"name": "Malloc0"}))),
        -19
    );
    assert_eq!(
        call(&h, "bdev_malloc_delete", json!({"name": "Malloc0"})),
        Ok(json!(true))
    );
    let subs = call(&h, "nvmf_get_subsystems", json!({"nqn": NQN})).unwrap();
    assert_eq!(subs[0]["namespaces"], json!([]));
    assert_eq!(
        code(call(&h, "bdev_get_bdevs", json!({"name": "Malloc0"}))),
        -19
    );
    // The listener stays, and the NSID can be used again.
    assert!(dir.path().join("cntrl").exists());
    call(
        &h,
        "bdev_null_create",
        json!({"name": "N", "num_blocks": 8, "block_size": 512}),
    )
    .unwrap();
    assert_eq!(
        call(
            &h,
            "nvmf_subsystem_add_ns",
            json!({"nqn": NQN, "namespace": {"bdev_name": "N"}})
        ),
        Ok(json!(1))
    );
}

#[test]
fn malloc_backing_is_reported_and_round_trips_through_save_config() {
    let (a, _) = handler();
    let create = |h: &NvmemuHandler, name: &str, extra: Value| {
        let mut p = json!({"name": name, "num_blocks": 1024, "block_size": 4096});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        call(h, "bdev_malloc_create", p)
    };
    create(&a, "Backed", json!({})).unwrap();
    create(&a, "Lazy", json!({"lazy": true})).unwrap();
    let (c, msg) = create(&a, "Both", json!({"lazy": true, "hugepages": true})).unwrap_err();
    assert_eq!(c, -32602, "{msg}");
    let saved = dispatch(&a, Request::SaveConfig).unwrap();
    let bdev_config = saved["subsystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["subsystem"] == json!("bdev"))
        .unwrap()["config"]
        .clone();
    let params = |name: &str| {
        bdev_config
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["params"]["name"] == json!(name))
            .unwrap()["params"]
            .clone()
    };
    // Only the non-default flag is written (SPDK refuses parameters it does not know).
    assert_eq!(params("Lazy")["lazy"], json!(true));
    assert!(params("Backed").get("lazy").is_none());
    assert!(params("Backed").get("hugepages").is_none());
    drop(a);
    let (b, _) = handler();
    load_config(&b, &saved).unwrap();
    let malloc = |name: &str| {
        call(&b, "bdev_get_bdevs", json!({"name": name})).unwrap()[0]["driver_specific"]["malloc"]
            .clone()
    };
    let (backed, lazy) = (malloc("Backed"), malloc("Lazy"));
    assert_eq!(
        (&backed["lazy"], &lazy["lazy"]),
        (&json!(false), &json!(true))
    );
    assert!(
        backed["resident_bytes"].as_u64().unwrap() >= 4 << 20,
        "{backed}"
    );
    assert!(lazy["resident_bytes"].as_u64().unwrap() < 4 << 20, "{lazy}");
    assert_eq!(dispatch(&b, Request::SaveConfig).unwrap(), saved);
}

#[test]
fn a_malloc_bdev_being_backed_blocks_no_other_method_and_keeps_its_name() {
    let (h, _) = handler();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // 256 MiB, backed page by page at creation: long enough to be seen in progress.
            let made = call(
                &h,
                "bdev_malloc_create",
                json!({"name": "Big", "num_blocks": 1u64 << 19, "block_size": 512}),
            );
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            assert_eq!(made, Ok(json!("Big")));
        });
        // A probe that creates nothing either way: the name check comes before the
        // geometry check, which refuses zero blocks after the name was free.
        let probe = json!({"name": "Big", "num_blocks": 0, "block_size": 512});
        let mut seen_in_progress = false;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            match call(&h, "bdev_null_create", probe.clone()) {
                Err((code, msg)) if msg.contains("already exists") => {
                    assert_eq!(code, -17, "{msg}");
                    // Taken but, just after, still not registered: the name was reserved by a
                    // create in progress, and the probe was answered meanwhile (no lock held).
                    seen_in_progress |= get_code(&h, "Big") == Some(-19);
                }
                Err((code, msg)) => assert_eq!(code, -22, "{msg}"),
                Ok(v) => panic!("the probe created a bdev: {v}"),
            }
        }
        assert!(
            seen_in_progress,
            "no method was answered while the bdev was being backed"
        );
    });
    let got = call(&h, "bdev_get_bdevs", json!({"name": "Big"})).unwrap();
    assert_eq!(got[0]["num_blocks"], json!(1u64 << 19));
    // The reservation is gone with the create: the name is now the bdev's, not a placeholder.
    assert_eq!(code(call(&h, "bdev_null_create", probe_named("Big"))), -17);
    call(&h, "bdev_malloc_delete", json!({"name": "Big"})).unwrap();
    assert_eq!(code(call(&h, "bdev_null_create", probe_named("Big"))), -22);
}

fn get_code(h: &NvmemuHandler, name: &str) -> Option<i32> {
    call(h, "bdev_get_bdevs", json!({"name": name}))
        .err()
        .map(|e| e.0)
}

fn probe_named(name: &str) -> Value {
    json!({"name": name, "num_blocks": 0, "block_size": 512})
}

#[test]
fn a_bdev_wait_is_capped_at_a_minute() {
    use std::time::Duration;
    assert_eq!(super::bdev_wait(2_000), Duration::from_secs(2));
    assert_eq!(super::bdev_wait(600_000), Duration::from_secs(60));
    assert_eq!(super::bdev_wait(u64::MAX), super::MAX_BDEV_WAIT);
}
