// SPDX-License-Identifier: Apache-2.0
//! Commands whose work is not bounded by a data transfer (Deallocate, Write Zeroes) are
//! merged and split across poll passes: no pass does more than a piece of them, other
//! commands keep completing meanwhile, and the blocks read zero once the CQE is posted.

#![allow(clippy::cast_possible_truncation)] // test data and SQE fields built from small values

use nvmemu_ctrl::test_utils::{BLOCK, BLOCKS, TestHost, delete_sq, layout, pattern, rw, sqe};
use nvmemu_spec::{DataPtr, Sqe, Status};
use zerocopy::IntoBytes;

/// The most bytes one pass may zero or deallocate (`io/zeroing.rs`'s `PIECE_BYTES`).
const PIECE: u64 = 1 << 20;
const NS_BYTES: u64 = BLOCKS * BLOCK;

/// A Dataset Management (Deallocate) of every range in `ranges` (slba, blocks), its list
/// at the start of the list area.
fn deallocate(h: &TestHost, ranges: &[(u64, u32)]) -> Sqe {
    deallocate_at(h, layout::LISTS, ranges)
}

/// Like `deallocate`, the list at host offset `at`.
fn deallocate_at(h: &TestHost, at: u64, ranges: &[(u64, u32)]) -> Sqe {
    let list: Vec<[u32; 4]> = ranges
        .iter()
        .map(|&(slba, n)| [0, n, slba as u32, (slba >> 32) as u32])
        .collect();
    h.mem.write(at, list.as_bytes());
    Sqe {
        nsid: 1,
        cdw10: ranges.len() as u32 - 1,
        cdw11: 1 << 2,
        ..sqe(
            0x09,
            DataPtr::Prp {
                prp1: h.mem.iova(at),
                prp2: 0,
            },
        )
    }
}

fn write_zeroes(slba: u64, blocks: u32) -> Sqe {
    Sqe {
        nsid: 1,
        cdw10: slba as u32,
        cdw12: blocks - 1,
        ..sqe(0x08, DataPtr::Prp { prp1: 0, prp2: 0 })
    }
}

fn unmapped(h: &TestHost) -> (u64, u64) {
    let ns = h.ctrl.namespaces().next().expect("namespace 1");
    let s = ns.bdev().stats().snapshot();
    (s.bytes_unmapped, s.num_unmap_ops)
}

/// Poll until `qid` has a CQE, checking that no pass deallocates more than a piece; returns
/// the CQE and the number of passes.
fn poll_until_done(h: &mut TestHost, qid: u16, max_passes: usize) -> (Status, usize) {
    for pass in 1..=max_passes {
        let before = unmapped(h).0;
        h.poll();
        let did = unmapped(h).0 - before;
        assert!(did <= PIECE, "pass {pass} deallocated {did} bytes");
        if let Some(c) = h.reap(qid) {
            return (c.status(), pass);
        }
    }
    panic!("no completion within {max_passes} passes");
}

#[test]
fn a_deallocate_naming_the_whole_namespace_256_times_costs_one_namespace_in_pieces() {
    let mut h = TestHost::ready(16);
    let data = pattern(8 * 512, 9);
    assert_eq!(h.write_blocks(1, BLOCKS - 8, &data), Status::SUCCESS);
    let before = unmapped(&h);
    let cmd = deallocate(&h, &[(0, BLOCKS as u32); 256]);
    h.submit(1, cmd);
    let (status, passes) = poll_until_done(&mut h, 1, 1000);
    assert_eq!(status, Status::SUCCESS);
    // Merged into one range: the namespace once (64 pieces), not 256 times.
    assert_eq!(passes as u64, NS_BYTES / PIECE);
    let after = unmapped(&h);
    assert_eq!(after.0 - before.0, NS_BYTES);
    assert_eq!(after.1 - before.1, 1, "one merged range, one unmap op");
    let (s, back) = h.read_blocks(1, BLOCKS - 8, 8);
    assert_eq!(s, Status::SUCCESS);
    assert!(back.iter().all(|&b| b == 0));
}

