// SPDX-License-Identifier: Apache-2.0
//! The JSON-RPC control plane end to end: the real `nvmemu serve` binary configured by
//! `nvmemu rpc` (rpc.py's command lines) and by raw JSON-RPC, then used by the userspace
//! driver over the vfio-user socket it created.
#![allow(clippy::cast_possible_truncation)] // Test patterns: `i as u8` wraps on purpose.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nvmemu_driver::{AttachOptions, AttachedController, sqe};
use nvmemu_rpc::{Client, ClientError};
use nvmemu_spec::opcode::IoOpcode;
use nvmemu_spec::{Lba, Nsid, Status};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_nvmemu");
const NQN: &str = "nqn.2016-06.io.spdk:cnode1";

/// A running `nvmemu serve` with its RPC socket and a traddr directory in a temp dir.
struct Server {
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("vfu")).expect("traddr dir");
        Server::start_in(dir, extra)
    }

    /// A server with a command-line controller on `--socket-dir DIR/ctrl0` (returned) and
    /// `extra` arguments (its `--ns`, ...).
    fn start_with_socket_dir(extra: &[&str]) -> (Server, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let traddr = dir.path().join("ctrl0");
        std::fs::create_dir(&traddr).expect("socket dir");
        let mut args = vec!["--socket-dir", traddr.to_str().expect("utf-8 path")];
        args.extend_from_slice(extra);
        (Server::start_in(dir, &args), traddr)
    }

    fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Server {
        Server::launch(dir, Command::new(BIN), extra)
    }

    /// `nvmemu serve` run by `cmd` (the binary, or a shell that execs it).
    fn launch(dir: tempfile::TempDir, mut cmd: Command, extra: &[&str]) -> Server {
        let sock = dir.path().join("rpc.sock");
        let child = cmd
            .arg("serve")
            .arg("-r")
            .arg(&sock)
            .args(["-m", "0x1"])
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .expect("nvmemu serve starts");
        let server = Server {
            child: Some(child),
            dir,
        };
        server.wait_for_socket();
        server
    }

    fn wait_for_socket(&self) {
        common::wait_for_rpc_socket(&self.sock());
    }

    fn sock(&self) -> PathBuf {
        self.dir.path().join("rpc.sock")
    }

    /// The server's resident set size (VmRSS), in bytes.
    fn rss(&self) -> u64 {
        let pid = self.child.as_ref().expect("running").id();
        let status =
            std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
        kb_field(&status, "VmRSS")
    }

    fn traddr(&self) -> PathBuf {
        self.dir.path().join("vfu")
    }

    /// `nvmemu rpc -s SOCK args...`.
    fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("rpc")
            .arg("-s")
            .arg(self.sock())
            .args(args)
            .output()
            .expect("nvmemu rpc runs")
    }

    /// `nvmemu rpc` that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "nvmemu rpc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    fn call(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let mut c = Client::connect(&self.sock(), Duration::from_secs(30)).expect("connect");
        c.call(method, params)
    }

    /// The reference set-up script, as rpc.py command lines.
    fn reference_sequence(&self) {
        let traddr = self.traddr();
        let traddr = traddr.to_str().expect("utf-8 path");
        assert_eq!(self.ok(&["framework_wait_init"]), "");
        assert_eq!(
            // SPDK's script says 4092 (MB); a smaller one keeps parallel tests light, now
            // that malloc memory is backed at creation.
            self.ok(&["bdev_malloc_create", "64", "512", "-b", "Malloc0"]),
            "Malloc0\n"
        );
        assert_eq!(self.ok(&["nvmf_create_transport", "-t", "VFIOUSER"]), "");
        assert_eq!(
            self.ok(&["nvmf_create_subsystem", NQN, "-s", "SPDK00", "-a"]),
            ""
        );
        assert_eq!(self.ok(&["nvmf_subsystem_add_ns", NQN, "Malloc0"]), "");
        assert_eq!(
            self.ok(&[
                "nvmf_subsystem_add_listener",
                NQN,
                "-t",
                "VFIOUSER",
                "-a",
                traddr,
                "-s",
                "0"
            ]),
            ""
        );
    }

    /// `spdk_kill_instance SIGTERM`, then the process exits 0 and removes its sockets.
    /// Returns the temp dir (still holding the traddr directory).
    fn kill(mut self) -> tempfile::TempDir {
        self.ok(&["spdk_kill_instance", "SIGTERM"]);
        let status = self.child.take().expect("child").wait().expect("wait");
        assert!(status.success(), "nvmemu serve exited with {status}");
        assert!(!self.sock().exists(), "RPC socket removed");
        assert!(
            !self.traddr().join("cntrl").exists(),
            "controller socket removed"
        );
        std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A `Key:   N kB` field of a /proc file, in bytes.
fn kb_field(text: &str, key: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.split(':').next() == Some(key))
        .unwrap_or_else(|| panic!("no {key}"));
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("a number of kB");
    kb * 1024
}

