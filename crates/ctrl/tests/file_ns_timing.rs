// SPDX-License-Identifier: Apache-2.0
//! Target-side timing of file namespaces: their commands complete in a later pass than the
//! one that took them (the I/O runs on the controller's io_uring or its worker threads),
//! yet each is timed once in every layer, with a backend layer that spans its I/O, and its
//! bdev's latency is counted: by the controller's timing when the histogram is on for it,
//! by the bdev channel when only the bdev is timed. A command that waited for room is
//! timed from when it was taken.

#![allow(clippy::cast_possible_truncation)] // test data and SQE fields built from small values
#![allow(clippy::unwrap_used)]

mod file_common;
mod timing_common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use file_common::{Engine, compare, fill_file, held_host, host_on, new_file, next_cqe, run};
use nvmemu_bdev::{Bdev, BdevStatsSnapshot};
use nvmemu_ctrl::COMPARE_BUFS;
use nvmemu_ctrl::test_utils::{TestHost, bare, layout, pattern, rw, sqe};
use nvmemu_ctrl::timing::{Layer, LayerSet};
use nvmemu_mem::global_clock;
use nvmemu_spec::{DataPtr, Sqe, Status};
use timing_common::check_layer_sums;

/// Commands per batch, and batches of writes (then as many of reads).
const PER_BATCH: u64 = 8;
const BATCHES: u64 = 3;
const N: u64 = PER_BATCH * BATCHES;
/// 4 KiB per command: where the reads land.
const READBACK: u64 = layout::DATA + 0x10_0000;

/// Both engines on the file at `path`: io_uring (where allowed) and the worker threads.
fn hosts(path: &Path) -> Vec<(&'static str, TestHost)> {
    let mut workers = host_on(path, false);
    workers.force_file_worker_threads();
    vec![("io_uring", host_on(path, false)), ("workers", workers)]
}

fn bdev(h: &TestHost) -> Arc<Bdev> {
    Arc::clone(h.ctrl.namespaces().next().unwrap().bdev())
}

fn stats(h: &TestHost) -> BdevStatsSnapshot {
    bdev(h).stats().snapshot()
}

/// Queue 1's histograms of namespace 1 (empty if none yet).
fn layers(h: &TestHost) -> LayerSet {
    let snap = h.ctrl.timing().expect("timing on");
    snap.queues
        .iter()
        .filter(|(q, ..)| q.0 == 1)
        .flat_map(|(_, q, _)| &q.namespaces)
        .find(|n| n.nsid == 1)
        .map_or_else(|| LayerSet::new(snap.granularity), |n| (*n.layers).clone())
}

/// Submit `cmds` at once and poll until all completed; their statuses by submission.
fn run_batch(h: &mut TestHost, cmds: &[Sqe]) -> Vec<Status> {
    let cids: Vec<_> = cmds.iter().map(|c| h.submit(1, *c)).collect();
    let mut statuses = vec![None; cids.len()];
    for _ in &cids {
        let c = next_cqe(h);
        let at = cids.iter().position(|id| id.0 == c.cid).unwrap();
        statuses[at] = Some(c.status());
    }
    statuses.into_iter().map(Option::unwrap).collect()
}

/// [`N`] 4 KiB writes of fresh data in batches, then [`N`] reads of it, read back and
/// compared.
fn write_then_read(h: &mut TestHost, seed: u8) -> Vec<u8> {
    let data = pattern((N * 4096) as usize, seed);
    h.mem.write(layout::DATA, &data);
    for b in 0..BATCHES {
        let cmds: Vec<Sqe> = (b * PER_BATCH..(b + 1) * PER_BATCH)
            .map(|i| rw(0x01, 1, i * 8, 8, h.prps(layout::DATA + i * 4096, 4096)))
            .collect();
        assert!(run_batch(h, &cmds).iter().all(|s| *s == Status::SUCCESS));
    }
    data
}

