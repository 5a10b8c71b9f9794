// SPDX-License-Identifier: Apache-2.0
//! The rarer commands of a file-backed namespace never block the poller: Compare (read
//! into a buffer of the controller's, compared when the read completes), a read with SGL
//! Bit Buckets and a transfer of more pieces than one ring slot holds (split over several
//! operations) complete in a later pass while their operations are held back; the data
//! and statuses are right on io_uring and on the worker threads; `corrupt` and `delay` faults hit
//! file namespaces as they hit memory ones; a new DMA table waits for the I/O in flight.

#![allow(clippy::cast_possible_truncation)] // test data and SQE fields built from small values
#![allow(clippy::unwrap_used)]

mod file_common;

use std::path::Path;

use file_common::{
    Engine, SCATTER, compare, data_block, fill_file, gather, held_host, host_on, new_cqe_status,
    new_file, release_later, run, scatter, scattered, segment, stamped,
};
use nvmemu_bdev::fault::{FaultAction, FaultIo, FaultKind};
use nvmemu_ctrl::test_utils::{HeldFileIo, TestHost, layout, pattern, rw};
use nvmemu_spec::{SglDescriptor, SglKind, Sqe, Status};

/// Both engines: io_uring (where allowed) and the worker threads.
fn hosts(path: &Path) -> Vec<(&'static str, TestHost)> {
    let mut workers = host_on(path, false);
    workers.force_file_worker_threads();
    vec![("io_uring", host_on(path, false)), ("workers", workers)]
}

#[test]
fn compare_matches_the_file_or_fails_with_compare_failure() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    let file = fill_file(&path, 7);
    for (engine, mut h) in hosts(&path) {
        let (slba, len) = (64u64, 64usize << 10);
        let want = &file[slba as usize * 512..][..len];
        h.mem.write(layout::DATA, want);
        let cmd = compare(slba, (len / 512) as u32, h.prps(layout::DATA, len as u64));
        assert_eq!(run(&mut h, cmd).status(), Status::SUCCESS, "{engine}");
        let mut differs = want.to_vec();
        differs[40_000] ^= 1;
        h.mem.write(layout::DATA, &differs);
        let c = run(&mut h, cmd);
        assert_eq!(c.status(), Status::COMPARE_FAILURE, "{engine}");
        assert_eq!(
            c.status().to_field() & 0x7FF,
            (2 << 8) | 0x85,
            "SCT 2h, SC 85h"
        );
        let ns = h.ctrl.namespaces().next().unwrap();
        assert_eq!(ns.bdev().stats().snapshot().num_compare_ops, 2, "{engine}");
    }
}

/// The poller hands each rare command to the engine and returns: with the worker
/// threads held, passes go by without its completion; released, it completes right.
#[test]
fn rare_commands_complete_in_a_later_pass_while_their_io_is_held() {
    let (_dir, file, mut h, held) = held_host(Engine::Workers, 9, 64);
    let at = |slba: u64, len: usize| &file[slba as usize * 512..][..len];
    // Compare.
    h.mem.write(layout::DATA, at(16, 4096));
    let cmd = compare(16, 8, h.prps(layout::DATA, 4096));
    assert_eq!(
        held_then_released("compare", &mut h, &held, cmd),
        Status::SUCCESS
    );
    // A read with a Bit Bucket.
    h.mem.write(layout::DATA, &[0xEE; 1024]);
    let descs = [
        data_block(&h, layout::DATA, 512),
        SglDescriptor::new(SglKind::BitBucket { len: 512 }),
        data_block(&h, layout::DATA + 512, 512),
    ];
    let cmd = rw(0x02, 1, 32, 3, segment(&h, &descs));
    assert_eq!(
        held_then_released("bit bucket", &mut h, &held, cmd),
        Status::SUCCESS
    );
    assert_eq!(h.mem.read_vec(layout::DATA, 512), at(32, 512));
    assert_eq!(h.mem.read_vec(layout::DATA + 512, 512), at(34, 512));
    // A read of 300 pieces (more than one ring slot holds).
    let descs = scattered(&h, SCATTER, 300);
    let cmd = rw(0x02, 1, 100, 300, segment(&h, &descs));
    assert_eq!(
        held_then_released("300 pieces", &mut h, &held, cmd),
        Status::SUCCESS
    );
    assert_eq!(gather(&h, SCATTER, 300), at(100, 300 * 512));
}

