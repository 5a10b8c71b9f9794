// SPDX-License-Identifier: Apache-2.0
//! The vfio-user protocol as QEMU's and SPDK's clients speak it, against the real target on
//! a socket (vfio-user spec "Commands"), and the NVMe data path through it: PRP lists, SGLs
//! (NVMe Base 1.4, 4.3 and 4.4) and several queue pairs at once.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::os::fd::AsFd;

use common::{RawConn, access_payload, device_info_payload, errno_of, pattern};
use nvmemu_driver::sqe::rw;
use nvmemu_spec::opcode::IoOpcode;
use nvmemu_spec::{Cid, SglDescriptor, SglKind};
use nvmemu_spec::{Lba, Nsid, Psdt, Sqe, Status};
use nvmemu_vfio_user::{Client, Errno};

const VERSION: u16 = 1;
const DEVICE_GET_INFO: u16 = 4;
const GET_REGION_INFO: u16 = 5;
const GET_IRQ_INFO: u16 = 7;
const REGION_READ: u16 = 9;
const REGION_WRITE: u16 = 10;

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

fn region_info_request(argsz: u32, index: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0..4].copy_from_slice(&argsz.to_le_bytes());
    p[8..12].copy_from_slice(&index.to_le_bytes());
    p
}

#[test]
fn version_from_spdk_client_without_json_succeeds() {
    let t = common::start_default();
    let mut c = RawConn::connect(&t);
    // SPDK: major 0, minor 1, no capabilities (4-byte payload).
    let reply = c.request(VERSION, 0, &[0, 0, 1, 0]).ok(VERSION);
    assert_eq!(&reply.payload[0..4], &[0, 0, 0, 0], "reply is version 0.0");
    let json = &reply.payload[4..];
    assert_eq!(json.last(), Some(&0), "JSON is NUL-terminated");
    let text = std::str::from_utf8(&json[..json.len() - 1]).unwrap();
    assert!(text.contains("\"max_msg_fds\""), "{text}");
    assert!(!text.contains("write_multiple"), "{text}");
    // The stream is in sync: the next command is answered.
    let info = c
        .request(DEVICE_GET_INFO, 0, &device_info_payload())
        .ok(DEVICE_GET_INFO);
    assert_eq!(u32_at(&info.payload, 4), 3);
}

#[test]
fn spdk_sized_region_info_request_gets_sparse_area_and_fd_and_stays_in_sync() {
    let t = common::start_default();
    let mut c = RawConn::connect_negotiated(&t);
    // SPDK sends argsz 4064 with a 4064-byte payload; only the index matters.
    let reply = c
        .request(GET_REGION_INFO, 0, &region_info_request(4064, 0, 4064))
        .ok(GET_REGION_INFO);
    let p = &reply.payload;
    assert_eq!(p.len(), 64, "info + sparse cap with one area");
    assert_eq!(u32_at(p, 0), 64, "argsz");
    assert_eq!(u32_at(p, 4), 1 | 2 | 4 | 8, "READ|WRITE|MMAP|CAPS");
    assert_eq!(u32_at(p, 8), 0, "index");
    assert_eq!(u32_at(p, 12), 32, "cap_offset");
    assert_eq!(u64_at(p, 16), 0x4000, "BAR0 size");
    // Sparse mmap cap: id 1, version 1, next 0, one area {0x1000, 0x1000}.
    assert_eq!(u32_at(p, 32), 1 | (1 << 16));
    assert_eq!(u32_at(p, 36), 0);
    assert_eq!(u32_at(p, 40), 1, "nr_areas");
    assert_eq!((u64_at(p, 48), u64_at(p, 56)), (0x1000, 0x1000));
    assert_eq!(reply.fds.len(), 1, "exactly one fd");
    let st = rustix::fs::fstat(&reply.fds[0]).unwrap();
    let file_offset = u64_at(p, 24);
    assert!(
        st.st_size.cast_unsigned() >= file_offset + 0x2000,
        "fd covers the area"
    );
    // The whole 4064-byte request was consumed: the next one is answered correctly.
    let reply = c
        .request(GET_REGION_INFO, 0, &region_info_request(4064, 7, 4064))
        .ok(GET_REGION_INFO);
    assert_eq!(reply.payload.len(), 32);
    assert_eq!(u32_at(&reply.payload, 8), 7);
    assert_eq!(u64_at(&reply.payload, 16), 4096, "PCIe config space");
    assert!(reply.fds.is_empty());
}

