// SPDX-License-Identifier: Apache-2.0
//! Hostile NVMe hosts against the real target: data pointers outside mapped memory,
//! invalid queue creation and doorbell values beyond the queue. Each command gets its exact
//! status, the controller stays up, and the same server serves the next client.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use common::{DATA_IOVA, assert_serves_next_client, create_cq_sqe, create_sq_sqe, map_req, rw_sqe};
use nvmemu_driver::sqe::{delete_io_cq, delete_io_sq};
use nvmemu_spec::opcode::IoOpcode;
use nvmemu_spec::regs::csts;
use nvmemu_spec::{Cid, Psdt, Qid, Sqe, Status};
use nvmemu_spec::{SglDescriptor, SglKind};

// ---------------------------------------------------------------------------------------
// Data pointers outside mapped memory.

fn sgl_write(lba: u64, nblocks: u32, desc: SglDescriptor) -> Sqe {
    let mut sqe = rw_sqe(IoOpcode::Write, lba, nblocks, 0);
    sqe.cdw0 = Sqe::make_cdw0(u8::from(IoOpcode::Write), Psdt::SglMptrContiguous, Cid(0));
    (sqe.dptr1, sqe.dptr2) = desc.to_dptr();
    sqe
}

#[test]
fn prps_and_sgls_outside_mapped_memory_are_data_transfer_errors() {
    let t = common::start_default();
    let mut c = common::attach(&t, 1);
    let mut q = c.take_qpair().unwrap();
    let unmapped = 0x7_0000_0000u64;
    let pool_end = nvmemu_driver::DMA_POOL_IOVA + c.dma_pool().size();
    let buf = c.alloc_dma(8192).unwrap();
    let cases: Vec<(&str, Sqe)> = vec![
        ("PRP1 unmapped", rw_sqe(IoOpcode::Write, 0, 8, unmapped)),
        (
            "PRP1 unmapped, read",
            rw_sqe(IoOpcode::Read, 0, 8, unmapped),
        ),
        ("PRP1 at address 0", rw_sqe(IoOpcode::Read, 0, 1, 0)),
        (
            "PRP1 just past the pool",
            rw_sqe(IoOpcode::Write, 0, 1, pool_end),
        ),
        ("PRP2 unmapped", {
            let mut s = rw_sqe(IoOpcode::Write, 0, 16, buf.iova().0);
            s.dptr2 = unmapped;
            s
        }),
        ("PRP list pointer unmapped", {
            let mut s = rw_sqe(IoOpcode::Write, 0, 24, buf.iova().0);
            s.dptr2 = unmapped;
            s
        }),
        (
            "SGL data block unmapped",
            sgl_write(
                0,
                8,
                SglDescriptor::new(SglKind::DataBlock {
                    addr: unmapped,
                    len: 4096,
                }),
            ),
        ),
        (
            "SGL data block running past the pool",
            sgl_write(
                0,
                8,
                SglDescriptor::new(SglKind::DataBlock {
                    addr: pool_end - 2048,
                    len: 4096,
                }),
            ),
        ),
        (
            "SGL segment unmapped",
            sgl_write(
                0,
                8,
                SglDescriptor::new(SglKind::LastSegment {
                    addr: unmapped,
                    len: 16,
                }),
            ),
        ),
    ];
    for (what, sqe) in cases {
        let cqe = q.execute_raw(sqe, None).unwrap();
        assert_eq!(cqe.status(), Status::DATA_TRANSFER_ERROR, "{what}");
    }
    // A PRP list whose entry is unmapped.
    let list = c.alloc_dma(4096).unwrap();
    list.write_obj(0, &unmapped).unwrap();
    let mut s = rw_sqe(IoOpcode::Write, 0, 24, buf.iova().0);
    s.dptr2 = list.iova().0;
    assert_eq!(
        q.execute_raw(s, None).unwrap().status(),
        Status::DATA_TRANSFER_ERROR
    );
    // The queue still works.
    let ok = rw_sqe(IoOpcode::Write, 0, 8, buf.iova().0);
    assert_eq!(q.execute_raw(ok, None).unwrap().status(), Status::SUCCESS);
    drop(q);
    c.shutdown().unwrap();
    drop(c); // closes the connection: one client at a time
    assert_serves_next_client(&t);
}

