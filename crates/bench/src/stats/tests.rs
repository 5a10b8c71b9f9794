// SPDX-License-Identifier: Apache-2.0
//! Tests of the statistics: running sums, histograms, batched latencies, merges.

use super::*;

#[test]
fn running_stat_matches_textbook_values() {
    let mut s = RunningStat::default();
    for v in [2, 4, 4, 4, 5, 5, 7, 9] {
        s.add(v);
    }
    assert_eq!((s.n, s.min, s.max), (8, 2, 9));
    assert!((s.mean() - 5.0).abs() < 1e-12);
    // Sample stddev of the classic data set: sqrt(32/7).
    assert!((s.stddev() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    let mut m = RunningStat::default();
    m.merge(&s);
    m.merge(&s);
    assert_eq!((m.n, m.min, m.max), (16, 2, 9));
}

#[test]
fn side_by_side_jobs_add_up_as_fio_group_reporting() {
    // Two jobs' bandwidth samples: (10, 20, 31) and (100, 200). Their means add up to
    // 170 1/3, which is no whole number over the 5 samples: the total keeps it exactly.
    let mut a = RunningStat::default();
    for v in [10, 20, 31] {
        a.add(v);
    }
    let mut b = RunningStat::default();
    for v in [100, 200] {
        b.add(v);
    }
    let mut g = RunningStat::default();
    g.add_side_by_side(&a);
    g.add_side_by_side(&b);
    // fio: min, max, mean and samples add up; S = 220 2/3 + 5000 over 5 - 1 samples.
    assert_eq!((g.n, g.min, g.max), (5, 110, 231));
    assert!(
        (g.mean() - (170.0 + 1.0 / 3.0)).abs() < 1e-9,
        "{}",
        g.mean()
    );
    let s = 662.0 / 3.0 + 5000.0;
    assert!(
        (g.stddev() - (s / 4.0f64).sqrt()).abs() < 1e-9,
        "{}",
        g.stddev()
    );
    // Nothing from a job without samples.
    g.add_side_by_side(&RunningStat::default());
    assert_eq!(g.n, 5);
}

#[test]
fn buckets_follow_fio_edges() {
    let mut b = LatBuckets::default();
    for ns in [
        1,
        3,
        250,
        999,
        1000,
        1999,
        250_000,
        1_000_000,
        1_500_000_000,
        5_000_000_000,
    ] {
        b.add(ns);
    }
    assert_eq!(b.n, [1, 1, 0, 0, 0, 0, 0, 1, 0, 1]);
    assert_eq!(b.u, [2, 0, 0, 0, 0, 0, 0, 1, 0, 0]);
    assert_eq!(b.m, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1]);
    assert_eq!(
        (depth_index(1), depth_index(16), depth_index(64)),
        (0, 4, 6)
    );
    assert_eq!(
        (
            batch_index(0),
            batch_index(4),
            batch_index(5),
            batch_index(65)
        ),
        (0, 1, 2, 6)
    );
}

#[test]
fn pending_runs_record_the_same_samples_as_one_at_a_time() {
    let (mut direct, mut batched) = (JobStats::default(), JobStats::default());
    let mut pending = PendingLatencies::default();
    let mut rng = crate::offsets::Rng::new(7);
    for i in 0..5000u64 {
        // Runs of equal latencies of random length, both directions, wide values.
        let run = rng.below(9);
        let clat_bits = 10 + rng.below(25);
        let io = IoLatency {
            dir: usize::from(rng.below(4) == 0),
            slat: rng.below(300),
            clat: rng.below(1 << clat_bits),
            lat: rng.below(1 << 20),
            at_ns: i,
        };
        for _ in 0..run {
            if let Some(ds) = direct.dirs.get_mut(io.dir) {
                ds.slat.add(io.slat);
                ds.clat.add(io.clat);
                ds.lat.add(io.lat);
                ds.io_bytes += 4096;
                ds.total_ios += 1;
            }
            direct.lat_buckets.add(io.clat);
            pending.add(&mut batched, io, 4096);
        }
        if i % 7 == 0 {
            pending.flush(&mut batched);
        }
    }
    pending.flush(&mut batched);
    assert!(direct.dirs[0].total_ios > 10_000 && direct.dirs[1].total_ios > 1000);
    for (a, b) in direct.dirs.iter().zip(&batched.dirs) {
        assert_eq!((a.io_bytes, a.total_ios), (b.io_bytes, b.total_ios));
        assert_eq!((a.slat, a.lat, a.clat.stat), (b.slat, b.lat, b.clat.stat));
        assert_eq!(a.clat.hist, b.clat.hist);
        assert_eq!(
            a.clat.hist.value_at_quantile(0.99),
            b.clat.hist.value_at_quantile(0.99)
        );
    }
    assert_eq!(direct.lat_buckets, batched.lat_buckets);
    // A second flush records nothing twice.
    let before = batched.dirs[0].total_ios;
    pending.flush(&mut batched);
    assert_eq!(batched.dirs[0].total_ios, before);
}

#[test]
fn samples_every_500ms() {
    let mut d = DirStats::default();
    d.reset(0);
    d.io_bytes = 1024 * 1000;
    d.total_ios = 1000;
    d.maybe_sample(100_000_000);
    assert_eq!(d.bw.n, 0);
    d.maybe_sample(500_000_000);
    assert_eq!((d.bw.n, d.bw.max, d.iops.max), (1, 2000, 2000));
}
