// SPDX-License-Identifier: Apache-2.0
//! The answers' shapes that tests/peers/rpc_shape.py found different from SPDK's nvmf_tgt.

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
        let bdev_uuid = call(&h, "bdev_get_bdevs", json!({"name": "Malloc0"})).unwrap()[0]["uuid"]
            .as_str()
            .unwrap()
            .to_owned();
        let ns = call(&h, "nvmf_get_subsystems", json!({"nqn": NQN})).unwrap()[0]["namespaces"][0]
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
    let ns =
        call(&h, "nvmf_get_subsystems", json!({"nqn": NQN})).unwrap()[0]["namespaces"][1].clone();
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

#[test]
fn tcp_transport_takes_spdks_c2h_success_on_by_default_and_off_when_asked() {
    let listed = |params: Value| {
        let (h, _) = handler();
        call(&h, "nvmf_create_transport", params).unwrap();
        let t = call(&h, "nvmf_get_transports", json!({"trtype": "TCP"})).unwrap();
        let saved = dispatch(&h, Request::SaveConfig).unwrap();
        let recorded = saved_call(&saved, "nvmf_create_transport");
        (t[0]["c2h_success"].clone(), recorded["c2h_success"].clone())
    };
    let on = json!(true);
    assert_eq!(listed(json!({"trtype": "TCP"})), (on.clone(), on));
    let off = json!(false);
    assert_eq!(
        listed(json!({"trtype": "TCP", "c2h_success": false})),
        (off.clone(), off)
    );
}
