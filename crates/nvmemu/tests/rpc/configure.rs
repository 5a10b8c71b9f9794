// SPDX-License-Identifier: Apache-2.0
//! Configuring a server: rpc.py's reference script, raw JSON-RPC, `serve --json` and command-line namespaces, and the error codes of bad calls.

use super::*;

#[test]
fn reference_script_then_driver_verifies_data_and_identity() {
    let s = Server::start(&[]);
    s.reference_sequence();
    let mut c = attach(&s.traddr());
    let id = c.identify_controller().unwrap();
    assert_eq!(id.sn.trim(), "SPDK00");
    assert_eq!(id.mn.trim(), "SPDK bdev Controller");
    assert_eq!(identify_subnqn(&mut c), NQN);
    let ns: Vec<_> = c
        .namespaces()
        .iter()
        .map(|n| (n.nsid, n.nsze, n.lba_size))
        .collect();
    assert_eq!(ns, vec![(Nsid(1), 64 * 2048, 512)]);

    let mut q = c.take_qpair().unwrap();
    let len = 64 * 1024u64;
    let wbuf = c.alloc_dma(len).unwrap();
    let pattern: Vec<u8> = (0..len).map(|i| (i * 13 + 7) as u8).collect();
    wbuf.copy_from(0, &pattern).unwrap();
    // The last 128 blocks of the 64 MiB namespace.
    let slba = Lba(64 * 2048 - 128);
    q.write_blocking(Nsid(1), slba, 128, &wbuf).unwrap();
    let rbuf = c.alloc_dma(len).unwrap();
    q.read_blocking(Nsid(1), slba, 128, &rbuf).unwrap();
    let mut back = vec![0u8; len as usize];
    rbuf.copy_to(0, &mut back).unwrap();
    assert_eq!(back, pattern);
    drop(q);
    c.shutdown().unwrap();

    // The I/O shows up in the bdev's counters.
    let stat = s
        .call("bdev_get_iostat", json!({"name": "Malloc0"}))
        .unwrap();
    assert_eq!(stat["bdevs"][0]["bytes_written"], json!(len));
    assert_eq!(stat["bdevs"][0]["bytes_read"], json!(len));
    let bdevs = s.call("bdev_get_bdevs", json!({})).unwrap();
    assert_eq!(bdevs[0]["claimed"], json!(true));
    s.kill();
}

#[test]
fn bad_parameters_unknown_methods_and_state_errors_get_spdk_codes() {
    let s = Server::start(&[]);
    s.reference_sequence();
    assert_eq!(rpc_code(s.call("bdev_frobnicate", json!({}))).0, -32601);
    let (code, msg) = rpc_code(s.call("bdev_malloc_create", json!({"num_blocks": 8})));
    assert_eq!(code, -32602);
    assert!(msg.contains("block_size"), "{msg}");
    let (code, msg) = rpc_code(s.call(
        "nvmf_create_subsystem",
        json!({"nqn": "nqn.2016-06.io.spdk:x", "serial_number": "S".repeat(21)}),
    ));
    assert_eq!(code, -32602);
    assert!(msg.contains("serial_number"), "{msg}");
    let (code, msg) = rpc_code(s.call("nvmf_create_subsystem", json!({"nqn": "cnode9"})));
    assert_eq!(code, -32602);
    assert!(msg.contains("nqn"), "{msg}");
    // State errors: SPDK's -errno style.
    assert_eq!(
        rpc_code(s.call("bdev_malloc_delete", json!({"name": "Missing"}))).0,
        -19
    );
    assert_eq!(
        rpc_code(s.call(
            "bdev_malloc_create",
            json!({"name": "Malloc0", "num_blocks": 8, "block_size": 512})
        ))
        .0,
        -17
    );
    assert_eq!(
        rpc_code(s.call("bdev_get_bdevs", json!({"name": "Nope"}))).0,
        -19
    );
    assert_eq!(
        rpc_code(s.call(
            "bdev_malloc_create",
            json!({"name": "Odd", "num_blocks": 8, "block_size": 1536})
        ))
        .0,
        -22
    );
    s.ok(&["bdev_malloc_create", "1", "4096", "-b", "Malloc1"]);
    let (code, msg) = rpc_code(s.call(
        "nvmf_subsystem_add_listener",
        json!({"nqn": NQN, "listen_address": {"trtype": "VFIOUSER", "traddr": "/nonexistent/vfu"}}),
    ));
    assert_eq!(code, -2, "{msg}");
    assert!(msg.contains("/nonexistent/vfu"), "{msg}");
    let (code, _) = rpc_code(s.call(
        "nvmf_subsystem_add_ns",
        json!({"nqn": NQN, "namespace": {"bdev_name": "Malloc1", "nsid": 1}}),
    ));
    assert_eq!(code, -17);
    let (code, _) = rpc_code(s.call(
        "nvmf_subsystem_add_ns",
        json!({"nqn": NQN, "namespace": {"bdev_name": "Malloc0"}}),
    ));
    assert_eq!(code, -16, "a claimed bdev cannot back a second namespace");
    assert_eq!(
        rpc_code(s.call("nvmf_subsystem_remove_ns", json!({"nqn": NQN, "nsid": 9}))).0,
        -2
    );
    assert_eq!(
        rpc_code(s.call("nvmf_delete_subsystem", json!({"nqn": "nqn.x:none"}))).0,
        -32602
    );
    // The CLI: usage errors exit 2, failed calls exit 1 with rpc.py's error text.
    assert_eq!(s.cli(&["bdev_frobnicate"]).status.code(), Some(2));
    let out = s.cli(&["bdev_null_delete", "Malloc0"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"code\": -19"), "{err}");
    // Nothing crashed: the server still answers, and the state is intact.
    assert_eq!(s.ok(&["nvmf_subsystem_add_ns", NQN, "Malloc1"]), "");
    s.kill();
}