fn read_back(h: &mut TestHost, data: &[u8]) {
    for b in 0..BATCHES {
        let cmds: Vec<Sqe> = (b * PER_BATCH..(b + 1) * PER_BATCH)
            .map(|i| rw(0x02, 1, i * 8, 8, h.prps(READBACK + i * 4096, 4096)))
            .collect();
        assert!(run_batch(h, &cmds).iter().all(|s| *s == Status::SUCCESS));
    }
    assert!(h.mem.read_vec(READBACK, data.len()) == data, "read back");
}

/// The layers add up (`check_layer_sums`), and no backend layer is of zero ticks.
fn check_layers(set: &LayerSet, n: u64, what: &str) {
    check_layer_sums(set, n, what);
    assert_eq!(set.get(Layer::Backend).buckets()[0], 0, "{what}: backend 0");
}

/// `ns` converted from ticks is `ticks` within a nanosecond of rounding.
fn same_ns(ns: u64, ticks: u128, what: &str) {
    let clock = global_clock();
    if clock.is_tsc() {
        let want = clock.ticks_to_ns(u64::try_from(ticks).unwrap());
        assert!(ns.abs_diff(want) <= 1, "{what}: {ns} ns, backend {want} ns");
    }
}

#[test]
fn reads_and_writes_are_timed_once_in_every_layer_and_in_the_bdevs_latency() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    for (engine, mut h) in hosts(&path) {
        bdev(&h).set_timed(true);
        assert!(h.ctrl.set_timing("aio0", true, 7));
        // A pass before the first command, so each has a previous pass (the wait bound).
        h.poll();
        let data = write_then_read(&mut h, 9);
        let set = layers(&h);
        check_layers(&set, N, engine);
        // The commands of a batch behind a file command wait for its submission.
        assert!(set.get(Layer::Queued).sum() > 0, "{engine}");
        let s = stats(&h);
        assert_eq!(s.num_write_ops, N, "{engine}");
        // The bdev's write latency is the writes' backend layer: one reading serves both.
        let writes = set.get(Layer::Backend).sum();
        same_ns(s.write_latency.sum_ns, writes, engine);
        assert_eq!(s.read_latency, Default::default(), "{engine}");
        read_back(&mut h, &data);
        let set = layers(&h);
        check_layers(&set, 2 * N, engine);
        let s = stats(&h);
        assert_eq!((s.num_read_ops, s.num_write_ops), (N, N), "{engine}");
        let reads = set.get(Layer::Backend).sum() - writes;
        same_ns(s.read_latency.sum_ns, reads, engine);
        assert_eq!(h.ctrl.timing().unwrap().dropped, 0, "{engine}");
    }
}

fn flush() -> Sqe {
    Sqe {
        nsid: 1,
        ..bare(0x00)
    }
}

/// Dataset Management, Deallocate, of `blocks` blocks at `slba` (its range at `LISTS`).
fn deallocate(h: &TestHost, slba: u32, blocks: u32) -> Sqe {
    h.mem.write(
        layout::LISTS,
        &[0u32, blocks, slba, 0].map(u32::to_le_bytes).concat(),
    );
    let prp1 = h.mem.iova(layout::LISTS);
    Sqe {
        nsid: 1,
        cdw11: 1 << 2,
        ..sqe(0x09, DataPtr::Prp { prp1, prp2: 0 })
    }
}

