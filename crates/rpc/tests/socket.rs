// SPDX-License-Identifier: Apache-2.0
//! The server over a real UNIX socket with the in-memory FakeHandler: framing as rpc.py does
//! it, several requests per connection, many connections, error codes, stop.
#![allow(clippy::unwrap_used)] // Test helpers outside #[test] fns.

mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use common::{Server, read_reply, req};
use nvmemu_rpc::test_utils::FakeHandler;
use nvmemu_rpc::{Client, ClientError, DEFAULT_TIMEOUT, Framer, StopHandle, call, serve};
use serde_json::{Value, json};

fn call_on(path: &Path, method: &str, params: Value) -> Result<Value, ClientError> {
    call(path, method, params)
}

#[test]
fn reference_script_over_one_connection() {
    let srv = Server::start();
    let mut c = Client::connect(&srv.path, DEFAULT_TIMEOUT).unwrap();
    assert_eq!(
        c.call("framework_wait_init", json!({})).unwrap(),
        json!(true)
    );
    assert_eq!(
        c.call(
            "bdev_malloc_create",
            json!({"num_blocks": 8184, "block_size": 512, "name": "Malloc0"})
        )
        .unwrap(),
        json!("Malloc0")
    );
    assert_eq!(
        c.call("nvmf_create_transport", json!({"trtype": "VFIOUSER"}))
            .unwrap(),
        json!(true)
    );
    let nqn = "nqn.2016-06.io.spdk:cnode1";
    assert_eq!(
        c.call(
            "nvmf_create_subsystem",
            json!({"nqn": nqn, "serial_number": "SPDK00", "allow_any_host": true})
        )
        .unwrap(),
        json!(true)
    );
    assert_eq!(
        c.call(
            "nvmf_subsystem_add_ns",
            json!({"nqn": nqn, "namespace": {"bdev_name": "Malloc0"}})
        )
        .unwrap(),
        json!(1)
    );
    assert_eq!(
        c.call(
            "nvmf_subsystem_add_listener",
            json!({"nqn": nqn, "listen_address":
            {"trtype": "VFIOUSER", "traddr": "/tmp/vfu", "trsvcid": "0"}})
        )
        .unwrap(),
        json!(true)
    );
    let subs = c.call("nvmf_get_subsystems", json!({})).unwrap();
    assert_eq!(subs[0]["nqn"], json!(nqn));
    assert_eq!(subs[0]["serial_number"], json!("SPDK00"));
    assert_eq!(subs[0]["namespaces"][0]["bdev_name"], json!("Malloc0"));
    assert_eq!(subs[0]["listen_addresses"][0]["traddr"], json!("/tmp/vfu"));
    let bdevs = c
        .call("bdev_get_bdevs", json!({"name": "Malloc0"}))
        .unwrap();
    assert_eq!(bdevs[0]["product_name"], json!("Malloc disk"));
    assert_eq!(bdevs[0]["num_blocks"], json!(8184));
    assert_eq!(bdevs[0]["claimed"], json!(true));
    // A bdev in use cannot be deleted: an SPDK-style errno error, and the server lives on.
    match c.call("bdev_malloc_delete", json!({"name": "Malloc0"})) {
        Err(ClientError::Rpc(e)) => assert_eq!(
            (e.code, e.message.as_str()),
            (-16, "Device or resource busy")
        ),
        other => panic!("expected EBUSY, got {other:?}"),
    }
    match c.call(
        "bdev_malloc_create",
        json!({"num_blocks": 8, "block_size": 512, "name": "Malloc0"}),
    ) {
        Err(ClientError::Rpc(e)) => assert_eq!((e.code, e.message.as_str()), (-17, "File exists")),
        other => panic!("expected EEXIST, got {other:?}"),
    }
    assert_eq!(
        c.call("spdk_get_version", Value::Null).unwrap()["fields"]["minor"],
        json!(1)
    );
}

#[test]
fn requests_split_byte_by_byte_and_pipelined() {
    let srv = Server::start();
    let mut s = srv.raw();
    let mut framer = Framer::new(1 << 20);
    // One request, one byte per write.
    for b in req("framework_wait_init", Value::Null, json!(1)) {
        s.write_all(&[b]).unwrap();
    }
    let r = read_reply(&mut s, &mut framer);
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 1, "result": true}));
    // Three requests in one write, with whitespace between two of them and a string id.
    let mut batch = req(
        "bdev_null_create",
        json!({"name": "N", "num_blocks": 16, "block_size": 4096}),
        json!(2),
    );
    batch.extend_from_slice(b"\n  ");
    batch.extend(req("bdev_get_bdevs", Value::Null, json!("three")));
    batch.extend(req("bdev_null_delete", json!({"name": "N"}), json!(4)));
    s.write_all(&batch).unwrap();
    assert_eq!(read_reply(&mut s, &mut framer)["result"], json!("N"));
    let r = read_reply(&mut s, &mut framer);
    assert_eq!(r["id"], json!("three"));
    assert_eq!(r["result"][0]["product_name"], json!("Null disk"));
    assert_eq!(
        read_reply(&mut s, &mut framer),
        json!({"jsonrpc": "2.0", "id": 4, "result": true})
    );
}

#[test]
fn many_connections_one_after_another() {
    let srv = Server::start();
    for i in 0..100 {
        let name = format!("M{i}");
        let r = call_on(
            &srv.path,
            "bdev_malloc_create",
            json!({"num_blocks": 1, "block_size": 512, "name": name}),
        );
        assert_eq!(r.unwrap(), json!(name));
    }
    let all = call_on(&srv.path, "bdev_get_bdevs", json!({})).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 100);
}

