// SPDX-License-Identifier: Apache-2.0
//! Criterion micro-benchmarks of the controller's per-I/O internals: the PRP and SGL
//! walk, the walk plus the data copy (a Read's and a Write's payload), and completion
//! posting into a CQ ring in client memory. Run with `cargo bench -p nvmemu-ctrl`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nvmemu_ctrl::bench_hooks::{self, CqPoster};
use nvmemu_ctrl::test_utils::HostMemory;
use nvmemu_spec::{Cid, Cqe, DataPtr, Qid, SglDescriptor, SglKind, Status};

const PAGE: u64 = 4096;
/// Client memory: data at 1 MiB, PRP lists at 64 KiB, SGL segments at 128 KiB, CQ at 256 KiB.
const HOST_BYTES: u64 = 8 << 20;
const DATA: u64 = 1 << 20;
const LIST: u64 = 64 << 10;
const SEGMENT: u64 = 128 << 10;
const CQ: u64 = 256 << 10;

/// A PRP data pointer for `len` bytes at `DATA`; pages `stride` pages apart (1 means
/// physically contiguous, so the walk coalesces them into one piece).
fn prp(host: &HostMemory, len: u64, stride: u64) -> DataPtr {
    let pages = len.div_ceil(PAGE);
    let page = |i: u64| host.iova(DATA + i * stride * PAGE);
    let prp2 = match pages {
        0 | 1 => 0,
        2 => page(1),
        _ => {
            for i in 1..pages {
                host.write_obj(LIST + (i - 1) * 8, &page(i));
            }
            host.iova(LIST)
        }
    };
    DataPtr::Prp {
        prp1: page(0),
        prp2,
    }
}

/// An SGL for `len` bytes: one data block in the SQE when `blocks` is 1, else a last
/// segment of `blocks` data blocks, each two pages apart.
fn sgl(host: &HostMemory, len: u32, blocks: u32) -> DataPtr {
    if blocks <= 1 {
        return DataPtr::Sgl(SglDescriptor::new(SglKind::DataBlock {
            addr: host.iova(DATA),
            len,
        }));
    }
    let each = len / blocks;
    for i in 0..blocks {
        let d = SglDescriptor::new(SglKind::DataBlock {
            addr: host.iova(DATA + u64::from(i) * 2 * PAGE),
            len: each,
        });
        host.write_obj(SEGMENT + u64::from(i) * 16, &d);
    }
    DataPtr::Sgl(SglDescriptor::new(SglKind::LastSegment {
        addr: host.iova(SEGMENT),
        len: blocks * 16,
    }))
}

fn walks(c: &mut Criterion) {
    let host = HostMemory::new(HOST_BYTES);
    let mem = host.guest();
    let mut g = c.benchmark_group("prp_walk");
    for (name, len, stride) in [
        ("512B", 512u64, 1u64),
        ("4KiB", 4096, 1),
        ("8KiB_prp2", 8192, 2),
        ("128KiB_list_contiguous", 128 << 10, 1),
        ("128KiB_list_scattered", 128 << 10, 2),
    ] {
        let dptr = prp(&host, len, stride);
        g.throughput(Throughput::Elements(1));
        g.bench_function(name, |b| {
            b.iter(|| bench_hooks::walk(&mem, black_box(&dptr), len, true))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("sgl_walk");
    for (name, len, blocks) in [
        ("4KiB_one_block", 4096u32, 1u32),
        ("128KiB_segment_of_8", 128 << 10, 8),
    ] {
        let dptr = sgl(&host, len, blocks);
        g.throughput(Throughput::Elements(1));
        g.bench_function(name, |b| {
            b.iter(|| bench_hooks::walk(&mem, black_box(&dptr), u64::from(len), true))
        });
    }
    g.finish();
}

fn copies(c: &mut Criterion) {
    let host = HostMemory::new(HOST_BYTES);
    let mem = host.guest();
    let mut g = c.benchmark_group("data_copy");
    for len in [512usize, 4096] {
        let dptr = prp(&host, len as u64, 1);
        let mut buf = vec![0x5au8; len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(format!("read_to_host_{len}B"), |b| {
            b.iter(|| bench_hooks::copy_to_host(&mem, black_box(&dptr), black_box(&buf)))
        });
        g.bench_function(format!("write_from_host_{len}B"), |b| {
            b.iter(|| bench_hooks::copy_from_host(&mem, black_box(&dptr), black_box(&mut buf)))
        });
    }
    g.finish();
}

fn completions(c: &mut Criterion) {
    let host = HostMemory::new(HOST_BYTES);
    let mem = host.guest();
    let mut g = c.benchmark_group("completion");
    g.throughput(Throughput::Elements(1));
    let mut cq = CqPoster::new(&mem, host.iova(CQ), 1024).expect("CQ ring inside host memory");
    let mut cid = 0u16;
    g.bench_function("build_and_post", |b| {
        b.iter(|| {
            cid = cid.wrapping_add(1);
            let cqe = Cqe::new(Cid(cid), Qid(1), cid & 1023, Status::SUCCESS, 0, false);
            cq.post(black_box(cqe))
        })
    });
    g.bench_function("post_batch_of_32", |b| {
        b.iter(|| {
            // The host consumed the previous batch (a head doorbell write).
            cq.consume_all();
            for i in 0..32u16 {
                let cqe = Cqe::new(Cid(i), Qid(1), i, Status::SUCCESS, 0, false);
                black_box(cq.stage(cqe));
            }
            cq.flush()
        })
    });
    g.finish();
}

criterion_group!(benches, walks, copies, completions);
criterion_main!(benches);
