// SPDX-License-Identifier: Apache-2.0
//! fio's batching options as the job loop applies them: commands per doorbell, free slots
//! needed before a refill, completions taken per poll. Observed through an [`IoQueue`]
//! that records what the loop asks of it.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nvmemu_bench::{
    BenchOptions, EngineError, EtaMode, Geometry, IoQueue, MemDevice, MemQueue, NoTarget, Op,
    RwMode, SizeSpec, VerifyMode, run_bench,
};

/// What the job loop did, call by call.
#[derive(Debug, Default)]
struct Log {
    /// Commands covered by each doorbell.
    per_ring: Vec<usize>,
    /// The `max` of each reap call and what it returned.
    reaps: Vec<(usize, usize)>,
    /// Commands submitted between two reap calls (0 when none).
    per_refill: Vec<usize>,
    submitted: usize,
    since_ring: usize,
    since_reap: usize,
}

/// A [`MemQueue`] (every command completes at its doorbell) that logs the calls.
struct Recorder {
    inner: MemQueue,
    log: Arc<Mutex<Log>>,
    /// Hand out at most one completion per reap, like a device slower than the job.
    trickle: bool,
}

impl IoQueue for Recorder {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }
    fn setup(&mut self, slots: usize, slot_bytes: usize) -> Result<(), EngineError> {
        self.inner.setup(slots, slot_bytes)
    }
    fn write_payload(&mut self, slot: usize, src: &[u8]) -> Result<(), EngineError> {
        self.inner.write_payload(slot, src)
    }
    fn read_payload(&mut self, slot: usize, dst: &mut [u8]) -> Result<(), EngineError> {
        self.inner.read_payload(slot, dst)
    }
    fn submit(&mut self, slot: usize, op: Op, lba: u64, blocks: u32) -> Result<(), EngineError> {
        self.inner.submit(slot, op, lba, blocks)?;
        let mut l = self.log.lock().unwrap();
        l.submitted += 1;
        l.since_ring += 1;
        l.since_reap += 1;
        Ok(())
    }
    fn ring(&mut self) -> Result<(), EngineError> {
        let mut l = self.log.lock().unwrap();
        let n = std::mem::take(&mut l.since_ring);
        l.per_ring.push(n);
        self.inner.ring()
    }
    fn reap(&mut self, max: usize, done: &mut dyn FnMut(usize, Result<(), EngineError>)) -> usize {
        let n = self
            .inner
            .reap(if self.trickle { max.min(1) } else { max }, done);
        let mut l = self.log.lock().unwrap();
        l.reaps.push((max, n));
        let refill = std::mem::take(&mut l.since_reap);
        l.per_refill.push(refill);
        n
    }
}

/// Runs `opts` (a short time-based randread, or a verified write) on one recorded queue.
fn run(opts: BenchOptions) -> (Log, nvmemu_bench::BenchResult) {
    run_on(opts, false)
}

fn run_on(opts: BenchOptions, trickle: bool) -> (Log, nvmemu_bench::BenchResult) {
    let dev = MemDevice::new(512, 1 << 12, 128 * 1024);
    let log = Arc::new(Mutex::new(Log::default()));
    let q = Recorder {
        inner: dev.queue(),
        log: Arc::clone(&log),
        trickle,
    };
    let r = run_bench(
        &opts,
        vec![Box::new(q) as Box<dyn IoQueue>],
        &NoTarget,
        &[],
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    let log = std::mem::take(&mut *log.lock().unwrap());
    (log, r)
}

fn randread(iodepth: u32) -> BenchOptions {
    BenchOptions {
        rw: RwMode::Randread.into(),
        iodepth,
        runtime: Some(Duration::from_millis(150)),
        time_based: true,
        eta: EtaMode::Never,
        ..BenchOptions::default()
    }
}

#[test]
fn explicit_options_bound_doorbells_refills_and_reaps() {
    let (log, r) = run(BenchOptions {
        iodepth_batch_submit: 4,
        iodepth_batch_complete_min: 3,
        iodepth_batch_complete_max: 5,
        ..randread(16)
    });
    assert!(r.jobs[0].output.error.is_none());
    assert!(log.submitted > 1000, "{}", log.submitted);
    // The first fill: 16 commands behind four doorbells.
    assert_eq!(log.per_ring.get(..4), Some(&[4, 4, 4, 4][..]));
    assert!(log.per_ring.iter().all(|&n| (1..=4).contains(&n)));
    assert!(log.reaps.iter().all(|&(max, n)| max == 5 && n <= 5));
    // A refill waits for 3 free slots, then fills every free slot; the queue completes
    // at once, so each refill after the first is what the previous reap freed: 3 to 5.
    let refills: Vec<usize> = log.per_refill.iter().copied().filter(|&n| n > 0).collect();
    assert_eq!(refills.first(), Some(&16));
    let odd = refills[1..].iter().find(|&&n| !(3..=5).contains(&n));
    assert_eq!(odd, None, "a refill outside 3..=5");
}

#[test]
fn refill_waits_for_complete_min_free_slots() {
    // One completion per reap: the job must collect three before it refills.
    let (log, _) = run_on(
        BenchOptions {
            iodepth_batch_complete_min: 3,
            ..randread(8)
        },
        true,
    );
    let refills: Vec<usize> = log.per_refill.iter().copied().filter(|&n| n > 0).collect();
    assert!(refills.len() > 100, "{}", refills.len());
    let odd = refills[1..].iter().find(|&&n| n != 3);
    assert_eq!(odd, None, "a refill of other than 3 commands");
    // Without the option every completion is refilled at once.
    let (log, _) = run_on(randread(8), true);
    assert!(log.per_refill[1..].iter().all(|&n| n <= 1));
}

#[test]
fn defaults_ring_once_per_refill_and_reap_half_of_iodepth() {
    let (log, _) = run(randread(16));
    assert_eq!(log.per_ring.first(), Some(&16));
    assert!(log.reaps.iter().all(|&(max, n)| max == 8 && n <= 8));
    // One doorbell per refill: every refill is a single ring of what one reap freed.
    assert!(log.per_ring[1..].iter().all(|&n| (1..=8).contains(&n)));
    let refills = log.per_refill.iter().filter(|&&n| n > 0).count();
    assert_eq!(refills, log.per_ring.len());
    // fio's clamping: a max below the min is raised to it; both stay within iodepth.
    let o = BenchOptions {
        iodepth_batch_submit: 99,
        iodepth_batch_complete_min: 6,
        iodepth_batch_complete_max: 2,
        ..randread(8)
    };
    let b = o.batching();
    assert_eq!((b.submit, b.refill_min, b.reap_max), (8, 6, 6));
    assert_eq!(randread(1).batching().reap_max, 1);
}

#[test]
fn verify_holds_with_small_batches() {
    let (log, r) = run(BenchOptions {
        rw: RwMode::Write.into(),
        iodepth: 8,
        iodepth_batch_submit: 3,
        iodepth_batch_complete_max: 2,
        verify: VerifyMode::Crc32c,
        size: Some(SizeSpec::Bytes(1 << 20)),
        runtime: None,
        time_based: false,
        ..randread(8)
    });
    let out = &r.jobs[0].output;
    assert!(out.error.is_none());
    assert_eq!(out.verify.errors, 0);
    assert_eq!(
        out.verify.verified_ios, 256,
        "every 4 KiB block written is read back"
    );
    assert!(log.per_ring.iter().all(|&n| (1..=3).contains(&n)));
}