fn attach(dir: &Path) -> AttachedController {
    AttachedController::attach(
        dir,
        AttachOptions {
            io_queues: 1,
            queue_depth: 32,
            dma_pool_bytes: 8 << 20,
            ..AttachOptions::default()
        },
    )
    .expect("driver attaches")
}

fn rpc_code(r: Result<Value, ClientError>) -> (i32, String) {
    match r {
        Err(ClientError::Rpc(e)) => (e.code, e.message),
        other => panic!("expected an RPC error, got {other:?}"),
    }
}

/// SUBNQN: Identify Controller bytes 1023:768, NUL padded.
fn identify_subnqn(c: &mut AttachedController) -> String {
    let buf = c.alloc_dma(4096).expect("DMA buffer");
    let cqe = c
        .admin_raw_with_data(
            sqe::identify(sqe::cns::CONTROLLER, Nsid(0)),
            Some((&buf, 4096)),
        )
        .expect("Identify Controller");
    assert!(cqe.status().is_success());
    let mut raw = vec![0u8; 256];
    buf.copy_to(768, &mut raw).expect("copy identify data");
    String::from_utf8_lossy(&raw)
        .trim_end_matches('\0')
        .to_owned()
}

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

/// `nvmf_get_stats` qpair counts summed over the poll groups: (admin_qpairs, io_qpairs,
/// current_admin_qpairs, current_io_qpairs).
fn qpair_counts(s: &Server) -> (u64, u64, u64, u64) {
    let stats = s.call("nvmf_get_stats", json!({})).expect("nvmf_get_stats");
    let groups = stats["poll_groups"].as_array().expect("poll_groups");
    let sum = |k: &str| groups.iter().map(|g| g[k].as_u64().expect(k)).sum::<u64>();
    (
        sum("admin_qpairs"),
        sum("io_qpairs"),
        sum("current_admin_qpairs"),
        sum("current_io_qpairs"),
    )
}

