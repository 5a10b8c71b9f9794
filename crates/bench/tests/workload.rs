// SPDX-License-Identifier: Apache-2.0
//! fio's workload options as the job loop applies them, observed through the commands a
//! logging [`MemDevice`] queue accepted and the data left on it: `bssplit` and `bsrange`
//! with the random map and verify, `random_distribution`, `rwmixread`/`rwmixwrite`,
//! `rw=trim`, `number_ios`, `io_size`, `loops`, `rate_iops` and `thinktime`.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::run_on;
use nvmemu_bench::{
    BenchOptions, BenchResult, BlocksType, BsSpec, EtaMode, MemDevice, Op, RwMode, SizeSpec,
    VerifyMode, WorkloadOptions, parse_bsrange, parse_bssplit, parse_random_distribution,
    parse_rate_iops,
};

/// 4 MiB of 512-byte blocks.
const BLOCKS: u64 = 1 << 13;

fn run(opts: &BenchOptions) -> (BenchResult, Vec<(Op, u64)>) {
    run_on(&MemDevice::new(512, BLOCKS, 1 << 20), opts)
}

fn job(rw: RwMode, size: u64, workload: WorkloadOptions) -> BenchOptions {
    BenchOptions {
        rw: rw.into(),
        bs: 4096.into(),
        iodepth: 8,
        size: Some(SizeSpec::Bytes(size)),
        eta: EtaMode::Never,
        workload,
        ..BenchOptions::default()
    }
}

fn ios(r: &BenchResult, dir: usize) -> u64 {
    r.jobs[0].output.stats.dirs[dir].total_ios
}

fn bytes(r: &BenchResult, dir: usize) -> u64 {
    r.jobs[0].output.stats.dirs[dir].io_bytes
}

#[test]
fn randwrite_verify_with_bssplit_checks_every_block_exactly_once() {
    for split in [
        None,
        Some("4k/50:16k/30:64k/20"),
        Some("4k/10:8k/90,64k/100"),
    ] {
        let w = WorkloadOptions {
            bssplit: split.map(|s| parse_bssplit(s).unwrap()),
            ..WorkloadOptions::default()
        };
        let o = BenchOptions {
            verify: VerifyMode::Crc32c,
            ..job(RwMode::Randwrite, 2 << 20, w)
        };
        let (r, log) = run(&o);
        let v = &r.jobs[0].output.verify;
        assert_eq!(v.errors, 0, "{split:?}");
        // One pass writes the 2 MiB once; the verify pass reads each of its 4096 blocks once.
        assert_eq!(bytes(&r, 1), 2 << 20, "{split:?}");
        assert_eq!(v.verified_blocks, 4096, "{split:?}");
        assert_eq!(v.unverifiable_ios, 0);
        let writes: Vec<u64> = log
            .iter()
            .filter(|c| c.0 == Op::Write)
            .map(|c| c.1)
            .collect();
        if split.is_some() {
            let sizes: HashMap<u64, ()> = writes.iter().map(|&l| (l, ())).collect();
            assert_eq!(
                sizes.len(),
                writes.len(),
                "no start written twice in one pass"
            );
            assert!(writes.len() < 512, "some writes were larger than 4k");
        }
    }
}

#[test]
fn bsrange_sizes_stay_in_range_and_sequential_covers_the_region() {
    let w = WorkloadOptions {
        bsrange: Some(parse_bsrange("4k-16k").unwrap()),
        ..WorkloadOptions::default()
    };
    let (r, log) = run(&job(RwMode::Write, 1 << 20, w));
    assert_eq!(bytes(&r, 1), 1 << 20);
    // Sequential: each command starts where the previous ended, 8..=32 blocks later.
    for pair in log.windows(2) {
        let step = pair[1].1 - pair[0].1;
        assert!((8..=32).contains(&step) && step % 8 == 0, "step {step}");
    }
    assert!(log.windows(2).any(|p| p[1].1 - p[0].1 == 8));
    assert!(log.windows(2).any(|p| p[1].1 - p[0].1 == 32));
}

#[test]
fn same_seed_same_offsets_other_seed_other_offsets() {
    let seq = |seed: u64| {
        let o = BenchOptions {
            randseed: Some(seed),
            rwmixread: 60,
            ..job(
                RwMode::Randrw,
                1 << 20,
                WorkloadOptions {
                    bssplit: Some(parse_bssplit("4k/50:8k/50").unwrap()),
                    ..WorkloadOptions::default()
                },
            )
        };
        run(&o).1
    };
    assert_eq!(seq(5), seq(5));
    assert_ne!(seq(5), seq(6));
}

