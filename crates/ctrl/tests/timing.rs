// SPDX-License-Identifier: Apache-2.0
//! Target-side timing (`Controller::set_timing` / `timing`): what is counted, how the layers
//! relate, and that turning it off removes it.

mod timing_common;

use nvmemu_ctrl::Namespace;
use nvmemu_ctrl::test_utils::{TestHost, layout, rw};
use nvmemu_ctrl::timing::{Layer, TimingSnapshot};
use nvmemu_spec::{Nsid, Status};
use timing_common::check_layer_sums;

/// Submit `n` one-block reads on queue 1 (at most `per_poll` before each poll) and reap
/// them all; returns how many completed successfully.
fn run_reads(h: &mut TestHost, n: usize, per_poll: usize) -> usize {
    let mut ok = 0;
    let mut left = n;
    while left > 0 {
        let now = left.min(per_poll);
        for i in 0..now {
            h.submit(1, rw(0x02, 1, i as u64, 1, h.prps(layout::DATA, 512)));
        }
        let mut reaped = 0;
        while reaped < now {
            h.poll();
            while let Some(c) = h.reap(1) {
                ok += usize::from(c.status() == Status::SUCCESS);
                reaped += 1;
            }
        }
        left -= now;
    }
    ok
}

fn queue1(s: &TimingSnapshot) -> &nvmemu_ctrl::timing::QueueTiming {
    &s.queues
        .iter()
        .find(|(q, _, _)| q.0 == 1)
        .expect("queue 1 timed")
        .1
}

#[test]
fn off_by_default_and_nothing_is_recorded() {
    let mut h = TestHost::ready(64);
    assert!(!h.ctrl.timing_enabled());
    assert_eq!(run_reads(&mut h, 5, 5), 5);
    assert_eq!(h.ctrl.timing(), None);
}

#[test]
fn every_completed_command_is_counted_once_in_every_layer() {
    let mut h = TestHost::ready(64);
    assert!(h.ctrl.set_timing("malloc0", true, 7));
    // One idle pass first, so every command's pass has a previous pass (the wait bound).
    h.poll();
    // 40 at once: two batches of one SQ (32 + 8) in two passes; then 17 one by one.
    let n = run_reads(&mut h, 40, 40) + run_reads(&mut h, 17, 1);
    assert_eq!(n, 57);
    let snap = h.ctrl.timing().expect("timing on");
    assert_eq!(snap.bdevs, vec!["malloc0".to_string()]);
    assert_eq!(snap.dropped, 0);
    let q = queue1(&snap);
    assert_eq!(q.namespaces.len(), 1);
    assert_eq!(q.namespaces[0].nsid, 1);
    let set = &q.namespaces[0].layers;
    check_layer_sums(set, 57, "reads");
    assert!(set.get(Layer::Total).sum() > 0);
    assert!(set.get(Layer::Backend).max() <= set.get(Layer::Total).max());
    // Depth seen: 40 then 8 at the batched looks, 1 at each of the 17 others.
    assert_eq!(q.looks, 2 + 17);
    assert_eq!(q.depth_sum, 40 + 8 + 17);
}

#[test]
fn only_the_enabled_bdev_is_timed_and_disabling_drops_everything() {
    let mut h = TestHost::ready(64);
    assert!(!h.ctrl.set_timing("other", true, 7));
    assert_eq!(run_reads(&mut h, 3, 3), 3);
    let snap = h.ctrl.timing().expect("timing on for `other`");
    assert!(snap.queues.iter().all(|(_, q, _)| q.namespaces.is_empty()));
    assert!(h.ctrl.set_timing("malloc0", true, 7));
    assert_eq!(run_reads(&mut h, 4, 4), 4);
    let snap = h.ctrl.timing().expect("on");
    let q = queue1(&snap);
    assert_eq!(q.namespaces[0].layers.get(Layer::Total).count(), 4);
    assert_eq!(
        snap.queues.iter().find(|(q, ..)| q.0 == 1).unwrap().2,
        ["malloc0"]
    );
    // Enabling again keeps the counts.
    assert!(h.ctrl.set_timing("malloc0", true, 7));
    assert_eq!(
        queue1(&h.ctrl.timing().unwrap()).namespaces[0]
            .layers
            .get(Layer::Total)
            .count(),
        4
    );
    h.ctrl.set_timing("malloc0", false, 7);
    assert!(h.ctrl.timing_enabled(), "`other` is still on");
    h.ctrl.set_timing("other", false, 7);
    assert!(!h.ctrl.timing_enabled());
    assert_eq!(h.ctrl.timing(), None);
    assert_eq!(run_reads(&mut h, 2, 2), 2);
    assert_eq!(h.ctrl.timing(), None);
}

