// SPDX-License-Identifier: Apache-2.0
//! The ceiling probe (`nvmemu bench --ceiling`): the fastest this machine can move NVMe-shaped
//! work between two cores, measured with the same block size, depth and footprint as a real
//! run so a result can be stated as a fraction of it.
//!
//! Two pinned threads share anonymous memory: per queue pair, a ring of 64-byte commands (SQ)
//! with a tail doorbell word and a ring of 16-byte completions (CQ) with a phase tag and a head
//! doorbell word; the client's data slots (one per queue entry) and a "namespace" buffer of
//! the footprint's size. The client keeps `depth` commands in flight on each of its `queues`
//! queue pairs (one, or one per controller of the real run), each naming a random block-aligned
//! offset; the device copies `bs` bytes between that offset and the command's slot (or not,
//! in the no-copy variant) and posts the completion (body, then status+phase with Release).
//! Nothing else: no PRPs, no validation, no DMA table, no namespace lookup.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nvmemu_mem::{MemError, MmapRegion, TscClock};

use crate::offsets::Rng;
use crate::sysinfo::pin_to;

/// What the probe does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CeilingOptions {
    /// Bytes per operation.
    pub bs: u64,
    /// Commands kept in flight per queue pair (each SQ and CQ has depth + 1 entries).
    pub depth: u16,
    /// Queue pairs, each with its own rings and doorbells (the controllers of a run with
    /// `--controllers`); the device visits them in turn on every pass, the client reaps and
    /// refills them in turn.
    pub queues: u16,
    /// Size of the buffer the device copies from/to (the namespace size of the real run).
    pub footprint: u64,
    /// Copy `bs` bytes per command (false: the no-copy probe, rings only).
    pub copy: bool,
    /// Direction of the copy: false = buffer -> client (read), true = client -> buffer.
    pub write: bool,
    /// How long to run (after a warm-up of a tenth of it, at most 1 s).
    pub runtime: Duration,
    /// CPU of the client thread (the job CPU of the real run).
    pub client_cpu: Option<usize>,
    /// CPU of the device thread (the target poller's CPU).
    pub device_cpu: Option<usize>,
}

/// What the probe measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CeilingResult {
    /// The options it ran with.
    pub opts: CeilingOptions,
    /// Operations completed in the measured window.
    pub ops: u64,
    /// Length of the measured window, ns.
    pub elapsed_ns: u64,
    /// Average round trip (client submit to client reap), ns.
    pub avg_rtt_ns: f64,
}

impl CeilingResult {
    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        if self.elapsed_ns == 0 {
            return 0.0;
        }
        self.ops as f64 * 1e9 / self.elapsed_ns as f64
    }

    /// Bytes per second moved (0 for the no-copy probe's data, which it does not move).
    pub fn bytes_per_sec(&self) -> f64 {
        self.ops_per_sec() * self.opts.bs as f64
    }

    /// A short fio-like text block.
    pub fn render_text(&self) -> String {
        format!(
            "ceiling: ({}, bs={}, iodepth={}{}, footprint={} MiB, {})\n  ops: {:.0}/s ({:.2} M), bw={:.1} MiB/s, avg rtt={:.0} ns, ops={}, runtime={} ms\n",
            if self.opts.copy { "copy" } else { "nocopy" },
            self.opts.bs,
            self.opts.depth,
            if self.opts.queues > 1 {
                format!(" x {} queues", self.opts.queues)
            } else {
                String::new()
            },
            self.opts.footprint >> 20,
            if self.opts.write { "write" } else { "read" },
            self.ops_per_sec(),
            self.ops_per_sec() / 1e6,
            self.bytes_per_sec() / f64::from(1u32 << 20),
            self.avg_rtt_ns,
            self.ops,
            self.elapsed_ns / 1_000_000,
        )
    }

    /// The `"ceiling"` JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "mode": if self.opts.copy { "copy" } else { "nocopy" },
            "rw": if self.opts.write { "randwrite" } else { "randread" },
            "bs": self.opts.bs,
            "iodepth": self.opts.depth,
            "queues": self.opts.queues,
            "footprint": self.opts.footprint,
            "client_cpu": self.opts.client_cpu,
            "device_cpu": self.opts.device_cpu,
            "ops": self.ops,
            "runtime_ns": self.elapsed_ns,
            "ops_per_sec": self.ops_per_sec(),
            "bw_bytes": self.bytes_per_sec(),
            "avg_rtt_ns": self.avg_rtt_ns,
        })
    }
}

