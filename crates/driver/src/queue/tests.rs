// SPDX-License-Identifier: Apache-2.0
//! Ring tests: SQE placement, CID = slot, batched doorbells, phase tags, hostile CQEs.

use super::*;
use nvmemu_mem::Iova;

fn setup(depth: u16, list_bytes: u64) -> (DmaPool, Arc<MmapRegion>, Ring) {
    let pool = DmaPool::new(256 * 1024, Iova(1 << 32)).unwrap();
    let dbs = Arc::new(MmapRegion::anonymous(4096).unwrap());
    let db = Doorbells::new(Arc::clone(&dbs), Qid(1), 0).unwrap();
    let ring = Ring::new(&pool, Qid(1), depth, depth, list_bytes, db).unwrap();
    (pool, dbs, ring)
}

/// What a controller does to post a completion: body first, then the status/phase word.
fn post(ring: &Ring, index: u16, cid: u16, sqhd: u16, status: Status, phase: bool) {
    let cqe = Cqe::new(Cid(cid), ring.qid(), sqhd, status, 0xD00D, phase);
    let off = u64::from(index) * CQE_BYTES;
    let mut body = cqe;
    body.status_phase = if phase { 0 } else { 1 };
    ring.cq().write_obj(off, &body).unwrap();
    ring.cq()
        .store_release_u16(off + CQE_STATUS_OFFSET, cqe.status_phase)
        .unwrap();
}

fn sqe_at(ring: &Ring, index: u16) -> Sqe {
    ring.sq().read_obj(u64::from(index) * SQE_BYTES).unwrap()
}

fn read_sqe(opcode: u8) -> Sqe {
    Sqe {
        cdw0: u32::from(opcode),
        nsid: 1,
        ..Sqe::default()
    }
}

#[test]
fn push_writes_sqe_with_slot_cid_and_ring_batches_the_doorbell() {
    let (_pool, dbs, mut ring) = setup(8, 0);
    let sq_db = 0x8; // qid 1, stride 4
    let a = ring.push(read_sqe(2), 100, None).unwrap();
    let b = ring.push(read_sqe(1), 101, None).unwrap();
    assert_ne!(a, b);
    assert_eq!(sqe_at(&ring, 0).cid(), a);
    assert_eq!(sqe_at(&ring, 0).opcode(), 2);
    assert_eq!(sqe_at(&ring, 1).cid(), b);
    assert_eq!(
        dbs.load_acquire_u32(sq_db).unwrap(),
        0,
        "not rung before ring()"
    );
    ring.ring().unwrap();
    assert_eq!(dbs.load_acquire_u32(sq_db).unwrap(), 2);
    assert_eq!(ring.outstanding(), 2);
}

#[test]
fn poll_reaps_by_phase_and_returns_tokens_and_status() {
    let (_pool, dbs, mut ring) = setup(4, 0);
    let a = ring.push(read_sqe(2), 7, None).unwrap();
    let b = ring.push(read_sqe(2), 8, None).unwrap();
    ring.ring().unwrap();
    let mut seen = vec![];
    assert_eq!(
        ring.poll(16, |t, c| seen.push((t, result_of(c).ok())))
            .unwrap(),
        0
    );
    post(&ring, 0, b.0, 2, Status::LBA_OUT_OF_RANGE, true);
    post(&ring, 1, a.0, 2, Status::SUCCESS, true);
    assert_eq!(
        ring.poll(16, |t, c| seen.push((t, result_of(c).ok())))
            .unwrap(),
        2
    );
    assert_eq!(seen, vec![(8, None), (7, Some(0xD00D))]);
    assert_eq!(dbs.load_acquire_u32(0xC).unwrap(), 2, "CQ head doorbell");
    assert_eq!(ring.outstanding(), 0);
}

#[test]
fn status_becomes_typed_error() {
    let cqe = Cqe::new(Cid(0), Qid(1), 0, Status::COMPARE_FAILURE, 0, true);
    assert!(matches!(
        result_of(&cqe),
        Err(NvmeError::Status(s)) if s == Status::COMPARE_FAILURE
    ));
}