#[test]
fn compare_flush_write_zeroes_and_deallocate_are_timed_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    let file = fill_file(&path, 5);
    for (engine, mut h) in hosts(&path) {
        bdev(&h).set_timed(true);
        assert!(h.ctrl.set_timing("aio0", true, 7));
        h.poll();
        h.mem.write(layout::DATA, &file[..4096]);
        let same = compare(0, 8, h.prps(layout::DATA, 4096));
        assert_eq!(run(&mut h, same).status(), Status::SUCCESS, "{engine}");
        // A Compare that finds a difference is timed as any failed command is.
        let differs = compare(8, 8, h.prps(layout::DATA, 4096));
        assert_eq!(run(&mut h, differs).status(), Status::COMPARE_FAILURE);
        assert_eq!(run(&mut h, flush()).status(), Status::SUCCESS, "{engine}");
        let zeroes = rw(0x08, 1, 64, 8, DataPtr::Prp { prp1: 0, prp2: 0 });
        assert_eq!(run(&mut h, zeroes).status(), Status::SUCCESS, "{engine}");
        let dsm = deallocate(&h, 128, 16);
        assert_eq!(run(&mut h, dsm).status(), Status::SUCCESS, "{engine}");
        check_layers(&layers(&h), 5, engine);
        let s = stats(&h);
        assert_eq!(
            (s.num_compare_ops, s.num_flush_ops, s.num_write_zeroes_ops),
            (2, 1, 1),
            "{engine}"
        );
        assert_eq!(s.num_unmap_ops, 1, "{engine}");
        if global_clock().is_tsc() {
            assert!(s.unmap_latency.sum_ns > 0, "{engine}: {s:?}");
        }
        let read = rw(0x02, 1, 120, 24, h.prps(READBACK, 24 * 512));
        assert_eq!(run(&mut h, read).status(), Status::SUCCESS, "{engine}");
        let back = h.mem.read_vec(READBACK, 24 * 512);
        assert_eq!(back[..4096], file[120 * 512..128 * 512], "{engine}");
        assert!(
            back[4096..].iter().all(|b| *b == 0),
            "{engine}: deallocated"
        );
    }
}

#[test]
fn a_command_that_waited_for_room_is_timed_from_when_it_was_taken() {
    const HELD: Duration = Duration::from_millis(20);
    for (engine, seed) in [(Engine::Ring, 31), (Engine::Workers, 32)] {
        let (_dir, file, mut h, held) = held_host(engine, seed, 64);
        assert!(h.ctrl.set_timing("aio0", true, 7));
        h.poll();
        // Every Compare buffer taken by a held Compare, and one more that waits for one.
        let n = u64::from(COMPARE_BUFS) + 1;
        for i in 0..n {
            let at = layout::DATA + i * 4096;
            h.mem.write(at, &file[(i * 8) as usize * 512..][..4096]);
            h.submit(1, compare(i * 8, 8, h.prps(at, 4096)));
        }
        let start = std::time::Instant::now();
        while start.elapsed() < HELD {
            h.poll();
            assert_eq!(h.reap(1), None, "{engine:?}: held");
        }
        held.release();
        for _ in 0..n {
            assert_eq!(next_cqe(&mut h).status(), Status::SUCCESS, "{engine:?}");
        }
        let set = layers(&h);
        check_layers(&set, n, &format!("{engine:?}"));
        // Each was taken before the hold began: its backend layer holds the hold.
        let clock = global_clock();
        if clock.is_tsc() {
            let backend = u64::try_from(set.get(Layer::Backend).sum()).unwrap();
            let ns = clock.ticks_to_ns(backend);
            assert!(ns >= n * HELD.as_nanos() as u64, "{engine:?}: {ns} ns");
        }
    }
}

#[test]
fn with_only_the_bdev_timed_the_channel_times_the_file_io_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    for (engine, mut h) in hosts(&path) {
        // Off: counted, not timed.
        let data = write_then_read(&mut h, 3);
        read_back(&mut h, &data);
        let s = stats(&h);
        assert_eq!((s.num_read_ops, s.num_write_ops), (N, N), "{engine}");
        assert_eq!(
            [s.read_latency, s.write_latency],
            [Default::default(); 2],
            "{engine}"
        );
        // The bdev is timed, this controller times nothing (no histogram on it: a
        // controller made before it was enabled, say).
        bdev(&h).set_timed(true);
        let data = write_then_read(&mut h, 4);
        read_back(&mut h, &data);
        let dsm = deallocate(&h, 256, 8);
        assert_eq!(run(&mut h, dsm).status(), Status::SUCCESS, "{engine}");
        assert_eq!(h.ctrl.timing(), None);
        let s = stats(&h);
        assert_eq!(
            (s.num_read_ops, s.num_write_ops),
            (2 * N, 2 * N),
            "{engine}"
        );
        if global_clock().is_tsc() {
            for l in [s.read_latency, s.write_latency, s.unmap_latency] {
                assert!(l.sum_ns > 0 && l.min_ns > 0, "{engine}: {s:?}");
            }
        }
    }
}
