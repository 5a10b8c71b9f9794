// SPDX-License-Identifier: Apache-2.0
//! The poll group's busy and idle time (`TcpStats::busy_ns` and `idle_ns`, which
//! `thread_get_stats` reports): a pass that did work counts as busy, every other pass and
//! the sleeps between them as idle, as SPDK counts a thread's iterations.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use nvmemu_spec::Status;
use nvmemu_tcp::{TcpOptions, TcpStats, TcpTarget};

/// The target's counters once `f` holds of them (10 s at most).
fn wait_for(t: &TcpTarget, what: &str, f: impl Fn(&TcpStats) -> bool) -> TcpStats {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = t.stats();
        if f(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}: {s:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_target_nobody_talks_to_is_idle_only() {
    let (t, _addr, _) = target(TcpOptions::default());
    let first = wait_for(&t, "a first pass", |s| s.polls > 0);
    let later = wait_for(&t, "100 ms of idle time", |s| {
        s.idle_ns >= first.idle_ns + 100_000_000
    });
    assert_eq!(later.busy_ns, 0, "{later:?}");
}

#[test]
fn serving_commands_is_busy_time() {
    let (t, addr, _) = target(TcpOptions::default());
    let (_admin, mut io) = pair(addr, false, 32);
    let before = t.stats();
    for lba in 0..200 {
        let (c, data) = io.exec(rw(0x02, lba, 1, sgl(0x5A, 512)), &[], &[], 0);
        assert_eq!(c.status(), Status::SUCCESS);
        assert_eq!(data.len(), 512);
    }
    // The last pass that worked is charged when the next one begins.
    let after = wait_for(&t, "busy time for 200 reads", |s| {
        s.commands >= before.commands + 200 && s.busy_ns > before.busy_ns
    });
    // Each of the 200 round trips took at least one busy pass; between them the target
    // waited for the host, which is idle time.
    assert!(after.idle_ns > before.idle_ns, "{before:?} {after:?}");
}