#[test]
fn phase_flips_after_wrap() {
    let (_pool, _dbs, mut ring) = setup(3, 0);
    let mut tokens = vec![];
    // Three rounds through a 3-entry CQ, two commands at a time (2 slots).
    let mut cq_index = 0u16;
    let mut phase = true;
    for round in 0..3u64 {
        let c1 = ring.push(read_sqe(2), round * 10, None).unwrap();
        let c2 = ring.push(read_sqe(2), round * 10 + 1, None).unwrap();
        assert!(ring.push(read_sqe(2), 99, None).is_err(), "only 2 slots");
        ring.ring().unwrap();
        let sqhd = ring.sq_tail; // the device fetched everything
        for cid in [c1, c2] {
            post(&ring, cq_index, cid.0, sqhd, Status::SUCCESS, phase);
            cq_index += 1;
            if cq_index == 3 {
                cq_index = 0;
                phase = !phase;
            }
        }
        assert_eq!(ring.poll(16, |t, _| tokens.push(t)).unwrap(), 2);
    }
    assert_eq!(tokens, vec![0, 1, 10, 11, 20, 21]);
}

#[test]
fn stale_phase_entries_are_not_reaped() {
    let (_pool, _dbs, mut ring) = setup(4, 0);
    let a = ring.push(read_sqe(2), 1, None).unwrap();
    ring.ring().unwrap();
    // An entry with the old phase (0) is a leftover, not a completion.
    post(&ring, 0, a.0, 1, Status::SUCCESS, false);
    assert_eq!(
        ring.poll(16, |_, _| panic!("reaped a stale entry"))
            .unwrap(),
        0
    );
}

#[test]
fn unknown_and_duplicate_cids_are_errors_not_panics() {
    let (_pool, dbs, mut ring) = setup(8, 0);
    let a = ring.push(read_sqe(2), 1, None).unwrap();
    ring.ring().unwrap();
    post(&ring, 0, a.0, 1, Status::SUCCESS, true);
    post(&ring, 1, a.0, 1, Status::SUCCESS, true); // duplicate
    post(&ring, 2, 6000, 1, Status::SUCCESS, true); // never issued
    let mut n = 0;
    let err = ring.poll(16, |_, _| n += 1).unwrap_err();
    assert!(matches!(err, NvmeError::UnknownCid { cid: Cid(c), .. } if c == a.0));
    assert_eq!(n, 1);
    assert_eq!(
        dbs.load_acquire_u32(0xC).unwrap(),
        2,
        "consumed entries acknowledged"
    );
    let err = ring.poll(16, |_, _| n += 1).unwrap_err();
    assert!(matches!(err, NvmeError::UnknownCid { cid: Cid(6000), .. }));
    assert_eq!(dbs.load_acquire_u32(0xC).unwrap(), 3);
}

#[test]
fn foreign_sqid_and_bad_sqhd_are_errors() {
    let (_pool, _dbs, mut ring) = setup(4, 0);
    let a = ring.push(read_sqe(2), 1, None).unwrap();
    let mut cqe = Cqe::new(a, Qid(2), 0, Status::SUCCESS, 0, true);
    ring.cq().write_obj(0, &cqe).unwrap();
    assert!(matches!(
        ring.poll(1, |_, _| {}),
        Err(NvmeError::WrongSqid { sqid: 2, .. })
    ));
    cqe = Cqe::new(a, Qid(1), 9, Status::SUCCESS, 0, true);
    ring.cq().write_obj(CQE_BYTES, &cqe).unwrap();
    assert!(matches!(
        ring.poll(1, |_, _| {}),
        Err(NvmeError::BadSqHead { sqhd: 9, .. })
    ));
    // The command is still in flight and completes normally.
    post(&ring, 2, a.0, 1, Status::SUCCESS, true);
    let mut got = None;
    assert_eq!(ring.poll(1, |t, _| got = Some(t)).unwrap(), 1);
    assert_eq!(got, Some(1));
}

