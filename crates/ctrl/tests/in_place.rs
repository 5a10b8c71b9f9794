// SPDX-License-Identifier: Apache-2.0
//! Reads in place (`enable_reads_in_place`): a Read of a malloc namespace on such a queue
//! completes as a copied one does (status, counters, validation) but leaves the host's
//! buffer alone and records where the blocks lie; every case that must copy still does,
//! and a record keeps the namespace's memory alive after the namespace and bdev are gone.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

use std::sync::Arc;

use nvmemu_bdev::Bdev;
use nvmemu_bdev::fault::{FaultIo, FaultKind};
use nvmemu_bdev::model::{ModelConfig, ServiceTime};
use nvmemu_ctrl::test_utils::{BLOCK, BLOCKS, TestHost, layout, pattern, rw};
use nvmemu_ctrl::{InPlaceRead, Namespace};
use nvmemu_spec::{Cid, DataPtr, Nsid, Qid, Status};

const FILL: u8 = 0xEE;

/// Queue 1 reads in place, queue 2 copies; 8 KiB of `pattern(.., 7)` at LBA 8.
fn host() -> (TestHost, Vec<u8>) {
    let mut h = TestHost::ready(16);
    h.create_io_pair(2, 16);
    assert!(h.ctrl.enable_reads_in_place(Qid(1)));
    let data = pattern(8192, 7);
    assert_eq!(h.write_blocks(2, 8, &data), Status::SUCCESS);
    (h, data)
}

/// Read `blocks` at `slba` of namespace `nsid` on `qid` into a data area filled with
/// `FILL`; the status, what the data area holds after it, the in-place record, the CID.
fn read(
    h: &mut TestHost,
    qid: u16,
    (nsid, slba, blocks): (u32, u64, u32),
) -> (Status, Vec<u8>, Option<InPlaceRead>, Cid) {
    let len = u64::from(blocks) * BLOCK;
    h.mem.write(layout::DATA, &vec![FILL; len as usize]);
    let dptr = h.prps(layout::DATA, len);
    let cid = h.submit(qid, rw(0x02, nsid, slba, blocks, dptr));
    h.poll();
    let c = h.reap(qid).expect("a completion");
    assert_eq!(c.cid, cid.0);
    let record = h.ctrl.take_read_in_place(Qid(qid), cid);
    let data = h.mem.read_vec(layout::DATA, len as usize);
    (c.status(), data, record, cid)
}

fn bytes(r: &InPlaceRead) -> Vec<u8> {
    let mut v = vec![0; r.len() as usize];
    r.region().copy_to(r.offset(), &mut v).unwrap();
    v
}

#[test]
fn a_read_in_place_leaves_the_host_buffer_and_names_the_blocks() {
    let (mut h, data) = host();
    let bdev = Arc::clone(h.ctrl.namespaces().next().unwrap().bdev());
    let before = (h.ctrl.stats(), bdev.stats().snapshot());
    let (status, buf, record, cid) = read(&mut h, 1, (1, 8, 16));
    assert_eq!(status, Status::SUCCESS);
    assert!(
        buf.iter().all(|&b| b == FILL),
        "the host buffer was written"
    );
    let r = record.expect("a record");
    assert_eq!((r.offset(), r.len()), (8 * BLOCK, 8192));
    assert_eq!(bytes(&r), data);

    // Taken once; given back (its data sent), it is kept for its hold, not taken again.
    assert!(h.ctrl.take_read_in_place(Qid(1), cid).is_none());
    h.ctrl.give_back_read_in_place(Qid(1), cid, r);
    assert!(h.ctrl.take_read_in_place(Qid(1), cid).is_none());
    // Counted as a copied read is.
    let (c, b) = (h.ctrl.stats(), bdev.stats().snapshot());
    assert_eq!(c.host_read_commands, before.0.host_read_commands + 1);
    assert_eq!(c.bytes_read, before.0.bytes_read + 8192);
    assert_eq!(b.num_read_ops, before.1.num_read_ops + 1);
    assert_eq!(b.bytes_read, before.1.bytes_read + 8192);
    // The copying queue still copies.
    let (status, buf, record, _) = read(&mut h, 2, (1, 8, 16));
    assert_eq!((status, record.is_none()), (Status::SUCCESS, true));
    assert_eq!(buf, data);
}