#[test]
fn prps_into_a_region_mapped_without_an_fd_are_data_transfer_errors() {
    let t = common::start_default();
    let (mut c, shared) = common::attach_shared(&t, 1);
    // QEMU maps ROM/BIOS blocks without an fd: the map succeeds, the memory is unreachable.
    shared.with_client(|cl| cl.dma_map(&map_req(DATA_IOVA, 1 << 20, 0), None).unwrap());
    let mut q = c.take_qpair().unwrap();
    for op in [IoOpcode::Write, IoOpcode::Read] {
        let cqe = q
            .execute_raw(rw_sqe(op, 0, 8, DATA_IOVA + 4096), None)
            .unwrap();
        assert_eq!(cqe.status(), Status::DATA_TRANSFER_ERROR, "{op:?}");
    }
    let sgl = sgl_write(
        0,
        8,
        SglDescriptor::new(SglKind::DataBlock {
            addr: DATA_IOVA,
            len: 4096,
        }),
    );
    assert_eq!(
        q.execute_raw(sgl, None).unwrap().status(),
        Status::DATA_TRANSFER_ERROR
    );
    // An I/O queue in fd-less memory cannot be created either.
    let cqe = c
        .admin_raw(create_cq_sqe(2, 16, DATA_IOVA, false, 0))
        .unwrap();
    assert_ne!(cqe.status(), Status::SUCCESS);
    assert_eq!(shared.csts() & csts::CFS, 0, "not fatal");
    drop(q);
    c.shutdown().unwrap();
    drop(c);
    drop(shared);
    assert_serves_next_client(&t);
}

// ---------------------------------------------------------------------------------------
// Queue creation (NVMe Base 1.4, 5.3 and 5.4).

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one table of cases, one per status the spec names, read best in one place"
)]
fn invalid_queue_creation_gets_the_command_specific_status() {
    let t = common::start_default();
    // Two I/O queues allocated; queue pair 2 is deleted so QID 2 is free to misuse.
    let mut c = common::attach(&t, 2);
    let qps = c.qpairs();
    assert_eq!(
        c.admin_raw(delete_io_sq(Qid(2))).unwrap().status(),
        Status::SUCCESS
    );
    assert_eq!(
        c.admin_raw(delete_io_cq(Qid(2))).unwrap().status(),
        Status::SUCCESS
    );
    let ring = c.alloc_dma(64 * 64).unwrap().iova().0;
    let cq_ring = c.alloc_dma(16 * 64).unwrap().iova().0;
    let mqes = c.cap().max_queue_entries() as u16;
    let cases: Vec<(&str, Sqe, Status)> = vec![
        (
            "CQ 0",
            create_cq_sqe(0, 16, cq_ring, false, 0),
            Status::INVALID_QID,
        ),
        (
            "CQ beyond the allocated count",
            create_cq_sqe(3, 16, cq_ring, false, 0),
            Status::INVALID_QID,
        ),
        (
            "CQ 0xFFFF",
            create_cq_sqe(0xFFFF, 16, cq_ring, false, 0),
            Status::INVALID_QID,
        ),
        (
            "CQ that exists",
            create_cq_sqe(1, 16, cq_ring, false, 0),
            Status::INVALID_QID,
        ),
        (
            "CQ of 1 entry",
            create_cq_sqe(2, 1, cq_ring, false, 0),
            Status::INVALID_QUEUE_SIZE,
        ),
        (
            "CQ above MQES",
            create_cq_sqe(2, mqes.wrapping_add(1), cq_ring, false, 0),
            Status::INVALID_QUEUE_SIZE,
        ),
        (
            "CQ on vector 64 of 64",
            create_cq_sqe(2, 16, cq_ring, true, 64),
            Status::INVALID_INTERRUPT_VECTOR,
        ),
        (
            "CQ on vector 0xFFFF",
            create_cq_sqe(2, 16, cq_ring, true, 0xFFFF),
            Status::INVALID_INTERRUPT_VECTOR,
        ),
        ("SQ 0", create_sq_sqe(0, 16, ring, 1), Status::INVALID_QID),
        (
            "SQ beyond the allocated count",
            create_sq_sqe(3, 16, ring, 1),
            Status::INVALID_QID,
        ),
        (
            "SQ that exists",
            create_sq_sqe(1, 16, ring, 1),
            Status::INVALID_QID,
        ),
        (
            "SQ on a missing CQ",
            create_sq_sqe(2, 16, ring, 2),
            Status::CQ_INVALID,
        ),
        (
            "SQ on the admin CQ",
            create_sq_sqe(2, 16, ring, 0),
            Status::INVALID_QID,
        ),
        (
            "SQ of 1 entry",
            create_sq_sqe(2, 1, ring, 1),
            Status::INVALID_QUEUE_SIZE,
        ),
        (
            "SQ above MQES",
            create_sq_sqe(2, mqes.wrapping_add(1), ring, 1),
            Status::INVALID_QUEUE_SIZE,
        ),
        (
            "SQ not physically contiguous",
            {
                let mut s = create_sq_sqe(2, 16, ring, 1);
                s.cdw11 &= !1;
                s
            },
            Status::INVALID_FIELD,
        ),
        (
            "CQ ring not page aligned",
            create_cq_sqe(2, 16, cq_ring + 16, false, 0),
            Status::INVALID_FIELD,
        ),
    ];
    for (what, sqe, want) in cases {
        let cqe = c.admin_raw(sqe).unwrap();
        assert_eq!(cqe.status(), want, "{what}");
    }
    // Deleting what does not exist.
    assert_eq!(
        c.admin_raw(delete_io_sq(Qid(2))).unwrap().status(),
        Status::INVALID_QID
    );
    assert_eq!(
        c.admin_raw(delete_io_cq(Qid(0))).unwrap().status(),
        Status::INVALID_QID
    );
    // A CQ with an SQ still on it cannot be deleted.
    assert_eq!(
        c.admin_raw(delete_io_cq(Qid(1))).unwrap().status(),
        Status::INVALID_QUEUE_DELETION
    );
    // Valid creation at the same QID works after all that (and the driver's shutdown then
    // deletes it as its own).
    assert_eq!(
        c.admin_raw(create_cq_sqe(2, 16, cq_ring, true, 63))
            .unwrap()
            .status(),
        Status::SUCCESS
    );
    assert_eq!(
        c.admin_raw(create_sq_sqe(2, 16, ring, 2)).unwrap().status(),
        Status::SUCCESS
    );
    drop(qps);
    c.shutdown().unwrap();
    drop(c); // closes the connection: one client at a time
    assert_serves_next_client(&t);
}

