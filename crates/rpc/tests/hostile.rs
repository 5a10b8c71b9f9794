// SPDX-License-Identifier: Apache-2.0
//! Clients that try to hold the server: half-sent and trickled requests, oversized requests
//! and batches, idle connections filling every slot, calls that wait while their client
//! leaves. Each gets its exact error (or is closed to make room) and a fresh client is then
//! served. Deadlines are short, so nothing here sleeps for long.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Server, closed, read_reply, req};
use nvmemu_rpc::test_utils::FakeHandler;
use nvmemu_rpc::{Caller, Client, Framer, Handler, Limits, Request, RpcError};
use serde_json::{Value, json};

fn limits() -> Limits {
    Limits {
        request: Duration::from_millis(300),
        reply: Duration::from_secs(5),
        max_request_bytes: 64 * 1024,
        max_connections: 4,
    }
}

fn fake() -> impl FnOnce(nvmemu_rpc::StopHandle) -> Arc<dyn Handler + Send + Sync> {
    |stop| Arc::new(FakeHandler::new(Some(stop)))
}

/// A fresh client gets an answer at once; returned still connected.
fn fresh_client_is_served(srv: &Server) -> Client {
    let mut c = Client::connect(&srv.path, Duration::from_secs(5)).unwrap();
    assert_eq!(
        c.call("framework_wait_init", Value::Null).unwrap(),
        json!(true)
    );
    c
}

fn error_of(v: &Value) -> (i64, &str) {
    (
        v["error"]["code"].as_i64().unwrap(),
        v["error"]["message"].as_str().unwrap(),
    )
}

#[test]
fn half_sent_and_trickled_requests_get_a_parse_error_at_the_deadline() {
    let srv = Server::start_with(fake(), limits());
    let expired = |s: &mut std::os::unix::net::UnixStream| {
        let r = read_reply(s, &mut Framer::new(4096));
        assert_eq!(r["id"], Value::Null);
        assert_eq!(
            error_of(&r),
            (-32700, "Parse error: request incomplete after 300 ms")
        );
        assert!(closed(s));
    };
    // Half a request, then silence: answered once the 300 ms deadline passes, not before.
    let mut half = srv.raw();
    let t0 = Instant::now();
    half.write_all(br#"{"jsonrpc":"2.0","meth"#).unwrap();
    expired(&mut half);
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t0.elapsed()
    );
    // One byte every 50 ms: never complete within 300 ms.
    let mut slow = srv.raw();
    let text = req("framework_wait_init", Value::Null, json!(1));
    for b in text.iter().take(10) {
        let _ = slow.write_all(&[*b]); // fails once the server has closed
        std::thread::sleep(Duration::from_millis(50));
    }
    expired(&mut slow);
    // A client that waits between complete requests is not held to the deadline.
    let mut patient = srv.raw();
    let mut framer = Framer::new(4096);
    for id in 1..=2 {
        patient
            .write_all(&req("framework_wait_init", Value::Null, json!(id)))
            .unwrap();
        assert_eq!(read_reply(&mut patient, &mut framer)["id"], json!(id));
        std::thread::sleep(Duration::from_millis(400));
    }
    drop(fresh_client_is_served(&srv));
}

#[test]
fn an_oversized_request_is_refused_and_a_long_batch_is_one_error() {
    let srv = Server::start_with(fake(), limits());
    let mut big = srv.raw();
    let pad = "x".repeat(100 * 1024);
    let _ = big.write_all(&req("framework_wait_init", json!({"pad": pad}), json!(1)));
    let r = read_reply(&mut big, &mut Framer::new(4096));
    assert_eq!(
        error_of(&r),
        (-32600, "Invalid request: request exceeds 65536 bytes")
    );
    assert!(closed(&mut big));
    // A batch one over the cap is refused whole; the connection goes on.
    let one = json!({"jsonrpc": "2.0", "method": "framework_wait_init", "id": 1});
    let batch = Value::Array(vec![one; nvmemu_rpc::MAX_BATCH + 1]);
    let mut s = srv.raw();
    let mut framer = Framer::new(1 << 20);
    s.write_all(&serde_json::to_vec(&batch).unwrap()).unwrap();
    let r = read_reply(&mut s, &mut framer);
    assert_eq!(
        error_of(&r),
        (
            -32600,
            "Invalid request: a batch of 129 requests exceeds 128"
        )
    );
    s.write_all(&req("framework_wait_init", Value::Null, json!(2)))
        .unwrap();
    assert_eq!(read_reply(&mut s, &mut framer)["result"], json!(true));
    drop(fresh_client_is_served(&srv));
}

