// SPDX-License-Identifier: Apache-2.0
//! The per-command trace (`Controller::set_trace`, `nvmemu bench --lat-breakdown`) for
//! commands that complete after the pass that fetched them: a file namespace's I/O (done
//! when its last operation is reaped, on io_uring and on the worker threads), a CQE held
//! by a latency model or a `delay` fault (done before the hold, posted after it) and a
//! large Write Zeroes set aside. Each shows fetch <= done <= post, with the wait where it
//! belongs.

#![allow(clippy::cast_possible_truncation)] // test data and SQE fields built from small values
#![allow(clippy::unwrap_used)]

mod file_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use file_common::{Engine, fill_file, held_host, host_on, new_file, next_cqe};
use nvmemu_bdev::fault::{FaultAction, FaultIo, FaultKind};
use nvmemu_bdev::model::{ModelConfig, ServiceTime};
use nvmemu_ctrl::test_utils::{TestHost, bare, layout, pattern, rw, set_feature};
use nvmemu_ctrl::{LatencyHook, LatencyTable};
use nvmemu_mem::global_clock;
use nvmemu_spec::{Cid, DataPtr, Sqe, Status};

/// How long a test holds a command back (its I/O, its model or its fault).
const HOLD: Duration = Duration::from_millis(20);

/// Install a trace on `h`'s controller.
fn trace(h: &mut TestHost) -> Arc<LatencyTable> {
    let table = Arc::new(LatencyTable::new(4, 4096));
    h.ctrl.set_trace(Some(LatencyHook(Arc::clone(&table))));
    table
}

/// Command `cid`'s readings on queue 1, each recorded and in order.
fn stages(table: &LatencyTable, cid: Cid, what: &str) -> [u64; 3] {
    stages_on(table, 1, cid, what)
}

fn stages_on(table: &LatencyTable, qid: u16, cid: Cid, what: &str) -> [u64; 3] {
    let [fetch, done, post] = table.read(qid, cid.0).unwrap();
    assert!(
        fetch > 0 && fetch <= done && done <= post,
        "{what}: fetch {fetch}, done {done}, post {post}"
    );
    [fetch, done, post]
}

/// At least [`HOLD`] went by from reading `from` to reading `to` (where the clock can say).
fn held_between(from: u64, to: u64, what: &str) {
    let clock = global_clock();
    if clock.is_tsc() {
        let ns = clock.ticks_to_ns(to - from);
        assert!(ns >= HOLD.as_nanos() as u64, "{what}: {ns} ns");
    }
}

/// Submit `cmd` on queue 1 and poll until its CQE arrives (at most 10 s); its CID.
fn run_ok(h: &mut TestHost, cmd: Sqe, what: &str) -> Cid {
    let cid = h.submit(1, cmd);
    let start = Instant::now();
    let c = loop {
        h.poll();
        if let Some(c) = h.reap(1) {
            break c;
        }
        assert!(start.elapsed().as_secs() < 10, "{what}: no completion");
        std::thread::yield_now();
    };
    assert_eq!((c.cid, c.status()), (cid.0, Status::SUCCESS), "{what}");
    cid
}

#[test]
fn a_file_commands_done_is_when_its_io_is_reaped_and_its_post_when_its_cqe_is() {
    for (engine, seed) in [(Engine::Ring, 41), (Engine::Workers, 42)] {
        let what = format!("{engine:?}");
        let (_dir, file, mut h, held) = held_host(engine, seed, 64);
        let table = trace(&mut h);
        let cid = h.submit(1, rw(0x02, 1, 8, 8, h.prps(layout::DATA, 4096)));
        h.poll();
        // Released a little later than HOLD: the test's clock and the TSC's conversion
        // may disagree by a few parts per thousand.
        let start = Instant::now();
        while start.elapsed() < HOLD + HOLD / 10 {
            h.poll();
            assert_eq!(h.reap(1), None, "{what}: held");
        }
        held.release();
        let c = next_cqe(&mut h);
        assert_eq!((c.cid, c.status()), (cid.0, Status::SUCCESS), "{what}");
        assert_eq!(
            h.mem.read_vec(layout::DATA, 4096),
            file[4096..8192],
            "{what}"
        );
        let [fetch, done, _] = stages(&table, cid, &what);
        // Fetched before the hold, done after it.
        held_between(fetch, done, &what);
    }
}

#[test]
fn file_reads_and_writes_are_traced_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    let mut workers = host_on(&path, false);
    workers.force_file_worker_threads();
    for (engine, mut h) in [("io_uring", host_on(&path, false)), ("workers", workers)] {
        let table = trace(&mut h);
        let data = pattern(4096, 7);
        h.mem.write(layout::DATA, &data);
        let write = rw(0x01, 1, 16, 8, h.prps(layout::DATA, 4096));
        let cid = run_ok(&mut h, write, engine);
        stages(&table, cid, engine);
        let readback = layout::DATA + 0x1_0000;
        let read = rw(0x02, 1, 16, 8, h.prps(readback, 4096));
        let cid = run_ok(&mut h, read, engine);
        stages(&table, cid, engine);
        assert_eq!(h.mem.read_vec(readback, 4096), data, "{engine}");
    }
}

