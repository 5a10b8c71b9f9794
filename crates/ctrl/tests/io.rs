// SPDX-License-Identifier: Apache-2.0
//! The I/O path through real queues: data pointers (PRP, PRP lists, chained lists, SGLs),
//! every I/O command, error statuses, doorbell abuse, CQ backpressure, phase wrap,
//! interrupts, SMART counters and shadow doorbells.

#![allow(clippy::cast_possible_truncation)] // test data and SQE fields built from small values

use nvmemu_ctrl::test_utils::{
    BLOCK, TestHost, get_feature, get_log, layout, pattern, rw, sgl, sqe,
};
use nvmemu_spec::log_page::SmartLog;
use nvmemu_spec::{DataPtr, SglDescriptor, SglKind, Sqe, Status};
use zerocopy::IntoBytes;

#[test]
fn prp1_only_and_prp1_plus_prp2_round_trip() {
    let mut h = TestHost::ready(16);
    let one = pattern(512, 1);
    assert_eq!(h.write_blocks(1, 10, &one), Status::SUCCESS);
    assert_eq!(h.read_blocks(1, 10, 1), (Status::SUCCESS, one));
    // Two pages from an unaligned buffer: PRP1 with an offset plus PRP2.
    let data = pattern(4096, 2);
    h.mem.write(layout::DATA + 0x800, &data);
    let d = h.prps(layout::DATA + 0x800, 4096);
    assert!(matches!(d, DataPtr::Prp { prp2, .. } if prp2 != 0));
    assert_eq!(h.cmd(1, rw(0x01, 1, 100, 8, d)).status(), Status::SUCCESS);
    assert_eq!(h.read_blocks(1, 100, 8), (Status::SUCCESS, data));
}

#[test]
fn prp_list_round_trip() {
    let mut h = TestHost::ready(16);
    let data = pattern(64 * 1024, 3);
    assert_eq!(h.write_blocks(1, 1000, &data), Status::SUCCESS);
    assert_eq!(h.read_blocks(1, 1000, 128), (Status::SUCCESS, data));
}

#[test]
fn one_mib_through_a_chained_prp_list() {
    let mut h = TestHost::ready(16);
    let len = 1 << 20;
    let data = pattern(len, 4);
    // Scatter the pages in reverse order so nothing coalesces, PRP1 at an offset.
    let pages = len / 4096 + 1;
    let page = |i: usize| layout::DATA + ((pages - 1 - i) as u64) * 4096;
    let first_off = 0x200u64;
    let mut pos = 0usize;
    let first = 4096 - first_off as usize;
    h.mem.write(page(0) + first_off, &data[..first]);
    pos += first;
    let mut entries = Vec::new();
    for i in 1..pages {
        let n = (len - pos).min(4096);
        h.mem.write(page(i), &data[pos..pos + n]);
        entries.push(h.mem.iova(page(i)));
        pos += n;
    }
    assert_eq!(entries.len(), 256);
    // The list starts 8 entries before the end of its page: 7 data entries, then a chain.
    let list1 = layout::LISTS + 4096 - 64;
    let list2 = layout::LISTS + 0x2000;
    let mut l1: Vec<u64> = entries[..7].to_vec();
    l1.push(h.mem.iova(list2));
    h.mem.write(list1, l1.as_bytes());
    h.mem.write(list2, entries[7..].as_bytes());
    let d = DataPtr::Prp {
        prp1: h.mem.iova(page(0) + first_off),
        prp2: h.mem.iova(list1),
    };
    assert_eq!(
        h.cmd(1, rw(0x01, 1, 4096, 2048, d)).status(),
        Status::SUCCESS
    );
    // Read it back contiguously and compare.
    let back: Vec<u8> = {
        let mut out = Vec::new();
        for chunk in 0..8u64 {
            let (s, v) = h.read_blocks(1, 4096 + chunk * 256, 256);
            assert_eq!(s, Status::SUCCESS);
            out.extend(v);
        }
        out
    };
    assert!(back == data, "1 MiB round trip differs");
    // One byte more than MDTS (1 MiB) is Invalid Field.
    assert_eq!(
        h.cmd(1, rw(0x02, 1, 0, 2049, d)).status(),
        Status::INVALID_FIELD
    );
}