#[test]
fn qemu_style_region_info_is_truncated_then_complete() {
    let t = common::start_default();
    let mut c = RawConn::connect_negotiated(&t);
    let first = c
        .request(GET_REGION_INFO, 0, &region_info_request(32, 0, 32))
        .ok(GET_REGION_INFO);
    assert_eq!(first.payload.len(), 32, "fits QEMU's 32-byte buffer");
    assert_eq!(u32_at(&first.payload, 0), 64, "full size for the retry");
    assert_eq!(
        u32_at(&first.payload, 4) & 8,
        0,
        "no CAPS in a truncated reply"
    );
    assert!(first.fds.is_empty(), "fd only with the caps");
    let full = c
        .request(GET_REGION_INFO, 0, &region_info_request(64, 0, 32))
        .ok(GET_REGION_INFO);
    assert_eq!(full.payload.len(), 64);
    assert_eq!(u32_at(&full.payload, 4) & 8, 8);
    assert_eq!(full.fds.len(), 1);
}

#[test]
fn device_info_and_irq_info_describe_an_nvme_pci_function() {
    let t = common::start_default();
    let mut c = Client::connect(&t.socket()).unwrap();
    let info = c.device_info().unwrap();
    assert_eq!(info.flags, 1 | 2, "RESET | PCI");
    assert_eq!((info.num_regions, info.num_irqs), (9, 5));
    let counts: Vec<(u32, u32)> = (0..5)
        .map(|i| {
            let irq = c.irq_info(i).unwrap();
            (irq.flags, irq.count)
        })
        .collect();
    // INTx 1, MSI 0, MSI-X 64 (the default vector count), ERR 1, REQ 1; EVENTFD only.
    assert_eq!(counts, vec![(1, 1), (1, 0), (1, 64), (1, 1), (1, 1)]);
    assert_eq!(errno_of(c.irq_info(5)), Errno::INVAL);
    // The raw form: a 16-byte request for index 2.
    drop(c); // one client at a time
    let mut raw = RawConn::connect_negotiated(&t);
    let mut p = 16u32.to_le_bytes().to_vec();
    p.extend_from_slice(&[0; 4]);
    p.extend_from_slice(&2u32.to_le_bytes());
    p.extend_from_slice(&[0; 4]);
    let r = raw.request(GET_IRQ_INFO, 0, &p).ok(GET_IRQ_INFO);
    assert_eq!(u32_at(&r.payload, 12), 64);
}

#[test]
fn regions_have_the_documented_sizes_and_bad_indexes_fail() {
    let t = common::start_default();
    let mut c = Client::connect(&t.socket()).unwrap();
    let sizes: Vec<u64> = (0..9).map(|i| c.region_info(i).unwrap().0.size).collect();
    assert_eq!(sizes, vec![0x4000, 0, 0, 0, 0x1000, 0x1000, 0, 4096, 0]);
    assert_eq!(
        c.region_info(1).unwrap().0.flags,
        0,
        "absent BAR has no flags"
    );
    assert_eq!(errno_of(c.region_info(9)), Errno::INVAL);
    assert_eq!(errno_of(c.region_info(u32::MAX)), Errno::INVAL);
}