#[test]
fn a_large_request_in_small_pieces_is_answered() {
    let srv = Server::start_with(
        fake(),
        Limits {
            request: Duration::from_secs(10),
            ..limits()
        },
    );
    let mut s = srv.raw();
    let name = "n".repeat(60 * 1024);
    let text = req(
        "bdev_null_create",
        json!({"name": name, "num_blocks": 8, "block_size": 512}),
        json!(7),
    );
    for piece in text.chunks(64) {
        s.write_all(piece).unwrap();
    }
    let r = read_reply(&mut s, &mut Framer::new(1 << 20));
    assert_eq!(
        (r["id"].clone(), r["result"].as_str().map(str::len)),
        (json!(7), Some(name.len()))
    );
}

#[test]
fn idle_and_half_sent_connections_are_closed_to_make_room_for_a_new_client() {
    let srv = Server::start_with(
        fake(),
        Limits {
            request: Duration::from_secs(60),
            ..limits()
        },
    );
    // Fill the four slots: two idle after a call, two in the middle of a request.
    let mut held: Vec<UnixStream> = Vec::new();
    for id in 0..2 {
        let mut s = srv.raw();
        s.write_all(&req("framework_wait_init", Value::Null, json!(id)))
            .unwrap();
        read_reply(&mut s, &mut Framer::new(4096));
        held.push(s);
    }
    for _ in 0..2 {
        let mut s = srv.raw();
        s.write_all(br#"{"jsonrpc":"2.0","#).unwrap();
        held.push(s);
    }
    std::thread::sleep(Duration::from_millis(50)); // let the server read them
    // Four more clients (which stay) are each served at once; the quietest connection
    // makes room each time: the two idle ones (oldest first), then the half-sent ones.
    let fresh: Vec<Client> = (0..4).map(|_| fresh_client_is_served(&srv)).collect();
    assert_eq!(fresh.len(), 4);
    for (i, s) in held.iter_mut().enumerate() {
        assert!(closed(s), "connection {i} still open");
    }
}

/// FakeHandler, except that `bdev_get_bdevs` with a `timeout` waits for all of it, or
/// until its caller leaves.
struct Waiting {
    inner: FakeHandler,
    waiting: AtomicUsize,
}

impl Handler for Waiting {
    fn handle(&self, req: Request) -> Result<Value, RpcError> {
        self.inner.handle(req)
    }

    fn handle_for(&self, req: Request, caller: &Caller<'_>) -> Result<Value, RpcError> {
        if let Request::BdevGetBdevs(p) = &req {
            let end = Instant::now() + Duration::from_millis(p.timeout);
            self.waiting.fetch_add(1, Ordering::SeqCst);
            while Instant::now() < end && !caller.is_gone() {
                std::thread::sleep(Duration::from_millis(5));
            }
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner.handle(req)
    }
}

#[test]
fn calls_waiting_in_every_slot_refuse_a_newcomer_until_their_clients_leave() {
    let handler = Arc::new(Waiting {
        inner: FakeHandler::new(None),
        waiting: AtomicUsize::new(0),
    });
    let h = Arc::clone(&handler);
    let srv = Server::start_with(
        move |_| h,
        Limits {
            max_connections: 2,
            ..limits()
        },
    );
    let mut callers: Vec<UnixStream> = (0..2)
        .map(|id| {
            let mut s = srv.raw();
            s.write_all(&req(
                "bdev_get_bdevs",
                json!({"timeout": 60_000}),
                json!(id),
            ))
            .unwrap();
            s
        })
        .collect();
    let t0 = Instant::now();
    while handler.waiting.load(Ordering::SeqCst) < 2 {
        assert!(t0.elapsed() < Duration::from_secs(5), "calls never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Nobody can be closed to make room: the newcomer is told so, even after sending.
    let mut late = srv.raw();
    let _ = late.write_all(&req("framework_wait_init", Value::Null, json!(9)));
    let r = read_reply(&mut late, &mut Framer::new(4096));
    assert_eq!(
        error_of(&r),
        (
            -16,
            "Too many RPC connections: all 2 are inside calls; try again"
        )
    );
    assert!(closed(&mut late));
    // The waiting clients leave: their calls end and free the slots at once, long before
    // their 60 s timeout (the bound leaves a loaded machine room to schedule them).
    callers.clear();
    let t0 = Instant::now();
    while handler.waiting.load(Ordering::SeqCst) > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "calls outlived their clients"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(fresh_client_is_served(&srv));
}