#[test]
fn sgl_data_block_segments_and_bit_bucket() {
    let mut h = TestHost::ready(16);
    let data = pattern(2048, 5);
    h.mem.write(layout::DATA, &data);
    let one = SglDescriptor::new(SglKind::DataBlock {
        addr: h.mem.iova(layout::DATA),
        len: 2048,
    });
    assert_eq!(
        h.cmd(1, rw(0x01, 1, 50, 4, sgl(one))).status(),
        Status::SUCCESS
    );
    // Read back through a Segment -> Last Segment chain with a bit bucket in the middle.
    let out = layout::DATA + 0x10000;
    h.mem.write(out, &[0xEE; 2048]);
    let last = [SglDescriptor::new(SglKind::DataBlock {
        addr: h.mem.iova(out + 1024),
        len: 1024,
    })];
    h.mem.write(layout::LISTS + 0x100, last.as_bytes());
    let seg = [
        SglDescriptor::new(SglKind::DataBlock {
            addr: h.mem.iova(out),
            len: 512,
        }),
        SglDescriptor::new(SglKind::BitBucket { len: 512 }),
        SglDescriptor::new(SglKind::LastSegment {
            addr: h.mem.iova(layout::LISTS + 0x100),
            len: 16,
        }),
    ];
    h.mem.write(layout::LISTS, seg.as_bytes());
    let d = SglDescriptor::new(SglKind::Segment {
        addr: h.mem.iova(layout::LISTS),
        len: 48,
    });
    assert_eq!(
        h.cmd(1, rw(0x02, 1, 50, 4, sgl(d))).status(),
        Status::SUCCESS
    );
    let back = h.mem.read_vec(out, 2048);
    assert_eq!(&back[..512], &data[..512]);
    assert_eq!(
        &back[512..1024],
        &[0xEE; 512][..],
        "bit bucket leaves memory alone"
    );
    assert_eq!(&back[1024..], &data[1024..]);
    // Errors.
    let short = SglDescriptor::new(SglKind::DataBlock {
        addr: h.mem.iova(layout::DATA),
        len: 1000,
    });
    assert_eq!(
        h.cmd(1, rw(0x01, 1, 50, 2, sgl(short))).status(),
        Status::DATA_SGL_LENGTH_INVALID
    );
    let keyed = SglDescriptor::new(SglKind::Unsupported { sgl_id: 0x40 });
    assert_eq!(
        h.cmd(1, rw(0x01, 1, 50, 1, sgl(keyed))).status(),
        Status::SGL_DESCRIPTOR_TYPE_INVALID
    );
    let bucket = SglDescriptor::new(SglKind::BitBucket { len: 512 });
    assert_eq!(
        h.cmd(1, rw(0x01, 1, 50, 1, sgl(bucket))).status(),
        Status::SGL_DESCRIPTOR_TYPE_INVALID
    );
}