#[test]
fn reads_past_a_region_end_get_an_errno() {
    let t = common::start_default();
    let mut c = Client::connect(&t.socket()).unwrap();
    let mut b4 = [0u8; 4];
    let mut b8 = [0u8; 8];
    assert_eq!(errno_of(c.region_read(7, 4094, &mut b4)), Errno::INVAL);
    assert_eq!(errno_of(c.region_read(7, 4096, &mut b4)), Errno::INVAL);
    assert_eq!(
        errno_of(c.region_read(0, 0x4000 - 4, &mut b8)),
        Errno::INVAL
    );
    assert_eq!(errno_of(c.region_read(4, 0x1000, &mut b4)), Errno::INVAL);
    assert_eq!(errno_of(c.region_read(1, 0, &mut b4)), Errno::INVAL);
    assert_eq!(errno_of(c.region_read(8, 0, &mut b4)), Errno::INVAL);
    assert_eq!(errno_of(c.region_write(7, 4095, &b4)), Errno::INVAL);
    // Offset + count wrapping around is refused, not wrapped.
    drop(c); // one client at a time
    let mut raw = RawConn::connect_negotiated(&t);
    let r = raw.request(REGION_READ, 0, &access_payload(7, u64::MAX - 1, 4));
    assert_eq!(r.errno(), Errno::INVAL);
    // The last dword of each region is readable.
    let r = raw
        .request(REGION_READ, 0, &access_payload(7, 4092, 4))
        .ok(REGION_READ);
    assert_eq!(r.payload.len(), 16 + 4);
}

#[test]
fn config_space_identity_and_bar_sizing() {
    let t = common::start_default();
    let mut c = Client::connect(&t.socket()).unwrap();
    let read32 = |c: &mut Client, off: u64| {
        let mut b = [0u8; 4];
        c.region_read(7, off, &mut b).unwrap();
        u32::from_le_bytes(b)
    };
    assert_eq!(read32(&mut c, 0) & 0xFFFF, 0x4e58, "vendor");
    assert_eq!(read32(&mut c, 8) >> 8, 0x01_08_02, "class NVMe");
    // BAR sizing probes (PCI 3.0, 6.2.5.1): all ones reads back the size mask.
    c.region_write(7, 0x10, &u32::MAX.to_le_bytes()).unwrap();
    assert_eq!(read32(&mut c, 0x10), 0xFFFF_C000, "BAR0 is 16 KiB");
    c.region_write(7, 0x20, &u32::MAX.to_le_bytes()).unwrap();
    assert_eq!(read32(&mut c, 0x20), 0xFFFF_F000, "BAR4 is 4 KiB");
    c.region_write(7, 0x14, &u32::MAX.to_le_bytes()).unwrap();
    assert_eq!(read32(&mut c, 0x14), 0, "BAR1 not implemented");
    c.region_write(7, 0x30, &0xFFFF_F800u32.to_le_bytes())
        .unwrap();
    assert_eq!(read32(&mut c, 0x30), 0, "no expansion ROM");
    // Identity is read-only.
    c.region_write(7, 0, &u32::MAX.to_le_bytes()).unwrap();
    assert_eq!(read32(&mut c, 0) & 0xFFFF, 0x4e58);
    // A BAR address written afterwards sticks above the size bits.
    c.region_write(7, 0x10, &0xFEB0_0000u32.to_le_bytes())
        .unwrap();
    assert_eq!(read32(&mut c, 0x10), 0xFEB0_0000);
}

#[test]
fn posted_writes_get_no_reply_and_the_stream_stays_in_sync() {
    let t = common::start_default();
    let mut c = RawConn::connect_negotiated(&t);
    // A posted (NO_REPLY) config write, then a posted write that fails: neither is answered.
    let mut w = access_payload(7, 0x3C, 1);
    w.push(0x0B);
    c.send(REGION_WRITE, 0x10, &w, &[]);
    let mut bad = access_payload(9, 0, 4);
    bad.extend_from_slice(&[0; 4]);
    c.send(REGION_WRITE, 0x10, &bad, &[]);
    // The next message received is the reply to this read.
    let r = c
        .request(REGION_READ, 0, &access_payload(7, 0x3C, 1))
        .ok(REGION_READ);
    assert_eq!(r.payload[16], 0x0B, "the posted write was applied");
}

// ---------------------------------------------------------------------------------------
// Data path.

