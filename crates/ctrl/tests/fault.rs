// SPDX-License-Identifier: Apache-2.0
//! Injected errors (SPDK's error bdev) through real queues: `failure` completes without
//! executing, with Internal Error and an Error Information log entry; `pending` is never
//! completed until Abort or Delete SQ; `nomem` leaves the command in its SQ;
//! `corrupt_data` changes one byte of the data read or stored; each injection hits exactly
//! `num` commands of its type.

use std::os::fd::AsFd;
use std::sync::Arc;

use nvmemu_bdev::fault::{FaultIo, FaultKind};
use nvmemu_ctrl::test_utils::{
    HostMemory, TestHost, bare, delete_sq, get_log, layout, pattern, rw,
};
use nvmemu_mem::{DmaBacking, DmaRegion, GuestMemory, Iova, MmapRegion, Protection, create_memfd};
use nvmemu_spec::{DataPtr, Status};

fn arm(h: &TestHost, io: FaultIo, kind: FaultKind, num: u32) {
    let ns = h.ctrl.namespaces().next().expect("namespace 1");
    let faults = ns.bdev().faults();
    faults
        .arm(io, kind, kind.action(0, 0), (num, 0))
        .expect("room for a rule");
}

fn arm_corrupt(h: &TestHost, io: FaultIo, offset: u64, value: u8) {
    let ns = h.ctrl.namespaces().next().expect("namespace 1");
    let kind = FaultKind::CorruptData;
    let faults = ns.bdev().faults();
    faults
        .arm(io, kind, kind.action(offset, value), (1, 0))
        .expect("room for a rule");
}

fn write(h: &TestHost, slba: u64) -> nvmemu_spec::Sqe {
    rw(0x01, 1, slba, 1, h.prps(layout::DATA, 512))
}

#[test]
fn a_failure_completes_with_internal_error_without_writing_and_is_logged() {
    let mut h = TestHost::ready(64);
    assert_eq!(h.write_blocks(1, 5, &pattern(512, 1)), Status::SUCCESS);
    arm(&h, FaultIo::Write, FaultKind::Failure, 1);
    h.mem.write(layout::DATA, &pattern(512, 2));
    let c = h.cmd(1, write(&h, 5));
    assert_eq!(c.status(), Status::INTERNAL_ERROR);
    assert_eq!(
        c.status().to_field() & (1 << 14),
        0,
        "DNR clear: it may be retried"
    );
    // Not executed: the old data is still there. The next write is not hit (num 1).
    let (status, back) = h.read_blocks(1, 5, 1);
    assert_eq!((status, back), (Status::SUCCESS, pattern(512, 1)));
    assert_eq!(h.cmd(1, write(&h, 5)).status(), Status::SUCCESS);
    // The Error Information log's newest entry: error count 1, SQ 1, the CID, the status.
    let log = h.admin(get_log(&h, 0x01, 16, 0, 0xFFFF_FFFF));
    assert_eq!(log.status(), Status::SUCCESS);
    let entry = h.mem.read_vec(layout::ADMIN_DATA, 64);
    assert_eq!(u64::from_le_bytes(entry[0..8].try_into().unwrap()), 1);
    assert_eq!(u16::from_le_bytes([entry[8], entry[9]]), 1);
    assert_eq!(u16::from_le_bytes([entry[10], entry[11]]), c.cid);
    let field = u16::from_le_bytes([entry[12], entry[13]]) >> 1;
    assert_eq!(Status::from_field(field), Status::INTERNAL_ERROR);
}

#[test]
fn an_injection_hits_only_its_type_and_num_commands() {
    let mut h = TestHost::ready(64);
    arm(&h, FaultIo::Read, FaultKind::Failure, 2);
    assert_eq!(h.cmd(1, write(&h, 0)).status(), Status::SUCCESS);
    let read = |h: &TestHost| rw(0x02, 1, 0, 1, h.prps(layout::DATA, 512));
    let got: Vec<_> = (0..3).map(|_| h.cmd(1, read(&h)).status()).collect();
    assert_eq!(
        got,
        [
            Status::INTERNAL_ERROR,
            Status::INTERNAL_ERROR,
            Status::SUCCESS
        ]
    );
}

#[test]
fn a_pending_command_is_answered_only_by_abort() {
    let mut h = TestHost::ready(64);
    arm(&h, FaultIo::Write, FaultKind::Pending, 1);
    let victim = h.submit(1, write(&h, 0));
    for _ in 0..10 {
        h.poll();
    }
    assert!(h.reap(1).is_none(), "a pending command is never completed");
    assert_eq!(h.ctrl.held_completions(), 1);
    assert_eq!(
        h.ctrl.next_due_ns(),
        None,
        "never due: no poller wakes for it"
    );
    let mut abort = bare(0x08);
    abort.cdw10 = 1 | (u32::from(victim.0) << 16);
    let a = h.admin(abort);
    assert_eq!((a.status(), a.dw0), (Status::SUCCESS, 0), "aborted");
    let c = h.reap(1).expect("the aborted command's CQE");
    assert_eq!((c.cid, c.status()), (victim.0, Status::ABORT_REQUESTED));
    assert_eq!(h.cmd(1, write(&h, 0)).status(), Status::SUCCESS);
}