#[test]
fn iostat_latency_ticks_and_nvmf_qpair_counts_follow_a_clients_io() {
    let s = Server::start(&[]);
    s.reference_sequence();
    assert_eq!(qpair_counts(&s), (0, 0, 0, 0));
    let opts = AttachOptions {
        io_queues: 2,
        queue_depth: 32,
        dma_pool_bytes: 8 << 20,
        ..AttachOptions::default()
    };
    let mut c = AttachedController::attach(&s.traddr(), opts).expect("driver attaches");
    let n = c.io_queue_count() as u64;
    assert!(n >= 1);
    assert_eq!(qpair_counts(&s), (1, n, 1, n));

    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    buf.copy_from(0, &[0x5a; 4096]).unwrap();
    for i in 0..64 {
        q.write_blocking(Nsid(1), Lba(i * 8), 8, &buf).unwrap();
        q.read_blocking(Nsid(1), Lba(i * 8), 8, &buf).unwrap();
    }
    drop(q);
    c.shutdown().unwrap();
    // The I/O queues are deleted; the totals keep them.
    let (admin, io, _, current_io) = qpair_counts(&s);
    assert_eq!((admin, io, current_io), (1, n, 0));

    let stat = s
        .call("bdev_get_iostat", json!({"name": "Malloc0"}))
        .unwrap();
    assert_eq!(stat["tick_rate"], json!(1_000_000_000u64));
    let b = &stat["bdevs"][0];
    let get = |k: &str| b[k].as_u64().expect(k);
    for (op, count) in [
        ("read", get("num_read_ops")),
        ("write", get("num_write_ops")),
    ] {
        let (sum, min, max) = (
            get(&format!("{op}_latency_ticks")),
            get(&format!("min_{op}_latency_ticks")),
            get(&format!("max_{op}_latency_ticks")),
        );
        assert_eq!(count, 64, "{op}");
        assert!(min > 0 && min <= max && max <= sum, "{op}: {b}");
        assert!(sum >= count * min && sum <= count * max, "{op}: {b}");
    }
    // No Deallocate ran: its latency is all zero.
    let unmap = [
        "unmap_latency_ticks",
        "min_unmap_latency_ticks",
        "max_unmap_latency_ticks",
    ];
    assert!(unmap.iter().all(|k| get(k) == 0), "{b}");

    // A second client adds its own queues to the totals.
    drop(c);
    let mut c = AttachedController::attach(&s.traddr(), opts).expect("driver attaches again");
    let m = c.io_queue_count() as u64;
    assert_eq!(qpair_counts(&s), (2, n + m, 1, m));
    c.shutdown().unwrap();
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

/// Polls until the controller completes an outstanding AER.
fn wait_event(c: &mut AttachedController) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = c.poll_async_events().expect("poll AERs");
        if let Some(cqe) = events.first() {
            assert_eq!(events.len(), 1);
            assert!(cqe.status().is_success(), "{:?}", cqe.status());
            return cqe.dw0;
        }
        assert!(Instant::now() < deadline, "no asynchronous event");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Changed Namespace List (LID 04h): the NSIDs it lists.
fn changed_namespaces(c: &mut AttachedController) -> Vec<u32> {
    let page = c
        .get_log_page(0x04, Nsid(0xFFFF_FFFF), 4096, 0)
        .expect("Changed Namespace List");
    page.chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .take_while(|&n| n != 0)
        .collect()
}

/// Namespace Attribute Changed: Notice (type 2), information 00h, log page 04h.
const NS_ATTR_CHANGED_DW0: u32 = 0x04_00_02;

#[test]
fn namespace_hot_add_and_remove_reach_an_attached_driver_by_async_event() {
    let s = Server::start(&[]);
    s.reference_sequence();
    let mut c = attach(&s.traddr());
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1)]);
    // Namespace Attribute Notices on (Asynchronous Event Configuration, FID 0Bh, bit 8).
    c.set_features(0x0B, 1 << 8).unwrap();
    c.submit_async_event_request().unwrap();

    assert_eq!(
        s.ok(&["bdev_malloc_create", "8", "4096", "-b", "Malloc1"]),
        "Malloc1\n"
    );
    assert_eq!(
        c.poll_async_events().unwrap(),
        vec![],
        "creating a bdev is no event"
    );
    assert_eq!(s.ok(&["nvmf_subsystem_add_ns", NQN, "Malloc1"]), "");
    assert_eq!(wait_event(&mut c), NS_ATTR_CHANGED_DW0);
    assert_eq!(changed_namespaces(&mut c), vec![2]);
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1), Nsid(2)]);
    let id = c.identify_namespace(Nsid(2)).unwrap();
    assert_eq!((id.nsze, id.lba_size()), (8 * 256, Some(4096)));

    // The new namespace takes I/O.
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    buf.copy_from(0, &[0x5A; 4096]).unwrap();
    let w = q
        .execute_raw(
            sqe::rw(IoOpcode::Write, Nsid(2), Lba(3), 1),
            Some((&buf, 4096)),
        )
        .unwrap();
    assert!(w.status().is_success());

    // Hot remove with reads in flight, by deleting the bdev as SPDK users do: each read
    // completes (successfully, or with Invalid Namespace if it was fetched after the
    // removal); none is lost. Then another event, the log lists the NSID again, and I/O to
    // it fails while namespace 1 is untouched.
    c.submit_async_event_request().unwrap();
    let inflight = 24u64;
    for i in 0..inflight {
        let rd = sqe::rw(IoOpcode::Read, Nsid(2), Lba(i % 8), 1);
        q.submit_raw(rd, Some((&buf, 4096)), i).unwrap();
    }
    q.ring().unwrap();
    s.ok(&["bdev_malloc_delete", "Malloc1"]);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while (seen.len() as u64) < inflight {
        q.poll_completions(64, |token, r| {
            seen.push((token, r.map_err(|e| e.to_string())))
        })
        .unwrap();
        assert!(Instant::now() < deadline, "in-flight reads lost: {seen:?}");
    }
    let invalid_ns = format!("command failed with status {}", Status::INVALID_NAMESPACE);
    for (token, r) in &seen {
        assert!(
            r.is_ok() || r.as_ref().err() == Some(&invalid_ns),
            "read {token}: {r:?}"
        );
    }
    let mut tokens: Vec<u64> = seen.iter().map(|(t, _)| *t).collect();
    tokens.sort_unstable();
    assert_eq!(tokens, (0..inflight).collect::<Vec<_>>());
    assert_eq!(wait_event(&mut c), NS_ATTR_CHANGED_DW0);
    assert_eq!(changed_namespaces(&mut c), vec![2]);
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1)]);
    let r = q
        .execute_raw(
            sqe::rw(IoOpcode::Read, Nsid(2), Lba(3), 1),
            Some((&buf, 4096)),
        )
        .unwrap();
    assert_eq!(
        r.status().with_dnr(false),
        Status::INVALID_NAMESPACE.with_dnr(false)
    );
    q.write_blocking(Nsid(1), Lba(0), 8, &buf).unwrap();
    // The bdev went with its namespace.
    assert_eq!(
        rpc_code(s.call("bdev_get_bdevs", json!({"name": "Malloc1"}))).0,
        -19
    );
    drop(q);
    c.shutdown().unwrap();
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

