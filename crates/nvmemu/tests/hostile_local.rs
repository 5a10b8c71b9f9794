// SPDX-License-Identifier: Apache-2.0
//! Other local users: a socket directory they control, and a socket they squat. Root's
//! server refuses to bind where another user could swap its socket, and root's clients
//! (`rpc`, `stat`, `identify`, `bench`) refuse to talk to a server another user runs. Each
//! case uses a real second uid (1001), so these tests need root; as another user they
//! return at once.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nvmemu");
const OTHER: u32 = 1001;

fn root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A directory (in a fresh root-owned temporary directory) that uid 1001 owns.
fn theirs() -> (tempfile::TempDir, PathBuf) {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("theirs");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(OTHER), Some(OTHER)).unwrap();
    (top, dir)
}

/// Runs `nvmemu ARGS` and its output; a command still running after 30 s (a server that
/// accepted what it should have refused) is killed and fails the test.
fn run(args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!(
                "nvmemu {args:?} still running after 30 s: {:?}",
                child.wait_with_output()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn serve_refused(socket_dir: &Path, rpc: &Path) -> String {
    let out = run(&[
        "serve",
        "-m",
        "0x1",
        "-r",
        rpc.to_str().unwrap(),
        "--socket-dir",
        socket_dir.to_str().unwrap(),
        "--ns",
        "malloc:size=1M",
    ]);
    common::one_line_failure(&out)
}

#[test]
fn serve_refuses_a_socket_dir_another_user_controls() {
    if !root() {
        return;
    }
    let (top, dir) = theirs();
    let vfu = dir.join("vfu");
    std::fs::create_dir(&vfu).unwrap();
    let rpc = top.path().join("rpc.sock");
    let want = format!(
        "{} is owned by uid 1001, neither root nor you: another user could replace the socket {}",
        dir.display(),
        vfu.join("cntrl").display()
    );
    let err = serve_refused(&vfu, &rpc);
    assert!(err.contains(&want), "{err}");
    // The same directory reached through a symlink of root's.
    let link = top.path().join("link");
    std::os::unix::fs::symlink(&vfu, &link).unwrap();
    let err = serve_refused(&link, &rpc);
    let owned = format!(
        "{} is owned by uid 1001, neither root nor you",
        dir.display()
    );
    assert!(err.contains(&owned), "{err}");
    // A group-writable directory of root's, not sticky.
    let shared = top.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o775)).unwrap();
    let err = serve_refused(&shared, &rpc);
    assert!(
        err.contains(&format!(
            "{} is writable by others (mode 0775) and not sticky",
            shared.display()
        )),
        "{err}"
    );
    assert!(!rpc.exists());
}

/// `nvmemu serve` run as uid 1001 in its own directory: its RPC socket and one controller.
struct Squatter {
    child: Child,
    _top: tempfile::TempDir,
    rpc: PathBuf,
    vfu: PathBuf,
}

impl Squatter {
    fn start() -> Squatter {
        let (top, dir) = theirs();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        // uid 1001 must be able to reach its directory inside root's 0700 temporary one.
        std::fs::set_permissions(
            top.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o711),
        )
        .unwrap();
        let (rpc, vfu) = (dir.join("rpc.sock"), dir.join("vfu"));
        std::fs::create_dir(&vfu).unwrap();
        std::os::unix::fs::chown(&vfu, Some(OTHER), Some(OTHER)).unwrap();
        let child = Command::new(BIN)
            .args(["serve", "-m", "0x1", "--ns", "malloc:size=1M", "-r"])
            .arg(&rpc)
            .arg("--socket-dir")
            .arg(&vfu)
            .uid(OTHER)
            .gid(OTHER)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !(rpc.exists() && vfu.join("cntrl").exists()) {
            assert!(Instant::now() < deadline, "the squatter never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        Squatter {
            child,
            _top: top,
            rpc,
            vfu,
        }
    }
}

impl Drop for Squatter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn clients_refuse_a_server_another_user_runs() {
    if !root() {
        return;
    }
    let s = Squatter::start();
    let (rpc, vfu) = (s.rpc.to_str().unwrap(), s.vfu.to_str().unwrap());
    let said = |path: &Path| {
        format!(
            "{} is served by uid 1001, neither root nor you (uid 0)",
            path.display()
        )
    };

    let out = run(&["rpc", "-s", rpc, "spdk_get_version"]);
    let err = common::one_line_failure(&out);
    assert!(err.starts_with(&said(&s.rpc)), "{err}");

    let out = run(&["stat", "-s", rpc, "-c", "1"]);
    let err = common::one_line_failure(&out);
    assert!(err.contains(&said(&s.rpc)), "{err}");

    let cntrl = s.vfu.join("cntrl");
    let out = run(&["identify", "--socket", vfu]);
    let err = common::one_line_failure(&out);
    assert!(err.contains(&said(&cntrl)), "{err}");

    let out = run(&[
        "bench",
        "--socket",
        vfu,
        "--rw=read",
        "--size=64k",
        "--eta",
        "never",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&said(&cntrl)), "{err}");
}
