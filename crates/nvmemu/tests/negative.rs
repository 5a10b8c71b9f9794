// SPDX-License-Identifier: Apache-2.0
//! Hostile clients and hosts against the real target: malformed vfio-user messages, bad DMA
//! maps, data pointers outside mapped memory, invalid queue creation, doorbell abuse and
//! DMA_UNMAP under load. Each sequence gets its exact error (errno or NVMe status), and
//! afterwards the same server serves the next client (fresh attach + verified I/O).
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::{
    HostMem, RawConn, access_payload, assert_serves_next_client, create_cq_sqe, create_sq_sqe,
    device_info_payload, errno_of, rw_sqe,
};
use nvmemu_driver::sqe::{delete_io_cq, delete_io_sq};
use nvmemu_spec::opcode::IoOpcode;
use nvmemu_spec::regs::csts;
use nvmemu_spec::{Cid, Psdt, Qid, Sqe, Status};
use nvmemu_spec::{SglDescriptor, SglKind};
use nvmemu_vfio_user::{DmaMap, DmaUnmap, Errno, SetIrqs};

const DMA_MAP: u16 = 2;
const DEVICE_GET_INFO: u16 = 4;
const REGION_READ: u16 = 9;

// ---------------------------------------------------------------------------------------
// Framing and commands.