/// Bytes written at `lba` through the driver's PRPs, for SGL reads to check.
fn prp_write(
    q: &mut nvmemu_driver::IoQpair,
    c: &nvmemu_driver::AttachedController,
    lba: u64,
    data: &[u8],
) {
    let buf = c.alloc_dma(data.len() as u64).unwrap();
    buf.copy_from(0, data).unwrap();
    q.write_blocking(Nsid(1), Lba(lba), (data.len() / 512) as u32, &buf)
        .unwrap();
}

fn prp_read(
    q: &mut nvmemu_driver::IoQpair,
    c: &nvmemu_driver::AttachedController,
    lba: u64,
    len: usize,
) -> Vec<u8> {
    let buf = c.alloc_dma(len as u64).unwrap();
    q.read_blocking(Nsid(1), Lba(lba), (len / 512) as u32, &buf)
        .unwrap();
    let mut out = vec![0u8; len];
    buf.copy_to(0, &mut out).unwrap();
    out
}

fn sgl_sqe(op: IoOpcode, lba: u64, nblocks: u32, desc: SglDescriptor) -> Sqe {
    let mut sqe = rw(op, Nsid(1), Lba(lba), nblocks);
    sqe.cdw0 = Sqe::make_cdw0(u8::from(op), Psdt::SglMptrContiguous, Cid(0));
    (sqe.dptr1, sqe.dptr2) = desc.to_dptr();
    sqe
}

fn data_block(addr: u64, len: u32) -> SglDescriptor {
    SglDescriptor::new(SglKind::DataBlock { addr, len })
}

#[test]
fn identify_create_queues_and_verify_through_prp_lists() {
    let t = common::start_default();
    let mut c = common::attach(&t, 1);
    assert_eq!(c.identify_controller().unwrap().sn.trim(), "TESTSERIAL01");
    let mut q = c.take_qpair().unwrap();
    // 1 MiB (MDTS 8): PRP1 plus a 255-entry PRP list.
    let big = pattern(1 << 20, 3);
    prp_write(&mut q, &c, 1000, &big);
    assert!(prp_read(&mut q, &c, 1000, big.len()) == big);
    // A buffer starting 512 bytes into a page: PRP1 has an offset, the list follows.
    let len = 64 * 1024;
    let buf = c.alloc_dma(len + 4096).unwrap().slice(512, len).unwrap();
    let data = pattern(len as usize, 9);
    buf.copy_from(0, &data).unwrap();
    q.write_blocking(Nsid(1), Lba(5000), 128, &buf).unwrap();
    assert!(prp_read(&mut q, &c, 5000, len as usize) == data);
    drop(q);
    c.shutdown().unwrap();
}

