// SPDX-License-Identifier: Apache-2.0
//! fio's verify variants end to end on a [`MemDevice`]: every method writes blocks a
//! later `verify_only` run accepts, and a block corrupted on the device in between is
//! reported by LBA with the job failing (`err=84`, EILSEQ); `verify_backlog` checks as
//! it goes; `do_verify=0` reads nothing back.
#![allow(clippy::unwrap_used)]

mod common;

use common::run_on;
use nvmemu_bench::{
    BenchOptions, EtaMode, MemDevice, Op, OutputFormat, RwMode, SizeSpec, VerifyMode,
    WorkloadOptions, parse_bssplit, parse_verify_pattern, render,
};

fn job(verify: VerifyMode, workload: WorkloadOptions) -> BenchOptions {
    BenchOptions {
        rw: RwMode::Randwrite.into(),
        bs: 4096.into(),
        iodepth: 8,
        size: Some(SizeSpec::Bytes(1 << 20)),
        verify,
        eta: EtaMode::Never,
        workload: WorkloadOptions {
            bssplit: Some(parse_bssplit("4k/60:16k/40").unwrap()),
            ..workload
        },
        ..BenchOptions::default()
    }
}

/// [`job`] with verify method `m` (and a pattern for `verify=pattern`).
fn method_job(m: VerifyMode) -> BenchOptions {
    job(
        m,
        WorkloadOptions {
            verify_pattern: (m == VerifyMode::Pattern)
                .then(|| parse_verify_pattern("0xfeedface").unwrap()),
            ..WorkloadOptions::default()
        },
    )
}

fn only(o: &BenchOptions) -> BenchOptions {
    BenchOptions {
        workload: WorkloadOptions {
            verify_only: true,
            ..o.workload.clone()
        },
        ..o.clone()
    }
}

const METHODS: [VerifyMode; 5] = [
    VerifyMode::Crc32c,
    VerifyMode::Md5,
    VerifyMode::Sha256,
    VerifyMode::Xxhash,
    VerifyMode::Pattern,
];

#[test]
fn each_method_round_trips_and_names_a_corrupted_lba() {
    for m in METHODS {
        let dev = MemDevice::new(512, 1 << 12, 1 << 20);
        let o = method_job(m);
        let (r, _) = run_on(&dev, &o);
        let v = &r.jobs[0].output.verify;
        assert_eq!((v.errors, v.verified_blocks), (0, 2048), "{m:?}");
        // verify_only replays the writes without issuing one, and finds them all.
        let (r, log) = run_on(&dev, &only(&o));
        assert!(log.iter().all(|c| c.0 == Op::Read), "{m:?}");
        let v = &r.jobs[0].output.verify;
        assert_eq!((v.errors, v.verified_blocks), (0, 2048), "{m:?}");
        assert_eq!(r.jobs[0].errno(), 0);
        // One flipped byte in the data of LBA 1234 (past any header).
        let mut byte = dev.read_blocks(1234, 1).unwrap()[300];
        byte ^= 0x08;
        dev.write_bytes(1234, 300, &[byte]).unwrap();
        let (r, _) = run_on(&dev, &only(&o));
        let v = &r.jobs[0].output.verify;
        assert_eq!(v.errors, 1, "{m:?}");
        assert_eq!(v.first[0].lba, 1234, "{m:?}");
        assert_eq!(r.jobs[0].errno(), 84);
        let text = render(&r, OutputFormat::NORMAL);
        assert!(
            text.contains("err=84 (verify failed at lba 1234: "),
            "{m:?}: {text}"
        );
        if m == VerifyMode::Pattern {
            assert!(text.contains("pattern mismatch at byte 300"), "{text}");
        } else {
            assert!(text.contains(&format!("bad {}", m.as_str())), "{text}");
        }
    }
}

#[test]
fn verify_only_over_other_data_fails() {
    let dev = MemDevice::new(512, 1 << 12, 1 << 20);
    // Written twice over (generation 2) but replayed as one loop (generation 1).
    let twice = job(
        VerifyMode::Sha256,
        WorkloadOptions {
            loops: 2,
            ..WorkloadOptions::default()
        },
    );
    run_on(&dev, &twice);
    let (r, _) = run_on(
        &dev,
        &only(&job(VerifyMode::Sha256, WorkloadOptions::default())),
    );
    assert!(r.jobs[0].output.verify.errors > 0);
    assert!(render(&r, OutputFormat::NORMAL).contains("generation 2, expected 1"));
    // Data written with another method does not pass either.
    let (r, _) = run_on(
        &dev,
        &only(&job(VerifyMode::Md5, WorkloadOptions::default())),
    );
    assert!(r.jobs[0].output.verify.errors > 0);
    // And the right replay passes.
    let (r, _) = run_on(&dev, &only(&twice));
    assert_eq!(r.jobs[0].output.verify.errors, 0);
}