#[test]
fn sigterm_with_a_driver_attached_shuts_down_cleanly() {
    let mut s = Server::start(&[]);
    s.reference_sequence();
    let c = attach(&s.traddr());
    let pid = s.child.as_ref().expect("child").id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(sent.success());
    let status = s.child.take().expect("child").wait().unwrap();
    assert!(status.success(), "nvmemu serve exited with {status}");
    assert!(!s.sock().exists(), "RPC socket removed");
    assert!(
        !s.traddr().join("cntrl").exists(),
        "controller socket removed"
    );
    // The driver finds the device gone; dropping it must not hang or panic.
    drop(c);
}

/// What backs a bdev, from `bdev_get_bdevs`' `driver_specific.malloc`.
fn backing(s: &Server, name: &str) -> Value {
    let b = s
        .call("bdev_get_bdevs", json!({"name": name}))
        .expect("bdev_get_bdevs");
    b[0]["driver_specific"]["malloc"].clone()
}

fn resident(s: &Server, name: &str) -> u64 {
    backing(s, name)["resident_bytes"]
        .as_u64()
        .expect("resident_bytes")
}

/// A malloc namespace is real memory from creation (RSS at least its size),
/// `lazy=on` stays sparse, Deallocate and Write Zeroes read back zeroes in both modes
/// without giving a backed namespace's pages back, and a namespace larger than the machine
/// is refused with one line while the others keep serving.
#[test]
fn malloc_memory_is_backed_at_creation_and_an_oversized_one_is_refused() {
    const SIZE: u64 = 256 << 20;
    let (s, traddr) = Server::start_with_socket_dir(&[
        "--ns",
        "malloc:size=256M,lba=4096",
        "--ns",
        "malloc:size=256M,lba=4096,lazy=on",
    ]);
    let rss = s.rss();
    assert!(
        (SIZE..SIZE + SIZE / 2).contains(&rss),
        "RSS {rss} with one backed and one lazy namespace of {SIZE}"
    );
    let (backed, lazy) = (backing(&s, "ns0n1"), backing(&s, "ns0n2"));
    assert_eq!(
        (&backed["lazy"], &lazy["lazy"]),
        (&json!(false), &json!(true))
    );
    assert!(
        backed["resident_bytes"].as_u64().unwrap() >= SIZE,
        "{backed}"
    );
    assert!(
        lazy["resident_bytes"].as_u64().unwrap() < SIZE / 16,
        "{lazy}"
    );
    assert_eq!(backed["page_size"], json!(4096));

    // More than the machine has (MemTotal + 1 GiB), through the RPC and rpc.py's CLI.
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let too_big = kb_field(&meminfo, "MemTotal") + (1 << 30);
    let (code, msg) = rpc_code(s.call(
        "bdev_malloc_create",
        json!({"name": "Huge", "num_blocks": too_big / 4096, "block_size": 4096}),
    ));
    assert_eq!(code, -12, "{msg}");
    for part in ["Huge", "asked", "available", "MemAvailable", "lazy=on"] {
        assert!(msg.contains(part), "{part} missing in: {msg}");
    }
    assert!(!msg.contains('\n'), "not one line: {msg}");
    let out = s.cli(&["bdev_malloc_create", &(too_big >> 20).to_string(), "4096"]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("available"), "{text}");
    assert!(s.call("bdev_get_bdevs", json!({"name": "Huge"})).is_err());
    assert!(s.rss() < SIZE + SIZE / 2, "the refused bdev took memory");

    // The server still serves both namespaces: write, zero, deallocate, read back.
    let mut c = attach(&traddr);
    let mut q = c.take_qpair().unwrap();
    let len = 1u64 << 20;
    let blocks = u32::try_from(len / 4096).unwrap();
    let wbuf = c.alloc_dma(len).unwrap();
    let rbuf = c.alloc_dma(len).unwrap();
    let ranges = c.alloc_dma(4096).unwrap();
    let pattern: Vec<u8> = (0..len).map(|i| (i % 251) as u8 | 1).collect();
    wbuf.copy_from(0, &pattern).unwrap();
    let mut back = vec![0u8; len as usize];
    for nsid in [Nsid(1), Nsid(2)] {
        for slba in [Lba(0), Lba(4096)] {
            q.write_blocking(nsid, slba, blocks, &wbuf).unwrap();
            q.read_blocking(nsid, slba, blocks, &rbuf).unwrap();
            rbuf.copy_to(0, &mut back).unwrap();
            assert!(back == pattern, "{nsid:?} data read back differs");
        }
        q.write_zeroes_blocking(nsid, Lba(0), blocks).unwrap();
        q.deallocate_blocking(nsid, &[(Lba(4096), blocks)], &ranges)
            .unwrap();
        for slba in [Lba(0), Lba(4096)] {
            q.read_blocking(nsid, slba, blocks, &rbuf).unwrap();
            rbuf.copy_to(0, &mut back).unwrap();
            assert!(back.iter().all(|&b| b == 0), "{nsid:?} {slba:?} not zero");
        }
    }
    drop(q);
    c.shutdown().unwrap();
    assert!(
        resident(&s, "ns0n1") >= SIZE,
        "zeroing gave backed pages back"
    );
    assert!(
        resident(&s, "ns0n2") < SIZE / 16,
        "lazy namespace filled up"
    );
    s.kill();
}