#[test]
fn truncated_payloads_get_einval_and_the_stream_stays_in_sync() {
    let t = common::start_default();
    let mut c = RawConn::connect_negotiated(&t);
    // Each command's fixed struct cut short.
    for (cmd, len) in [
        (2u16, 31usize),
        (3, 23),
        (4, 15),
        (5, 31),
        (7, 15),
        (8, 19),
        (9, 15),
        (10, 15),
    ] {
        let r = c.request(cmd, 0, &vec![0u8; len]);
        assert_eq!(r.header.command, cmd);
        assert_eq!(r.errno(), Errno::INVAL, "command {cmd} with {len} bytes");
    }
    // argsz smaller than the struct it describes.
    let mut info = device_info_payload();
    info[0] = 8;
    assert_eq!(c.request(DEVICE_GET_INFO, 0, &info).errno(), Errno::INVAL);
    // REGION_WRITE whose data is shorter than its count.
    let mut w = access_payload(7, 0x3C, 4);
    w.push(1);
    assert_eq!(c.request(10, 0, &w).errno(), Errno::INVAL);
    // Still in sync.
    c.request(DEVICE_GET_INFO, 0, &device_info_payload())
        .ok(DEVICE_GET_INFO);
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn message_sizes_that_lie_are_refused() {
    let t = common::start_default();
    // msg_size smaller than the header: rejected with EINVAL.
    let mut c = RawConn::connect_negotiated(&t);
    let mut h = vec![0u8; 16];
    h[2..4].copy_from_slice(&DEVICE_GET_INFO.to_le_bytes());
    h[4..8].copy_from_slice(&8u32.to_le_bytes());
    c.send_bytes(&h, &[]);
    assert_eq!(c.recv().errno(), Errno::INVAL);
    drop(c);
    // A header that promises more than is ever sent, then the client hangs up mid-message.
    let mut c = RawConn::connect_negotiated(&t);
    let mut h = vec![0u8; 16];
    h[2..4].copy_from_slice(&REGION_READ.to_le_bytes());
    h[4..8].copy_from_slice(&4096u32.to_le_bytes());
    h.extend_from_slice(&[0u8; 10]);
    c.send_bytes(&h, &[]);
    drop(c);
    // The server drops that connection and accepts the next.
    assert_serves_next_client(&t);
}

#[test]
fn oversized_messages_are_drained_and_refused_with_e2big() {
    let t = common::start_default();
    let mut c = RawConn::connect_negotiated(&t);
    // 2 MiB of payload, more than max_data_xfer_size + room: drained, not allocated.
    let big = vec![0x41u8; 2 << 20];
    let writer = {
        let mut stream = c.stream.try_clone().unwrap();
        let mut msg = vec![0u8; 16];
        msg[0..2].copy_from_slice(&77u16.to_le_bytes());
        msg[2..4].copy_from_slice(&REGION_READ.to_le_bytes());
        msg[4..8].copy_from_slice(&((16 + big.len()) as u32).to_le_bytes());
        std::thread::spawn(move || {
            use std::io::Write;
            stream.write_all(&msg).unwrap();
            stream.write_all(&big).unwrap();
        })
    };
    let r = c.recv();
    writer.join().unwrap();
    assert_eq!(r.header.msg_id, 77);
    assert_eq!(r.errno(), Errno::TOOBIG);
    // REGION_READ of more than 1 MiB in a well-sized message.
    let r = c.request(REGION_READ, 0, &access_payload(7, 0, (1 << 20) + 1));
    assert_eq!(r.errno(), Errno::TOOBIG);
    c.request(DEVICE_GET_INFO, 0, &device_info_payload())
        .ok(DEVICE_GET_INFO);
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn unknown_and_unsupported_commands_get_enotsup_with_their_payload_drained() {
    let t = common::start_default();
    let mut c = RawConn::connect_negotiated(&t);
    for cmd in [0u16, 6, 11, 12, 14, 15, 16, 17, 18, 19, 999, u16::MAX] {
        // A payload that looks like a header: if it were not drained, it would be parsed.
        let mut payload = vec![0u8; 100];
        payload[2..4].copy_from_slice(&DEVICE_GET_INFO.to_le_bytes());
        payload[4..8].copy_from_slice(&32u32.to_le_bytes());
        let r = c.request(cmd, 0, &payload);
        assert_eq!(r.header.command, cmd);
        assert_eq!(r.errno(), Errno::NOTSUP, "command {cmd}");
    }
    c.request(DEVICE_GET_INFO, 0, &device_info_payload())
        .ok(DEVICE_GET_INFO);
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn commands_before_version_and_a_second_version_are_refused() {
    let t = common::start_default();
    let mut c = RawConn::connect(&t);
    assert_eq!(
        c.request(DEVICE_GET_INFO, 0, &device_info_payload())
            .errno(),
        Errno::INVAL
    );
    // Major 1 is not a version we speak.
    assert_eq!(c.request(1, 0, &[1, 0, 0, 0]).errno(), Errno::INVAL);
    c.request(1, 0, &[0, 0, 1, 0]).ok(1);
    assert_eq!(c.request(1, 0, &[0, 0, 1, 0]).errno(), Errno::INVAL);
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn bad_region_indexes_and_accesses_get_einval() {
    let t = common::start_default();
    let mut c = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    let mut b = [0u8; 4];
    for index in [1u32, 2, 3, 6, 8, 9, 100, u32::MAX] {
        assert_eq!(
            errno_of(c.region_read(index, 0, &mut b)),
            Errno::INVAL,
            "region {index}"
        );
        assert_eq!(
            errno_of(c.region_write(index, 0, &b)),
            Errno::INVAL,
            "region {index}"
        );
    }
    // NVMe registers only take 4- and 8-byte aligned accesses.
    let mut two = [0u8; 2];
    assert_eq!(errno_of(c.region_read(0, 0, &mut two)), Errno::INVAL);
    assert_eq!(errno_of(c.region_read(0, 2, &mut b)), Errno::INVAL);
    // A read of zero bytes is not an access.
    assert_eq!(errno_of(c.region_read(7, 0, &mut [])), Errno::INVAL);
    drop(c);
    assert_serves_next_client(&t);
}

// ---------------------------------------------------------------------------------------
// DMA maps.

fn map_req(iova: u64, size: u64, offset: u64) -> DmaMap {
    DmaMap {
        flags: DmaMap::FLAG_READ | DmaMap::FLAG_WRITE,
        offset,
        iova,
        size,
    }
}

#[test]
fn overlapping_dma_maps_get_eexist() {
    let t = common::start_default();
    let mut c = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    let mem = HostMem::new(2 << 20, 1 << 30);
    let fd = mem.fd.as_fd();
    c.dma_map(&map_req(1 << 30, 1 << 20, 0), Some(fd)).unwrap();
    for (iova, size) in [
        (1 << 30, 1 << 20),                   // identical
        ((1 << 30) + 4096, 4096),             // inside
        ((1 << 30) - 4096, 8192),             // straddles the start
        ((1 << 30) + (1 << 20) - 4096, 8192), // straddles the end
        ((1 << 30) - 4096, 2 << 20),          // covers it
    ] {
        let e = errno_of(c.dma_map(&map_req(iova, size, 0), Some(fd)));
        assert_eq!(e, Errno::EXIST, "{iova:#x}+{size:#x}");
    }
    // Also for a map without an fd.
    assert_eq!(
        errno_of(c.dma_map(&map_req(1 << 30, 4096, 0), None)),
        Errno::EXIST
    );
    // Adjacent is fine, and an exact unmap frees the range for a new map.
    c.dma_map(&map_req((1 << 30) + (1 << 20), 1 << 20, 1 << 20), Some(fd))
        .unwrap();
    c.dma_unmap(&DmaUnmap {
        flags: 0,
        iova: 1 << 30,
        size: 1 << 20,
    })
    .unwrap();
    c.dma_map(&map_req((1 << 30) + 4096, 4096, 0), Some(fd))
        .unwrap();
    // Unmapping something that is not a previous map exactly is refused.
    let e = errno_of(c.dma_unmap(&DmaUnmap {
        flags: 0,
        iova: 1 << 30,
        size: 4096,
    }));
    assert_eq!(e, Errno::INVAL);
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn dma_maps_past_the_end_of_their_fd_are_refused() {
    let t = common::start_default();
    let mut c = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    let mem = HostMem::new(1 << 20, 1 << 30);
    let fd = mem.fd.as_fd();
    for (size, offset) in [
        (2 << 20, 0),
        (1 << 20, 4096),
        (4096, 1 << 20),
        (4096, u64::MAX - 4096),
    ] {
        let e = errno_of(c.dma_map(&map_req(1 << 30, size, offset), Some(fd)));
        assert_eq!(e, Errno::INVAL, "size {size:#x} at offset {offset:#x}");
    }
    // IOVA + size wrapping, zero size, unknown flags.
    assert_eq!(
        errno_of(c.dma_map(&map_req(u64::MAX - 4095, 8192, 0), Some(fd))),
        Errno::INVAL
    );
    assert_eq!(
        errno_of(c.dma_map(&map_req(1 << 30, 0, 0), Some(fd))),
        Errno::INVAL
    );
    let mut bad = map_req(1 << 30, 4096, 0);
    bad.flags |= 1 << 7;
    assert_eq!(errno_of(c.dma_map(&bad, Some(fd))), Errno::INVAL);
    // The fd itself is fine: the exact size maps.
    c.dma_map(&map_req(1 << 30, 1 << 20, 0), Some(fd)).unwrap();
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn a_dma_map_the_process_cannot_map_gets_enomem() {
    let t = common::start_default();
    let mut c = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    // A sparse 128 TiB memfd: the file has the size, but no process has that much address
    // space, so the server's mmap fails with ENOMEM, which is what the client is told.
    let fd = rustix::fs::memfd_create("huge", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&fd, 1 << 47).unwrap();
    assert_eq!(
        errno_of(c.dma_map(&map_req(1 << 30, 1 << 47, 0), Some(fd.as_fd()))),
        Errno::NOMEM
    );
    // The same client can still map what fits.
    let mem = HostMem::new(1 << 20, 1 << 30);
    c.dma_map(&map_req(1 << 30, 1 << 20, 0), Some(mem.fd.as_fd()))
        .unwrap();
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn dma_map_with_two_fds_is_refused() {
    let t = common::start_default();
    let mut c = RawConn::connect_negotiated(&t);
    let a = HostMem::new(4096, 0);
    let b = HostMem::new(4096, 0);
    let mut p = 32u32.to_le_bytes().to_vec();
    p.extend_from_slice(&3u32.to_le_bytes());
    p.extend_from_slice(&0u64.to_le_bytes());
    p.extend_from_slice(&(1u64 << 30).to_le_bytes());
    p.extend_from_slice(&4096u64.to_le_bytes());
    c.send(DMA_MAP, 0, &p, &[a.fd.as_fd(), b.fd.as_fd()]);
    assert_eq!(c.recv().errno(), Errno::INVAL);
    drop(c);
    assert_serves_next_client(&t);
}

// ---------------------------------------------------------------------------------------
// Data pointers outside mapped memory.

/// IOVA of a separately mapped data region (above the driver's pool at 4 GiB).
const DATA_IOVA: u64 = 0x20_0000_0000;

/// Command `i` of a stream alternating 4 KiB Writes and Reads over the first MiB at
/// [`DATA_IOVA`] and the first 4 MiB of NSID 1.
fn mixed_io(q: &mut nvmemu_driver::IoQpair, i: u64) -> nvmemu_spec::Cqe {
    let op = if i.is_multiple_of(2) {
        IoOpcode::Write
    } else {
        IoOpcode::Read
    };
    let prp = DATA_IOVA + (i % 256) * 4096;
    q.execute_raw(rw_sqe(op, i % 1024 * 8, 8, prp), None)
        .unwrap()
}

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

// ---------------------------------------------------------------------------------------
// DMA_UNMAP while I/O is in flight (vfio-user DMA_UNMAP: the server drops every reference
// before it replies).

#[test]
fn unmapping_the_data_region_during_io_replies_promptly_and_fails_later_commands() {
    let t = common::start_default();
    let (mut c, shared) = common::attach_shared(&t, 1);
    let data = HostMem::new(1 << 20, DATA_IOVA);
    shared.with_client(|cl| data.dma_map(cl).unwrap());
    let mut q = c.take_qpair().unwrap();
    let ok = Arc::new(AtomicU32::new(0));
    let unmapped = Arc::new(AtomicBool::new(false));
    let io = {
        let (ok, unmapped) = (ok.clone(), unmapped.clone());
        std::thread::spawn(move || {
            // Keep writing and reading 4 KiB pieces of the data region. Once the unmap has
            // replied, every command submitted afterwards must fail with Data Transfer Error.
            let mut after = 0u32;
            let start = Instant::now();
            let mut i = 0u64;
            while after < 50 {
                assert!(start.elapsed() < common::DEADLINE, "I/O loop stuck");
                let was_unmapped = unmapped.load(Ordering::Acquire);
                let cqe = mixed_io(&mut q, i);
                if was_unmapped {
                    assert_eq!(
                        cqe.status(),
                        Status::DATA_TRANSFER_ERROR,
                        "command {i} after unmap"
                    );
                    after += 1;
                } else if cqe.status() == Status::SUCCESS {
                    ok.fetch_add(1, Ordering::Release);
                } else {
                    assert_eq!(cqe.status(), Status::DATA_TRANSFER_ERROR, "command {i}");
                }
                i += 1;
            }
            q
        })
    };
    common::wait_for("I/O in flight", || {
        (ok.load(Ordering::Acquire) >= 20).then_some(())
    });
    // The reply arrives while the I/O thread keeps submitting: the server does not wait for
    // the queues to go idle (a hang here trips the I/O thread's deadline).
    shared.with_client(|cl| {
        cl.dma_unmap(&DmaUnmap {
            flags: 0,
            iova: DATA_IOVA,
            size: 1 << 20,
        })
        .unwrap();
    });
    unmapped.store(true, Ordering::Release);
    let q = io.join().unwrap();
    // The queues live in the driver's pool, which is still mapped: not fatal.
    assert_eq!(shared.csts() & csts::CFS, 0);
    drop(q);
    c.shutdown().unwrap();
    drop(c);
    drop(shared);
    assert_serves_next_client(&t);
}

#[test]
fn unmapping_queue_memory_during_io_pauses_the_queues_until_it_is_mapped_again() {
    let t = common::start_default();
    let (mut c, shared) = common::attach_shared(&t, 1);
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    buf.fill(0, 4096, 0x5A).unwrap();
    let (iova, size) = (nvmemu_driver::DMA_POOL_IOVA, c.dma_pool().size());
    // DMA_UNMAP replies (with success) although the queues it removes are live.
    shared.with_client(|cl| {
        cl.dma_unmap(&DmaUnmap {
            flags: 0,
            iova,
            size,
        })
        .unwrap()
    });
    // Commands rung while the pool (queues + data) is unmapped are not taken.
    for k in 0..8 {
        q.submit_write(nvmemu_spec::Nsid(1), nvmemu_spec::Lba(k * 8), 8, &buf, k)
            .unwrap();
    }
    q.ring().unwrap();
    // A register round trip runs between two poller passes: several passes have seen the
    // doorbell by the time it returns, and none took a command.
    for _ in 0..3 {
        assert_eq!(shared.csts() & csts::CFS, 0, "not fatal");
    }
    let mut seen = 0;
    q.poll_completions(64, |_, _| seen += 1).unwrap();
    assert_eq!(seen, 0, "no completion while the queues are unmapped");
    // The same memory mapped again: the queued writes run and complete, none lost.
    shared.with_client(|cl| {
        cl.dma_map(
            &nvmemu_vfio_user::DmaMap {
                flags: 3,
                offset: 0,
                iova,
                size,
            },
            Some(c.dma_pool().fd()),
        )
        .unwrap()
    });
    let mut done = 0u64;
    common::wait_for("the paused writes to complete", || {
        q.poll_completions(64, |_, r| {
            r.unwrap();
            done += 1;
        })
        .unwrap();
        (done == 8).then_some(())
    });
    let rbuf = c.alloc_dma(4096).unwrap();
    q.read_blocking(nvmemu_spec::Nsid(1), nvmemu_spec::Lba(56), 8, &rbuf)
        .unwrap();
    let mut back = vec![0u8; 4096];
    rbuf.copy_to(0, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0x5A));
    drop(q);
    c.shutdown().unwrap();
    drop(c);
    drop(shared);
    assert_serves_next_client(&t);
}

#[test]
fn unaligned_dma_map_offsets_are_honoured_exactly() {
    let t = common::start_default();
    let (mut c, shared) = common::attach_shared(&t, 1);
    let mem = HostMem::new(1 << 20, 0);
    let marker = common::pattern(4096, 0x33);
    mem.map.copy_from(0x100, &marker).unwrap();
    // fd offset 0x100 (not page aligned): the server maps the page below and the device sees
    // fd byte 0x100 at DATA_IOVA, as libvfio-user does.
    shared.with_client(|cl| {
        cl.dma_map(&map_req(DATA_IOVA, 0x2000, 0x100), Some(mem.fd.as_fd()))
            .unwrap()
    });
    let mut q = c.take_qpair().unwrap();
    let cqe = q
        .execute_raw(rw_sqe(IoOpcode::Write, 0, 8, DATA_IOVA), None)
        .unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
    let back = c.alloc_dma(4096).unwrap();
    q.read_blocking(nvmemu_spec::Nsid(1), nvmemu_spec::Lba(0), 8, &back)
        .unwrap();
    let mut got = vec![0u8; 4096];
    back.copy_to(0, &mut got).unwrap();
    assert!(got == marker, "device read the wrong bytes of the fd");
    // The map ends 0x2000 bytes later, not at a page boundary of the fd.
    let cqe = q
        .execute_raw(rw_sqe(IoOpcode::Write, 0, 1, DATA_IOVA + 0x2000), None)
        .unwrap();
    assert_eq!(cqe.status(), Status::DATA_TRANSFER_ERROR);
    drop(q);
    c.shutdown().unwrap();
    drop(c);
    drop(shared);
    assert_serves_next_client(&t);
}

#[test]
fn client_vanishing_with_io_in_flight_leaves_the_server_serving() {
    let t = common::start_default();
    let (mut c, shared) = common::attach_shared(&t, 1);
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    for k in 0..32 {
        q.submit_write(nvmemu_spec::Nsid(1), nvmemu_spec::Lba(k * 8), 8, &buf, k)
            .unwrap();
    }
    q.ring().unwrap();
    // Hang up without any shutdown: no queue deletion, no unmap.
    shared.with_client(|cl| {
        rustix::net::shutdown(cl.stream_fd(), rustix::net::Shutdown::Both).unwrap()
    });
    std::mem::forget(q);
    std::mem::forget(c);
    drop(shared);
    assert_serves_next_client(&t);
}

// ---------------------------------------------------------------------------------------
// Memory that vanishes under the server (issue 15 item 1): a client shrinks a file it
// DMA-mapped, or the doorbell memfd REGION_INFO gave it. The server never takes SIGBUS.

#[test]
fn shrinking_a_dma_mapped_memfd_under_io_fails_that_command_and_the_server_serves_on() {
    let t = common::start_default();
    // A second controller on the same (only) poller, with its client attached throughout.
    let dir2 = common::add_controller(&t);
    let mut other = nvmemu_driver::Controller::attach(dir2.path(), common::opts(1)).unwrap();
    let (mut c, shared) = common::attach_shared(&t, 1);
    let data = HostMem::new(1 << 20, DATA_IOVA);
    shared.with_client(|cl| data.dma_map(cl).unwrap());
    let mut q = c.take_qpair().unwrap();
    let ok = Arc::new(AtomicU32::new(0));
    let io = {
        let ok = ok.clone();
        std::thread::spawn(move || {
            // Write and read 4 KiB pieces of the data memfd until a command fails: the one
            // whose data vanished, with Data Transfer Error. The controller is then fatal
            // and takes nothing more, so the loop must stop there.
            let start = Instant::now();
            for i in 0u64.. {
                assert!(start.elapsed() < common::DEADLINE, "no command failed");
                let cqe = mixed_io(&mut q, i);
                if cqe.status() != Status::SUCCESS {
                    return cqe.status();
                }
                ok.fetch_add(1, Ordering::Release);
            }
            unreachable!()
        })
    };
    common::wait_for("I/O in flight", || {
        (ok.load(Ordering::Acquire) >= 20).then_some(())
    });
    rustix::fs::ftruncate(&data.fd, 0).unwrap();
    assert_eq!(io.join().unwrap(), Status::DATA_TRANSFER_ERROR);
    let st = shared.csts();
    assert_eq!(st & csts::CFS, csts::CFS, "controller fatal: {st:#x}");
    let faults = t
        .target
        .on_controller(t.id, |pc| pc.ctrl.stats().memory_faults)
        .unwrap();
    assert_eq!(faults, 1);
    // The other controller on that poller never noticed.
    common::verified_io_on(&mut other);
    drop(c);
    drop(shared);
    assert_serves_next_client(&t);
}

#[test]
fn shrinking_the_memfd_holding_a_queue_makes_the_controller_fatal() {
    let t = common::start_default();
    let mut h = common::RawHost::connect(&t);
    let mut q = h.create_io_pair(1, false, 0);
    h.verified_io(&mut q, 8, &common::pattern(4096, 3));
    // Keep the admin queue (first 8 KiB), take away I/O queue 1 and the data area.
    rustix::fs::ftruncate(&h.mem.fd, 0x2000).unwrap();
    // The SQE lands in a page this process no longer has either (recovered here too): the
    // server reads zeros where the SQE was, its access faults, and no completion can reach
    // the host; the controller reports Controller Fatal Status.
    q.submit(
        &h.mem.map,
        &h.db,
        rw_sqe(IoOpcode::Write, 0, 8, h.mem.iova_of(common::RawHost::DATA)),
    );
    common::wait_csts(&mut h.client, "CSTS.CFS", |v| v & csts::CFS != 0);
    // Admin commands stop too (the controller is fatal until reset), and a reset recovers.
    h.client.reset().unwrap();
    drop(h);
    assert_serves_next_client(&t);
}

#[test]
fn the_doorbell_memfd_cannot_be_resized_by_the_client() {
    let t = common::start_default();
    let mut client = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    let (_, fd) = client.region_info(0).unwrap();
    let fd = fd.expect("BAR0 comes with its fd");
    for size in [0, 0x1000, 1 << 30] {
        assert_eq!(
            rustix::fs::ftruncate(&fd, size),
            Err(Errno::PERM),
            "ftruncate to {size:#x}"
        );
    }
    drop(client);
    // The server's own doorbell page is intact: the next client's I/O rings through it.
    assert_serves_next_client(&t);
}

// ---------------------------------------------------------------------------------------
// Interrupt fds (issue 15 item 5): only eventfds, never a blocking write.

const MSIX: u32 = 2;
const ERR: u32 = 3;

fn set_irqs_req(index: u32, flags: u32, count: u32) -> SetIrqs {
    SetIrqs {
        flags,
        index,
        start: 0,
        count,
    }
}

#[test]
fn a_pipe_as_interrupt_fd_is_refused_with_einval() {
    let t = common::start_default();
    let mut h = common::RawHost::connect(&t);
    let (_rd, wr) = rustix::pipe::pipe().unwrap();
    let trig = SetIrqs::DATA_EVENTFD | SetIrqs::ACTION_TRIGGER;
    for index in [MSIX, ERR] {
        let r = h
            .client
            .set_irqs(&set_irqs_req(index, trig, 1), &[wr.as_fd()]);
        assert_eq!(errno_of(r), Errno::INVAL, "index {index}");
    }
    // The same client goes on: an eventfd is accepted, I/O works.
    let efd = common::eventfd();
    h.client
        .set_irqs(&set_irqs_req(MSIX, trig, 1), &[efd.as_fd()])
        .unwrap();
    let mut q = h.create_io_pair(1, false, 0);
    h.verified_io(&mut q, 16, &common::pattern(4096, 9));
    drop(h);
    assert_serves_next_client(&t);
}

#[test]
fn a_full_blocking_eventfd_does_not_stall_the_poller_or_the_control_thread() {
    let t = common::start_default();
    let mut h = common::RawHost::connect(&t);
    // Blocking eventfds at their maximum count: one more write would block for ever.
    let full: Vec<_> = (0..3)
        .map(|_| {
            let fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).unwrap();
            rustix::io::write(&fd, &(u64::MAX - 1).to_ne_bytes()).unwrap();
            fd
        })
        .collect();
    let trig = SetIrqs::DATA_EVENTFD | SetIrqs::ACTION_TRIGGER;
    let msix: Vec<_> = full[..2].iter().map(|f| f.as_fd()).collect();
    h.client
        .set_irqs(&set_irqs_req(MSIX, trig, 2), &msix)
        .unwrap();
    h.client
        .set_irqs(&set_irqs_req(ERR, trig, 1), &[full[2].as_fd()])
        .unwrap();
    // MSI-X on; I/O queue 1 interrupts on vector 1: every completion signals a full fd.
    h.client
        .region_write(7, 0x84 + 2, &(1u16 << 15).to_le_bytes())
        .unwrap();
    let mut q = h.create_io_pair(1, true, 1);
    for lba in 0..20 {
        h.verified_io(&mut q, lba * 8, &common::pattern(4096, lba as u8));
    }
    // A loopback trigger of the ERR index (control thread) returns too.
    h.client
        .set_irqs(
            &set_irqs_req(ERR, SetIrqs::DATA_NONE | SetIrqs::ACTION_TRIGGER, 1),
            &[],
        )
        .unwrap();
    drop(h);
    assert_serves_next_client(&t);
}

// ---------------------------------------------------------------------------------------
// Clients that do not keep up their side (issue 15 items 2 and 5): deadlines, one client
// per controller.

fn short_deadlines() -> nvmemu_device::Deadlines {
    nvmemu_device::Deadlines {
        version: Duration::from_millis(2500),
        message: Duration::from_millis(300),
        reply: Duration::from_millis(300),
    }
}

/// Read until the server closes the connection; how long that took.
fn time_to_eof(c: &mut RawConn) -> Duration {
    use std::io::Read;
    let start = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => return start.elapsed(),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return start.elapsed(),
            Err(e) => panic!("no EOF within the deadline: {e}"),
        }
    }
}

/// Queue `n` 4 KiB config-space reads without reading a reply (from a thread, since the
/// client's own sends block once the server stops reading).
fn flood_without_reading(c: &RawConn, n: usize) -> std::thread::JoinHandle<()> {
    let mut stream = c.stream.try_clone().unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    std::thread::spawn(move || {
        use std::io::Write;
        let payload = access_payload(7, 0, 4096);
        for id in 0..n {
            let mut msg = vec![0u8; 16];
            msg[0..2].copy_from_slice(&(id as u16).to_le_bytes());
            msg[2..4].copy_from_slice(&REGION_READ.to_le_bytes());
            msg[4..8].copy_from_slice(&((16 + payload.len()) as u32).to_le_bytes());
            msg.extend_from_slice(&payload);
            if stream.write_all(&msg).is_err() {
                return;
            }
        }
    })
}

#[test]
fn a_client_that_never_reads_its_replies_is_dropped() {
    let t = common::start_with_deadlines(short_deadlines());
    let mut c = RawConn::connect_negotiated(&t);
    // 2000 replies of 4 KiB are far more than the socket buffers hold.
    let writer = flood_without_reading(&c, 2000);
    // Let the server block on a full socket, then start reading: by then it has given up.
    std::thread::sleep(Duration::from_millis(1000));
    let waited = time_to_eof(&mut c);
    writer.join().unwrap();
    assert!(waited < Duration::from_secs(5), "EOF after {waited:?}");
    // Its control thread is free: the mailbox answers and the next client is served.
    t.target.on_controller(t.id, |_| ()).unwrap();
    assert_serves_next_client(&t);
}

#[test]
fn removing_a_controller_does_not_wait_for_a_client_that_never_reads() {
    // Default (5 s) deadlines: removal must not wait for them to pass.
    let t = common::start_default();
    let c = RawConn::connect_negotiated(&t);
    let writer = flood_without_reading(&c, 2000);
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    t.target.remove_controller(t.id).unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(2), "removal took {took:?}");
    drop(c);
    writer.join().unwrap();
}

#[test]
fn a_client_that_sends_a_byte_at_a_time_is_dropped() {
    let t = common::start_with_deadlines(short_deadlines());
    let mut c = RawConn::connect_negotiated(&t);
    let mut msg = vec![0u8; 16];
    msg[2..4].copy_from_slice(&DEVICE_GET_INFO.to_le_bytes());
    msg[4..8].copy_from_slice(&32u32.to_le_bytes());
    msg.extend_from_slice(&device_info_payload());
    let start = Instant::now();
    let mut dropped = false;
    for b in &msg {
        use std::io::Write;
        if c.stream.write_all(std::slice::from_ref(b)).is_err() {
            dropped = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // 32 bytes at 10 per second would take 3.2 s; the message deadline is 0.3 s.
    if !dropped {
        assert!(
            c.closed_by_server(),
            "a whole message, slowly, was answered"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(4));
    assert_serves_next_client(&t);
}

#[test]
fn a_half_closed_client_is_noticed() {
    let t = common::start_with_deadlines(short_deadlines());
    let mut c = RawConn::connect_negotiated(&t);
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(c.closed_by_server());
    assert_serves_next_client(&t);
}

#[test]
fn an_idle_first_client_gets_the_second_one_a_busy_error_then_is_dropped() {
    // VERSION deadline 4 s: well after both refusals below (1 s hand-over grace each).
    let t = common::start_with_deadlines(nvmemu_device::Deadlines {
        version: Duration::from_secs(4),
        ..short_deadlines()
    });
    let mut idle = RawConn::connect(&t);
    // Connected, no VERSION: the controller is taken. A second client hears so at once
    // (after the short hand-over grace), instead of hanging.
    let start = Instant::now();
    let second = nvmemu_vfio_user::Client::connect(&t.socket());
    assert!(
        matches!(second, Err(nvmemu_vfio_user::ClientError::Busy)),
        "{second:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(3));
    assert_eq!(
        nvmemu_vfio_user::ClientError::Busy.to_string(),
        "Controller is in use by another client"
    );
    // A raw client sees the protocol's answer: an error reply to VERSION with EBUSY.
    let mut raw = RawConn::connect(&t);
    let r = raw.request(1, 0, &[0, 0, 1, 0]);
    assert_eq!(r.header.command, 1);
    assert_eq!(r.errno(), Errno::BUSY);
    assert!(raw.closed_by_server());
    // The idle client is dropped once the VERSION deadline (4 s) passes.
    let waited = time_to_eof(&mut idle);
    assert!(start.elapsed() < Duration::from_secs(8), "{waited:?}");
    assert_serves_next_client(&t);
}
