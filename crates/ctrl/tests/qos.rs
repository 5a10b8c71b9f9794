// SPDX-License-Identifier: Apache-2.0
//! QoS limits (`bdev_set_qos_limit`) through real queues: commands beyond the limit wait in
//! their SQ and complete later, in order; none fails. Timing bounds are loose on purpose
//! (a loaded machine only makes things slower, so only lower bounds are checked tightly).

use std::time::{Duration, Instant};

use nvmemu_bdev::QosValues;
use nvmemu_ctrl::test_utils::{TestHost, layout, rw};
use nvmemu_spec::{Cqe, Status};

/// Submit `n` commands built by `make`, poll until all complete; the CQEs in completion
/// order and the time it took.
fn run(
    h: &mut TestHost,
    n: u16,
    make: impl Fn(&TestHost, u16) -> nvmemu_spec::Sqe,
) -> (Vec<Cqe>, Duration) {
    let cids: Vec<_> = (0..n)
        .map(|i| {
            let s = make(h, i);
            h.submit(1, s)
        })
        .collect();
    let start = Instant::now();
    let mut done = Vec::new();
    while done.len() < cids.len() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "commands never completed"
        );
        h.poll();
        while let Some(c) = h.reap(1) {
            done.push(c);
        }
    }
    let order: Vec<_> = done.iter().map(|c| nvmemu_spec::Cid(c.cid)).collect();
    assert_eq!(
        order, cids,
        "completion order differs from submission order"
    );
    assert!(done.iter().all(|c| c.status() == Status::SUCCESS));
    (done, start.elapsed())
}

fn set_limit(h: &TestHost, v: QosValues) {
    h.ctrl
        .namespaces()
        .next()
        .expect("namespace 1")
        .bdev()
        .qos()
        .set(v);
}

/// A ready host (I/O queue pair 1) whose namespace 1 has the limits `v`.
fn limited(v: QosValues) -> TestHost {
    let h = TestHost::ready(64);
    set_limit(&h, v);
    h
}

fn read(h: &TestHost, i: u16) -> nvmemu_spec::Sqe {
    rw(0x02, 1, u64::from(i), 1, h.prps(layout::DATA, 512))
}

#[test]
fn iops_limit_queues_commands_and_keeps_their_order() {
    let mut h = limited(QosValues {
        rw_ios_per_sec: 1000,
        ..QosValues::default()
    });
    // 1000 IOPS = one command per 1 ms slice: 40 commands need at least 39 slices.
    let (_, took) = run(&mut h, 40, read);
    assert!(
        took >= Duration::from_millis(35),
        "40 commands at 1000 IOPS took {took:?}"
    );
    // Unset: the same commands run in one pass again.
    set_limit(&h, QosValues::default());
    for i in 0..20 {
        let s = read(&h, i);
        h.submit(1, s);
    }
    assert_eq!(h.poll(), 20);
}

#[test]
fn a_command_without_tokens_stays_in_its_sq() {
    let mut h = limited(QosValues {
        rw_ios_per_sec: 1000,
        ..QosValues::default()
    });
    for i in 0..8 {
        let s = read(&h, i);
        h.submit(1, s);
    }
    // The first pass has one token: one command runs, seven stay queued (the SQ head in
    // its CQE says so).
    assert_eq!(h.poll(), 1);
    let c = h.reap(1).expect("one completion");
    assert_eq!(c.sq_head, 1);
    assert!(h.reap(1).is_none());
    set_limit(&h, QosValues::default());
}

#[test]
fn write_bandwidth_limit_slows_writes_and_not_reads() {
    let mut h = limited(QosValues {
        w_mbytes_per_sec: 1,
        ..QosValues::default()
    });
    // Reads are not limited by a write limit.
    let (_, took) = run(&mut h, 20, read);
    assert!(took < Duration::from_secs(5));
    // 1 MiB/s: eight 4 KiB writes = 32 KiB need about 31 ms.
    let write = |h: &TestHost, i: u16| rw(0x01, 1, u64::from(i) * 8, 8, h.prps(layout::DATA, 4096));
    let (_, took) = run(&mut h, 8, write);
    assert!(
        took >= Duration::from_millis(20),
        "32 KiB at 1 MiB/s took {took:?}"
    );
    set_limit(&h, QosValues::default());
}