#[test]
fn write_zeroes_deallocate_and_compare() {
    let mut h = TestHost::ready(16);
    let data = pattern(8 * 512, 6);
    assert_eq!(h.write_blocks(1, 0, &data), Status::SUCCESS);
    // Compare: equal, then one byte off.
    let d = h.prps(layout::DATA, 4096);
    assert_eq!(h.cmd(1, rw(0x05, 1, 0, 8, d)).status(), Status::SUCCESS);
    h.mem.write(layout::DATA + 4000, &[data[4000] ^ 1]);
    assert_eq!(
        h.cmd(1, rw(0x05, 1, 0, 8, d)).status(),
        Status::COMPARE_FAILURE
    );
    // Write Zeroes on blocks 0..2 (DEAC on 2..4).
    let wz = |slba: u64, n: u32, deac: bool| Sqe {
        nsid: 1,
        cdw10: slba as u32,
        cdw12: (n - 1) | (u32::from(deac) << 25),
        ..sqe(0x08, DataPtr::Prp { prp1: 0, prp2: 0 })
    };
    assert_eq!(h.cmd(1, wz(0, 2, false)).status(), Status::SUCCESS);
    assert_eq!(h.cmd(1, wz(2, 2, true)).status(), Status::SUCCESS);
    // Deallocate blocks 6..8 with DSM (two ranges, one empty).
    let ranges: [u32; 8] = [0, 2, 6, 0, 0, 0, 5, 0];
    h.mem.write(layout::LISTS, ranges.as_bytes());
    let dsm = Sqe {
        nsid: 1,
        cdw10: 1,
        cdw11: 1 << 2,
        ..sqe(
            0x09,
            DataPtr::Prp {
                prp1: h.mem.iova(layout::LISTS),
                prp2: 0,
            },
        )
    };
    assert_eq!(h.cmd(1, dsm).status(), Status::SUCCESS);
    let (s, back) = h.read_blocks(1, 0, 8);
    assert_eq!(s, Status::SUCCESS);
    assert!(back[..4 * 512].iter().all(|&b| b == 0));
    assert_eq!(&back[4 * 512..6 * 512], &data[4 * 512..6 * 512]);
    assert!(back[6 * 512..].iter().all(|&b| b == 0));
    // A DSM range past the end changes nothing.
    let bad: [u32; 8] = [0, 1, 4, 0, 0, 2, (1u64 << 17) as u32 - 1, 0];
    h.mem.write(layout::LISTS, bad.as_bytes());
    assert_eq!(h.cmd(1, dsm).status(), Status::LBA_OUT_OF_RANGE);
    assert_eq!(h.read_blocks(1, 4, 1).1, data[4 * 512..5 * 512].to_vec());
    // Flush: a namespace and the broadcast NSID.
    let flush = |nsid| Sqe {
        nsid,
        ..sqe(0x00, DataPtr::Prp { prp1: 0, prp2: 0 })
    };
    assert_eq!(h.cmd(1, flush(1)).status(), Status::SUCCESS);
    assert_eq!(h.cmd(1, flush(0xFFFF_FFFF)).status(), Status::SUCCESS);
    assert_eq!(h.cmd(1, flush(2)).status(), Status::INVALID_NAMESPACE);
}

#[test]
fn io_error_statuses() {
    let mut h = TestHost::ready(16);
    let d = h.prps(layout::DATA, 512);
    let last = (1u64 << 17) - 1;
    let mut unaligned_list = h.prps(layout::DATA, 3 * 4096);
    if let DataPtr::Prp { prp2, .. } = &mut unaligned_list {
        h.mem.write(
            layout::LISTS,
            [h.mem.iova(layout::DATA + 4096 + 8), 0u64].as_bytes(),
        );
        *prp2 = h.mem.iova(layout::LISTS);
    }
    let cases: Vec<(Sqe, Status)> = vec![
        (rw(0x7E, 1, 0, 1, d), Status::INVALID_OPCODE),
        (rw(0x02, 0, 0, 1, d), Status::INVALID_NAMESPACE),
        (rw(0x02, 2, 0, 1, d), Status::INVALID_NAMESPACE),
        (rw(0x02, 0xFFFF_FFFF, 0, 1, d), Status::INVALID_NAMESPACE),
        (rw(0x02, 1, last, 2, d), Status::LBA_OUT_OF_RANGE),
        (rw(0x02, 1, u64::MAX, 1, d), Status::LBA_OUT_OF_RANGE),
        (rw(0x02, 1, last, 1, d), Status::SUCCESS),
        (rw(0x02, 1, 0, 2049, d), Status::INVALID_FIELD),
        (
            rw(
                0x02,
                1,
                0,
                1,
                DataPtr::Prp {
                    prp1: 0x10_0000,
                    prp2: 0,
                },
            ),
            Status::DATA_TRANSFER_ERROR,
        ),
        (
            rw(
                0x01,
                1,
                0,
                16,
                DataPtr::Prp {
                    prp1: h.mem.iova(layout::DATA),
                    prp2: 0x5000,
                },
            ),
            Status::DATA_TRANSFER_ERROR,
        ),
        (
            rw(
                0x02,
                1,
                0,
                16,
                DataPtr::Prp {
                    prp1: h.mem.iova(layout::DATA),
                    prp2: h.mem.iova(layout::DATA + 4096 + 4),
                },
            ),
            Status::PRP_OFFSET_INVALID,
        ),
        (
            rw(0x02, 1, 0, 24, unaligned_list),
            Status::PRP_OFFSET_INVALID,
        ),
        (
            Sqe {
                cdw0: rw(0x02, 1, 0, 1, d).cdw0 | (3 << 14),
                ..rw(0x02, 1, 0, 1, d)
            },
            Status::INVALID_FIELD,
        ),
    ];
    for (i, (s, want)) in cases.into_iter().enumerate() {
        assert_eq!(h.cmd(1, s).status(), want, "case {i}");
    }
    assert_eq!(h.ctrl.stats().errors, 12);
}

