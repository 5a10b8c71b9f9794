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
        let o = job(
            m,
            WorkloadOptions {
                verify_pattern: (m == VerifyMode::Pattern)
                    .then(|| parse_verify_pattern("0xfeedface").unwrap()),
                ..WorkloadOptions::default()
            },
        );
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
