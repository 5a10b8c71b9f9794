// SPDX-License-Identifier: Apache-2.0
//! The running `nvmemu serve` the tests configure and query.

use super::*;

/// A running `nvmemu serve` with its RPC socket and a traddr directory in a temp dir.
pub(crate) struct Server {
    pub(crate) child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Server {
    pub(crate) fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("vfu")).expect("traddr dir");
        Server::start_in(dir, extra)
    }

    /// A server with a command-line controller on `--socket-dir DIR/ctrl0` (returned) and
    /// `extra` arguments (its `--ns`, ...).
    pub(crate) fn start_with_socket_dir(extra: &[&str]) -> (Server, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let traddr = dir.path().join("ctrl0");
        std::fs::create_dir(&traddr).expect("socket dir");
        let mut args = vec!["--socket-dir", traddr.to_str().expect("utf-8 path")];
        args.extend_from_slice(extra);
        (Server::start_in(dir, &args), traddr)
    }

    pub(crate) fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Server {
        Server::launch(dir, Command::new(BIN), extra)
    }

    /// `nvmemu serve` run by `cmd` (the binary, or a shell that execs it).
    pub(crate) fn launch(dir: tempfile::TempDir, mut cmd: Command, extra: &[&str]) -> Server {
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

    pub(crate) fn wait_for_socket(&self) {
        common::wait_for_rpc_socket(&self.sock());
    }

    pub(crate) fn sock(&self) -> PathBuf {
        self.dir.path().join("rpc.sock")
    }

    /// The server's resident set size (VmRSS), in bytes.
    pub(crate) fn rss(&self) -> u64 {
        let pid = self.child.as_ref().expect("running").id();
        let status =
            std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
        kb_field(&status, "VmRSS")
    }

    pub(crate) fn traddr(&self) -> PathBuf {
        self.dir.path().join("vfu")
    }

    /// `nvmemu rpc -s SOCK args...`.
    pub(crate) fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("rpc")
            .arg("-s")
            .arg(self.sock())
            .args(args)
            .output()
            .expect("nvmemu rpc runs")
    }

    /// `nvmemu rpc` that must succeed; returns its stdout.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "nvmemu rpc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    /// One report of `nvmemu stat -s SOCK -c 1 ARGS...` that must succeed: its stdout.
    pub(crate) fn stat(&self, args: &[&str]) -> String {
        let out = Command::new(BIN)
            .arg("stat")
            .arg("-s")
            .arg(self.sock())
            .args(["-i", "0.1", "--count", "1"])
            .args(args)
            .output()
            .expect("nvmemu stat runs");
        assert!(
            out.status.success(),
            "nvmemu stat: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    pub(crate) fn call(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let mut c = Client::connect(&self.sock(), Duration::from_secs(30)).expect("connect");
        c.call(method, params)
    }

    /// The reference set-up script, as rpc.py command lines.
    pub(crate) fn reference_sequence(&self) {
        assert_eq!(self.ok(&["framework_wait_init"]), "");
        assert_eq!(
            // SPDK's script says 4092 (MB); a smaller one keeps parallel tests light, now
            // that malloc memory is backed at creation.
            self.ok(&["bdev_malloc_create", "64", "512", "-b", "Malloc0"]),
            "Malloc0\n"
        );
        self.export("Malloc0");
    }

    /// The rest of the reference script for `bdev`: the VFIOUSER transport, subsystem
    /// [`NQN`] with `bdev` as namespace 1, and its listener at [`Server::traddr`].
    pub(crate) fn export(&self, bdev: &str) {
        let traddr = self.traddr();
        let traddr = traddr.to_str().expect("utf-8 path");
        assert_eq!(self.ok(&["nvmf_create_transport", "-t", "VFIOUSER"]), "");
        assert_eq!(
            self.ok(&["nvmf_create_subsystem", NQN, "-s", "SPDK00", "-a"]),
            ""
        );
        assert_eq!(self.ok(&["nvmf_subsystem_add_ns", NQN, bdev]), "");
        let listener = ["nvmf_subsystem_add_listener", NQN, "-t", "VFIOUSER", "-a"];
        assert_eq!(self.ok(&[&listener[..], &[traddr, "-s", "0"]].concat()), "");
    }

    /// `spdk_kill_instance SIGTERM`, then the process exits 0 and removes its sockets.
    /// Returns the temp dir (still holding the traddr directory).
    pub(crate) fn kill(mut self) -> tempfile::TempDir {
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