/// Submit `cmd`, check that passes return without its CQE while the workers hold its
/// operations, then release them and return its status.
fn held_then_released(what: &str, h: &mut TestHost, held: &HeldFileIo, cmd: Sqe) -> Status {
    held.hold();
    let cid = h.submit(1, cmd);
    for _ in 0..3 {
        h.poll();
        assert!(
            h.reap(1).is_none(),
            "{what}: completed while its operation was held"
        );
    }
    held.release();
    new_cqe_status(h, cid)
}

#[test]
fn bit_buckets_skip_their_bytes_and_the_rest_lands_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    let file = fill_file(&path, 10);
    for (engine, mut h) in hosts(&path) {
        let (a, b) = (layout::DATA, layout::DATA + 0x2_0000);
        h.mem.write(a, &[0xEE; 0x3_0000]);
        // 4096 + 70000 (more than the sink: two pieces of it) + 2000 + 192 = 149 blocks.
        let descs = [
            data_block(&h, a, 4096),
            SglDescriptor::new(SglKind::BitBucket { len: 70_000 }),
            data_block(&h, b, 2000),
            SglDescriptor::new(SglKind::BitBucket { len: 192 }),
        ];
        let slba = 40u64;
        let cmd = rw(0x02, 1, slba, 149, segment(&h, &descs));
        let c = run(&mut h, cmd);
        assert_eq!(c.status(), Status::SUCCESS, "{engine}");
        let base = slba as usize * 512;
        assert_eq!(h.mem.read_vec(a, 4096), &file[base..][..4096], "{engine}");
        assert_eq!(
            h.mem.read_vec(b, 2000),
            &file[base + 74_096..][..2000],
            "{engine}"
        );
        assert_eq!(
            h.mem.read_vec(a + 4096, 16),
            [0xEE; 16],
            "{engine}: untouched"
        );
        assert_eq!(
            h.mem.read_vec(b + 2000, 16),
            [0xEE; 16],
            "{engine}: untouched"
        );
    }
}

#[test]
fn transfers_of_more_pieces_than_a_slot_holds_are_split_and_land_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    for (engine, mut h) in hosts(&path) {
        let data = stamped(300 * 512, engine.len() as u8);
        scatter(&h, SCATTER, &data);
        let descs = scattered(&h, SCATTER, 300);
        let cmd = rw(0x01, 1, 200, 300, segment(&h, &descs));
        let c = run(&mut h, cmd);
        assert_eq!(c.status(), Status::SUCCESS, "{engine}");
        let stored = std::fs::read(&path).unwrap();
        assert_eq!(&stored[200 * 512..][..data.len()], &data[..], "{engine}");
        let back = SCATTER + 0x10_0000;
        let descs = scattered(&h, back, 300);
        let cmd = rw(0x02, 1, 200, 300, segment(&h, &descs));
        let c = run(&mut h, cmd);
        assert_eq!(c.status(), Status::SUCCESS, "{engine}");
        assert_eq!(gather(&h, back, 300), data, "{engine}");
    }
}

/// The file ends inside the second of a split read's operations: the command fails with
/// the failed operation's status, and the controller goes on serving.
#[test]
fn a_failure_in_the_middle_of_a_split_read_is_the_commands_status() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    let file = fill_file(&path, 11);
    for (engine, mut h) in hosts(&path) {
        let slba = 1000u64;
        // The first operation (260 pieces of 512 bytes) reads whole; the second finds
        // the end of the file.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(slba * 512 + 260 * 512)
            .unwrap();
        let descs = scattered(&h, SCATTER, 300);
        let cmd = rw(0x02, 1, slba, 300, segment(&h, &descs));
        let c = run(&mut h, cmd);
        assert_eq!(c.status(), Status::UNRECOVERED_READ_ERROR, "{engine}");
        assert_eq!(
            gather(&h, SCATTER, 260),
            &file[slba as usize * 512..][..260 * 512],
            "{engine}: the first operation's data"
        );
        let cmd = rw(0x02, 1, 0, 8, h.prps(layout::DATA, 4096));
        let c = run(&mut h, cmd);
        assert_eq!(c.status(), Status::SUCCESS, "{engine}: still serving");
        std::fs::write(&path, &file).unwrap();
    }
}