#[test]
fn errors_are_those_of_a_copied_read_and_leave_no_record() {
    let (mut h, _) = host();
    let unmapped = DataPtr::Prp {
        prp1: 0x1234_5000,
        prp2: 0,
    };
    let bad = [
        (
            rw(0x02, 1, BLOCKS, 1, h.prps(layout::DATA, 512)),
            "LBA range",
        ),
        (rw(0x02, 1, 8, 1, unmapped), "unmapped buffer"),
        (rw(0x02, 9, 8, 1, h.prps(layout::DATA, 512)), "no namespace"),
    ];
    for (sqe, what) in bad {
        let want = h.cmd(2, sqe).status();
        assert_ne!(want, Status::SUCCESS, "{what}");
        let cid = h.submit(1, sqe);
        h.poll();
        assert_eq!(h.reap(1).unwrap().status(), want, "{what}");
        assert!(h.ctrl.take_read_in_place(Qid(1), cid).is_none(), "{what}");
    }
}

#[test]
fn what_must_be_copied_is_copied() {
    let (mut h, data) = host();
    let bdev = Arc::clone(h.ctrl.namespaces().next().unwrap().bdev());
    let copied = |h: &mut TestHost, nsid, what| {
        let (status, buf, record, _) = read(h, 1, (nsid, 8, 16));
        assert_eq!(status, Status::SUCCESS, "{what}");
        assert!(record.is_none(), "{what}: read in place");
        buf
    };
    // A timed bdev: the copy is what its read latency measures.
    bdev.set_timed(true);
    assert_eq!(copied(&mut h, 1, "timed"), data);
    bdev.set_timed(false);
    // A latency model holds the completion: the data is the command's, not the send's.
    let t = ServiceTime {
        avg_us: 1,
        p99_us: 1,
    };
    bdev.model().set(Some(ModelConfig::spdk(t, t)));
    h.poll();
    let len = 8192;
    h.mem.write(layout::DATA, &vec![FILL; len]);
    let cid = h.submit(1, rw(0x02, 1, 8, 16, h.prps(layout::DATA, len as u64)));
    let cqe = loop {
        h.poll();
        if let Some(c) = h.reap(1) {
            break c;
        }
    };
    assert_eq!((cqe.cid, cqe.status()), (cid.0, Status::SUCCESS));
    assert!(h.ctrl.take_read_in_place(Qid(1), cid).is_none(), "modelled");
    assert_eq!(h.mem.read_vec(layout::DATA, len), data);
    bdev.model().set(None);
    // An injected corruption edits the host's buffer.
    let kind = FaultKind::CorruptData;
    bdev.faults()
        .arm(FaultIo::Read, kind, kind.action(100, 0x5A), (1, 0))
        .unwrap();
    let mut want = data.clone();
    want[100] ^= 0x5A;
    assert_eq!(copied(&mut h, 1, "corrupted"), want);
    // A null namespace has no memory.
    let null = Arc::new(Bdev::null("null0", 512, 64).unwrap());
    h.ctrl
        .attach_namespace(Namespace::new(Nsid(2), null))
        .unwrap();
    assert!(copied(&mut h, 2, "null").iter().all(|&b| b == 0));
    // And once all that is gone, reads are in place again.
    let (_, _, record, _) = read(&mut h, 1, (1, 8, 16));
    assert_eq!(bytes(&record.expect("in place")), data);
}

#[test]
fn a_record_keeps_the_namespace_memory_after_the_namespace_and_bdev_are_gone() {
    let (mut h, data) = host();
    let (_, _, record, _) = read(&mut h, 1, (1, 8, 16));
    let r = record.unwrap();
    let bdev = h.ctrl.detach_namespace(Nsid(1)).unwrap();
    let weak = Arc::downgrade(&bdev);
    drop(bdev);
    assert!(weak.upgrade().is_none(), "the bdev is gone");
    assert_eq!(bytes(&r), data);
    // Only a queue of this controller's that asked reads in place.
    assert!(!h.ctrl.enable_reads_in_place(Qid(0)));
    assert!(!h.ctrl.enable_reads_in_place(Qid(5)));
}
