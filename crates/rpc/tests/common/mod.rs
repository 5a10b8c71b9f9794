// SPDX-License-Identifier: Apache-2.0
//! A server over a real UNIX socket in a temp dir, and rpc.py-style raw reads.
#![allow(clippy::unwrap_used, dead_code)] // Test helpers outside #[test] fns.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use nvmemu_rpc::test_utils::FakeHandler;
use nvmemu_rpc::{Access, Framer, Handler, Limits, RpcSocket, StopHandle, serve_on};
use serde_json::{Value, json};

pub struct Server {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub stop: StopHandle,
    pub thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// The in-memory FakeHandler with the default limits.
    pub fn start() -> Server {
        Server::start_with(
            |stop| Arc::new(FakeHandler::new(Some(stop))),
            Limits::default(),
        )
    }

    /// `handler` (made with the server's stop handle) with `limits`.
    pub fn start_with(
        handler: impl FnOnce(StopHandle) -> Arc<dyn Handler + Send + Sync>,
        limits: Limits,
    ) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rpc.sock");
        let stop = StopHandle::new().unwrap();
        let handler = handler(stop.clone());
        // Bound before the thread starts: clients can connect as soon as this returns.
        let socket = RpcSocket::bind(&path, Access::OWNER).unwrap();
        let s = stop.clone();
        let thread = std::thread::spawn(move || serve_on(socket, handler, s, &limits));
        Server {
            _dir: dir,
            path,
            stop,
            thread: Some(thread),
        }
    }

    /// A raw connection whose reads give up after 10 s, so a server that stops answering
    /// fails the test instead of hanging it.
    pub fn raw(&self) -> UnixStream {
        let s = UnixStream::connect(&self.path).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            t.join().unwrap().unwrap();
        }
    }
}

/// Reads one reply the way rpc.py does: decode as bytes arrive.
pub fn read_reply(s: &mut UnixStream, framer: &mut Framer) -> Value {
    let mut buf = [0u8; 1];
    loop {
        if let Some(v) = framer.next_value().unwrap() {
            return v;
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "server closed before replying");
        framer.push(&buf[..n]);
    }
}

/// Whether the server closed `s` (EOF, or a reset) with nothing more to read.
pub fn closed(s: &mut UnixStream) -> bool {
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => rest.iter().all(u8::is_ascii_whitespace),
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

pub fn req(method: &str, params: Value, id: Value) -> Vec<u8> {
    let mut r = json!({"jsonrpc": "2.0", "method": method, "id": id});
    if !params.is_null() {
        r["params"] = params;
    }
    serde_json::to_vec(&r).unwrap()
}
