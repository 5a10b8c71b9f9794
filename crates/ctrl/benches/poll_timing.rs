// SPDX-License-Identifier: Apache-2.0
//! What target-side timing costs per command, on one thread: a batch of 16 one-block reads
//! submitted through the fake host, one `Controller::poll`, the 16 completions reaped; with
//! timing off (the default) and on (`set_timing`, as `bdev_enable_histogram` does). Run with
//! `cargo bench -p nvmemu-ctrl --bench poll_timing`; the per-element times are per command.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nvmemu_ctrl::test_utils::{TestHost, layout, rw};

const BATCH: usize = 16;

fn batch(h: &mut TestHost) {
    for i in 0..BATCH {
        h.submit(1, rw(0x02, 1, i as u64, 1, h.prps(layout::DATA, 512)));
    }
    h.poll();
    for _ in 0..BATCH {
        h.reap(1)
            .expect("every command completes in the pass that took it");
    }
}

fn poll(c: &mut Criterion) {
    let mut g = c.benchmark_group("poll_16_reads");
    g.throughput(Throughput::Elements(BATCH as u64));
    let mut off = TestHost::ready(64);
    g.bench_function("timing_off", |b| b.iter(|| batch(&mut off)));
    let mut on = TestHost::ready(64);
    on.ctrl.set_timing("malloc0", true, 7);
    g.bench_function("timing_on", |b| b.iter(|| batch(&mut on)));
    g.finish();
}

criterion_group!(benches, poll);
criterion_main!(benches);