#[test]
fn deleting_the_sq_aborts_a_pending_command() {
    let mut h = TestHost::ready(64);
    arm(&h, FaultIo::Read, FaultKind::Pending, 1);
    let victim = h.submit(1, rw(0x02, 1, 0, 1, h.prps(layout::DATA, 512)));
    h.poll();
    assert_eq!(h.admin(delete_sq(1)).status(), Status::SUCCESS);
    let c = h.reap(1).expect("the pending command's CQE");
    assert_eq!((c.cid, c.status()), (victim.0, Status::ABORTED_SQ_DELETION));
}

#[test]
fn nomem_leaves_the_command_in_its_sq_until_the_hits_are_spent() {
    let mut h = TestHost::ready(64);
    arm(&h, FaultIo::Write, FaultKind::Nomem, 3);
    let cid = h.submit(1, write(&h, 0));
    for _ in 0..3 {
        assert_eq!(h.poll(), 0);
        assert!(h.reap(1).is_none(), "refused for now");
    }
    h.poll();
    let c = h.reap(1).expect("taken once the hits are spent");
    assert_eq!((c.cid, c.status()), (cid.0, Status::SUCCESS));
}

#[test]
fn corrupt_data_changes_one_byte_of_what_a_read_returns_not_what_is_stored() {
    let mut h = TestHost::ready(64);
    let data = pattern(8192, 3);
    assert_eq!(h.write_blocks(1, 8, &data), Status::SUCCESS);
    // In the second page (PRP2's piece), not the first.
    arm_corrupt(&h, FaultIo::Read, 5000, 0x5A);
    let (status, back) = h.read_blocks(1, 8, 16);
    assert_eq!(status, Status::SUCCESS, "a corrupted read succeeds");
    let mut want = data.clone();
    want[5000] ^= 0x5A;
    assert_eq!(back, want);
    let (_, again) = h.read_blocks(1, 8, 16);
    assert_eq!(again, data, "the stored data is intact");
}

#[test]
fn corrupt_data_on_a_write_stores_the_changed_byte_and_leaves_the_host_buffer() {
    let mut h = TestHost::ready(64);
    let data = pattern(512, 4);
    arm_corrupt(&h, FaultIo::Write, 0, 0xFF);
    assert_eq!(h.write_blocks(1, 2, &data), Status::SUCCESS);
    assert_eq!(
        h.mem.read_vec(layout::DATA, 512),
        data,
        "the host's buffer is restored"
    );
    let (_, stored) = h.read_blocks(1, 2, 1);
    let mut want = data.clone();
    want[0] ^= 0xFF;
    assert_eq!(stored, want);
}

/// IOVA of a page the host maps for the device to read only (DMA_MAP without WRITE).
const READ_ONLY_IOVA: u64 = 0x9_0000_0000;

/// Give `h`'s controller its client memory plus one page at [`READ_ONLY_IOVA`] the device
/// may only read; returns that page's mapping, for the host to fill.
fn add_read_only_page(h: &mut TestHost) -> Arc<MmapRegion> {
    let fd = create_memfd("nvmemu-test-ro", 4096, false).expect("memfd");
    let page =
        Arc::new(MmapRegion::map_shared(fd.as_fd(), 0, 4096, Protection::ReadWrite).expect("map"));
    let region = |iova, size, writable, map: &Arc<MmapRegion>| DmaRegion {
        iova: Iova(iova),
        size,
        writable,
        backing: DmaBacking::Mapped(Arc::clone(map)),
    };
    let guest = GuestMemory::new()
        .with_region(region(HostMemory::BASE, layout::SIZE, true, h.mem.region()))
        .and_then(|g| g.with_region(region(READ_ONLY_IOVA, 4096, false, &page)))
        .expect("two regions");
    h.ctrl.set_guest_memory(Arc::new(guest));
    page
}

#[test]
fn corrupt_data_on_a_write_from_a_read_only_buffer_still_stores_the_changed_byte() {
    // The device never writes a Write's buffer: a host may map it read-only for the device.
    let mut h = TestHost::ready(64);
    let page = add_read_only_page(&mut h);
    let data = pattern(512, 6);
    page.copy_from(0, &data).unwrap();
    arm_corrupt(&h, FaultIo::Write, 100, 0x81);
    let dptr = DataPtr::Prp {
        prp1: READ_ONLY_IOVA,
        prp2: 0,
    };
    assert_eq!(h.cmd(1, rw(0x01, 1, 9, 1, dptr)).status(), Status::SUCCESS);
    let (_, stored) = h.read_blocks(1, 9, 1);
    assert_eq!(
        stored[100],
        data[100] ^ 0x81,
        "the stored byte is corrupted"
    );
    let others_kept = (stored.iter().zip(&data).enumerate()).all(|(i, (s, d))| i == 100 || s == d);
    assert!(others_kept, "only that byte differs");
    let mut host = vec![0u8; 512];
    page.copy_to(0, &mut host).unwrap();
    assert_eq!(host, data, "the host's buffer is as it was");
}
