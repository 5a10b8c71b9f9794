// SPDX-License-Identifier: Apache-2.0
//! I/O queue life cycle: delete and re-create (with stale doorbells, shadow doorbells, other
//! sizes and vectors), deletion with commands queued, and resets with queues live. A queue
//! that is created again must start empty whatever its predecessor left behind: anything
//! else runs entries the host never submitted.

#![allow(clippy::cast_possible_truncation)] // test data built from small values

use std::sync::Arc;

use nvmemu_ctrl::test_utils::{
    TestHost, create_cq, create_sq, delete_cq, delete_sq, get_feature, layout, pattern, rw,
};
use nvmemu_mem::MmapRegion;
use nvmemu_spec::{Cqe, Status};

fn delete_pair(h: &mut TestHost, qid: u16) {
    assert_eq!(h.admin(delete_sq(qid)).status(), Status::SUCCESS);
    assert_eq!(h.admin(delete_cq(qid)).status(), Status::SUCCESS);
}

/// The entries of I/O CQ 1 the host would take as new (phase 1 from slot 0 on).
fn posted(h: &TestHost, entries: u64) -> Vec<Cqe> {
    (0..entries)
        .map(|i| h.mem.read_obj::<Cqe>(layout::IO_CQ + i * 16))
        .take_while(Cqe::phase)
        .collect()
}

/// Delete + re-create of queue pair 1 at the same ring addresses, with the old SQ tail (or
/// its shadow) at 3 and three Write SQEs of block 7 still in the ring.
fn recreated_pair_runs_nothing_stale(shadow: bool) {
    let mut h = TestHost::new();
    h.enable();
    if shadow {
        h.enable_shadow_doorbells();
    }
    h.create_io_pair(1, 16);
    h.shadow = shadow;
    let old = pattern(512, 1);
    for _ in 0..3 {
        assert_eq!(h.write_blocks(1, 7, &old), Status::SUCCESS);
    }
    delete_pair(&mut h, 1);

    // Were the stale entries run, block 7 would take this buffer's content.
    h.mem.write(layout::DATA, &pattern(512, 2));
    h.create_io_pair(1, 16);
    for _ in 0..4 {
        assert_eq!(h.poll(), 0, "nothing was submitted to the new queue");
    }
    assert!(
        posted(&h, 16).is_empty(),
        "no completion without a submission"
    );
    let (tail, head) = if shadow {
        let r = h.mem.region();
        (
            r.load_acquire_u32(layout::SHADOW + 8).unwrap_or(u32::MAX),
            r.load_acquire_u32(layout::SHADOW + 12).unwrap_or(u32::MAX),
        )
    } else {
        (
            h.doorbells.load_acquire_u32(8).unwrap_or(u32::MAX),
            h.doorbells.load_acquire_u32(12).unwrap_or(u32::MAX),
        )
    };
    assert_eq!((tail, head), (0, 0), "the new pair's doorbells start at 0");
    assert_eq!(h.read_blocks(1, 7, 1), (Status::SUCCESS, old));
}

#[test]
fn recreated_queue_pair_ignores_the_old_tail_doorbell() {
    recreated_pair_runs_nothing_stale(false);
}

#[test]
fn recreated_queue_pair_ignores_the_old_shadow_doorbells() {
    recreated_pair_runs_nothing_stale(true);
}

#[test]
fn recreated_cq_ignores_the_old_head_doorbell() {
    let mut h = TestHost::ready(4);
    for _ in 0..3 {
        assert_eq!(h.read_blocks(1, 0, 1).0, Status::SUCCESS);
    }
    // The host reaped three entries: CQ 1's head doorbell says 3.
    assert_eq!(h.doorbells.load_acquire_u32(12).unwrap(), 3);
    delete_pair(&mut h, 1);
    h.create_io_pair(1, 4);

    // Three reads fill the 4-entry CQ (nothing reaped); a fourth must wait for the host.
    let read = rw(0x02, 1, 0, 1, h.prps(layout::DATA, 512));
    let mut cids = Vec::new();
    for _ in 0..3 {
        cids.push(h.submit(1, read).0);
    }
    h.poll();
    cids.push(h.submit(1, read).0);
    for _ in 0..3 {
        h.poll();
    }
    let seen: Vec<u16> = posted(&h, 4).iter().map(|c| c.cid).collect();
    assert_eq!(seen, cids[..3], "a full CQ takes no fourth entry");

    let mut reaped = Vec::new();
    while let Some(c) = h.reap(1) {
        reaped.push(c.cid);
    }
    h.poll();
    reaped.extend(h.reap(1).map(|c| c.cid));
    assert_eq!(reaped, cids, "the fourth completes once the host made room");
}

