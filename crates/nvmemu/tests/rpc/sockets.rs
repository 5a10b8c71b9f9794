// SPDX-License-Identifier: Apache-2.0
//! The RPC socket: its mode and group, a socket path already taken, and clients that hold connections.

use super::*;

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
    assert_eq!(
        s.call("framework_wait_init", json!({})).expect("served"),
        json!(true)
    );
    // Served before the 5 s request deadline that would free the held slots anyway: the
    // newest half-sent request has not been answered yet (timed by the server's own
    // deadline rather than a bound of ours that a loaded machine could outlast).
    let newest = held.last().expect("held connections");
    newest.set_nonblocking(true).expect("nonblocking");
    let mut byte = [0u8; 1];
    let waiting = (&*newest).read(&mut byte);
    assert!(
        matches!(&waiting, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the held request was already answered ({waiting:?}): the fresh client waited"
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

/// `nvmemu rpc`'s error line into a standard error whose reader has gone is lost; the
/// command still ends with status 1 (`eprintln!` aborted it).
#[test]
fn rpc_error_with_a_closed_standard_error_still_exits_with_status_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(BIN)
        .arg("rpc")
        .arg("-s")
        .arg(dir.path().join("no-server.sock"))
        .arg("spdk_get_version")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nvmemu rpc runs");
    drop(child.stderr.take());
    let out = child.wait_with_output().expect("nvmemu rpc ends");
    assert_eq!(out.status.code(), Some(1), "{:?}", out.status);
}