/// Why the probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum CeilingError {
    /// Bad block size, depth or footprint.
    #[error("ceiling probe: {0}")]
    Invalid(&'static str),
    /// A mapping failed.
    #[error("ceiling probe: cannot map memory: {0}")]
    Map(#[from] MemError),
}

const SQE: u64 = 64;
const CQE: u64 = 16;
/// Offsets in a queue pair's ring region: SQ tail doorbell, CQ head doorbell (own cache lines).
const SQ_DB: u64 = 0;
const CQ_DB: u64 = 128;
const SQ_BASE: u64 = 256;

/// The shared memory of one probe: a ring region per queue pair (each its own mapping, as
/// each controller's queues and doorbells are), the client's slots and the buffer.
struct Shared {
    rings: Vec<MmapRegion>,
    data: MmapRegion,
    backing: MmapRegion,
    entries: u32,
    cq_base: u64,
    slot_bytes: u64,
}

/// Run the probe; `stop` ends it early.
pub fn run_ceiling(
    opts: &CeilingOptions,
    stop: &AtomicBool,
) -> Result<CeilingResult, CeilingError> {
    if opts.bs == 0 || opts.depth == 0 || opts.queues == 0 || opts.footprint < opts.bs {
        return Err(CeilingError::Invalid(
            "bs, iodepth, queues and a footprint of at least bs are required",
        ));
    }
    let entries = u32::from(opts.depth) + 1;
    let cq_base = (SQ_BASE + u64::from(entries) * SQE).next_multiple_of(64);
    let slot_bytes = opts.bs.next_multiple_of(4096);
    let slots = u64::from(opts.depth) * u64::from(opts.queues);
    let sh = Shared {
        rings: (0..opts.queues)
            .map(|_| MmapRegion::anonymous(cq_base + u64::from(entries) * CQE))
            .collect::<Result<_, _>>()?,
        data: MmapRegion::anonymous(slot_bytes * slots)?,
        backing: MmapRegion::anonymous(opts.footprint)?,
        entries,
        cq_base,
        slot_bytes,
    };
    // Pre-fault everything so the probe, like a warmed-up run, never page-faults.
    sh.backing.fill(0, opts.footprint, 0x5a)?;
    sh.data.fill(0, sh.data.len(), 0xa5)?;
    for r in &sh.rings {
        r.fill(0, r.len(), 0)?;
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let dev = s.spawn(|| {
            if let Some(c) = opts.device_cpu {
                let _ = pin_to(c);
            }
            device(&sh, opts, &done);
        });
        let cli = s.spawn(|| {
            if let Some(c) = opts.client_cpu {
                let _ = pin_to(c);
            }
            client(&sh, opts, stop)
        });
        let r = cli.join();
        done.store(true, Ordering::Release);
        let _ = dev.join();
        r.map_err(|_| CeilingError::Invalid("the client thread panicked"))
    })
}

/// Ring index after `i`.
#[inline(always)]
fn next(i: u32, n: u32) -> u32 {
    if i + 1 == n { 0 } else { i + 1 }
}

/// One end's position in a queue pair: the ring index it takes or posts next on one ring,
/// the one it moves on the other, and its phase tag.
#[derive(Debug, Clone, Copy)]
struct Ends {
    sq: u32,
    cq: u32,
    phase: u16,
}

const START: Ends = Ends {
    sq: 0,
    cq: 0,
    phase: 1,
};

/// The device: each pass reads every queue's tail doorbell in turn and serves what it finds.
fn device(sh: &Shared, opts: &CeilingOptions, done: &AtomicBool) {
    let mut ends = vec![START; sh.rings.len()];
    let mut spins = 0u32;
    loop {
        let mut found = false;
        for (rings, e) in sh.rings.iter().zip(ends.iter_mut()) {
            let Ok(sq_tail) = rings.load_acquire_u32(SQ_DB) else {
                return;
            };
            if sq_tail != e.sq {
                found = true;
                if serve(sh, rings, opts, e, sq_tail).is_none() {
                    return;
                }
            }
        }
        if !found {
            spins += 1;
            if spins >= 1024 {
                spins = 0;
                if done.load(Ordering::Acquire) {
                    return;
                }
            }
            std::hint::spin_loop();
        }
    }
}