#[test]
fn zipf_sends_most_ios_to_few_blocks_as_theta_says() {
    let theta = 1.2;
    let n_ios = 40_000;
    let w = WorkloadOptions {
        random_distribution: parse_random_distribution("zipf:1.2").unwrap(),
        number_ios: Some(n_ios),
        io_size: Some(1 << 40),
        ..WorkloadOptions::default()
    };
    let (r, log) = run(&job(RwMode::Randread, 4 << 20, w));
    assert_eq!(ios(&r, 0), n_ios);
    let mut hits: HashMap<u64, u64> = HashMap::new();
    for (_, lba) in &log {
        *hits.entry(*lba).or_insert(0) += 1;
    }
    let mut counts: Vec<u64> = hits.into_values().collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let units = 1024u64; // 4 MiB of 4 KiB
    let top: u64 = counts.iter().take((units / 10) as usize).sum();
    let share = top as f64 / n_ios as f64;
    // Zipf(theta) over n ranks gives the top k the share H(k) / H(n).
    let h = |k: u64| (1..=k).map(|i| (i as f64).powf(-theta)).sum::<f64>();
    let want = h(units / 10) / h(units);
    assert!(
        share > 0.5 && (share - want).abs() < 0.05,
        "top 10% got {share}, zipf says {want}"
    );
}

#[test]
fn rwmixwrite_is_the_complement_of_rwmixread() {
    let w = WorkloadOptions {
        rwmixwrite: Some(30),
        ..WorkloadOptions::default()
    };
    let (r, _) = run(&job(RwMode::Randrw, 4 << 20, w));
    let (reads, writes) = (ios(&r, 0), ios(&r, 1));
    assert_eq!(reads + writes, 1024);
    let frac = reads as f64 / 1024.0;
    assert!((0.65..0.75).contains(&frac), "read fraction {frac}");
}

#[test]
fn trim_deallocates_and_the_blocks_read_back_as_zeroes() {
    let dev = MemDevice::new(512, BLOCKS, 1 << 20);
    run_on(
        &dev,
        &job(RwMode::Write, 1 << 20, WorkloadOptions::default()),
    );
    assert!(dev.read_blocks(0, 8).unwrap().iter().any(|&b| b != 0));
    let (r, log) = run_on(
        &dev,
        &job(RwMode::Randtrim, 512 << 10, WorkloadOptions::default()),
    );
    assert_eq!(ios(&r, 2), 128);
    assert!(log.iter().all(|c| c.0 == Op::Trim));
    assert!(dev.read_blocks(0, 1024).unwrap().iter().all(|&b| b == 0));
    assert!(dev.read_blocks(1024, 1024).unwrap().iter().any(|&b| b != 0));
    // A trim inside a verify job: the trimmed blocks must read back as zeroes.
    let o = BenchOptions {
        verify: VerifyMode::Md5,
        ..job(RwMode::Trim, 256 << 10, WorkloadOptions::default())
    };
    let (r, _) = run_on(&dev, &o);
    assert_eq!(r.jobs[0].output.verify.errors, 0);
    assert_eq!(r.jobs[0].output.verify.verified_blocks, 512);
}

#[test]
fn trimwrite_writes_each_range_after_trimming_it() {
    for rw in [RwMode::Trimwrite, RwMode::Randtrimwrite] {
        let dev = MemDevice::new(512, BLOCKS, 1 << 20);
        // fio's blocksize=512,512,16384 shape: 16 KiB trims written in 4 KiB writes.
        let o = BenchOptions {
            bs: BsSpec([4096, 4096, 16384]),
            ..job(rw, 256 << 10, WorkloadOptions::default())
        };
        let (r, log) = run_on(&dev, &o);
        // size bounds the trims; every trimmed range is written in full, in 4 KiB writes
        // (the random map may trim a shorter range where its neighbours were taken).
        assert_eq!(
            (bytes(&r, 2), bytes(&r, 1), ios(&r, 0)),
            (256 << 10, 256 << 10, 0)
        );
        assert_eq!(ios(&r, 1), 64, "{rw:?}");
        if rw == RwMode::Trimwrite {
            assert_eq!(ios(&r, 2), 16);
        }
        // Each write lands in the range of a trim issued before it.
        let mut trims = Vec::new();
        for &(op, lba) in &log {
            match op {
                Op::Trim => trims.push(lba),
                Op::Write => assert!(
                    trims.iter().any(|&t| (t..t + 32).contains(&lba)),
                    "{rw:?}: write at {lba} before its trim"
                ),
                Op::Read => panic!("{rw:?}: a read"),
            }
        }
        // The writes came after the trims: the range holds data, not zeroes.
        assert!(
            dev.read_blocks(0, 8).unwrap().iter().any(|&b| b != 0),
            "{rw:?}"
        );
    }
}