/// The binary under `umask 000`, through a shell that execs it with the arguments that follow.
fn under_umask_000() -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "umask 000 && exec \"$0\" \"$@\"", BIN]);
    cmd
}

fn mode_and_gid(path: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).expect("socket exists");
    (m.mode() & 0o7777, m.gid())
}

#[test]
fn sockets_are_owner_only_under_umask_000_and_rpc_group_grants_a_group() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let ctrl = dir.path().join("ctrl0");
    std::fs::create_dir(&ctrl).expect("socket dir");
    let ns = [
        "--socket-dir",
        ctrl.to_str().expect("utf-8"),
        "--ns",
        "malloc:size=4M,lba=512",
    ];
    let s = Server::launch(dir, under_umask_000(), &ns);
    let (rpc_mode, _) = mode_and_gid(&s.sock());
    let (cntrl_mode, _) = mode_and_gid(&ctrl.join("cntrl"));
    assert_eq!((rpc_mode, cntrl_mode), (0o600, 0o600));
    // The controller behind the 0600 socket does verified I/O.
    let mut c = attach(&ctrl);
    let mut q = c.take_qpair().expect("qpair");
    let buf = c.alloc_dma(4096).expect("DMA buffer");
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    buf.copy_from(0, &pattern).expect("fill");
    q.write_blocking(Nsid(1), Lba(8), 8, &buf).expect("write");
    let back = c.alloc_dma(4096).expect("DMA buffer");
    q.read_blocking(Nsid(1), Lba(8), 8, &back).expect("read");
    let mut got = vec![0u8; 4096];
    back.copy_to(0, &mut got).expect("copy");
    assert_eq!(got, pattern);
    drop(q);
    c.shutdown().expect("shutdown");
    s.kill();

    // --rpc-group: 0660 with that group (ours, so that chown is allowed).
    let dir = tempfile::tempdir().expect("tempdir");
    let probe = dir.path().join("probe");
    std::fs::write(&probe, b"").expect("probe file");
    let gid = std::fs::metadata(&probe).expect("probe").gid().to_string();
    let s = Server::launch(dir, under_umask_000(), &["--rpc-group", &gid]);
    assert_eq!(mode_and_gid(&s.sock()), (0o660, gid.parse().expect("gid")));
    s.kill();
}

