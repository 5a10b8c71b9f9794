// SPDX-License-Identifier: Apache-2.0
//! What a command whose data pointer makes several pieces of client memory counts in its
//! bdev's statistics (`bdev_get_iostat`): one operation and one latency sample per command,
//! the bytes of every piece, as SPDK's bdev layer counts one bdev I/O.

#![allow(clippy::cast_possible_truncation)] // test data and SQE fields built from small values

use std::sync::Arc;

use nvmemu_bdev::{Bdev, BdevStatsSnapshot};
use nvmemu_ctrl::test_utils::{TestHost, layout, pattern, rw};
use nvmemu_spec::{DataPtr, Status};
use zerocopy::IntoBytes;

const PAGE: u64 = 4096;
/// Four pages, each in a piece of its own.
const LEN: u64 = 4 * PAGE;
const BLOCKS: u32 = (LEN / 512) as u32;

/// Host offsets of the command's pages: every other page of the data area, so no two
/// are adjacent and the walk cannot merge them.
fn page(i: u64) -> u64 {
    layout::DATA + 2 * i * PAGE
}

/// PRP1 on the first page, PRP2 a list of the other three.
fn scattered(h: &TestHost) -> DataPtr {
    let entries: Vec<u64> = (1..4).map(|i| h.mem.iova(page(i))).collect();
    h.mem.write(layout::LISTS, entries.as_bytes());
    DataPtr::Prp {
        prp1: h.mem.iova(page(0)),
        prp2: h.mem.iova(layout::LISTS),
    }
}

fn put(h: &TestHost, data: &[u8]) {
    for (i, p) in data.chunks(PAGE as usize).enumerate() {
        h.mem.write(page(i as u64), p);
    }
}

fn get(h: &TestHost) -> Vec<u8> {
    (0..4)
        .flat_map(|i| h.mem.read_vec(page(i), PAGE as usize))
        .collect()
}

fn bdev(h: &TestHost) -> Arc<Bdev> {
    Arc::clone(h.ctrl.namespaces().next().expect("namespace 1").bdev())
}

fn counts(h: &TestHost) -> BdevStatsSnapshot {
    bdev(h).stats().snapshot()
}

#[test]
fn a_read_write_or_compare_in_four_pieces_counts_one_operation_and_all_its_bytes() {
    let mut h = TestHost::ready(16);
    let data = pattern(LEN as usize, 7);
    put(&h, &data);
    let d = scattered(&h);
    let before = counts(&h);
    assert_eq!(
        h.cmd(1, rw(0x01, 1, 64, BLOCKS, d)).status(),
        Status::SUCCESS
    );
    let s = counts(&h);
    assert_eq!(s.num_write_ops - before.num_write_ops, 1);
    assert_eq!(s.bytes_written - before.bytes_written, LEN);

    put(&h, &vec![0; LEN as usize]);
    assert_eq!(
        h.cmd(1, rw(0x02, 1, 64, BLOCKS, d)).status(),
        Status::SUCCESS
    );
    assert_eq!(get(&h), data, "read back through the same scattered pages");
    let s = counts(&h);
    assert_eq!(s.num_read_ops - before.num_read_ops, 1);
    assert_eq!(s.bytes_read - before.bytes_read, LEN);

    assert_eq!(
        h.cmd(1, rw(0x05, 1, 64, BLOCKS, d)).status(),
        Status::SUCCESS
    );
    let s = counts(&h);
    assert_eq!(s.num_compare_ops - before.num_compare_ops, 1);
    assert_eq!(s.bytes_compared - before.bytes_compared, LEN);
    // A difference in the second piece: the verdict is reached there, and the Compare is
    // counted once with the bytes compared up to it.
    h.mem.write(page(1) + 9, &[data[PAGE as usize + 9] ^ 1]);
    let c = h.cmd(1, rw(0x05, 1, 64, BLOCKS, d));
    assert_eq!(c.status(), Status::COMPARE_FAILURE);
    let s = counts(&h);
    assert_eq!(s.num_compare_ops - before.num_compare_ops, 2);
    assert_eq!(s.bytes_compared - before.bytes_compared, LEN + 2 * PAGE);
}

#[test]
fn a_failed_piece_counts_no_operation() {
    let mut h = TestHost::ready(16);
    let before = counts(&h);
    // The last list entry is outside every DMA region: three pieces go, the fourth fails.
    let mut entries: Vec<u64> = (1..3).map(|i| h.mem.iova(page(i))).collect();
    entries.push(h.mem.iova(0) + layout::SIZE + PAGE);
    h.mem.write(layout::LISTS, entries.as_bytes());
    let d = DataPtr::Prp {
        prp1: h.mem.iova(page(0)),
        prp2: h.mem.iova(layout::LISTS),
    };
    for opcode in [0x01, 0x02, 0x05] {
        let c = h.cmd(1, rw(opcode, 1, 64, BLOCKS, d));
        assert_eq!(c.status(), Status::DATA_TRANSFER_ERROR, "opcode {opcode}");
    }
    let s = counts(&h);
    assert_eq!(
        (s.num_write_ops, s.num_read_ops, s.num_compare_ops),
        (
            before.num_write_ops,
            before.num_read_ops,
            before.num_compare_ops
        )
    );
}

#[test]
fn a_bdev_timing_itself_takes_one_latency_sample_per_command() {
    let mut h = TestHost::ready(16);
    let d = scattered(&h);
    // The bdev is timed and the controller is not timing its commands: the channel reads
    // the clock itself.
    bdev(&h).set_timed(true);
    assert_eq!(
        h.cmd(1, rw(0x02, 1, 0, BLOCKS, d)).status(),
        Status::SUCCESS
    );
    let l = counts(&h).read_latency;
    if nvmemu_mem::global_clock().is_tsc() {
        assert!(l.sum_ns > 0, "{l:?}");
        // Four samples, one per piece, would add up to at least four times the shortest.
        assert_eq!((l.min_ns, l.max_ns), (l.sum_ns, l.sum_ns), "{l:?}");
    }
}