#[test]
fn other_queues_complete_while_a_large_deallocate_runs_and_a_second_one_waits() {
    let mut h = TestHost::ready(16);
    h.create_io_pair(2, 16);
    let data = pattern(512, 3);
    assert_eq!(h.write_blocks(2, 7, &data), Status::SUCCESS);
    h.submit(1, deallocate(&h, &[(0, BLOCKS as u32)]));
    // Behind it on the same SQ: a second Deallocate (must wait for the slot), then a Read
    // that waits behind it (the SQ is taken in order).
    h.submit(1, deallocate_at(&h, layout::LISTS + 0x1000, &[(0, 1024)]));
    h.submit(1, rw(0x02, 1, 0, 1, h.prps(layout::DATA + 8192, 512)));
    h.poll();
    assert_eq!(h.reap(1), None, "nothing on SQ 1 is done after one pass");
    // SQ 2 is served in every pass meanwhile: one Read per pass, each done at once.
    for _ in 0..10 {
        let dptr = h.prps(layout::DATA, 512);
        h.submit(2, rw(0x02, 1, 7, 1, dptr));
        h.poll();
        let c = h.reap(2).expect("SQ 2 completes in the same pass");
        assert_eq!(c.status(), Status::SUCCESS);
    }
    let (status, _) = poll_until_done(&mut h, 1, 200);
    assert_eq!(status, Status::SUCCESS);
    // Then the small Deallocate and the Read run, in the next pass.
    h.poll();
    assert_eq!(h.reap(1).map(|c| c.status()), Some(Status::SUCCESS));
    assert_eq!(h.reap(1).map(|c| c.status()), Some(Status::SUCCESS));
    assert_eq!(h.read_blocks(2, 7, 1), (Status::SUCCESS, vec![0; 512]));
}

#[test]
fn a_large_write_zeroes_is_split_and_reads_zero() {
    let mut h = TestHost::ready(16);
    let data = pattern(4096, 5);
    assert_eq!(h.write_blocks(1, 65535 - 7, &data), Status::SUCCESS);
    // 65,536 blocks of 512 bytes: 32 MiB, 32 pieces.
    h.submit(1, write_zeroes(0, 65536));
    let mut passes = 0;
    let cqe = loop {
        passes += 1;
        assert!(passes <= 100, "no completion");
        h.poll();
        if let Some(c) = h.reap(1) {
            break c;
        }
    };
    assert_eq!(cqe.status(), Status::SUCCESS);
    assert_eq!(passes, 32);
    let (s, back) = h.read_blocks(1, 65535 - 7, 8);
    assert_eq!(s, Status::SUCCESS);
    assert!(back.iter().all(|&b| b == 0));
    // A small one still completes in its own pass.
    assert_eq!(h.cmd(1, write_zeroes(0, 8)).status(), Status::SUCCESS);
}

#[test]
fn deleting_the_sq_aborts_the_command_set_aside_and_a_reset_forgets_it() {
    let mut h = TestHost::ready(16);
    h.create_io_pair(2, 16);
    h.submit(2, deallocate(&h, &[(0, BLOCKS as u32)]));
    h.poll();
    assert!(h.ctrl.has_deferred_work());
    assert_eq!(h.admin(delete_sq(2)).status(), Status::SUCCESS);
    assert_eq!(
        h.reap(2).map(|c| c.status()),
        Some(Status::ABORTED_SQ_DELETION)
    );
    assert!(!h.ctrl.has_deferred_work());
    // Set one aside again, then reset: nothing is left to do or to post.
    h.submit(1, deallocate(&h, &[(0, BLOCKS as u32)]));
    h.poll();
    assert!(h.ctrl.has_deferred_work());
    h.ctrl.reset();
    assert!(!h.ctrl.has_deferred_work());
    assert_eq!(h.poll(), 0);
}
