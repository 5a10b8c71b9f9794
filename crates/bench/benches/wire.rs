// SPDX-License-Identifier: Apache-2.0
//! Criterion micro-benchmarks of the per-I/O wire work on both sides of a queue pair: SQE
//! decode (I/O and admin), building a completion and writing it into a CQ ring in an
//! anonymous mapping (body copy + Release store of the status/phase word, as the
//! controller posts it), and the benchmark's own per-I/O bookkeeping (offset generator and
//! random map, latency histogram). Run with `cargo bench -p nvmemu-bench`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nvmemu_bench::{LatStat, Offsets, Rng};
use nvmemu_mem::MmapRegion;
use nvmemu_spec::{
    AdminCommand, Cid, Cqe, IoCommand, Psdt, Qid, SglDescriptor, SglKind, Sqe, Status,
};
use zerocopy::IntoBytes;

const READ: u8 = 0x02;
const WRITE: u8 = 0x01;
const IDENTIFY: u8 = 0x06;
const CREATE_IO_SQ: u8 = 0x01;
const CQ_ENTRIES: u64 = 1024;
const CQE_BYTES: u64 = 16;

fn read_prp() -> Sqe {
    Sqe {
        cdw0: Sqe::make_cdw0(READ, Psdt::Prp, Cid(7)),
        nsid: 1,
        dptr1: 0x1_0000_0000,
        dptr2: 0,
        cdw10: 0x1234,
        cdw12: 0,
        ..Sqe::default()
    }
}

fn write_sgl() -> Sqe {
    let (d1, d2) = SglDescriptor::new(SglKind::DataBlock {
        addr: 0x1_0000_0000,
        len: 4096,
    })
    .to_dptr();
    Sqe {
        cdw0: Sqe::make_cdw0(WRITE, Psdt::SglMptrContiguous, Cid(9)),
        nsid: 1,
        dptr1: d1,
        dptr2: d2,
        cdw10: 0x5678,
        cdw12: 7,
        ..Sqe::default()
    }
}

fn admin(opcode: u8, cdw10: u32, cdw11: u32) -> Sqe {
    Sqe {
        cdw0: Sqe::make_cdw0(opcode, Psdt::Prp, Cid(1)),
        dptr1: 0x2_0000_0000,
        cdw10,
        cdw11,
        ..Sqe::default()
    }
}

fn sqe_decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("sqe_decode");
    g.throughput(Throughput::Elements(1));
    let (r, w) = (read_prp(), write_sgl());
    g.bench_function("io_read_prp", |b| {
        b.iter(|| IoCommand::decode(black_box(&r)))
    });
    g.bench_function("io_write_sgl", |b| {
        b.iter(|| IoCommand::decode(black_box(&w)))
    });
    // Identify Controller (CNS 1); Create I/O SQ 1 of 1024 entries on CQ 1, contiguous.
    let id = admin(IDENTIFY, 1, 0);
    let csq = admin(CREATE_IO_SQ, (1023 << 16) | 1, (1 << 16) | 1);
    g.bench_function("admin_identify", |b| {
        b.iter(|| AdminCommand::decode(black_box(&id)))
    });
    g.bench_function("admin_create_io_sq", |b| {
        b.iter(|| AdminCommand::decode(black_box(&csq)))
    });
    // The copy out of shared memory that precedes every decode.
    let ring = MmapRegion::anonymous(64 * CQ_ENTRIES).expect("anonymous mapping");
    ring.write_obj(0, &r).expect("SQE inside the ring");
    g.bench_function("sqe_copy_and_decode", |b| {
        b.iter(|| {
            let sqe: Sqe = ring.read_obj(black_box(0)).expect("SQE inside the ring");
            IoCommand::decode(&sqe)
        })
    });
    g.finish();
}

fn completion_posting(c: &mut Criterion) {
    let ring = MmapRegion::anonymous(CQ_ENTRIES * CQE_BYTES).expect("anonymous mapping");
    let mut g = c.benchmark_group("completion_posting");
    g.throughput(Throughput::Elements(1));
    let mut tail = 0u64;
    let mut phase = true;
    let mut cid = 0u16;
    g.bench_function("cqe_build_and_ring_write", |b| {
        b.iter(|| {
            cid = cid.wrapping_add(1);
            let cqe = Cqe::new(Cid(cid), Qid(1), cid, Status::SUCCESS, 0, phase);
            let off = tail * CQE_BYTES;
            let bytes = cqe.as_bytes();
            let body = bytes.get(..14).expect("a CQE is 16 bytes");
            ring.copy_from(off, body).expect("CQE inside the ring");
            ring.store_release_u16(off + 14, cqe.status_phase)
                .expect("CQE inside the ring");
            tail += 1;
            if tail == CQ_ENTRIES {
                tail = 0;
                phase = !phase;
            }
        })
    });
    g.bench_function("cqe_write_obj", |b| {
        b.iter(|| {
            let cqe = Cqe::new(Cid(3), Qid(1), 3, Status::SUCCESS, 0, true);
            ring.write_obj(black_box(0), &cqe)
        })
    });
    g.finish();
}

fn bench_side(c: &mut Criterion) {
    let mut g = c.benchmark_group("bench_bookkeeping");
    g.throughput(Throughput::Elements(1));
    let mut rng = Rng::new(42);
    g.bench_function("random_offset", |b| {
        b.iter(|| rng.below(black_box(1 << 21)))
    });
    // fio's random map over a power-of-two range and over one that needs cycle walking.
    for units in [1u64 << 21, 1_500_000] {
        let mut rng = Rng::new(42);
        let mut map = Offsets::new(true, true, units, &mut rng);
        g.bench_function(format!("random_map_offset_{units}"), |b| {
            b.iter(|| map.next(&mut rng))
        });
    }
    let mut lat = LatStat::new();
    let mut v = 1000u64;
    g.bench_function("latency_record", |b| {
        b.iter(|| {
            v = v.wrapping_mul(6364136223846793005).wrapping_add(1) % 1_000_000 + 500;
            lat.add(black_box(v));
        })
    });
    g.finish();
}

criterion_group!(benches, sqe_decode, completion_posting, bench_side);
criterion_main!(benches);
