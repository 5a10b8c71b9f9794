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

/// Top `h`'s queue 1 up to `outstanding` reads.
fn fill(h: &mut TestHost, queued: &mut u16, outstanding: u16) {
    while *queued < outstanding {
        let s = read(h, *queued);
        h.submit(1, s);
        *queued += 1;
    }
}

/// Reap `h`'s queue 1; how many completed.
fn reap_all(h: &mut TestHost, queued: &mut u16) -> u64 {
    let mut done = 0;
    while h.reap(1).is_some() {
        *queued -= 1;
        done += 1;
    }
    done
}

/// The 1 ms QoS timeslice the global clock is in now.
fn slice_now() -> u64 {
    nvmemu_mem::global_clock().now_ns() / 1_000_000
}

#[test]
fn two_controllers_on_one_limited_namespace_share_its_limit() {
    let mut a = TestHost::ready(64);
    let mut b = TestHost::ready(64);
    let shared = a.ctrl.namespaces().next().expect("namespace 1").clone();
    b.ctrl
        .detach_namespace(nvmemu_spec::Nsid(1))
        .expect("detach");
    b.ctrl.attach_namespace(shared).expect("attach");
    // 16 reads per 1 ms slice for the namespace, whichever controller runs them.
    const PER_SLICE: u64 = 16;
    set_limit(
        &a,
        QosValues {
            rw_ios_per_sec: PER_SLICE * 1000,
            ..QosValues::default()
        },
    );
    // A pass that starts and ends in one slice spends that slice's tokens only. Slices in
    // which both controllers made such a pass tell a limit shared by the two from one per
    // controller (32 reads); the machine's speed changes how many there are, not the
    // verdict.
    let (mut qa, mut qb) = (0, 0);
    let mut per_slice = std::collections::BTreeMap::<u64, (u64, u64)>::new();
    let start = Instant::now();
    let mut both = std::collections::BTreeSet::new();
    let mut round = 0u64;
    while both.len() < 20 && start.elapsed() < Duration::from_secs(5) {
        fill(&mut a, &mut qa, 32);
        fill(&mut b, &mut qb, 32);
        // Take turns at polling first: the first in a slice may take all of it.
        let order = if round.is_multiple_of(2) {
            [0, 1]
        } else {
            [1, 0]
        };
        round += 1;
        let mut slices = [None; 2];
        for i in order {
            let (h, queued) = if i == 0 {
                (&mut a, &mut qa)
            } else {
                (&mut b, &mut qb)
            };
            let before = slice_now();
            h.poll();
            let ran = reap_all(h, queued);
            // A pass that crossed into the next slice may have used either: not counted.
            if slice_now() == before {
                slices[i] = Some(before);
                let entry = per_slice.entry(before).or_default();
                if i == 0 {
                    entry.0 += ran;
                } else {
                    entry.1 += ran;
                }
            }
        }
        if let [Some(sa), Some(sb)] = slices
            && sa == sb
        {
            both.insert(sa);
        }
    }
    set_limit(&a, QosValues::default());
    assert!(
        !both.is_empty(),
        "the two controllers never polled in the same slice"
    );
    for (slice, (ran_a, ran_b)) in &per_slice {
        assert!(
            ran_a + ran_b <= PER_SLICE,
            "slice {slice}: {ran_a} reads on A and {ran_b} on B, limit {PER_SLICE} for both"
        );
    }
    let (total_a, total_b) = per_slice
        .values()
        .fold((0, 0), |(x, y), (a, b)| (x + a, y + b));
    assert!(
        total_a > 0 && total_b > 0,
        "both get a share: {total_a} on A, {total_b} on B"
    );
}

#[test]
fn one_controller_alone_gets_the_whole_limit() {
    let mut h = limited(QosValues {
        rw_ios_per_sec: 16_000,
        ..QosValues::default()
    });
    let mut queued = 0;
    fill(&mut h, &mut queued, 32);
    // The first pass finds the pool full: all 16 tokens of the slice go to this controller.
    h.poll();
    assert_eq!(reap_all(&mut h, &mut queued), 16);
    set_limit(&h, QosValues::default());
}