#[test]
fn a_modelled_commands_post_comes_after_its_hold() {
    let mut h = TestHost::ready(64);
    let us = HOLD.as_micros() as u64;
    let t = ServiceTime {
        avg_us: us,
        p99_us: us,
    };
    let ns = h.ctrl.namespaces().next().unwrap();
    ns.bdev().model().set(Some(ModelConfig::spdk(t, t)));
    let table = trace(&mut h);
    let data = pattern(512, 3);
    h.mem.write(layout::DATA, &data);
    let write = rw(0x01, 1, 5, 1, h.prps(layout::DATA, 512));
    let cid = run_ok(&mut h, write, "write");
    let [_, done, post] = stages(&table, cid, "write");
    held_between(done, post, "write");
    ns_model_off(&h);
    let (status, back) = h.read_blocks(1, 5, 1);
    assert_eq!((status, back), (Status::SUCCESS, data));
}

fn ns_model_off(h: &TestHost) {
    h.ctrl.namespaces().next().unwrap().bdev().model().set(None);
}

/// A `delay` fault on the next read of namespace 1, for [`HOLD`].
fn delay_next_read(h: &TestHost) {
    let us = HOLD.as_micros() as u64;
    let ns = h.ctrl.namespaces().next().unwrap();
    ns.bdev()
        .faults()
        .arm(
            FaultIo::Read,
            FaultKind::Failure,
            FaultAction::Delay { us },
            (1, 0),
        )
        .unwrap();
}

#[test]
fn a_delayed_commands_done_comes_before_its_hold_and_its_post_after() {
    // A memory namespace: the read runs when fetched, its CQE waits.
    let mut h = TestHost::ready(64);
    let table = trace(&mut h);
    let data = pattern(512, 9);
    assert_eq!(h.write_blocks(1, 7, &data), Status::SUCCESS);
    delay_next_read(&h);
    let read = rw(0x02, 1, 7, 1, h.prps(layout::DATA, 512));
    let cid = run_ok(&mut h, read, "memory");
    assert_eq!(h.mem.read_vec(layout::DATA, 512), data);
    let [_, done, post] = stages(&table, cid, "memory");
    held_between(done, post, "memory");
    // A file namespace: the wait starts when its I/O is reaped.
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    let file = fill_file(&path, 11);
    let mut h = host_on(&path, false);
    let table = trace(&mut h);
    delay_next_read(&h);
    let read = rw(0x02, 1, 0, 8, h.prps(layout::DATA, 4096));
    let cid = run_ok(&mut h, read, "file");
    assert_eq!(h.mem.read_vec(layout::DATA, 4096), file[..4096]);
    let [_, done, post] = stages(&table, cid, "file");
    held_between(done, post, "file");
}

#[test]
fn a_write_zeroes_set_aside_is_traced_when_its_last_piece_is_done() {
    let mut h = TestHost::ready(64);
    let table = trace(&mut h);
    // 2 MiB: more than one pass's piece, so it completes in a later pass.
    let blocks = 4096;
    let data = pattern(512, 13);
    let last = u64::from(blocks) - 1;
    assert_eq!(h.write_blocks(1, last, &data), Status::SUCCESS);
    let zeroes = rw(0x08, 1, 0, blocks, DataPtr::Prp { prp1: 0, prp2: 0 });
    let cid = h.submit(1, zeroes);
    assert_eq!(h.poll(), 0, "set aside");
    let c = next_cqe(&mut h);
    assert_eq!((c.cid, c.status()), (cid.0, Status::SUCCESS));
    stages(&table, cid, "write zeroes");
    let (status, back) = h.read_blocks(1, last, 1);
    assert_eq!((status, back), (Status::SUCCESS, vec![0; 512]));
}

#[test]
fn an_asynchronous_event_request_is_done_and_posted_when_its_event_comes() {
    let mut h = TestHost::ready(16);
    let table = trace(&mut h);
    assert_eq!(h.admin(set_feature(0x0B, 0)).status(), Status::SUCCESS);
    let aer = h.submit(0, bare(0x0C));
    h.poll();
    let [fetch, ..] = table.read(0, aer.0).unwrap();
    assert!(fetch > 0);
    // SQ 1's tail doorbell beyond its size: an Invalid Doorbell Write Value event.
    // The pass that finds it raises the event; the next delivers it.
    h.doorbells.store_release_u32(8, 16).unwrap();
    assert_eq!(h.poll() + h.poll(), 1);
    assert_eq!(h.reap(0).map(|c| c.cid), Some(aer.0));
    stages_on(&table, 0, aer, "AER");
}
