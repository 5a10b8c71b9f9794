// SPDX-License-Identifier: Apache-2.0
//! A poller whose only work is completions a latency model holds sleeps until they are
//! due instead of spinning, and still posts each one no sooner than due and about on
//! time. Read from the poller thread's own counters in /proc: its voluntary context
//! switches (each park is one) and its CPU time. Bounds are loose, and the time the
//! poller and the client waited for a CPU (the scheduler counts it) is added to them: a
//! loaded machine only makes the poller later and gives it less CPU, never more.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use nvmemu_bdev::Bdev;
use nvmemu_bdev::model::{ModelConfig, ServiceTime};
use nvmemu_ctrl::{ControllerConfig, Namespace};
use nvmemu_device::{Admission, ClientBudget, ControllerSpec, Deadlines};
use nvmemu_driver::AttachedController;
use nvmemu_spec::{Lba, Nsid};

/// Each read takes this long in the model (units unlimited: all are due together).
const SERVICE: Duration = Duration::from_millis(300);
const READS: u64 = 16;

/// What the scheduler counted for one thread of this process.
#[derive(Clone, Copy)]
struct Usage {
    /// On a CPU, ns.
    cpu_ns: u64,
    /// Runnable but waiting for a CPU, ns.
    wait_ns: u64,
    /// Voluntary context switches (each park is one).
    switches: u64,
}

/// [`Usage`] of the thread whose `/proc` directory is `dir` (`/proc/self/task/TID`).
fn thread_usage(dir: &str) -> Usage {
    let schedstat = std::fs::read_to_string(format!("{dir}/schedstat")).unwrap();
    let mut fields = schedstat.split_whitespace().map(|f| f.parse().unwrap());
    let (cpu_ns, wait_ns) = (fields.next().unwrap(), fields.next().unwrap());
    let status = std::fs::read_to_string(format!("{dir}/status")).unwrap();
    let switches = status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    Usage {
        cpu_ns,
        wait_ns,
        switches,
    }
}

#[test]
fn a_poller_waiting_for_held_completions_sleeps_and_posts_them_on_time() {
    let target = common::test_target(Deadlines::default(), ClientBudget::default());
    let dir = tempfile::tempdir().unwrap();
    let bdev = Arc::new(Bdev::malloc("slow", 512, 1 << 12).unwrap());
    let us = u64::try_from(SERVICE.as_micros()).unwrap();
    let t = ServiceTime {
        avg_us: us,
        p99_us: us,
    };
    bdev.model().set(Some(ModelConfig::spdk(t, t)));
    target
        .add_controller(ControllerSpec {
            socket_dir: dir.path().to_path_buf(),
            socket_mode: 0o600,
            config: ControllerConfig::default(),
            namespaces: vec![Namespace::new(Nsid(1), bdev)],
            admission: Admission::default(),
        })
        .unwrap();
    let mut c = AttachedController::attach(dir.path(), common::opts(1)).unwrap();
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    let tid = target.poller_tids()[0].unwrap();

    let poller = format!("/proc/self/task/{tid}");
    let (poller_before, client_before) = (thread_usage(&poller), thread_usage("/proc/thread-self"));
    let start = Instant::now();
    for i in 0..READS {
        q.submit_read(Nsid(1), Lba(i * 8), 8, &buf, i).unwrap();
    }
    q.ring().unwrap();
    // The client sleeps between looks, leaving the CPUs to the poller if it wants them.
    let mut reaped = 0;
    while reaped < READS {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{reaped} of {READS} reaped"
        );
        std::thread::sleep(Duration::from_millis(1));
        reaped += q.poll_completions(64, |_, r| assert!(r.is_ok())).unwrap() as u64;
    }
    let took = start.elapsed();
    let (poller_after, client_after) = (thread_usage(&poller), thread_usage("/proc/thread-self"));
    let cpu = Duration::from_nanos(poller_after.cpu_ns - poller_before.cpu_ns);
    let parks = poller_after.switches - poller_before.switches;
    // A loaded machine makes the poller and this thread wait for a CPU: that time is
    // added to the bounds, as the scheduler counted it, and nothing else.
    let poller_wait = Duration::from_nanos(poller_after.wait_ns - poller_before.wait_ns);
    let waited = poller_wait + Duration::from_nanos(client_after.wait_ns - client_before.wait_ns);
    eprintln!(
        "{READS} reads of {SERVICE:?} done after {took:?}; poller CPU {cpu:?}, {parks} parks; \
         waited for a CPU {waited:?}"
    );

    assert!(took >= SERVICE, "completed early, after {took:?}");
    assert!(took < SERVICE * 2 + waited, "completed after {took:?}");
    // Parked in 200 us steps until shortly before the due time, each step 2 ms at most
    // besides the wait for a CPU; a spinning poller has none.
    let parking_ms = u64::try_from(SERVICE.saturating_sub(poller_wait).as_millis()).unwrap();
    assert!(
        parks >= (parking_ms / 2).min(50),
        "{parks} parks: the poller spun while completions were held"
    );
    assert!(cpu < took / 4, "the poller used {cpu:?} of CPU in {took:?}");
    drop(q);
    c.shutdown().unwrap();
}