/// Run the commands of one queue from its head `e.sq` up to `sq_tail`; None if its ring is
/// unreadable.
#[inline(always)]
fn serve(
    sh: &Shared,
    rings: &MmapRegion,
    opts: &CeilingOptions,
    e: &mut Ends,
    sq_tail: u32,
) -> Option<()> {
    while e.sq != sq_tail {
        let cmd = rings
            .read_obj::<[u64; 8]>(SQ_BASE + u64::from(e.sq) * SQE)
            .ok()?;
        e.sq = next(e.sq, sh.entries);
        let (off, slot) = (cmd[0], cmd[1]);
        if opts.copy {
            let dst = slot * sh.slot_bytes;
            let _ = if opts.write {
                sh.data.copy_to_region(dst, &sh.backing, off, opts.bs)
            } else {
                sh.backing.copy_to_region(off, &sh.data, dst, opts.bs)
            };
        }
        let at = sh.cq_base + u64::from(e.cq) * CQE;
        let body = [slot, u64::from(e.sq)];
        let _ = rings.copy_from(at, &body_bytes(&body)[..14]);
        let _ = rings.store_release_u16(at + 14, e.phase);
        e.cq = next(e.cq, sh.entries);
        if e.cq == 0 {
            e.phase ^= 1;
        }
    }
    Some(())
}

fn body_bytes(b: &[u64; 2]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&b[0].to_le_bytes());
    out[8..].copy_from_slice(&b[1].to_le_bytes());
    out
}

/// The client's side of the run: what it submits and what it has counted.
struct Client<'a> {
    sh: &'a Shared,
    opts: &'a CeilingOptions,
    clock: TscClock,
    rng: Rng,
    blocks: u64,
    /// When each slot's command was submitted (slot `q * depth + i` is queue `q`'s `i`).
    submit_ns: Vec<u64>,
    ops: u64,
    rtt_sum: u64,
    recording: bool,
}

impl Client<'_> {
    /// Write slot `slot`'s next command at queue `rings`' tail (the doorbell is rung later).
    #[inline(always)]
    fn submit(&mut self, rings: &MmapRegion, e: &mut Ends, slot: u64) {
        let cmd = [
            self.rng.below(self.blocks) * self.opts.bs,
            slot,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        let _ = rings.write_obj(SQ_BASE + u64::from(e.sq) * SQE, &cmd);
        e.sq = next(e.sq, self.sh.entries);
    }

    /// Reap every completion queue `rings` has posted, resubmitting each slot at once and
    /// ringing both doorbells after; `t_done` is the pass's reap time, read at its first
    /// completion. Returns how many it reaped.
    #[inline(always)]
    fn reap(&mut self, rings: &MmapRegion, e: &mut Ends, t_done: &mut u64) -> u32 {
        let mut reaped = 0u32;
        loop {
            let at = self.sh.cq_base + u64::from(e.cq) * CQE;
            let Ok(sp) = rings.load_acquire_u16(at + 14) else {
                break;
            };
            if sp & 1 != e.phase {
                break;
            }
            let Ok(cqe) = rings.read_obj::<[u64; 2]>(at) else {
                break;
            };
            if *t_done == 0 {
                *t_done = self.clock.now_ns();
            }
            e.cq = next(e.cq, self.sh.entries);
            if e.cq == 0 {
                e.phase ^= 1;
            }
            let slot = cqe[0];
            let (recording, t) = (self.recording, *t_done);
            if let Some(s) = self
                .submit_ns
                .get_mut(usize::try_from(slot).unwrap_or(usize::MAX))
            {
                if recording {
                    self.ops += 1;
                    self.rtt_sum += t.saturating_sub(*s);
                }
                *s = t;
            }
            self.submit(rings, e, slot);
            reaped += 1;
        }
        if reaped > 0 {
            let _ = rings.store_release_u32(CQ_DB, e.cq);
            let _ = rings.store_release_u32(SQ_DB, e.sq);
        }
        reaped
    }
}

