// SPDX-License-Identifier: Apache-2.0
//! fio's random map as the job loop applies it: a random workload touches every block of
//! its range once per pass (and verify reads back each block written, once), the same seed
//! gives the same offsets, and `norandommap` draws independently. Observed through each
//! queue's log of the commands it accepted (`MemQueue::with_log`).
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use nvmemu_bench::{
    BenchOptions, BenchResult, CommandLog, EtaMode, IoQueue, MemDevice, NoTarget, Op, RwMode,
    SizeSpec, VerifyMode, run_bench,
};

/// Runs `opts` with one recorded queue per job on a 2 MiB device of 512-byte blocks;
/// returns the result and each job's commands in submission order.
fn run(opts: &BenchOptions) -> (BenchResult, Vec<Vec<(Op, u64)>>) {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let logs: Vec<CommandLog> = (0..opts.numjobs).map(|_| CommandLog::default()).collect();
    let queues = logs
        .iter()
        .map(|log| Box::new(dev.queue().with_log(Arc::clone(log))) as Box<dyn IoQueue>)
        .collect();
    let r = run_bench(
        opts,
        queues,
        &NoTarget,
        &[],
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    let logs = logs
        .iter()
        .map(|l| std::mem::take(&mut *l.lock().unwrap()))
        .collect();
    (r, logs)
}

/// 4 KiB random I/O over 1 MiB (256 units).
fn random(rw: RwMode) -> BenchOptions {
    BenchOptions {
        rw: rw.into(),
        bs: 4096.into(),
        iodepth: 8,
        size: Some(SizeSpec::Bytes(1 << 20)),
        eta: EtaMode::Never,
        ..BenchOptions::default()
    }
}

/// How often each LBA was the target of `op`.
fn counts(log: &[(Op, u64)], op: Op) -> HashMap<u64, usize> {
    let mut m = HashMap::new();
    for &(o, lba) in log {
        if o == op {
            *m.entry(lba).or_insert(0) += 1;
        }
    }
    m
}

fn lbas(log: &[(Op, u64)]) -> Vec<u64> {
    log.iter().map(|&(_, lba)| lba).collect()
}

#[test]
fn randwrite_verify_checks_every_block_written_exactly_once() {
    let (r, logs) = run(&BenchOptions {
        verify: VerifyMode::Crc32c,
        ..random(RwMode::Randwrite)
    });
    let out = &r.jobs[0].output;
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.stats.dirs[1].total_ios, 256);
    assert_eq!(out.verify.errors, 0);
    assert_eq!(
        out.verify.verified_ios, 256,
        "every block written is verified"
    );
    assert_eq!(out.verify.unverifiable_ios, 0);
    assert_eq!(out.stats.dirs[0].total_ios, 256);
    let (writes, reads) = (counts(&logs[0], Op::Write), counts(&logs[0], Op::Read));
    let want: Vec<u64> = (0..256).map(|u| u * 8).collect();
    for (what, m) in [("written", &writes), ("read back", &reads)] {
        let mut got: Vec<u64> = m.keys().copied().collect();
        got.sort_unstable();
        assert_eq!(got, want, "every unit {what}");
        assert!(m.values().all(|&n| n == 1), "a unit {what} twice");
    }
    // Random order, not the sequential one.
    let order = lbas(&logs[0]);
    assert_ne!(order[..256], want[..]);
}

#[test]
fn each_pass_of_a_time_based_run_covers_the_range_once_in_a_new_order() {
    let (_, logs) = run(&BenchOptions {
        runtime: Some(std::time::Duration::from_millis(100)),
        time_based: true,
        ..random(RwMode::Randread)
    });
    let order = lbas(&logs[0]);
    let passes: Vec<&[u64]> = order.chunks_exact(256).collect();
    assert!(passes.len() >= 2, "{} commands", order.len());
    for (i, p) in passes.iter().enumerate() {
        let mut units = p.to_vec();
        units.sort_unstable();
        units.dedup();
        assert_eq!(units.len(), 256, "pass {i} repeats a unit");
    }
    assert_ne!(passes[0], passes[1], "passes share their order");
}

#[test]
fn same_seed_same_offsets_other_seed_or_job_other_offsets() {
    let o = BenchOptions {
        randseed: Some(1234),
        numjobs: 2,
        ..random(RwMode::Randread)
    };
    let (_, a) = run(&o);
    let (_, b) = run(&o);
    assert_eq!(lbas(&a[0]), lbas(&b[0]), "same seed, same sequence");
    assert_eq!(lbas(&a[1]), lbas(&b[1]));
    assert_ne!(lbas(&a[0]), lbas(&a[1]), "jobs differ");
    let (_, c) = run(&BenchOptions {
        randseed: Some(1235),
        ..o.clone()
    });
    assert_ne!(lbas(&a[0]), lbas(&c[0]), "seeds differ");
    // The default seed repeats too (fio's randrepeat=1).
    let d = random(RwMode::Randread);
    assert_eq!(lbas(&run(&d).1[0]), lbas(&run(&d).1[0]));
}

#[test]
fn norandommap_draws_with_replacement() {
    let (r, logs) = run(&BenchOptions {
        norandommap: true,
        randseed: Some(99),
        ..random(RwMode::Randwrite)
    });
    assert_eq!(r.jobs[0].output.stats.dirs[1].total_ios, 256);
    let m = counts(&logs[0], Op::Write);
    // 256 draws from 256 units leave about a third untouched.
    assert!(m.len() < 220, "{} distinct units", m.len());
    assert!(m.values().any(|&n| n > 1));
}