#[test]
fn deleting_an_sq_aborts_the_commands_it_had_not_fetched() {
    let mut h = TestHost::ready(16);
    h.mem.write(layout::DATA, &[0xEE; 512]);
    let read = rw(0x02, 1, 0, 1, h.prps(layout::DATA, 512));
    let a = h.submit(1, read);
    let b = h.submit(1, read);
    // One poll: the admin queue is served first, so the delete finds both still queued.
    assert_eq!(h.admin(delete_sq(1)).status(), Status::SUCCESS);

    let got: Vec<(u16, Status, u16, u16)> = std::iter::from_fn(|| h.reap(1))
        .map(|c| (c.cid, c.status(), c.sq_head, c.sq_id))
        .collect();
    assert_eq!(
        got,
        [
            (a.0, Status::ABORTED_SQ_DELETION, 1, 1),
            (b.0, Status::ABORTED_SQ_DELETION, 2, 1),
        ]
    );
    assert_eq!(
        h.mem.read_vec(layout::DATA, 512),
        [0xEE; 512],
        "nothing ran"
    );
    assert!(h.irqs.0.contains(&1), "CQ 1's vector was raised");
    // The SQ is gone; its CQ can go now, and the pair comes back clean.
    assert_eq!(h.admin(delete_sq(1)).status(), Status::INVALID_QID);
    assert_eq!(h.admin(delete_cq(1)).status(), Status::SUCCESS);
    h.create_io_pair(1, 16);
    assert_eq!(h.read_blocks(1, 0, 1), (Status::SUCCESS, vec![0; 512]));
}

#[test]
fn a_pair_recreated_with_another_size_and_vector_uses_them() {
    let mut h = TestHost::ready(16);
    assert_eq!(h.write_blocks(1, 1, &pattern(512, 3)), Status::SUCCESS);
    delete_pair(&mut h, 1);

    let (sq_base, cq_base) = (h.mem.iova(layout::IO_SQ), h.mem.iova(layout::IO_CQ));
    assert_eq!(
        h.admin(create_cq(1, 64, cq_base, 5)).status(),
        Status::SUCCESS
    );
    assert_eq!(
        h.admin(create_sq(1, 64, sq_base, 1)).status(),
        Status::SUCCESS
    );
    let q = h.queues[1].as_mut().unwrap();
    (q.size, q.sq_tail, q.cq_head, q.phase) = (64, 0, 0, true);
    h.irqs.0.clear();

    // Twice around the larger ring, every block written and read back.
    for i in 0..150u64 {
        let data = pattern(512, i as u8);
        assert_eq!(h.write_blocks(1, 100 + i, &data), Status::SUCCESS);
        assert_eq!(h.read_blocks(1, 100 + i, 1), (Status::SUCCESS, data));
    }
    assert_eq!(h.read_blocks(1, 1, 1), (Status::SUCCESS, pattern(512, 3)));
    assert!(!h.irqs.0.is_empty());
    assert!(h.irqs.0.iter().all(|&v| v == 5 || v == 0), "{:?}", h.irqs.0);
}

