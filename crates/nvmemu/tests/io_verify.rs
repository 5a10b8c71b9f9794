// SPDX-License-Identifier: Apache-2.0
//! Data integrity through the real protocol: our driver against our target on a socket.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use nvmemu_driver::{AttachOptions, AttachedController};
use nvmemu_spec::{Lba, Nsid};

fn attach(t: &common::TestTarget, io_queues: u16) -> AttachedController {
    AttachedController::attach(
        t.dir(),
        AttachOptions {
            io_queues,
            queue_depth: 64,
            dma_pool_bytes: 32 << 20,
            ..AttachOptions::default()
        },
    )
    .expect("driver attaches")
}

#[test]
fn identify_reports_what_was_configured() {
    let t = common::start(&[("malloc", 512, 2048), ("null", 4096, 1024)]);
    let mut c = attach(&t, 1);
    let id = c.identify_controller().unwrap();
    assert_eq!(id.sn.trim(), "TESTSERIAL01");
    assert_eq!(id.mn.trim(), "nvmemu test controller");
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1), Nsid(2)]);
    let ns: Vec<_> = c
        .namespaces()
        .iter()
        .map(|n| (n.nsid, n.nsze, n.lba_size))
        .collect();
    assert_eq!(ns, vec![(Nsid(1), 2048, 512), (Nsid(2), 1024, 4096)]);
    c.shutdown().unwrap();
}

#[test]
fn write_then_read_back_through_prp_lists() {
    let t = common::start(&[("malloc", 512, 1 << 16)]);
    let mut c = attach(&t, 1);
    let mut q = c.take_qpair().unwrap();
    // 128 KiB: PRP1 + a PRP list.
    let len = 128 * 1024;
    let wbuf = c.alloc_dma(len).unwrap();
    let pattern: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    wbuf.copy_from(0, &pattern).unwrap();
    q.write_blocking(Nsid(1), Lba(100), 256, &wbuf).unwrap();
    let rbuf = c.alloc_dma(len).unwrap();
    q.read_blocking(Nsid(1), Lba(100), 256, &rbuf).unwrap();
    let mut back = vec![0u8; len as usize];
    rbuf.copy_to(0, &mut back).unwrap();
    assert_eq!(back, pattern);
    // Unwritten blocks read as zeroes.
    q.read_blocking(Nsid(1), Lba(5000), 8, &rbuf).unwrap();
    let mut z = vec![1u8; 4096];
    rbuf.copy_to(0, &mut z).unwrap();
    assert!(z.iter().all(|&b| b == 0));
    drop(q);
    c.shutdown().unwrap();
}

/// xorshift64*: deterministic test randomness without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const BLOCK: usize = 512;
/// Blocks per unit: each in-flight command owns one unit, so commands in flight never overlap.
const UNIT_BLOCKS: u64 = 64;