#[test]
fn sgl_data_block_segments_and_last_segment_write_and_read() {
    let t = common::start_default();
    let mut c = common::attach(&t, 1);
    let mut q = c.take_qpair().unwrap();

    // 1. One Data Block in the SQE: write 8 blocks, read back through PRPs.
    let data = pattern(4096, 21);
    let buf = c.alloc_dma(4096).unwrap();
    buf.copy_from(0, &data).unwrap();
    let cqe = q
        .execute_raw(
            sgl_sqe(IoOpcode::Write, 100, 8, data_block(buf.iova().0, 4096)),
            None,
        )
        .unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
    assert!(prp_read(&mut q, &c, 100, 4096) == data);

    // 2. SQE -> Segment [DB 1024, DB 512, Last Segment] -> [DB 1536, DB 1024]: 4 KiB from
    // five scattered pieces at odd offsets.
    let data = pattern(4096, 77);
    let pieces = c.alloc_dma(5 * 4096).unwrap();
    let spans: [(u64, u32); 4] = [
        (0x0200, 1024),
        (0x1400, 512),
        (0x2010, 1536),
        (0x3000, 1024),
    ];
    let mut pos = 0usize;
    for &(off, len) in &spans {
        pieces
            .copy_from(off, &data[pos..pos + len as usize])
            .unwrap();
        pos += len as usize;
    }
    let base = pieces.iova().0;
    let segs = c.alloc_dma(4096).unwrap();
    let seg2_off = 0x800u64;
    let seg1 = [
        data_block(base + spans[0].0, spans[0].1),
        data_block(base + spans[1].0, spans[1].1),
        SglDescriptor::new(SglKind::LastSegment {
            addr: segs.iova().0 + seg2_off,
            len: 32,
        }),
    ];
    let seg2 = [
        data_block(base + spans[2].0, spans[2].1),
        data_block(base + spans[3].0, spans[3].1),
    ];
    for (i, d) in seg1.iter().enumerate() {
        segs.write_obj(16 * i as u64, d).unwrap();
    }
    for (i, d) in seg2.iter().enumerate() {
        segs.write_obj(seg2_off + 16 * i as u64, d).unwrap();
    }
    let first = SglDescriptor::new(SglKind::Segment {
        addr: segs.iova().0,
        len: 48,
    });
    let cqe = q
        .execute_raw(sgl_sqe(IoOpcode::Write, 200, 8, first), None)
        .unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
    assert!(prp_read(&mut q, &c, 200, 4096) == data);

    // 3. Read the same blocks back through the same SGL into cleared pieces.
    pieces.fill(0, 5 * 4096, 0).unwrap();
    let cqe = q
        .execute_raw(sgl_sqe(IoOpcode::Read, 200, 8, first), None)
        .unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
    let mut back = Vec::new();
    for &(off, len) in &spans {
        let mut piece = vec![0u8; len as usize];
        pieces.copy_to(off, &mut piece).unwrap();
        back.extend_from_slice(&piece);
    }
    assert!(back == data);

    // 4. A Last Segment straight from the SQE.
    let data = pattern(1024, 5);
    let one = c.alloc_dma(4096).unwrap();
    one.copy_from(0x100, &data).unwrap();
    segs.write_obj(0xC00, &data_block(one.iova().0 + 0x100, 1024))
        .unwrap();
    let last = SglDescriptor::new(SglKind::LastSegment {
        addr: segs.iova().0 + 0xC00,
        len: 16,
    });
    let cqe = q
        .execute_raw(sgl_sqe(IoOpcode::Write, 300, 2, last), None)
        .unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
    assert!(prp_read(&mut q, &c, 300, 1024) == data);
    drop(q);
    c.shutdown().unwrap();
}

#[test]
fn sgl_bit_bucket_discards_the_middle_of_a_read() {
    let t = common::start_default();
    let mut c = common::attach(&t, 1);
    let mut q = c.take_qpair().unwrap();
    let data = pattern(4096, 99);
    prp_write(&mut q, &c, 400, &data);
    // [DB 1024][Bit Bucket 2048][DB 1024] over 8 blocks.
    let out = c.alloc_dma(8192).unwrap();
    out.fill(0, 8192, 0xEE).unwrap();
    let segs = c.alloc_dma(4096).unwrap();
    let descs = [
        data_block(out.iova().0, 1024),
        SglDescriptor::new(SglKind::BitBucket { len: 2048 }),
        data_block(out.iova().0 + 4096, 1024),
    ];
    for (i, d) in descs.iter().enumerate() {
        segs.write_obj(16 * i as u64, d).unwrap();
    }
    let last = SglDescriptor::new(SglKind::LastSegment {
        addr: segs.iova().0,
        len: 48,
    });
    let cqe = q
        .execute_raw(sgl_sqe(IoOpcode::Read, 400, 8, last), None)
        .unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
    let mut head = vec![0u8; 1024];
    let mut tail = vec![0u8; 1024];
    let mut gap = vec![0u8; 3072];
    out.copy_to(0, &mut head).unwrap();
    out.copy_to(4096, &mut tail).unwrap();
    out.copy_to(1024, &mut gap).unwrap();
    assert!(head == data[..1024], "first 1 KiB delivered");
    assert!(tail == data[3072..], "last 1 KiB delivered");
    assert!(
        gap.iter().all(|&b| b == 0xEE),
        "bit bucket bytes went nowhere"
    );
    // A bit bucket in a write is an error (NVMe Base 4.4: reads only).
    let cqe = q
        .execute_raw(sgl_sqe(IoOpcode::Write, 400, 8, last), None)
        .unwrap();
    assert_eq!(cqe.status(), Status::SGL_DESCRIPTOR_TYPE_INVALID);
    drop(q);
    c.shutdown().unwrap();
}

