// SPDX-License-Identifier: Apache-2.0
//! The DMA table: the poller's lookup (`translate`, once per data pointer) at several table
//! sizes, and building a table of 65,535 maps one DMA_MAP at a time (each a new snapshot).
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use nvmemu_mem::{Access, DmaBacking, DmaRegion, GuestMemory, Iova, MmapRegion};

const REGION: u64 = 0x1000;

/// `n` 4 KiB regions with a 4 KiB gap between neighbours, all backed by one mapping.
fn table(n: u64, mmap: &Arc<MmapRegion>) -> GuestMemory {
    (0..n).fold(GuestMemory::new(), |g, k| {
        g.with_region(DmaRegion {
            iova: Iova(k * 2 * REGION),
            size: REGION,
            writable: true,
            backing: DmaBacking::Mapped(mmap.clone()),
        })
        .unwrap()
    })
}

fn lookups(c: &mut Criterion) {
    let mmap = Arc::new(MmapRegion::anonymous(REGION).unwrap());
    for n in [1u64, 8, 256, 65535] {
        let g = table(n, &mmap);
        // A fixed walk over the table (odd stride), so lookups do not all hit one region.
        let mut k = 0u64;
        c.bench_function(&format!("translate, {n} regions"), |b| {
            b.iter(|| {
                k = (k + 7919) % n;
                let r = g.translate(Iova(k * 2 * REGION + 0x200), 512, Access::Read);
                black_box(r.unwrap().1)
            })
        });
    }
}

fn build(c: &mut Criterion) {
    let mmap = Arc::new(MmapRegion::anonymous(REGION).unwrap());
    let mut group = c.benchmark_group("build");
    group.sample_size(10);
    group.bench_function("65535 maps, one snapshot each", |b| {
        b.iter(|| black_box(table(65535, &mmap)))
    });
    group.finish();
}

criterion_group!(benches, lookups, build);
criterion_main!(benches);