#[test]
fn save_config_replays_through_serve_json() {
    let a = Server::start(&[]);
    a.reference_sequence();
    a.ok(&["bdev_null_create", "Null0", "16", "4096"]);
    let saved = a.ok(&["save_config"]);
    let subsystems = a.call("nvmf_get_subsystems", json!({})).unwrap();
    let bdevs = a.call("bdev_get_bdevs", json!({})).unwrap();
    // The saved traddr is in a's directory, kept (with the config file) for the second server.
    let dir = a.kill();
    let config = dir.path().join("config.json");
    std::fs::write(&config, &saved).unwrap();
    let b = Server::start_in(
        tempfile::TempDir::new_in(dir.path()).unwrap(),
        &["--json", config.to_str().unwrap()],
    );
    assert_eq!(
        b.call("nvmf_get_subsystems", json!({})).unwrap(),
        subsystems
    );
    // Same bdevs; how much of a namespace sits in transparent huge pages is up to the
    // kernel at the time, so that figure is left out.
    let no_thp = |mut v: Value| {
        for b in v.as_array_mut().unwrap() {
            if let Some(m) = b["driver_specific"].get_mut("malloc") {
                m.as_object_mut().unwrap().remove("transparent_huge_bytes");
            }
        }
        v
    };
    assert_eq!(
        no_thp(b.call("bdev_get_bdevs", json!({})).unwrap()),
        no_thp(bdevs)
    );
    assert_eq!(b.ok(&["save_config"]), saved);
    let mut c = attach(&dir.path().join("vfu"));
    assert_eq!(c.info().sn.trim(), "SPDK00");
    c.shutdown().unwrap();
    drop(b);
}

#[test]
fn command_line_namespaces_are_visible_to_rpc() {
    let (s, traddr) = Server::start_with_socket_dir(&[
        "--ns",
        "malloc:size=1M,lba=512",
        "--ns",
        "null:size=1M,lba=4096",
        "--serial",
        "CLI01",
    ]);
    let subs = s.call(
        "nvmf_get_subsystems",
        json!({"nqn": "nqn.2019-07.io.nvmemu:cnode1"}),
    );
    let subs = subs.unwrap();
    let ns: Vec<_> = subs[0]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["nsid"].clone(), n["bdev_name"].clone()))
        .collect();
    assert_eq!(
        ns,
        vec![(json!(1), json!("ns0n1")), (json!(2), json!("ns0n2"))]
    );
    let mut c = attach(&traddr);
    assert_eq!(c.info().sn.trim(), "CLI01");
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1), Nsid(2)]);
    c.shutdown().unwrap();
    // A second server may not steal the RPC socket of a live one.
    let out = Command::new(BIN)
        .args(["serve", "-r"])
        .arg(s.sock())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is in use: a server is listening on it")
    );
    s.ok(&["framework_wait_init"]);
    drop(s);
}

/// tests/rpc/test_rawrpc.py (raw JSON-RPC spoken like rpc.py) against the real server.
#[test]
fn python_raw_json_rpc_suite_passes_against_serve() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/rpc/test_rawrpc.py")
        .canonicalize()
        .expect("tests/rpc/test_rawrpc.py exists");
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("note: python3 not found; skipping {}", script.display());
        return;
    }
    let s = Server::start(&[]);
    let out = Command::new("python3")
        .arg(&script)
        .env("NVMEMU_RPC_SOCK", s.sock())
        .env("NVMEMU_VFU_DIR", s.traddr())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "test_rawrpc.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The suite ends with spdk_kill_instance: the server exits cleanly by itself.
    let mut s = s;
    let status = s.child.take().unwrap().wait().unwrap();
    assert!(status.success());
}