#[test]
fn doorbells_beyond_the_queue_size_are_ignored() {
    let mut h = TestHost::ready(16);
    assert_eq!(
        h.admin(nvmemu_ctrl::test_utils::set_feature(0x0B, 0))
            .status(),
        Status::SUCCESS
    );
    let aer = h.submit(0, nvmemu_ctrl::test_utils::bare(0x0C));
    h.poll();
    // SQ 1 tail 16 (size 16) and 0xFFFF: nothing happens, repeatedly.
    // (Only bits 15:0 are the value, so 0x1_0010 is 16 too.)
    let mut completed = 0;
    for v in [16u32, 0xFFFF, 0x1_0010] {
        h.doorbells.store_release_u32(8, v).unwrap();
        completed += h.poll();
    }
    assert_eq!(completed, 1, "the AER is the only completion");
    // The first bad write raised one Invalid Doorbell Write Value event.
    let c = h.reap(0).expect("AEN");
    assert_eq!((c.cid, c.dw0), (aer.0, 0x0001_0100));
    assert!(h.reap(0).is_none());
    assert_eq!(h.ctrl.stats().bad_doorbells, 1);
    // A valid tail again works.
    h.doorbells.store_release_u32(8, 0).unwrap();
    assert_eq!(h.write_blocks(1, 0, &[1; 512]), Status::SUCCESS);
}

#[test]
fn cq_full_backpressure_and_phase_wrap() {
    let mut h = TestHost::new();
    h.enable();
    // CQ of 4 entries (3 usable), SQ of 16.
    let cq = h.mem.iova(layout::IO_CQ);
    let sq = h.mem.iova(layout::IO_SQ);
    assert_eq!(
        h.admin(nvmemu_ctrl::test_utils::create_cq(1, 4, cq, 1))
            .status(),
        Status::SUCCESS
    );
    assert_eq!(
        h.admin(nvmemu_ctrl::test_utils::create_sq(1, 16, sq, 1))
            .status(),
        Status::SUCCESS
    );
    h.queues[1] = Some(nvmemu_ctrl::test_utils::HostQueue {
        qid: nvmemu_spec::Qid(1),
        size: 16,
        sq_off: layout::IO_SQ,
        cq_off: layout::IO_CQ,
        sq_tail: 0,
        cq_head: 0,
        phase: true,
    });
    let flush = Sqe {
        nsid: 1,
        ..sqe(0x00, DataPtr::Prp { prp1: 0, prp2: 0 })
    };
    for _ in 0..10 {
        h.submit(1, flush);
    }
    // The host-side queue bookkeeping uses the SQ size for both rings, so reap by hand.
    assert_eq!(h.poll(), 3, "only as many as the CQ can hold");
    assert_eq!(h.poll(), 0, "no room until the host moves the CQ head");
    let mut seen = 0;
    let mut head = 0u32;
    let mut phase = true;
    while seen < 10 {
        let mut got = 0;
        loop {
            let cqe: nvmemu_spec::Cqe = h.mem.read_obj(layout::IO_CQ + u64::from(head) * 16);
            if cqe.phase() != phase {
                break;
            }
            assert_eq!(cqe.status(), Status::SUCCESS);
            head += 1;
            if head == 4 {
                head = 0;
                phase = !phase;
            }
            got += 1;
        }
        seen += got;
        h.doorbells.store_release_u32(12, head).unwrap();
        h.poll();
    }
    assert_eq!(seen, 10);
    assert!(!phase || head != 0, "the ring wrapped at least twice");
    assert_eq!(h.ctrl.stats().queues[1].1.commands, 10);
}

