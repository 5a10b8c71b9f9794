// SPDX-License-Identifier: Apache-2.0
//! argv -> (method, params) for every method, against what rpc.py (SPDK `python/spdk/cli/*.py`
//! with `remove_null`) sends: absent options are omitted, and store_true flags are always sent
//! except by the nvmf subsystem, namespace and listener methods, which send a flag only when
//! it is set (so SPDK v25.05's nvmf_tgt, which refuses `enable_nssr`, accepts them).
#![allow(clippy::unwrap_used)] // Test helpers outside #[test] fns.

use nvmemu_rpc::cli::args::PrintStyle;
use nvmemu_rpc::cli::parse_args;
use serde_json::{Value, json};

mod device_models;

fn call(argv: &[&str]) -> (String, Value, PrintStyle) {
    let a = parse_args(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let c = a.method.to_call().unwrap();
    (c.method.to_owned(), c.params, c.print)
}

fn params(argv: &[&str]) -> Value {
    call(argv).1
}

#[test]
fn reference_script() {
    assert_eq!(
        call(&["framework_wait_init"]),
        ("framework_wait_init".into(), json!({}), PrintStyle::Nothing)
    );
    assert_eq!(
        call(&["bdev_malloc_create", "4092", "512", "-b", "Malloc0"]),
        (
            "bdev_malloc_create".into(),
            json!({"num_blocks": 8380416, "block_size": 512, "name": "Malloc0",
                   "md_interleave": false, "dif_is_head_of_md": false}),
            PrintStyle::Json
        )
    );
    assert_eq!(
        params(&["nvmf_create_transport", "-t", "VFIOUSER"]),
        json!({"trtype": "VFIOUSER", "zcopy": false, "no_srq": false, "c2h_success": true,
               "dif_insert_or_strip": false, "no_wr_batching": false, "disable_mappable_bar0": false,
               "disable_adaptive_irq": false, "disable_shadow_doorbells": false,
               "disable_command_passthru": false})
    );
    assert_eq!(
        params(&[
            "nvmf_create_subsystem",
            "nqn.2016-06.io.spdk:cnode1",
            "-s",
            "SPDK00",
            "-a"
        ]),
        json!({"nqn": "nqn.2016-06.io.spdk:cnode1", "serial_number": "SPDK00", "allow_any_host": true})
    );
    assert_eq!(
        params(&[
            "nvmf_subsystem_add_ns",
            "nqn.2016-06.io.spdk:cnode1",
            "Malloc0"
        ]),
        json!({"nqn": "nqn.2016-06.io.spdk:cnode1",
               "namespace": {"bdev_name": "Malloc0"}})
    );
    assert_eq!(
        params(&[
            "nvmf_subsystem_add_listener",
            "nqn.2016-06.io.spdk:cnode1",
            "-t",
            "VFIOUSER",
            "-a",
            "/tmp/vfu",
            "-s",
            "0"
        ]),
        json!({"nqn": "nqn.2016-06.io.spdk:cnode1",
               "listen_address": {"trtype": "VFIOUSER", "traddr": "/tmp/vfu", "trsvcid": "0"}})
    );
}

#[test]
fn framework_methods() {
    assert_eq!(
        call(&["rpc_get_methods", "-c"]),
        (
            "rpc_get_methods".into(),
            json!({"current": true, "include_aliases": false}),
            PrintStyle::Dict
        )
    );
    assert_eq!(call(&["spdk_get_version"]).1, json!({}));
    assert_eq!(call(&["spdk_get_version"]).2, PrintStyle::Json);
    assert_eq!(call(&["framework_get_reactors"]).2, PrintStyle::Dict);
    assert_eq!(
        params(&["spdk_kill_instance", "SIGTERM"]),
        json!({"sig_name": "SIGTERM"})
    );
    let a = parse_args(&["save_config", "-i", "-1", "-s", "bdev"]).unwrap();
    assert!(
        matches!(a.method, nvmemu_rpc::cli::args::MethodArgs::SaveConfig(ref s)
        if s.indent == -1 && s.subsystems.as_deref() == Some("bdev"))
    );
}

#[test]
fn bdev_malloc_methods() {
    assert_eq!(
        params(&[
            "bdev_malloc_create",
            "0.5",
            "4096",
            "-u",
            "U",
            "-p",
            "4096",
            "-o",
            "8",
            "-m",
            "8",
            "-i",
            "-t",
            "1",
            "-d",
            "-f",
            "0",
            "-n",
            "-1"
        ]),
        json!({"num_blocks": 128, "block_size": 4096, "uuid": "U", "physical_block_size": 4096,
               "optimal_io_boundary": 8, "md_size": 8, "md_interleave": true, "dif_type": 1,
               "dif_is_head_of_md": true, "dif_pi_format": 0, "numa_id": -1})
    );
    // nvmemu's own flags, sent only when given (rpc.py never sends them).
    assert_eq!(
        params(&["bdev_malloc_create", "1", "512", "--lazy"]),
        json!({"num_blocks": 2048, "block_size": 512, "md_interleave": false,
               "dif_is_head_of_md": false, "lazy": true})
    );
    assert_eq!(
        params(&["bdev_malloc_create", "1", "512", "--hugepages"]),
        json!({"num_blocks": 2048, "block_size": 512, "md_interleave": false,
               "dif_is_head_of_md": false, "hugepages": true})
    );
    assert_eq!(
        params(&["bdev_malloc_create", "1", "3000"]),
        json!({"num_blocks": 349, "block_size": 3000, "md_interleave": false, "dif_is_head_of_md": false})
    );
    assert!(
        parse_args(&["bdev_malloc_create", "1", "0"])
            .unwrap()
            .method
            .to_call()
            .is_err()
    );
    assert_eq!(
        params(&["bdev_malloc_delete", "Malloc0"]),
        json!({"name": "Malloc0"})
    );
}

#[test]
fn bdev_null_methods() {
    assert_eq!(
        call(&[
            "bdev_null_create",
            "Null0",
            "8",
            "4096",
            "-m",
            "8",
            "-t",
            "1",
            "-a",
            "1",
            "-g",
            "2",
            "-s",
            "3",
            "-c",
            "4",
            "-r",
            "5"
        ]),
        (
            "bdev_null_create".into(),
            json!({"name": "Null0", "num_blocks": 2048, "block_size": 4096, "md_size": 8, "dif_type": 1,
                   "dif_is_head_of_md": false, "preferred_write_alignment": 1,
                   "preferred_write_granularity": 2, "optimal_write_size": 3,
                   "preferred_unmap_alignment": 4, "preferred_unmap_granularity": 5}),
            PrintStyle::Json
        )
    );
    assert!(
        parse_args(&["bdev_null_create", "N", "8", "512", "-t", "1"])
            .unwrap()
            .method
            .to_call()
            .is_err()
    );
    assert_eq!(
        params(&["bdev_null_delete", "Null0"]),
        json!({"name": "Null0"})
    );
}

#[test]
fn bdev_query_and_qos_methods() {
    assert_eq!(
        call(&["bdev_get_bdevs"]),
        ("bdev_get_bdevs".into(), json!({}), PrintStyle::Dict)
    );
    assert_eq!(
        params(&["bdev_get_bdevs", "-b", "M", "-t", "100"]),
        json!({"name": "M", "timeout": 100})
    );
    assert_eq!(params(&["bdev_get_iostat"]), json!({"per_channel": false}));
    // rpc.py's flags; only the limits given are sent (the others keep their values).
    assert_eq!(
        call(&["bdev_set_qos_limit", "Malloc0", "--rw-ios-per-sec", "2000"]),
        (
            "bdev_set_qos_limit".into(),
            json!({"name": "Malloc0", "rw_ios_per_sec": 2000}),
            PrintStyle::Nothing
        )
    );
    assert_eq!(
        params(&[
            "bdev_set_qos_limit",
            "M",
            "--rw_mbytes_per_sec",
            "0",
            "--r-mbytes-per-sec",
            "5",
            "--w_mbytes_per_sec",
            "6"
        ]),
        json!({"name": "M", "rw_mbytes_per_sec": 0, "r_mbytes_per_sec": 5, "w_mbytes_per_sec": 6})
    );
    assert_eq!(
        params(&[
            "bdev_get_iostat",
            "-c",
            "--reset-mode",
            "maxmin",
            "--names",
            "a,b"
        ]),
        json!({"per_channel": true, "reset_mode": "maxmin", "names": ["a", "b"]})
    );
    assert!(parse_args(&["bdev_get_iostat", "-b", "a", "--names", "b"]).is_err());
}

#[test]
fn nvmf_transport_and_subsystem_methods() {
    let p = params(&[
        "nvmf_create_transport",
        "-t",
        "VFIOUSER",
        "-M",
        "-I",
        "-S",
        "-q",
        "64",
        "-o",
        "-g",
        "tgt",
    ]);
    assert_eq!(p["max_queue_depth"], json!(64));
    assert_eq!(p["tgt_name"], json!("tgt"));
    assert_eq!(
        (
            &p["disable_mappable_bar0"],
            &p["disable_adaptive_irq"],
            &p["disable_shadow_doorbells"],
            &p["c2h_success"]
        ),
        (&json!(true), &json!(true), &json!(true), &json!(false))
    );
    assert_eq!(
        call(&["nvmf_get_transports"]),
        ("nvmf_get_transports".into(), json!({}), PrintStyle::Dict)
    );
    assert_eq!(
        params(&["nvmf_get_transports", "--trtype", "VFIOUSER", "-t", "x"]),
        json!({"trtype": "VFIOUSER", "tgt_name": "x"})
    );
    assert_eq!(
        params(&[
            "nvmf_create_subsystem",
            "q",
            "-d",
            "Model",
            "-m",
            "4",
            "-r",
            "-i",
            "2",
            "-I",
            "9",
            "-p",
            "-n",
            "--max-discard-size",
            "64",
            "--max-write-zeroes-size",
            "128"
        ]),
        json!({"nqn": "q", "model_number": "Model", "max_namespaces": 4,
               "ana_reporting": true, "min_cntlid": 2, "max_cntlid": 9, "passthrough": true, "enable_nssr": true,
               "max_discard_size_kib": 64, "max_write_zeroes_size_kib": 128})
    );
    assert_eq!(params(&["nvmf_delete_subsystem", "q"]), json!({"nqn": "q"}));
    assert_eq!(
        call(&["nvmf_get_subsystems"]),
        ("nvmf_get_subsystems".into(), json!({}), PrintStyle::Dict)
    );
    assert_eq!(params(&["nvmf_get_subsystems", "q"]), json!({"nqn": "q"}));
}

#[test]
fn nvmf_namespace_and_listener_methods() {
    assert_eq!(
        params(&[
            "nvmf_subsystem_add_ns",
            "q",
            "B",
            "-n",
            "3",
            "-g",
            "G",
            "-e",
            "E",
            "-u",
            "U",
            "-a",
            "2",
            "-i",
            "-N",
            "-p",
            "f",
            "-t",
            "x"
        ]),
        json!({"nqn": "q", "tgt_name": "x", "namespace": {"bdev_name": "B", "nsid": 3, "nguid": "G", "eui64": "E",
               "uuid": "U", "anagrpid": 2, "no_auto_visible": true, "hide_metadata": true, "ptpl_file": "f"}})
    );
    assert_eq!(
        params(&["nvmf_subsystem_remove_ns", "q", "3"]),
        json!({"nqn": "q", "nsid": 3})
    );
    assert_eq!(
        params(&[
            "nvmf_subsystem_add_listener",
            "discovery",
            "-t",
            "tcp",
            "-a",
            "1.2.3.4",
            "-f",
            "ipv4",
            "-s",
            "4420",
            "-k",
            "-n",
            "optimized",
            "-S",
            "posix"
        ]),
        json!({"nqn": "nqn.2014-08.org.nvmexpress.discovery", "secure_channel": true, "ana_state": "optimized",
               "sock_impl": "posix",
               "listen_address": {"trtype": "tcp", "traddr": "1.2.3.4", "adrfam": "ipv4", "trsvcid": "4420"}})
    );
    assert_eq!(
        params(&[
            "nvmf_subsystem_remove_listener",
            "q",
            "-t",
            "VFIOUSER",
            "-a",
            "/tmp/vfu"
        ]),
        json!({"nqn": "q", "listen_address": {"trtype": "VFIOUSER", "traddr": "/tmp/vfu"}})
    );
    assert_eq!(
        call(&["nvmf_get_stats"]),
        ("nvmf_get_stats".into(), json!({}), PrintStyle::Dict)
    );
}

/// The params go on the wire in rpc.py's order: nested objects last.
#[test]
fn params_keep_rpc_pys_key_order() {
    let text = |argv: &[&str]| serde_json::to_string(&params(argv)).unwrap();
    assert_eq!(
        text(&[
            "nvmf_subsystem_add_ns",
            "q",
            "B",
            "-n",
            "3",
            "-t",
            "x",
            "-i"
        ]),
        r#"{"nqn":"q","tgt_name":"x","namespace":{"bdev_name":"B","nsid":3,"no_auto_visible":true}}"#
    );
    assert_eq!(
        text(&[
            "nvmf_subsystem_add_listener",
            "q",
            "-t",
            "tcp",
            "-a",
            "h",
            "-s",
            "1",
            "-p",
            "x",
            "-k"
        ]),
        r#"{"nqn":"q","tgt_name":"x","secure_channel":true,"listen_address":{"trtype":"tcp","traddr":"h","trsvcid":"1"}}"#
    );
    assert_eq!(
        text(&["bdev_malloc_create", "1", "512", "-b", "M"]),
        r#"{"num_blocks":2048,"block_size":512,"name":"M","md_interleave":false,"dif_is_head_of_md":false}"#
    );
}

/// Every CLI call decodes on the server side into the matching Request.
#[test]
fn cli_params_decode_as_requests() {
    for argv in [
        &["bdev_malloc_create", "4092", "512", "-b", "Malloc0"][..],
        &["nvmf_create_transport", "-t", "VFIOUSER"],
        &["nvmf_create_subsystem", "q", "-s", "SPDK00", "-a"],
        &["nvmf_subsystem_add_ns", "q", "Malloc0"],
        &[
            "nvmf_subsystem_add_listener",
            "q",
            "-t",
            "VFIOUSER",
            "-a",
            "/tmp/vfu",
            "-s",
            "0",
        ],
        &[
            "nvmf_subsystem_remove_listener",
            "q",
            "-t",
            "VFIOUSER",
            "-a",
            "/tmp/vfu",
        ],
        &["bdev_get_iostat", "-c"],
        &["rpc_get_methods"],
        &["bdev_null_create", "N", "1", "512"],
    ] {
        let (m, p, _) = call(argv);
        let r =
            nvmemu_rpc::Request::decode(&m, Some(p)).unwrap_or_else(|e| panic!("{argv:?}: {e:?}"));
        assert_eq!(r.method(), m);
    }
}

#[test]
fn nvmf_host_methods() {
    let h = "nqn.2016-06.io.spdk:host1";
    assert_eq!(
        params(&["nvmf_subsystem_add_host", "q", h]),
        json!({"nqn": "q", "host": h})
    );
    assert_eq!(
        params(&[
            "nvmf_subsystem_add_host",
            "q",
            h,
            "-t",
            "x",
            "--dhchap-key",
            "k"
        ]),
        json!({"nqn": "q", "host": h, "tgt_name": "x", "dhchap_key": "k"})
    );
    assert_eq!(
        params(&["nvmf_subsystem_remove_host", "q", h]),
        json!({"nqn": "q", "host": h})
    );
    // rpc.py: allow_any_host is false only with -d.
    for (flag, allow) in [("-e", true), ("-d", false)] {
        assert_eq!(
            params(&["nvmf_subsystem_allow_any_host", "q", flag]),
            json!({"nqn": "q", "allow_any_host": allow})
        );
    }
    assert_eq!(
        params(&["nvmf_subsystem_allow_any_host", "q"]),
        json!({"nqn": "q", "allow_any_host": true})
    );
    for m in [
        "nvmf_subsystem_get_controllers",
        "nvmf_subsystem_get_qpairs",
        "nvmf_subsystem_get_listeners",
    ] {
        let (method, p, print) = call(&[m, "q"]);
        assert_eq!(
            (method.as_str(), p, print),
            (m, json!({"nqn": "q"}), PrintStyle::Dict)
        );
        let r = nvmemu_rpc::Request::decode(m, Some(json!({"nqn": "q"}))).unwrap();
        assert_eq!(r.method(), m);
    }
}

#[test]
fn monitoring_methods() {
    for m in [
        "bdev_wait_for_examine",
        "thread_get_stats",
        "thread_get_pollers",
        "thread_get_io_channels",
        "framework_get_scheduler",
        "log_get_flags",
        "log_get_level",
        "log_get_print_level",
        "notify_get_types",
    ] {
        let (method, p, _) = call(&[m]);
        assert_eq!((method.as_str(), &p), (m, &json!({})));
        assert_eq!(nvmemu_rpc::Request::decode(m, Some(p)).unwrap().method(), m);
    }
    assert_eq!(params(&["log_set_flag", "nvmf"]), json!({"flag": "nvmf"}));
    assert_eq!(params(&["log_clear_flag", "nvmf"]), json!({"flag": "nvmf"}));
    assert_eq!(
        params(&["log_set_level", "DEBUG"]),
        json!({"level": "DEBUG"})
    );
    assert_eq!(
        params(&["log_set_print_level", "INFO"]),
        json!({"level": "INFO"})
    );
    assert_eq!(params(&["notify_get_notifications"]), json!({}));
    assert_eq!(
        params(&["notify_get_notifications", "-i", "3", "-n", "2"]),
        json!({"id": 3, "max": 2})
    );
}