/// One thread's random writes then verified random reads on its own queue pair and its own
/// slice of the namespace, `depth` commands in flight, transfers of 1..=64 blocks (up to
/// 32 KiB: PRP1 plus a PRP list) from buffers starting at random dword offsets.
fn write_then_verify(
    pool: nvmemu_driver::DmaPool,
    mut q: nvmemu_driver::IoQpair,
    first_lba: u64,
    units: u64,
    ios: usize,
    seed: u64,
) -> usize {
    let depth = 16usize;
    let slot_bytes = 4096 + UNIT_BLOCKS * BLOCK as u64;
    let bufs = pool.alloc_slab(depth, slot_bytes).unwrap();
    let mut shadow = vec![0u8; usize::try_from(units * UNIT_BLOCKS).unwrap() * BLOCK];
    let mut rng = Rng(seed | 1);
    // (lba, blocks, buffer offset) per busy slot; busy units.
    let mut slots: Vec<Option<(u64, u32, u64)>> = vec![None; depth];
    let mut busy = vec![false; usize::try_from(units).unwrap()];
    let mut checked = 0usize;
    for writing in [true, false] {
        let mut issued = 0usize;
        let mut done = 0usize;
        while done < ios {
            for (slot, s) in slots.iter_mut().enumerate() {
                if s.is_some() || issued == ios {
                    continue;
                }
                let unit = loop {
                    let u = rng.below(units);
                    if !busy[u as usize] {
                        break u;
                    }
                };
                let nblocks = 1 + rng.below(UNIT_BLOCKS) as u32;
                let start = rng.below(UNIT_BLOCKS - u64::from(nblocks) + 1);
                let lba = first_lba + unit * UNIT_BLOCKS + start;
                let off = rng.below(1024) * 4;
                let len = u64::from(nblocks) * BLOCK as u64;
                let buf = bufs[slot].slice(off, len).unwrap();
                let shadow_at = usize::try_from(lba - first_lba).unwrap() * BLOCK;
                let range = shadow_at..shadow_at + len as usize;
                if writing {
                    let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                    buf.copy_from(0, &data).unwrap();
                    shadow[range].copy_from_slice(&data);
                    q.submit_write(Nsid(1), Lba(lba), nblocks, &buf, slot as u64)
                        .unwrap();
                } else {
                    buf.fill(0, len, 0xEE).unwrap();
                    q.submit_read(Nsid(1), Lba(lba), nblocks, &buf, slot as u64)
                        .unwrap();
                }
                busy[unit as usize] = true;
                *s = Some((lba, nblocks, off));
                issued += 1;
            }
            q.ring().unwrap();
            q.poll_completions(depth, |token, res| {
                res.expect("I/O succeeds");
                let slot = usize::try_from(token).unwrap();
                let (lba, nblocks, off) = slots[slot].take().expect("slot in flight");
                busy[usize::try_from((lba - first_lba) / UNIT_BLOCKS).unwrap()] = false;
                if !writing {
                    let len = nblocks as usize * BLOCK;
                    let mut got = vec![0u8; len];
                    bufs[slot].copy_to(off, &mut got).unwrap();
                    let at = usize::try_from(lba - first_lba).unwrap() * BLOCK;
                    assert!(
                        got == shadow[at..at + len],
                        "data mismatch at lba {lba} ({nblocks} blocks)"
                    );
                    checked += 1;
                }
                done += 1;
            })
            .unwrap();
        }
    }
    checked
}