#[test]
fn number_ios_io_size_and_loops_stop_at_the_exact_count() {
    let w = WorkloadOptions {
        number_ios: Some(77),
        ..WorkloadOptions::default()
    };
    let (r, log) = run(&job(RwMode::Randwrite, 1 << 20, w));
    assert_eq!((ios(&r, 1), log.len()), (77, 77));
    // io_size beyond size: offsets wrap, 3 MiB over a 1 MiB range.
    let w = WorkloadOptions {
        io_size: Some(3 << 20),
        ..WorkloadOptions::default()
    };
    let (r, _) = run(&job(RwMode::Write, 1 << 20, w));
    assert_eq!(ios(&r, 1), 768);
    let w = WorkloadOptions {
        loops: 3,
        ..WorkloadOptions::default()
    };
    let o = BenchOptions {
        verify: VerifyMode::Crc32c,
        ..job(RwMode::Randwrite, 1 << 20, w)
    };
    let (r, log) = run(&o);
    assert_eq!(ios(&r, 1), 768);
    // Each loop ends with its own verify pass.
    assert_eq!(r.jobs[0].output.verify.verified_blocks, 3 * 2048);
    assert_eq!(r.jobs[0].output.verify.errors, 0);
    let first_read = log.iter().position(|c| c.0 == Op::Read).unwrap();
    assert_eq!(first_read, 256);
}

#[test]
fn rate_iops_paces_submissions() {
    // Loose bounds, not a speed goal: pacing must hold the job near the rate.
    let w = WorkloadOptions {
        rate_iops: Some(parse_rate_iops("2000").unwrap()),
        number_ios: Some(400),
        io_size: Some(1 << 40),
        ..WorkloadOptions::default()
    };
    let (r, _) = run(&job(RwMode::Randread, 4 << 20, w));
    let ms = r.jobs[0].output.runtime_ms;
    assert_eq!(ios(&r, 0), 400);
    let iops = 400_000.0 / ms as f64;
    // Pacing never runs ahead, however the machine is loaded.
    assert!(iops < 4000.0, "{iops} IOPS in {ms} ms");
    // It keeps up unless the job thread was starved of CPU (a waiting job polls, so on a
    // quiet machine it is on a CPU for the whole run).
    let u = &r.jobs[0].output.usage;
    let on_cpu = (u.usr_ms + u.sys_ms) as f64 / ms as f64;
    assert!(
        iops > 1000.0 || on_cpu < 0.8,
        "{iops} IOPS in {ms} ms, {on_cpu:.2} on CPU"
    );
}

#[test]
fn thinktime_counting_issues_pauses_after_thinktime_blocks() {
    let w = WorkloadOptions {
        thinktime: Some(Duration::from_millis(5)),
        thinktime_blocks: Some(4),
        thinktime_blocks_type: BlocksType::Issue,
        number_ios: Some(50),
        ..WorkloadOptions::default()
    };
    // A queue deep enough that only thinktime_blocks can keep the depth at 4.
    let opts = BenchOptions {
        iodepth: 32,
        ..job(RwMode::Randread, 1 << 20, w)
    };
    let (r, _) = run(&opts);
    assert_eq!(ios(&r, 0), 50);
    // Twelve pauses of 5 ms between thirteen groups at least.
    assert!(
        r.jobs[0].output.runtime_ms >= 60,
        "{} ms",
        r.jobs[0].output.runtime_ms
    );
    // Counting issues caps the depth: never more than 4 in flight (fio's 4-7 bucket).
    let depths = &r.jobs[0].output.stats.depth_map;
    assert!(depths[2] > 0, "{depths:?}");
    assert_eq!(depths[3..].iter().sum::<u64>(), 0, "{depths:?}");
}

#[test]
fn thinktime_counting_completions_keeps_the_queue_full() {
    // fio 3.33, thinktime=1000 thinktime_blocks=8 iodepth=32 (libaio, direct, on a file):
    // depth reaches 32 between pauses; a stall is due after 8 completions, not 8 issues.
    let w = WorkloadOptions {
        thinktime: Some(Duration::from_millis(1)),
        thinktime_blocks: Some(8),
        number_ios: Some(3000),
        io_size: Some(12 << 20),
        ..WorkloadOptions::default()
    };
    let opts = BenchOptions {
        iodepth: 32,
        ..job(RwMode::Randread, 4 << 20, w)
    };
    let (r, _) = run(&opts);
    assert_eq!(ios(&r, 0), 3000);
    let out = &r.jobs[0].output;
    let depths = &out.stats.depth_map;
    eprintln!("{depths:?} {} ms", out.runtime_ms);
    // Depths past thinktime_blocks (the 16-31 and 32-63 buckets) are reached: counting issues
    // would cap the depth at 8. (No wall-time bound: a loaded machine stretches each pause.)
    assert!(depths[4] + depths[5] > 0, "{depths:?}");
}