#[test]
fn error_codes_over_the_wire() {
    let srv = Server::start();
    let rpc_err = |m: &str, p: Value| match call_on(&srv.path, m, p) {
        Err(ClientError::Rpc(e)) => e,
        other => panic!("{m}: expected an error, got {other:?}"),
    };
    let e = rpc_err("no_such_method", json!({}));
    assert_eq!(e.code, -32601);
    let e = rpc_err("bdev_malloc_create", json!({"num_blocks": 8}));
    assert_eq!(e.code, -32602);
    assert!(e.message.contains("block_size"), "{}", e.message);
    let e = rpc_err(
        "bdev_malloc_create",
        json!({"num_blocks": 8, "block_size": "512"}),
    );
    assert_eq!(e.code, -32602);
    assert!(e.message.contains("block_size"), "{}", e.message);
    let e = rpc_err("bdev_get_bdevs", json!({"name": "nope"}));
    assert_eq!(e.code, -19);
}

#[test]
fn notification_gets_no_reply_and_parse_error_closes() {
    let srv = Server::start();
    let mut s = srv.raw();
    let mut framer = Framer::new(1 << 20);
    // A notification (no id) creates the bdev but is not answered; the next reply is id 9.
    s.write_all(br#"{"jsonrpc":"2.0","method":"bdev_malloc_create","params":{"name":"Q","num_blocks":1,"block_size":512}}"#)
        .unwrap();
    s.write_all(&req("bdev_get_bdevs", json!({"name": "Q"}), json!(9)))
        .unwrap();
    let r = read_reply(&mut s, &mut framer);
    assert_eq!(r["id"], json!(9));
    assert_eq!(r["result"][0]["name"], json!("Q"));
    // Invalid request (wrong version) is answered; the connection stays usable.
    s.write_all(br#"{"jsonrpc":"1.0","method":"x","id":10}"#)
        .unwrap();
    assert_eq!(
        read_reply(&mut s, &mut framer)["error"]["code"],
        json!(-32600)
    );
    // Garbage: -32700 with id null, then the server closes.
    s.write_all(b"{\"jsonrpc\" oops}").unwrap();
    let r = read_reply(&mut s, &mut framer);
    assert_eq!(
        r,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}})
    );
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.iter().all(u8::is_ascii_whitespace));
}

#[test]
fn kill_instance_replies_then_stops_and_removes_socket() {
    let mut srv = Server::start();
    let mut idle = srv.raw(); // an idle connection must not keep the server alive
    assert_eq!(
        call_on(
            &srv.path,
            "spdk_kill_instance",
            json!({"sig_name": "SIGTERM"})
        )
        .unwrap(),
        json!(true)
    );
    srv.thread.take().unwrap().join().unwrap().unwrap();
    assert!(!srv.path.exists());
    let mut buf = [0u8; 8];
    assert_eq!(idle.read(&mut buf).unwrap(), 0);
}

#[test]
fn stale_socket_file_is_replaced_but_other_files_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap()); // stale socket file
    let stop = StopHandle::new().unwrap();
    stop.stop();
    serve(&path, Arc::new(FakeHandler::new(None)), stop.clone()).unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, b"x").unwrap();
    assert!(serve(&file, Arc::new(FakeHandler::new(None)), stop).is_err());
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

#[test]
fn cli_runs_reference_script_and_prints_like_rpc_py() {
    let srv = Server::start();
    let sock = srv.path.to_str().unwrap().to_owned();
    let run = |argv: &[&str]| -> Result<String, String> {
        let mut full = vec!["-s", sock.as_str()];
        full.extend_from_slice(argv);
        let args = nvmemu_rpc::cli::parse_args(&full).unwrap();
        let mut out = Vec::new();
        nvmemu_rpc::cli::execute(&args, &mut out).map(|()| String::from_utf8(out).unwrap())
    };
    let nqn = "nqn.2016-06.io.spdk:cnode1";
    assert_eq!(run(&["framework_wait_init"]).unwrap(), "");
    assert_eq!(
        run(&["bdev_malloc_create", "4092", "512", "-b", "Malloc0"]).unwrap(),
        "Malloc0\n"
    );
    assert_eq!(
        run(&["nvmf_create_transport", "-t", "VFIOUSER"]).unwrap(),
        ""
    );
    assert_eq!(
        run(&["nvmf_create_subsystem", nqn, "-s", "SPDK00", "-a"]).unwrap(),
        ""
    );
    assert_eq!(run(&["nvmf_subsystem_add_ns", nqn, "Malloc0"]).unwrap(), "");
    assert_eq!(
        run(&[
            "nvmf_subsystem_add_listener",
            nqn,
            "-t",
            "VFIOUSER",
            "-a",
            "/tmp/vfu",
            "-s",
            "0"
        ])
        .unwrap(),
        ""
    );
    let subs: Value = serde_json::from_str(&run(&["nvmf_get_subsystems"]).unwrap()).unwrap();
    assert_eq!(subs[0]["namespaces"][0]["nsid"], json!(1));
    let err = run(&["bdev_malloc_create", "1", "512", "-b", "Malloc0"]).unwrap_err();
    assert!(
        err.contains("Got JSON-RPC error response") && err.contains("-17"),
        "{err}"
    );
    // save_config goes through framework_get_subsystems + framework_get_config, like rpc.py.
    let cfg: Value = serde_json::from_str(&run(&["save_config"]).unwrap()).unwrap();
    assert_eq!(cfg["subsystems"][0]["subsystem"], json!("bdev"));
    assert_eq!(
        cfg["subsystems"][0]["config"][0]["params"]["name"],
        json!("Malloc0")
    );
    // The saved config replays into a fresh handler.
    let fresh = FakeHandler::new(None);
    let report = nvmemu_rpc::load_config(&fresh, &cfg).unwrap();
    assert_eq!(report.applied, 5);
    assert!(report.skipped.is_empty());
}