#[test]
fn one_interrupt_per_cq_per_poll() {
    let mut h = TestHost::ready(16);
    h.irqs.0.clear();
    let flush = Sqe {
        nsid: 1,
        ..sqe(0x00, DataPtr::Prp { prp1: 0, prp2: 0 })
    };
    for _ in 0..5 {
        h.submit(1, flush);
    }
    assert_eq!(h.poll(), 5);
    assert_eq!(h.irqs.0, vec![1]);
    assert_eq!(h.poll(), 0);
    assert_eq!(h.irqs.0, vec![1]);
}

#[test]
fn smart_counters_move_with_io() {
    let mut h = TestHost::ready(16);
    let before = h.ctrl.stats();
    for i in 0..3 {
        assert_eq!(h.write_blocks(1, i * 8, &pattern(4096, 7)), Status::SUCCESS);
    }
    assert_eq!(h.read_blocks(1, 0, 2).0, Status::SUCCESS);
    let s = h.ctrl.stats();
    assert_eq!(s.host_write_commands - before.host_write_commands, 3);
    assert_eq!(s.host_read_commands - before.host_read_commands, 1);
    assert_eq!(s.bytes_written, 3 * 4096);
    assert_eq!(s.bytes_read, 2 * BLOCK);
    assert_eq!((s.data_units_written, s.data_units_read), (1, 1));
    let q1 = s.queues.iter().find(|(q, _)| q.0 == 1).unwrap().1;
    assert_eq!((q1.commands, q1.bytes_written), (4, 3 * 4096));
    let g = get_log(&h, 0x02, 128, 0, 0);
    assert_eq!(h.admin(g).status(), Status::SUCCESS);
    let smart: SmartLog = h.mem.read_obj(layout::ADMIN_DATA);
    assert_eq!(u128::from_le_bytes(smart.host_write_commands), 3);
    assert_eq!(u128::from_le_bytes(smart.host_read_commands), 1);
    assert_eq!(u128::from_le_bytes(smart.data_units_written), 1);
    assert_eq!(u128::from_le_bytes(smart.power_cycles), 1);
}

#[test]
fn shadow_doorbells_drive_io_queues() {
    let mut h = TestHost::new();
    h.enable();
    h.enable_shadow_doorbells();
    h.create_io_pair(1, 16);
    h.shadow = true;
    let data = pattern(512, 9);
    assert_eq!(h.write_blocks(1, 3, &data), Status::SUCCESS);
    assert_eq!(h.read_blocks(1, 3, 1), (Status::SUCCESS, data));
    // Nothing went through the real SQ 1 doorbell; the event index follows the tail.
    assert_eq!(h.doorbells.load_acquire_u32(8).unwrap(), 0);
    assert_eq!(
        h.mem
            .region()
            .load_acquire_u32(layout::EVENT_IDX + 8)
            .unwrap(),
        2
    );
    assert_eq!(
        h.mem
            .region()
            .load_acquire_u32(layout::EVENT_IDX + 12)
            .unwrap(),
        u32::MAX
    );
    // A disable drops the shadow buffers: after re-enabling, real doorbells work again.
    h.write_reg32(nvmemu_spec::regs::CC, 0);
    h.shadow = false;
    h.enable();
    h.create_io_pair(1, 16);
    assert_eq!(h.write_blocks(1, 3, &[0; 512]), Status::SUCCESS);
}