#[test]
fn a_namespace_attached_again_at_its_nsid_starts_with_empty_histograms() {
    let mut h = TestHost::ready(64);
    assert!(h.ctrl.set_timing("malloc0", true, 7));
    assert_eq!(run_reads(&mut h, 9, 9), 9);
    let count = |h: &TestHost| {
        let snap = h.ctrl.timing().expect("timing on");
        queue1(&snap)
            .namespaces
            .iter()
            .map(|n| n.layers.get(Layer::Total).count())
            .sum::<u64>()
    };
    assert_eq!(count(&h), 9);
    // Detached and attached again (the same bdev here, any bdev in general): what was timed
    // before belongs to the namespace that went, not to the one now at NSID 1.
    let bdev = h.ctrl.detach_namespace(Nsid(1)).unwrap();
    h.ctrl
        .attach_namespace(Namespace::new(Nsid(1), bdev))
        .unwrap();
    assert_eq!(count(&h), 0);
    assert_eq!(run_reads(&mut h, 4, 4), 4);
    assert_eq!(count(&h), 4);
}

#[test]
fn a_trace_records_fetch_done_and_post_of_each_command_and_nothing_once_removed() {
    use nvmemu_ctrl::{LatencyHook, LatencyTable};
    use std::sync::Arc;
    let mut h = TestHost::ready(16);
    let table = Arc::new(LatencyTable::new(4, 64));
    h.ctrl.set_trace(Some(LatencyHook(Arc::clone(&table))));
    let cid = h.submit(1, rw(0x02, 1, 0, 1, h.prps(layout::DATA, 512)));
    assert_eq!(h.poll(), 1);
    assert_eq!(h.reap(1).map(|c| c.status()), Some(Status::SUCCESS));
    let [fetch, done, post] = table.read(1, cid.0).unwrap();
    assert!(
        fetch > 0 && fetch <= done && done <= post,
        "{fetch} {done} {post}"
    );

    h.ctrl.set_trace(None);
    let cid = h.submit(1, rw(0x02, 1, 0, 1, h.prps(layout::DATA, 512)));
    assert_eq!(h.poll(), 1);
    assert_eq!(h.reap(1).map(|c| c.status()), Some(Status::SUCCESS));
    assert_eq!(table.read(1, cid.0), Some([0, 0, 0]));
}

#[test]
fn a_transport_that_marks_the_passes_sets_seen_and_irq_for_every_batch() {
    use nvmemu_ctrl::timing::PassMarks;
    use nvmemu_mem::TscClock;
    let mut h = TestHost::ready(64);
    h.ctrl.set_pass_marks(PassMarks::Transport);
    assert!(h.ctrl.set_timing("malloc0", true, 7));
    // The transport's pass began long before the poll (it read capsules meanwhile) and
    // ends long after it (it sent the responses): both spans belong to these commands.
    const BEFORE: u64 = 50_000_000;
    const AFTER: u64 = 70_000_000;
    let began = TscClock::ticks().saturating_sub(BEFORE);
    h.ctrl.transport_pass_begins(began);
    for i in 0..3 {
        h.submit(1, rw(0x02, 1, i, 1, h.prps(layout::DATA, 512)));
    }
    assert_eq!(h.poll(), 3);
    // The poll's own end records nothing: the completions are not on the wire yet.
    assert!(h.ctrl.timing_awaits_pass_end());
    let set = |h: &TestHost| {
        queue1(&h.ctrl.timing().unwrap()).namespaces[0]
            .layers
            .clone()
    };
    assert_eq!(set(&h).get(Layer::Total).count(), 0);
    assert_eq!(set(&h).get(Layer::Queued).count(), 3);
    h.ctrl.transport_pass_ends(TscClock::ticks() + AFTER);
    assert!(!h.ctrl.timing_awaits_pass_end());
    let set = set(&h);
    for layer in Layer::ALL.iter().take(5) {
        assert_eq!(set.get(*layer).count(), 3, "{}", layer.name());
    }
    assert!(set.get(Layer::Queued).sum() >= 3 * u128::from(BEFORE));
    assert!(set.get(Layer::Interrupt).sum() >= 3 * u128::from(AFTER));
    timing_common::check_parts_add_up(&set, "transport-marked passes");
}