fn arm_corrupt(h: &TestHost, io: FaultIo, offset: u64, value: u8) {
    let ns = h.ctrl.namespaces().next().unwrap();
    let kind = FaultKind::CorruptData;
    ns.bdev()
        .faults()
        .arm(io, kind, kind.action(offset, value), (1, 0))
        .unwrap();
}

#[test]
fn corrupt_faults_change_a_reads_data_or_the_stored_byte_of_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    let file = fill_file(&path, 12);
    for (engine, mut h) in hosts(&path) {
        // A read: the host gets the changed byte, the file keeps its own.
        arm_corrupt(&h, FaultIo::Read, 5000, 0x5A);
        let dptr = h.prps(layout::DATA, 8192);
        let c = run(&mut h, rw(0x02, 1, 8, 16, dptr));
        assert_eq!(c.status(), Status::SUCCESS, "{engine}");
        let mut want = file[8 * 512..][..8192].to_vec();
        want[5000] ^= 0x5A;
        assert_eq!(h.mem.read_vec(layout::DATA, 8192), want, "{engine}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            file,
            "{engine}: file unchanged"
        );
        // A write: the file gets the changed byte, the host's buffer stays as it was.
        let data = pattern(1024, 13);
        h.mem.write(layout::DATA, &data);
        arm_corrupt(&h, FaultIo::Write, 700, 0xFF);
        let cmd = rw(0x01, 1, 2, 2, h.prps(layout::DATA, 1024));
        let c = run(&mut h, cmd);
        assert_eq!(c.status(), Status::SUCCESS, "{engine}");
        let mut want = data.clone();
        want[700] ^= 0xFF;
        assert_eq!(
            &std::fs::read(&path).unwrap()[1024..2048],
            &want[..],
            "{engine}"
        );
        assert_eq!(
            h.mem.read_vec(layout::DATA, 1024),
            data,
            "{engine}: host buffer"
        );
        std::fs::write(&path, &file).unwrap();
    }
}

/// A `delay` fault holds a file command's completion for its time after the I/O, as it
/// holds a memory namespace's (it used to be lost: the command completes in a later pass).
#[test]
fn a_delay_fault_holds_a_file_commands_completion() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    let file = fill_file(&path, 15);
    for (engine, mut h) in hosts(&path) {
        let delay = std::time::Duration::from_millis(150);
        let us = u64::try_from(delay.as_micros()).unwrap();
        let ns = h.ctrl.namespaces().next().unwrap();
        let action = FaultAction::Delay { us };
        ns.bdev()
            .faults()
            .arm(FaultIo::Read, FaultKind::Failure, action, (1, 0))
            .unwrap();
        let start = std::time::Instant::now();
        let read = rw(0x02, 1, 8, 8, h.prps(layout::DATA, 4096));
        let cid = h.submit(1, read);
        let c = loop {
            h.poll();
            if let Some(c) = h.reap(1) {
                break c;
            }
            assert!(start.elapsed().as_secs() < 10, "{engine}: no completion");
            std::thread::yield_now();
        };
        assert_eq!((c.cid, c.status()), (cid.0, Status::SUCCESS), "{engine}");
        assert!(
            start.elapsed() >= delay,
            "{engine}: completed after {:?}",
            start.elapsed()
        );
        assert_eq!(
            h.mem.read_vec(layout::DATA, 4096),
            file[8 * 512..][..4096],
            "{engine}"
        );
    }
}

/// A new DMA table is installed only after the file I/O in flight is done, since the
/// client may reuse memory it unmapped: with the read held by the workers until 300 ms
/// later, installing the table returns with the data already in host memory.
#[test]
fn a_new_dma_table_waits_for_the_file_io_in_flight() {
    let (_dir, file, mut h, held) = held_host(Engine::Workers, 14, 64);
    h.mem.write(layout::DATA, &[0xEE; 4096]);
    let cid = h.submit(1, rw(0x02, 1, 0, 8, h.prps(layout::DATA, 4096)));
    h.poll();
    let opener = release_later(&held, 300);
    let table = h.mem.guest();
    h.ctrl.set_guest_memory(table);
    assert_eq!(
        h.mem.read_vec(layout::DATA, 4096),
        &file[..4096],
        "read done first"
    );
    opener.join().unwrap();
    assert_eq!(new_cqe_status(&mut h, cid), Status::SUCCESS);
}