#[test]
fn several_queue_pairs_do_concurrent_verified_io() {
    let t = common::start_default();
    let mut c = common::attach(&t, 4);
    let qps = c.qpairs();
    assert_eq!(qps.len(), 4);
    const DEPTH: usize = 16;
    const ROUNDS: usize = 8;
    let bufs: Vec<Vec<_>> = (0..qps.len())
        .map(|_| c.dma_pool().alloc_slab(DEPTH, 4096).unwrap())
        .collect();
    let handles: Vec<_> = qps
        .into_iter()
        .zip(bufs)
        .enumerate()
        .map(|(i, (mut q, bufs))| {
            std::thread::spawn(move || {
                // Each queue owns LBAs [i * 8192, ...): write DEPTH commands at once per round,
                // then read them all back at once and compare.
                for round in 0..ROUNDS {
                    let seed = (i * 16 + round) as u8;
                    let lba = |k: usize| ((i * 8192) + (round * DEPTH + k) * 8) as u64;
                    for (k, b) in bufs.iter().enumerate() {
                        b.copy_from(0, &pattern(4096, seed.wrapping_add(k as u8)))
                            .unwrap();
                        q.submit_write(Nsid(1), Lba(lba(k)), 8, b, k as u64)
                            .unwrap();
                    }
                    q.ring().unwrap();
                    reap_all(&mut q, DEPTH);
                    for (k, b) in bufs.iter().enumerate() {
                        b.fill(0, 4096, 0).unwrap();
                        q.submit_read(Nsid(1), Lba(lba(k)), 8, b, k as u64).unwrap();
                    }
                    q.ring().unwrap();
                    reap_all(&mut q, DEPTH);
                    for (k, b) in bufs.iter().enumerate() {
                        let mut back = vec![0u8; 4096];
                        b.copy_to(0, &mut back).unwrap();
                        assert!(
                            back == pattern(4096, seed.wrapping_add(k as u8)),
                            "queue {i} round {round} command {k}"
                        );
                    }
                }
                q
            })
        })
        .collect();
    let qps: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let qids: Vec<u16> = qps.iter().map(|q| q.qid().0).collect();
    assert_eq!(qids, vec![1, 2, 3, 4]);
    drop(qps);
    c.shutdown().unwrap();
}

fn reap_all(q: &mut nvmemu_driver::IoQpair, n: usize) {
    let mut done = 0;
    common::wait_for("completions", || {
        done += q
            .poll_completions(n, |token, res| {
                assert!(res.is_ok(), "command {token}: {res:?}");
            })
            .unwrap();
        (done == n).then_some(())
    });
}

#[test]
fn region_fd_maps_the_doorbells_the_controller_polls() {
    // The BAR0 fd is the doorbell page: a value stored through our mapping reads back
    // through REGION_READ of the same BAR0 offset.
    let t = common::start_default();
    let mut c = Client::connect(&t.socket()).unwrap();
    let (info, fd) = c.region_info(0).unwrap();
    let db = common::map_doorbells(fd.unwrap().as_fd(), info.file_offset);
    db.store_release_u32(0x10, 0xABCD).unwrap();
    let mut b = [0u8; 4];
    c.region_read(0, 0x1010, &mut b).unwrap();
    assert_eq!(u32::from_le_bytes(b), 0xABCD);
    // And the other way round: a doorbell written by message lands in the page.
    c.region_write(0, 0x1018, &7u32.to_le_bytes()).unwrap();
    assert_eq!(db.load_acquire_u32(0x18).unwrap(), 7);
}