#[test]
fn a_second_server_on_a_live_socket_dir_says_a_server_holds_it() {
    let (s, traddr) = Server::start_with_socket_dir(&["--ns", "malloc:size=4M,lba=512"]);
    let other = tempfile::tempdir().expect("tempdir");
    let out = Command::new(BIN)
        .args(["serve", "-m", "0x1", "-r"])
        .arg(other.path().join("rpc.sock"))
        .arg("--socket-dir")
        .arg(&traddr)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("nvmemu serve runs");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "{}: {}/cntrl is in use: a server is listening on it (stop that server or choose \
         another path)",
        traddr.display(),
        traddr.display()
    );
    assert!(
        err.lines().last().is_some_and(|l| l.ends_with(&want)),
        "{err}"
    );
    // The first server still serves.
    attach(&traddr).shutdown().expect("shutdown");
    s.kill();
}

/// `nvmemu serve -r PATH` that must fail at once; its stderr lines.
fn serve_refused(path: &Path) -> Vec<String> {
    let out = Command::new(BIN)
        .args(["serve", "-m", "0x1", "-r"])
        .arg(path)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("nvmemu serve runs");
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_squatted_rpc_path_stops_start_up_with_one_line_and_a_stale_socket_is_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("file.sock");
    std::fs::write(&file, b"keep").expect("file");
    assert_eq!(
        serve_refused(&file),
        [format!(
            "nvmemu: cannot serve JSON-RPC (-r picks another socket): {} exists and is not a socket",
            file.display()
        )]
    );
    assert_eq!(std::fs::read(&file).expect("file"), b"keep");
    let live = dir.path().join("live.sock");
    let squatter = std::os::unix::net::UnixListener::bind(&live).expect("squatter");
    assert_eq!(
        serve_refused(&live),
        [format!(
            "nvmemu: cannot serve JSON-RPC (-r picks another socket): {} is in use: a server \
             is listening on it (stop that server or choose another path)",
            live.display()
        )]
    );
    drop(squatter); // its file stays: a stale socket, which a fresh server replaces
    let stale_dir = tempfile::tempdir().expect("tempdir");
    drop(std::os::unix::net::UnixListener::bind(stale_dir.path().join("rpc.sock")).expect("bind"));
    let s = Server::launch(stale_dir, Command::new(BIN), &[]);
    assert_eq!(
        s.call("framework_wait_init", json!({})).expect("served"),
        json!(true)
    );
    s.kill();
}

#[test]
fn half_sent_connections_and_a_huge_batch_do_not_lock_out_a_fresh_client() {
    use std::io::{Read, Write};
    let s = Server::start(&[]);
    // More half-sent requests than there are connection slots (64).
    let held: Vec<std::os::unix::net::UnixStream> = (0..70)
        .map(|_| {
            let mut c = std::os::unix::net::UnixStream::connect(s.sock()).expect("connect");
            c.write_all(br#"{"jsonrpc":"2.0","method":"#).expect("send");
            c
        })
        .collect();
    let t0 = Instant::now();
    assert_eq!(
        s.call("framework_wait_init", json!({})).expect("served"),
        json!(true)
    );
    assert!(
        // Well under the 5 s request deadline that would free the held slots anyway.
        t0.elapsed() < Duration::from_secs(4),
        "fresh client waited {:?}",
        t0.elapsed()
    );
    drop(held);
    // The issue's batch: 100,000 requests, 6 MiB, refused once it passes 1 MiB.
    let rss_before = s.rss();
    let one = r#"{"jsonrpc":"2.0","method":"framework_wait_init","id":1}"#;
    let batch = format!("[{}]", vec![one; 100_000].join(","));
    let mut c = std::os::unix::net::UnixStream::connect(s.sock()).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let writer = {
        let mut w = c.try_clone().expect("clone");
        std::thread::spawn(move || {
            let _ = w.write_all(batch.as_bytes()); // cut short when the server closes
        })
    };
    let mut reply = Vec::new();
    let _ = c.read_to_end(&mut reply); // the reply, then EOF (or a reset)
    writer.join().expect("writer");
    let reply: Value = serde_json::Deserializer::from_slice(&reply)
        .into_iter()
        .next()
        .expect("a reply")
        .expect("JSON");
    assert_eq!(
        reply,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600,
            "message": "Invalid request: request exceeds 1048576 bytes"}})
    );
    assert!(
        s.rss() < rss_before + (64 << 20),
        "RSS grew by {} bytes",
        s.rss() - rss_before
    );
    assert_eq!(
        s.call("framework_wait_init", json!({})).expect("served"),
        json!(true)
    );
    s.kill();
}