// ---------------------------------------------------------------------------------------
// Doorbells (NVMe Base 1.4, 4.1: an invalid doorbell value is ignored and may raise an
// Invalid Doorbell Write Value asynchronous event; it never takes the controller down).

#[test]
fn doorbell_values_beyond_the_queue_size_are_ignored_until_corrected() {
    let t = common::start_default();
    let (mut c, shared) = common::attach_shared(&t, 1);
    let mut q = c.take_qpair().unwrap();
    let depth = u32::from(q.depth());
    let buf = c.alloc_dma(4096).unwrap();
    buf.copy_from(0, &common::pattern(4096, 1)).unwrap();
    q.write_blocking(nvmemu_spec::Nsid(1), nvmemu_spec::Lba(0), 8, &buf)
        .unwrap();
    // SQ 1 tail and CQ 1 head, and the admin SQ tail, far beyond their queue sizes.
    for (offset, value) in [
        (0x1008u64, depth),
        (0x1008, 0xFFFF),
        (0x1008, u32::MAX),
        (0x100C, depth + 7),
        (0x1000, 0x1_0000 + 40),
    ] {
        shared.with_client(|cl| cl.region_write(0, offset, &value.to_le_bytes()).unwrap());
        let st = shared.csts();
        assert_eq!(
            st & csts::CFS,
            0,
            "no fatal status after {value:#x} at {offset:#x}"
        );
        assert_eq!(st & csts::RDY, csts::RDY);
    }
    // The driver's next ring writes the correct values again: I/O and admin resume.
    let rbuf = c.alloc_dma(4096).unwrap();
    q.read_blocking(nvmemu_spec::Nsid(1), nvmemu_spec::Lba(0), 8, &rbuf)
        .unwrap();
    let mut back = vec![0u8; 4096];
    rbuf.copy_to(0, &mut back).unwrap();
    assert!(back == common::pattern(4096, 1));
    assert_eq!(c.identify_controller().unwrap().sn.trim(), "TESTSERIAL01");
    // The bad values were counted.
    let bad = t
        .target
        .on_controller(t.id, |pc| pc.ctrl.stats().bad_doorbells)
        .unwrap();
    assert!(bad >= 2, "bad doorbells counted: {bad}");
    drop(q);
    c.shutdown().unwrap();
    drop(c);
    drop(shared);
    assert_serves_next_client(&t);
}