#[test]
fn prefetching_ahead_of_polling_changes_no_result() {
    // One queue of 16 entries; each round queues 1-7 reads of distinct blocks into
    // distinct buffers, prefetches (sometimes twice, sometimes between submissions), then
    // polls and checks every completion and every byte, for many laps of the ring.
    let mut h = TestHost::ready(16);
    for b in 0..8u64 {
        assert_eq!(
            h.write_blocks(1, b * 8, &pattern(4096, b as u8)),
            Status::SUCCESS
        );
    }
    let buf = |i: u64| layout::DATA + 0x10000 + i * 4096;
    for round in 0..40u64 {
        let n = 1 + round % 7;
        let mut cids = Vec::new();
        for i in 0..n {
            let block = (round + i) % 8;
            let d = h.prps(buf(i), 4096);
            cids.push((h.submit(1, rw(0x02, 1, block * 8, 8, d)), i, block));
            if round % 3 == 0 && i == 0 {
                h.ctrl.prefetch_reads();
            }
        }
        h.ctrl.prefetch_reads();
        if round % 2 == 0 {
            h.ctrl.prefetch_reads();
        }
        assert_eq!(h.poll(), n as usize);
        for (cid, i, block) in cids {
            let c = h.reap(1).expect("a completion");
            assert_eq!((c.cid, c.status()), (cid.0, Status::SUCCESS));
            assert_eq!(h.mem.read_vec(buf(i), 4096), pattern(4096, block as u8));
        }
    }
    // A hostile tail moved back behind what was prefetched: nothing runs, nothing breaks.
    let d = h.prps(buf(0), 4096);
    let cid = h.submit(1, rw(0x02, 1, 0, 8, d));
    h.ctrl.prefetch_reads();
    let tail = h.queues[1].as_ref().unwrap().sq_tail;
    let back = (tail + 15) % 16;
    h.doorbells.store_release_u32(8, back).unwrap();
    h.ctrl.prefetch_reads();
    assert_eq!(h.poll(), 0);
    h.doorbells.store_release_u32(8, tail).unwrap();
    h.ctrl.prefetch_reads();
    assert_eq!(h.poll(), 1);
    let c = h.reap(1).expect("a completion");
    assert_eq!((c.cid, c.status()), (cid.0, Status::SUCCESS));
    assert_eq!(h.mem.read_vec(buf(0), 4096), pattern(4096, 0));
}

#[test]
fn a_command_rung_after_the_prefetch_is_taken_by_the_same_poll() {
    // A poller serving several controllers prefetches each one while polling the one before
    // it; the poll reads the doorbells again, so how promptly a command is taken does not
    // change: an I/O or admin command rung in between runs in that same poll.
    let mut h = TestHost::ready(16);
    assert_eq!(h.write_blocks(1, 0, &pattern(512, 4)), Status::SUCCESS);
    h.ctrl.prefetch_reads();
    let io = h.submit(1, rw(0x02, 1, 0, 1, h.prps(layout::DATA, 512)));
    // Get Features, Number of Queues: an admin command without data.
    let admin = h.submit(0, get_feature(0x07, 0, 0));
    assert_eq!(h.poll(), 2);
    let done = |c: Option<nvmemu_spec::Cqe>| c.map(|c| (c.cid, c.status()));
    assert_eq!(done(h.reap(1)), Some((io.0, Status::SUCCESS)));
    assert_eq!(done(h.reap(0)), Some((admin.0, Status::SUCCESS)));
    assert_eq!(h.mem.read_vec(layout::DATA, 512), pattern(512, 4));
}

#[test]
fn an_sqe_is_copied_out_once_and_a_later_rewrite_of_its_slot_is_not_run() {
    // CONTRIBUTING: an SQE is copied out of shared memory once and that copy is what runs.
    // The prefetch takes the copy; the host then rewrites the slot (which it may not do
    // before the command completes) with an opcode the controller refuses.
    let mut h = TestHost::ready(16);
    assert_eq!(h.write_blocks(1, 0, &pattern(512, 7)), Status::SUCCESS);
    let q = h.queues[1].clone().unwrap();
    let slot = q.sq_off + u64::from(q.sq_tail) * 64;
    let d = h.prps(layout::DATA, 512);
    let cid = h.submit(1, rw(0x02, 1, 0, 1, d));
    h.ctrl.prefetch_reads();
    let mut rewritten: Sqe = h.mem.read_obj(slot);
    rewritten.cdw0 = (rewritten.cdw0 & !0xFF) | 0x7F;
    h.mem.write_obj(slot, &rewritten);
    assert_eq!(h.poll(), 1);
    let c = h.reap(1).expect("a completion");
    assert_eq!((c.cid, c.status()), (cid.0, Status::SUCCESS));
    assert_eq!(h.mem.read_vec(layout::DATA, 512), pattern(512, 7));
}