/// Commands queued (doorbells rung) but not fetched when the controller is disabled or
/// reset are dropped with their queues: the next incarnation runs none of them.
fn reset_with_queues_live(reset: impl Fn(&mut TestHost)) {
    let mut h = TestHost::ready(16);
    h.mem.write(layout::DATA, &pattern(512, 4));
    let write = rw(0x01, 1, 9, 1, h.prps(layout::DATA, 512));
    h.submit(1, write);
    h.submit(1, write);
    h.submit(0, get_feature(0x01, 0, 0)); // Get Features, queued on the admin SQ

    reset(&mut h);
    assert_eq!(h.enable() & 1, 1);
    for _ in 0..3 {
        assert_eq!(h.poll(), 0, "nothing queued survives the reset");
    }
    assert!(h.reap(0).is_none());
    h.create_io_pair(1, 16);
    for _ in 0..3 {
        assert_eq!(h.poll(), 0);
    }
    assert_eq!(h.read_blocks(1, 9, 1), (Status::SUCCESS, vec![0; 512]));
}

#[test]
fn disabling_with_queues_live_drops_what_was_queued() {
    reset_with_queues_live(|h| {
        h.write_reg32(nvmemu_spec::regs::CC, 0);
        assert_eq!(h.read_reg32(nvmemu_spec::regs::CSTS) & 1, 0);
    });
}

#[test]
fn a_function_reset_with_queues_live_drops_what_was_queued() {
    reset_with_queues_live(|h| h.ctrl.reset());
}

/// What `nvmf_get_stats` reports per poll group: queue pairs created so far and live now.
fn qpairs(h: &TestHost) -> (u64, u64, u64, u64) {
    let s = h.ctrl.stats();
    (
        s.admin_qpairs_created,
        s.io_qpairs_created,
        s.current_admin_qpairs(),
        s.current_io_qpairs(),
    )
}

#[test]
fn queue_pair_counts_follow_creation_deletion_and_reset() {
    let mut h = TestHost::new();
    assert_eq!(qpairs(&h), (0, 0, 0, 0));
    h.enable();
    assert_eq!(qpairs(&h), (1, 0, 1, 0));
    h.create_io_pair(1, 16);
    h.create_io_pair(2, 16);
    assert_eq!(qpairs(&h), (1, 2, 1, 2));
    delete_pair(&mut h, 2);
    assert_eq!(qpairs(&h), (1, 2, 1, 1));
    // A refused creation (the CQ does not exist) creates nothing.
    let bad = h.admin(create_sq(3, 16, layout::IO_SQ, 3));
    assert!(!bad.status().is_success());
    assert_eq!(qpairs(&h), (1, 2, 1, 1));
    // Disable drops every queue; the totals stay, and the next enable adds an admin pair.
    h.write_reg32(nvmemu_spec::regs::CC, 0);
    assert_eq!(qpairs(&h), (1, 2, 0, 0));
    h.enable();
    h.create_io_pair(1, 16);
    assert_eq!(qpairs(&h), (2, 3, 1, 1));
}

/// A replaced doorbell page is no longer polled: a store into the old page (an earlier
/// client that kept its mapping) runs nothing, while the new page drives the queues.
#[test]
fn a_replaced_doorbell_page_is_no_longer_polled() {
    let mut h = TestHost::new();
    let old = Arc::clone(&h.doorbells);
    let fresh = Arc::new(MmapRegion::anonymous(old.len()).unwrap());
    h.ctrl.reset();
    let returned = h.ctrl.replace_doorbells(Arc::clone(&fresh)).unwrap();
    assert!(Arc::ptr_eq(&returned, &old));
    h.doorbells = fresh;
    assert_eq!(h.enable() & 1, 1);
    h.create_io_pair(1, 16);
    h.mem.write(layout::DATA, &pattern(512, 6));
    // The old page's SQ 1 tail moves by 5: nothing is fetched.
    old.store_release_u32(8, 5).unwrap();
    for _ in 0..3 {
        assert_eq!(h.poll(), 0, "the old page is not polled");
    }
    let write = rw(0x01, 1, 2, 1, h.prps(layout::DATA, 512));
    h.submit(1, write);
    assert_eq!(h.poll(), 1);
    assert_eq!(h.reap(1).unwrap().status(), Status::SUCCESS);
    assert_eq!(h.read_blocks(1, 2, 1), (Status::SUCCESS, pattern(512, 6)));
    // A page of another length is handed back.
    let small = Arc::new(MmapRegion::anonymous(512).unwrap());
    assert!(h.ctrl.replace_doorbells(small).is_err());
}