#[test]
fn queue_full_until_a_completion_frees_a_slot() {
    let (_pool, _dbs, mut ring) = setup(4, 0);
    let cids: Vec<_> = (0..3)
        .map(|t| ring.push(read_sqe(2), t, None).unwrap())
        .collect();
    assert!(matches!(
        ring.push(read_sqe(2), 3, None),
        Err(NvmeError::QueueFull { slots: 3, .. })
    ));
    ring.ring().unwrap();
    post(&ring, 0, cids[1].0, 3, Status::SUCCESS, true);
    assert_eq!(ring.poll(8, |_, _| {}).unwrap(), 1);
    let again = ring.push(read_sqe(2), 4, None).unwrap();
    assert_eq!(again, cids[1], "freed slot reused");
    assert_eq!(sqe_at(&ring, 3).cid(), again);
}

#[test]
fn sq_head_lagging_behind_completions_still_blocks_overwrite() {
    let (_pool, _dbs, mut ring) = setup(4, 0);
    let cids: Vec<_> = (0..3)
        .map(|t| ring.push(read_sqe(2), t, None).unwrap())
        .collect();
    ring.ring().unwrap();
    // The device completes one command but reports SQHD 0: nothing was consumed.
    post(&ring, 0, cids[0].0, 0, Status::SUCCESS, true);
    ring.poll(8, |_, _| {}).unwrap();
    assert!(matches!(
        ring.push(read_sqe(2), 9, None),
        Err(NvmeError::QueueFull { .. })
    ));
}

#[test]
fn data_pointer_built_in_the_slot_list() {
    let (pool, _dbs, mut ring) = setup(4, 64);
    let buf = pool.alloc(5 * 4096).unwrap();
    let cid = ring.push(read_sqe(2), 1, Some((&buf, 4 * 4096))).unwrap();
    let sqe = sqe_at(&ring, 0);
    assert_eq!(sqe.dptr1, buf.iova().0);
    let list_iova = sqe.dptr2;
    // The slot's own list, packed behind slot 0's.
    let first = ring.prp_lists[0].iova().0;
    assert_eq!(list_iova, first + u64::from(cid.0) * 64);
    let prp = &ring.prp_lists[usize::from(cid.0)];
    assert_eq!(prp.iova().0, list_iova);
    let entries: Vec<u64> = (0..3).map(|i| prp.read_obj(i * 8).unwrap()).collect();
    assert_eq!(
        entries,
        vec![
            buf.iova().0 + 4096,
            buf.iova().0 + 8192,
            buf.iova().0 + 12288
        ]
    );
}

#[test]
fn api_errors_leave_the_slot_free() {
    let (pool, _dbs, mut ring) = setup(4, 16);
    let buf = pool.alloc(4096).unwrap();
    assert!(matches!(
        ring.push(read_sqe(2), 1, Some((&buf, 8192))),
        Err(NvmeError::BufferTooSmall {
            needed: 8192,
            len: 4096
        })
    ));
    let big = pool.alloc(16 * 4096).unwrap();
    assert!(matches!(
        ring.push(read_sqe(2), 1, Some((&big, 16 * 4096))),
        Err(NvmeError::TransferTooLarge { .. })
    ));
    assert_eq!(ring.outstanding(), 0);
    assert_eq!(ring.sq_tail, 0);
}

#[test]
fn buffer_is_held_until_completion() {
    let (pool, _dbs, mut ring) = setup(4, 0);
    let free0 = pool.free_bytes();
    let buf = pool.alloc(4096).unwrap();
    let cid = ring.push(read_sqe(2), 1, Some((&buf, 4096))).unwrap();
    drop(buf);
    assert_eq!(
        pool.free_bytes(),
        free0 - 4096,
        "in-flight buffer not freed"
    );
    post(&ring, 0, cid.0, 1, Status::SUCCESS, true);
    ring.poll(1, |_, _| {}).unwrap();
    assert_eq!(pool.free_bytes(), free0);
}

