// SPDX-License-Identifier: Apache-2.0
//! The server answers when the process has no address space left for a new thread (as when
//! a vfio-user client has mapped it all): its connection threads were started with it.
//!
//! Alone in its test binary: the address-space limit it sets is process-wide.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::time::Duration;

use common::{Server, read_reply, req};
use nvmemu_rpc::{Framer, Limits};
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use serde_json::{Value, json};

/// The process's mapped address space now (VmSize), in bytes.
fn vm_size() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    kib * 1024
}

#[test]
fn a_client_is_answered_when_no_thread_can_be_started() {
    let srv = Server::start_with(
        |stop| std::sync::Arc::new(nvmemu_rpc::test_utils::FakeHandler::new(Some(stop))),
        Limits {
            max_connections: 4,
            ..Limits::default()
        },
    );
    // Everything this test needs later is allocated now.
    let mut framer = Framer::new(64 * 1024);
    let request = req("framework_wait_init", Value::Null, json!(1));
    // One call first: the server is up (its threads started) before the limit.
    let mut first = srv.raw();
    first.write_all(&request).unwrap();
    assert_eq!(read_reply(&mut first, &mut framer)["result"], json!(true));
    drop(first);
    let mut conns = Vec::with_capacity(3);
    let mut replies = Vec::with_capacity(3);
    let old = getrlimit(Resource::As);
    // Room for small allocations in existing arenas, none for a thread's 2 MiB stack.
    setrlimit(
        Resource::As,
        Rlimit {
            current: Some(vm_size() + (512 << 10)),
            maximum: old.maximum,
        },
    )
    .unwrap();
    assert!(
        std::thread::Builder::new().spawn(|| ()).is_err(),
        "a thread could still be started"
    );
    // Connected only now: the server accepts them with no room for a new thread.
    for _ in 0..3 {
        conns.push(srv.raw());
    }
    for c in &mut conns {
        c.write_all(&request).unwrap();
        replies.push(read_reply(c, &mut framer));
    }
    setrlimit(Resource::As, old).unwrap();
    for r in &replies {
        assert_eq!(r["result"], json!(true), "{r}");
    }
    drop(conns);
    std::thread::sleep(Duration::from_millis(10));
}