fn client(sh: &Shared, opts: &CeilingOptions, stop: &AtomicBool) -> CeilingResult {
    let depth = u64::from(opts.depth);
    let slots = depth * u64::from(opts.queues);
    let mut c = Client {
        sh,
        opts,
        clock: TscClock::new(),
        rng: Rng::new(0x9e37_79b9_7f4a_7c15),
        blocks: (opts.footprint / opts.bs).max(1),
        submit_ns: vec![0u64; usize::try_from(slots).unwrap_or(0)],
        ops: 0,
        rtt_sum: 0,
        recording: false,
    };
    let mut ends = vec![START; sh.rings.len()];
    let warm = (opts.runtime / 10).min(Duration::from_secs(1));
    let warm_ns = u64::try_from(warm.as_nanos()).unwrap_or(u64::MAX);
    let end_ns = warm_ns.saturating_add(u64::try_from(opts.runtime.as_nanos()).unwrap_or(u64::MAX));
    let t0 = c.clock.now_ns();
    c.submit_ns.fill(t0);
    for (q, (rings, e)) in (0u64..).zip(sh.rings.iter().zip(ends.iter_mut())) {
        for i in 0..depth {
            c.submit(rings, e, q * depth + i);
        }
        let _ = rings.store_release_u32(SQ_DB, e.sq);
    }
    let mut start = t0;
    c.recording = warm_ns == 0;
    loop {
        let mut reaped = 0u32;
        let mut t_done = 0u64;
        for (rings, e) in sh.rings.iter().zip(ends.iter_mut()) {
            reaped += c.reap(rings, e, &mut t_done);
        }
        if reaped == 0 {
            std::hint::spin_loop();
            continue;
        }
        if !c.recording && t_done >= warm_ns {
            c.recording = true;
            start = t_done;
        }
        // At least one measured operation, however slow the machine (or a stop request).
        if (t_done >= end_ns && c.ops > 0) || stop.load(Ordering::Relaxed) {
            return CeilingResult {
                opts: *opts,
                ops: c.ops,
                elapsed_ns: t_done.saturating_sub(start),
                avg_rtt_ns: if c.ops == 0 {
                    0.0
                } else {
                    c.rtt_sum as f64 / c.ops as f64
                },
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_completes_operations_with_and_without_copy() {
        for copy in [true, false] {
            let opts = CeilingOptions {
                bs: 512,
                depth: 4,
                queues: 1,
                footprint: 1 << 20,
                copy,
                write: false,
                runtime: Duration::from_millis(50),
                client_cpu: None,
                device_cpu: None,
            };
            let r = run_ceiling(&opts, &AtomicBool::new(false)).unwrap();
            assert!(r.ops > 0);
            assert!(r.avg_rtt_ns > 0.0);
            assert!(
                r.render_text()
                    .contains(if copy { "copy" } else { "nocopy" })
            );
            assert_eq!(r.to_json()["bs"], 512);
        }
    }

    #[test]
    fn several_queue_pairs_complete_commands_and_are_reported() {
        let opts = CeilingOptions {
            bs: 512,
            depth: 2,
            queues: 8,
            footprint: 1 << 20,
            copy: true,
            write: false,
            runtime: Duration::from_millis(50),
            client_cpu: None,
            device_cpu: None,
        };
        let r = run_ceiling(&opts, &AtomicBool::new(false)).unwrap();
        assert!(r.ops > 0 && r.avg_rtt_ns > 0.0);
        assert_eq!(r.to_json()["queues"], 8);
        assert!(r.render_text().contains("iodepth=2 x 8 queues"));
    }

    #[test]
    fn read_copies_the_buffer_into_the_slot_and_write_the_other_way() {
        let opts = CeilingOptions {
            bs: 4096,
            depth: 2,
            queues: 1,
            footprint: 1 << 16,
            copy: true,
            write: true,
            runtime: Duration::from_millis(20),
            client_cpu: None,
            device_cpu: None,
        };
        assert!(run_ceiling(&opts, &AtomicBool::new(false)).unwrap().ops > 0);
    }

    #[test]
    fn bad_options_are_refused() {
        let mut opts = CeilingOptions {
            bs: 0,
            depth: 1,
            queues: 1,
            footprint: 4096,
            copy: true,
            write: false,
            runtime: Duration::from_millis(1),
            client_cpu: None,
            device_cpu: None,
        };
        assert!(run_ceiling(&opts, &AtomicBool::new(false)).is_err());
        opts.bs = 512;
        opts.queues = 0;
        assert!(run_ceiling(&opts, &AtomicBool::new(false)).is_err());
        opts.queues = 1;
        opts.bs = 8192;
        assert!(run_ceiling(&opts, &AtomicBool::new(false)).is_err());
    }
}
