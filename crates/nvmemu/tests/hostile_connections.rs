// SPDX-License-Identifier: Apache-2.0
//! Many local clients against one controller: silent connections, connect/close floods,
//! clients waiting their turn and a full waiting queue. Whatever the others do, an honest
//! client is served at once when the controller is free, waits (told nothing, as with
//! SPDK's `nvmf_tgt`) while another is attached, or hears "busy" at once when the queue
//! is full.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::{RawConn, assert_serves_next_client};
use nvmemu_vfio_user::{Client, ClientError, Errno, MAX_PENDING, MAX_WAITING};

const VERSION: u16 = 1;
/// VERSION as SPDK's client sends it (0.1, no capabilities JSON).
const SPDK_VERSION: [u8; 4] = [0, 0, 1, 0];
/// Longest an honest client may wait for the controller when it is free: a third of
/// [`common::start_patient`]'s deadlines, so a client served within it waited for no
/// other client's deadline, however slow a loaded machine makes the round trips.
const PROMPT: Duration = Duration::from_secs(20);

/// Connects and negotiates within [`PROMPT`].
fn honest_client(t: &common::TestTarget) -> Client {
    let start = Instant::now();
    let c = Client::connect_within(&t.socket(), PROMPT).unwrap();
    assert!(start.elapsed() < PROMPT, "{:?}", start.elapsed());
    c
}

/// A raw connection that has sent VERSION and not read the reply.
fn sent_version(t: &common::TestTarget) -> RawConn {
    let mut c = RawConn::connect(t);
    c.send(VERSION, 0, &SPDK_VERSION, &[]);
    c
}

/// Whether `c` receives nothing within `wait` (the server neither answered nor closed).
fn silent_for(c: &mut RawConn, wait: Duration) -> bool {
    c.stream.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 1];
    let r = c.stream.read(&mut b);
    c.stream.set_read_timeout(Some(common::DEADLINE)).unwrap();
    matches!(r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

#[test]
fn silent_connections_do_not_delay_an_honest_client() {
    // Each silent connection may stay 60 s before it is dropped.
    let t = common::start_patient();
    let silent: Vec<RawConn> = (0..30).map(|_| RawConn::connect(&t)).collect();
    drop(honest_client(&t));
    assert_serves_next_client(&t);
    drop(silent);
}

#[test]
fn a_connect_close_flood_does_not_delay_an_honest_client() {
    let t = common::start_patient();
    for _ in 0..2000 {
        drop(UnixStream::connect(t.socket()).unwrap());
    }
    drop(honest_client(&t));
}

#[test]
fn connections_past_the_pending_bound_displace_the_oldest_silent_one() {
    let t = common::start_patient();
    let mut oldest = RawConn::connect(&t);
    let _others: Vec<RawConn> = (0..MAX_PENDING).map(|_| RawConn::connect(&t)).collect();
    // Closed long before its 60 s VERSION deadline.
    let start = Instant::now();
    assert!(oldest.closed_by_server());
    assert!(start.elapsed() < PROMPT, "{:?}", start.elapsed());
    drop(honest_client(&t));
}

#[test]
fn a_second_client_waits_until_the_first_leaves_then_runs() {
    let t = common::start_default();
    let first = common::attach(&t, 1);
    let socket = t.socket();
    let second = std::thread::spawn(move || {
        let mut c = Client::connect_within(&socket, common::DEADLINE)?;
        c.device_info()
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!second.is_finished(), "{:?}", second.join());
    drop(first);
    let info = second.join().unwrap().unwrap();
    assert!(info.num_regions > 0);
}

#[test]
fn a_full_queue_answers_the_next_client_busy_at_once() {
    let t = common::start_patient();
    let _attached = RawConn::connect_negotiated(&t);
    let waiting: Vec<RawConn> = (0..MAX_WAITING).map(|_| sent_version(&t)).collect();
    // Let the doorman queue them all before the next one arrives.
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    let refused = Client::connect_within(&t.socket(), common::DEADLINE);
    assert!(matches!(refused, Err(ClientError::Busy)), "{refused:?}");
    assert!(start.elapsed() < PROMPT, "{:?}", start.elapsed());
    // A raw client sees the protocol's answer: an error reply to VERSION with EBUSY.
    let mut raw = sent_version(&t);
    let r = raw.recv();
    assert_eq!((r.header.command, r.errno()), (VERSION, Errno::BUSY));
    assert!(raw.closed_by_server());

    // Waiting clients that hang up free their places: the next one waits, unanswered.
    drop(waiting);
    std::thread::sleep(Duration::from_millis(300));
    let mut next = sent_version(&t);
    assert!(silent_for(&mut next, Duration::from_millis(500)));
}

#[test]
fn the_waiting_client_runs_once_the_attached_one_leaves() {
    let t = common::start_default();
    let attached = RawConn::connect_negotiated(&t);
    let mut next = sent_version(&t);
    // Longer than any grace a server might give before refusing.
    assert!(silent_for(&mut next, Duration::from_millis(1500)));
    drop(attached);
    next.recv().ok(VERSION);
    drop(next);
    assert_serves_next_client(&t);
}