#[test]
fn verify_backlog_checks_as_it_goes_and_still_covers_every_block() {
    let dev = MemDevice::new(512, 1 << 12, 1 << 20);
    let o = job(
        VerifyMode::Xxhash,
        WorkloadOptions {
            verify_backlog: Some(16),
            ..WorkloadOptions::default()
        },
    );
    let (r, log) = run_on(&dev, &o);
    let v = &r.jobs[0].output.verify;
    assert_eq!((v.errors, v.verified_blocks), (0, 2048));
    // Reads start long before the last write.
    let first_read = log.iter().position(|c| c.0 == Op::Read).unwrap();
    let last_write = log.iter().rposition(|c| c.0 == Op::Write).unwrap();
    assert!(
        first_read < 40 && first_read < last_write,
        "{first_read} {last_write}"
    );
}

#[test]
fn do_verify_0_writes_verifiable_blocks_but_reads_nothing() {
    let dev = MemDevice::new(512, 1 << 12, 1 << 20);
    let o = job(
        VerifyMode::Crc32c,
        WorkloadOptions {
            do_verify: false,
            ..WorkloadOptions::default()
        },
    );
    let (r, log) = run_on(&dev, &o);
    assert!(log.iter().all(|c| c.0 == Op::Write));
    assert_eq!(r.jobs[0].output.verify.verified_blocks, 0);
    let on = BenchOptions {
        workload: WorkloadOptions::default(),
        ..o
    };
    let (r, _) = run_on(&dev, &only(&on));
    assert_eq!(r.jobs[0].output.verify.verified_blocks, 2048);
    assert_eq!(r.jobs[0].output.verify.errors, 0);
}

/// A read-only verify job, as fio runs one after a write job: every block it reads must
/// carry its own intact header (or the pattern).
fn read_back(o: &BenchOptions, do_verify: bool) -> BenchOptions {
    BenchOptions {
        rw: RwMode::Randread.into(),
        workload: WorkloadOptions {
            do_verify,
            ..o.workload.clone()
        },
        ..o.clone()
    }
}

#[test]
fn a_read_job_checks_every_block_and_fails_on_blank_or_lost_data() {
    for m in METHODS {
        let dev = MemDevice::new(512, 1 << 12, 1 << 20);
        let write = method_job(m);
        // A blank namespace holds nothing a verify job wrote: fio's err=84.
        let (r, _) = run_on(&dev, &read_back(&write, true));
        let v = &r.jobs[0].output.verify;
        assert!(v.errors > 0, "{m:?}: {v:?}");
        assert_eq!((v.verified_blocks, v.unverifiable_ios), (0, 0), "{m:?}");
        assert_eq!(r.jobs[0].errno(), 84, "{m:?}");
        let text = render(&r, OutputFormat::NORMAL);
        let why = if m == VerifyMode::Pattern {
            "pattern mismatch at byte 0"
        } else {
            "bad magic 0x00000000, expected 0x756d766e (no verify header"
        };
        assert!(text.contains(why), "{m:?}: {text}");
        // Written by an earlier job: a later read job (do_verify or not) checks it all.
        run_on(&dev, &write);
        for do_verify in [true, false] {
            let (r, _) = run_on(&dev, &read_back(&write, do_verify));
            let v = &r.jobs[0].output.verify;
            assert_eq!(
                (v.errors, v.verified_blocks, v.unverifiable_ios),
                (0, 2048, 0),
                "{m:?} do_verify={do_verify}"
            );
            assert_eq!(r.jobs[0].errno(), 0);
        }
        // A block lost on the device (reads as zeroes, as after a trim) fails it.
        dev.write_bytes(777, 0, &[0u8; 512]).unwrap();
        let (r, _) = run_on(&dev, &read_back(&write, true));
        let v = &r.jobs[0].output.verify;
        assert_eq!(v.errors, 1, "{m:?}");
        assert_eq!(v.first[0].lba, 777, "{m:?}");
        assert_eq!(r.jobs[0].errno(), 84);
    }
}

#[test]
fn writing_and_reading_back_each_report_their_own_runtime() {
    // fio: a write job with verify reports the writing as write's runtime and the
    // read-back as read's; together they make the job's runtime.
    let dev = MemDevice::new(512, 1 << 16, 1 << 20);
    let o = BenchOptions {
        rw: RwMode::Write.into(),
        size: Some(SizeSpec::Bytes(16 << 20)),
        ..job(VerifyMode::Sha256, WorkloadOptions::default())
    };
    let (r, _) = run_on(&dev, &o);
    let out = &r.jobs[0].output;
    let [read, write, trim] = out.dir_runtime_ms;
    assert!(
        read > 0 && write > 0 && trim == 0,
        "{:?}",
        out.dir_runtime_ms
    );
    assert!(
        read + write <= out.runtime_ms + 2,
        "{:?} of {}",
        out.dir_runtime_ms,
        out.runtime_ms
    );
    assert!(out.runtime_ms >= 4, "too short to tell: {}", out.runtime_ms);
    let v: serde_json::Value = serde_json::from_str(&nvmemu_bench::render_json(&r, false)).unwrap();
    let job = &v["jobs"][0];
    assert_eq!(job["read"]["runtime"], read);
    assert_eq!(job["write"]["runtime"], write);
    assert_eq!(job["job_runtime"], out.runtime_ms);
}