/// A deeper CQ than SQ: the head doorbell is written only once more than `cq_depth - depth`
/// entries are consumed, and a device that posts whenever its view of the CQ (tail against
/// the last head doorbell) is not full never finds it full.
#[test]
fn a_deeper_cq_defers_the_head_doorbell_and_never_fills() {
    for (depth, cq_depth) in [(8u16, 32u16), (8, 9), (5, 5), (16, 64)] {
        let pool = DmaPool::new(256 * 1024, Iova(1 << 32)).unwrap();
        let dbs = Arc::new(MmapRegion::anonymous(4096).unwrap());
        let db = Doorbells::new(Arc::clone(&dbs), Qid(1), 0).unwrap();
        let mut ring = Ring::new(&pool, Qid(1), depth, cq_depth, 0, db).unwrap();
        assert_eq!(ring.cq_depth(), cq_depth);
        let slack = cq_depth - depth;
        let (mut dev_tail, mut dev_phase, mut dev_sq_head) = (0u16, true, 0u16);
        let mut rng = 0x1234_5678_u64;
        let (mut completed, mut doorbells, mut last_db) = (0u64, 0u64, 0u32);
        let mut unacked = 0u16;
        while completed < 2000 {
            while ring.push(read_sqe(2), 1, None).is_ok() {}
            ring.ring().unwrap();
            // The device completes a random number of the commands it has fetched.
            let sq_tail = u16::try_from(dbs.load_acquire_u32(0x8).unwrap()).unwrap();
            rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            for _ in 0..(rng >> 60) {
                if dev_sq_head == sq_tail {
                    break;
                }
                let head = u16::try_from(dbs.load_acquire_u32(0xC).unwrap()).unwrap();
                let used = (dev_tail + cq_depth - head) % cq_depth;
                assert!(
                    used < cq_depth - 1,
                    "device found the CQ full ({depth}/{cq_depth})"
                );
                let cid = sqe_at(&ring, dev_sq_head).cid().0;
                dev_sq_head = (dev_sq_head + 1) % depth;
                post(
                    &ring,
                    dev_tail,
                    cid,
                    dev_sq_head,
                    Status::SUCCESS,
                    dev_phase,
                );
                dev_tail = (dev_tail + 1) % cq_depth;
                if dev_tail == 0 {
                    dev_phase = !dev_phase;
                }
            }
            let max = usize::try_from(1 + (rng >> 61)).unwrap();
            let n = ring.poll(max, |_, _| {}).unwrap();
            completed += n as u64;
            unacked += u16::try_from(n).unwrap();
            // Between two doorbells the head moves by at most slack + depth - 1 < cq_depth,
            // so every doorbell write changes the value.
            let now = dbs.load_acquire_u32(0xC).unwrap();
            if now != last_db {
                doorbells += 1;
                last_db = now;
                assert!(unacked > slack, "acknowledged early ({unacked} <= {slack})");
                unacked = 0;
            }
            assert!(unacked <= slack, "left {unacked} entries unacknowledged");
        }
        if slack > 0 {
            assert!(
                doorbells <= completed / u64::from(slack),
                "{doorbells} doorbells"
            );
        }
    }
}

#[test]
fn a_deep_queue_fits_a_physical_pool_whose_lists_outgrow_one_huge_page() {
    // 1023 slots x 8 KiB of list = 8 MiB: more than one 2 MiB page can hold in one piece.
    let pool = DmaPool::with_huge_page_addrs(16 << 20, (0..8).map(|i| (i + 1) << 30).collect());
    let dbs = Arc::new(MmapRegion::anonymous(4096).unwrap());
    let db = Doorbells::new(Arc::clone(&dbs), Qid(1), 0).unwrap();
    let ring = Ring::new(&pool, Qid(1), 1024, 1024, 8192, db).unwrap();
    assert_eq!(ring.prp_lists.len(), 1023);
    for list in &ring.prp_lists {
        // Each list lies inside one huge page, so the device sees it contiguous.
        let at = list.iova().0;
        assert_eq!(
            at >> 21,
            (at + 8191) >> 21,
            "list at {at:#x} crosses a huge page"
        );
    }
}