#[test]
fn random_writes_then_verified_reads_on_four_queue_pairs() {
    const THREADS: u64 = 4;
    const UNITS: u64 = 256;
    const IOS: usize = 5000;
    let t = common::start(&[("malloc", 512, THREADS * UNITS * UNIT_BLOCKS)]);
    let mut c = attach(&t, 4);
    let qpairs = c.qpairs();
    assert_eq!(qpairs.len(), 4);
    let checked: usize = std::thread::scope(|s| {
        let handles: Vec<_> = qpairs
            .into_iter()
            .enumerate()
            .map(|(i, q)| {
                let pool = c.dma_pool().clone();
                let i = i as u64;
                s.spawn(move || {
                    write_then_verify(pool, q, i * UNITS * UNIT_BLOCKS, UNITS, IOS, 77 + i)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    // 4 x (5000 writes + 5000 verified reads).
    assert_eq!(checked, 4 * IOS);
    c.shutdown().unwrap();
}

#[test]
fn write_zeroes_and_deallocate_read_back_as_zeroes() {
    let t = common::start(&[("malloc", 512, 4096)]);
    let mut c = attach(&t, 1);
    let mut q = c.take_qpair().unwrap();
    let len = 64 * BLOCK;
    let pattern: Vec<u8> = (0..len).map(|i| (i % 251) as u8 | 1).collect();
    let wbuf = c.alloc_dma(len as u64).unwrap();
    wbuf.copy_from(0, &pattern).unwrap();
    q.write_blocking(Nsid(1), Lba(100), 64, &wbuf).unwrap();
    q.write_blocking(Nsid(1), Lba(1000), 64, &wbuf).unwrap();

    q.write_zeroes_blocking(Nsid(1), Lba(110), 8).unwrap();
    let ranges = c.alloc_dma(4096).unwrap();
    q.deallocate_blocking(Nsid(1), &[(Lba(1000), 4), (Lba(1030), 10)], &ranges)
        .unwrap();

    let rbuf = c.alloc_dma(len as u64).unwrap();
    let mut back = vec![0u8; len];
    let zeroed = |blocks: std::ops::Range<usize>, back: &[u8]| {
        for (b, chunk) in back.chunks(BLOCK).enumerate() {
            let want_zero = blocks.contains(&b);
            let expect: &[u8] = &pattern[b * BLOCK..(b + 1) * BLOCK];
            if want_zero {
                assert!(chunk.iter().all(|&x| x == 0), "block {b} not zeroed");
            } else {
                assert_eq!(chunk, expect, "block {b} changed");
            }
        }
    };
    q.read_blocking(Nsid(1), Lba(100), 64, &rbuf).unwrap();
    rbuf.copy_to(0, &mut back).unwrap();
    zeroed(10..18, &back);
    q.read_blocking(Nsid(1), Lba(1000), 64, &rbuf).unwrap();
    rbuf.copy_to(0, &mut back).unwrap();
    let mut dealloc: Vec<usize> = (0..4).chain(30..40).collect();
    dealloc.sort_unstable();
    for (b, chunk) in back.chunks(BLOCK).enumerate() {
        if dealloc.contains(&b) {
            assert!(
                chunk.iter().all(|&x| x == 0),
                "deallocated block {b} not zero"
            );
        } else {
            assert_eq!(
                chunk,
                &pattern[b * BLOCK..(b + 1) * BLOCK],
                "block {b} changed"
            );
        }
    }
    drop(q);
    c.shutdown().unwrap();
}

/// Submit `sqe` as given on an idle queue pair and return its completion status.
fn raw_status(
    q: &mut nvmemu_driver::IoQpair,
    sqe: nvmemu_spec::Sqe,
    data: Option<(&nvmemu_driver::DmaBuf, u64)>,
) -> nvmemu_spec::Status {
    q.execute_raw(sqe, data).expect("completion").status()
}

fn same_status(a: nvmemu_spec::Status, b: nvmemu_spec::Status) -> bool {
    a.sct == b.sct && a.sc == b.sc
}

#[test]
fn out_of_range_lba_gets_lba_out_of_range() {
    use nvmemu_driver::{NvmeError, sqe};
    use nvmemu_spec::{IoOpcode, Status};
    let t = common::start(&[("malloc", 512, 1024)]);
    let mut c = attach(&t, 1);
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(8192).unwrap();
    // The driver refuses before the device sees it ...
    assert!(matches!(
        q.read_blocking(Nsid(1), Lba(1023), 2, &buf),
        Err(NvmeError::LbaOutOfRange {
            slba: 1023,
            nblocks: 2,
            nsze: 1024
        })
    ));
    // ... and the device refuses it on the wire (NVMe Base 2.0, Figure 102: LBA Out of Range).
    for (slba, n) in [(1023u64, 2u32), (1024, 1), (u64::MAX, 1), (u64::MAX - 2, 8)] {
        let s = raw_status(
            &mut q,
            sqe::rw(IoOpcode::Read, Nsid(1), Lba(slba), n),
            Some((&buf, u64::from(n) * 512)),
        );
        assert!(same_status(s, Status::LBA_OUT_OF_RANGE), "slba {slba}: {s}");
        let s = raw_status(
            &mut q,
            sqe::rw(IoOpcode::Write, Nsid(1), Lba(slba), n),
            Some((&buf, u64::from(n) * 512)),
        );
        assert!(
            same_status(s, Status::LBA_OUT_OF_RANGE),
            "write slba {slba}: {s}"
        );
    }
    let s = raw_status(
        &mut q,
        sqe::rw(IoOpcode::WriteZeroes, Nsid(1), Lba(1020), 8),
        None,
    );
    assert!(
        same_status(s, Status::LBA_OUT_OF_RANGE),
        "write zeroes: {s}"
    );
    // The queue pair still works afterwards.
    q.write_blocking(Nsid(1), Lba(1023), 1, &buf).unwrap();
    drop(q);
    c.shutdown().unwrap();
}

#[test]
fn misaligned_and_oversized_requests_get_the_right_answer() {
    use nvmemu_driver::{NvmeError, sqe};
    use nvmemu_spec::{IoOpcode, Status};
    let t = common::start(&[("malloc", 512, 1 << 14)]);
    let mut c = attach(&t, 1);
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(2 << 20).unwrap();
    let max = q.max_transfer_bytes();
    assert_eq!(max, 1 << 20, "MDTS 8 with 4 KiB pages");
    // Driver side: typed errors, nothing sent.
    let too_many = u32::try_from(max / 512 + 1).unwrap();
    assert!(matches!(
        q.read_blocking(Nsid(1), Lba(0), too_many, &buf),
        Err(NvmeError::TransferTooLarge { .. })
    ));
    let odd = buf.slice(1, 4096).unwrap();
    assert!(matches!(
        q.read_blocking(Nsid(1), Lba(0), 1, &odd),
        Err(NvmeError::BufferMisaligned { .. })
    ));
    assert!(matches!(
        q.read_blocking(Nsid(1), Lba(0), 0, &buf),
        Err(NvmeError::InvalidBlockCount(0))
    ));
    assert!(matches!(
        q.read_blocking(Nsid(9), Lba(0), 1, &buf),
        Err(NvmeError::UnknownNamespace(Nsid(9)))
    ));
    // Device side: a transfer past MDTS is Invalid Field in Command (NVMe Base 2.0, 5.15.2.2
    // MDTS); the PRPs describe only the first page, the length check comes first.
    let s = raw_status(
        &mut q,
        sqe::rw(IoOpcode::Read, Nsid(1), Lba(0), too_many),
        Some((&buf, 4096)),
    );
    assert!(same_status(s, Status::INVALID_FIELD), "oversized: {s}");
    // A second data page (PRP2) that does not start a page: PRP Offset Invalid.
    let mut bad = sqe::rw(IoOpcode::Read, Nsid(1), Lba(0), 16);
    bad.dptr1 = buf.iova().0;
    bad.dptr2 = buf.iova().0 + 4096 + 512;
    let s = raw_status(&mut q, bad, None);
    assert!(
        same_status(s, Status::PRP_OFFSET_INVALID),
        "PRP2 offset: {s}"
    );
    // Namespace that does not exist: Invalid Namespace or Format.
    let s = raw_status(
        &mut q,
        sqe::rw(IoOpcode::Read, Nsid(5), Lba(0), 1),
        Some((&buf, 512)),
    );
    assert!(same_status(s, Status::INVALID_NAMESPACE), "nsid 5: {s}");
    q.read_blocking(Nsid(1), Lba(0), 8, &buf).unwrap();
    drop(q);
    c.shutdown().unwrap();
}

/// NVMe Base 2.0, 4.1.1: PRP entry offsets are dword aligned; a controller may fail a PRP1
/// with bits 1:0 set with PRP Offset Invalid, otherwise it must act as if they were 00b.
#[test]
fn prp1_offset_bits_1_0_set_is_prp_offset_invalid() {
    use nvmemu_driver::sqe;
    use nvmemu_spec::{IoOpcode, Status};
    let t = common::start(&[("malloc", 512, 1024)]);
    let mut c = attach(&t, 1);
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    let pattern: Vec<u8> = (0..512u32).map(|i| (i % 253) as u8 | 0x80).collect();
    buf.copy_from(0, &pattern).unwrap();
    q.write_blocking(Nsid(1), Lba(0), 1, &buf).unwrap();
    buf.fill(0, 4096, 0).unwrap();
    let mut bad = sqe::rw(IoOpcode::Read, Nsid(1), Lba(0), 1);
    bad.dptr1 = buf.iova().0 + 2;
    let s = raw_status(&mut q, bad, None);
    assert!(
        same_status(s, Status::PRP_OFFSET_INVALID),
        "PRP1 with bits 1:0 set: {s}"
    );
    let mut back = vec![0u8; 512];
    buf.copy_to(0, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0), "a refused read moved no data");
    drop(q);
    c.shutdown().unwrap();
}
