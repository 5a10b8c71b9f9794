// SPDX-License-Identifier: Apache-2.0
//! Completions: latencies, counters, what each write or trim left, and the check of
//! every verify read.

use std::sync::atomic::Ordering;

use super::JobLoop;
use crate::engine::{EngineError, IoQueue};
use crate::generations::{GEN_UNKNOWN, apply, check_read, set_gen};
use crate::next_io::NextIo;
use crate::stats::{IoLatency, PendingLatencies};

/// Most empty polls one `reap` makes while the job waits for a free slot (a few
/// microseconds: the loop still checks the time, the stop flag and the logs between them).
const WAIT_POLLS: u32 = 256;

impl JobLoop<'_> {
    /// Takes up to `reap_max` completions. One clock reading, at the first, serves as
    /// the completion time of all; equal latencies are recorded together.
    ///
    /// While no slot can be refilled the loop has nothing to do but wait, so this polls the
    /// queue alone, up to [`WAIT_POLLS`] times: a completion is then seen one poll after it
    /// arrives, not one turn of the loop (its clock read, checks and sampling) after.
    pub(super) fn reap(&mut self, q: &mut dyn IoQueue) {
        let mut t_done = 0u64;
        let mut pending = PendingLatencies::default();
        let mut n = 0;
        for _ in 0..WAIT_POLLS {
            n = q.reap(self.plan.batching.reap_max, &mut |slot, res| {
                if t_done == 0 {
                    t_done = self.now();
                }
                self.complete(slot, res, t_done, &mut pending);
            });
            if n > 0 || self.free.len() >= self.plan.batching.refill_min {
                break;
            }
        }
        if n > 0 {
            self.reaped_at = Some(t_done);
            if let Some(th) = &mut self.thinker {
                th.completed(n as u64);
            }
            pending.flush(&mut self.out.stats);
            if self.recording {
                self.out.stats.count_complete(n);
            }
            self.publish_progress();
        }
        self.verify_reads(q);
    }

    /// Books one completion: counters, latencies, and what a write or trim left.
    fn complete(
        &mut self,
        slot: usize,
        res: Result<(), EngineError>,
        t_done: u64,
        pending: &mut PendingLatencies,
    ) {
        let Some(s) = self.slots.get(slot).copied() else {
            self.out
                .error
                .get_or_insert(EngineError::InvalidSlot { slot });
            return;
        };
        self.inflight = self.inflight.saturating_sub(1);
        let bytes = s.units * self.unit_bytes;
        let verifying = self.v.verifier.is_some();
        match res {
            Err(e) => {
                self.out.error.get_or_insert(e);
                if verifying && s.dir != 0 {
                    for u in s.unit..s.unit + s.units {
                        set_gen(&mut self.v.gens, u, GEN_UNKNOWN);
                    }
                }
            }
            Ok(()) => {
                if let (Some(b), Some(i)) =
                    (self.done_bytes.get_mut(s.dir), self.done_ios.get_mut(s.dir))
                {
                    *b += bytes;
                    *i += 1;
                }
                if self.recording && s.start_ns >= self.stats_start {
                    let lat = IoLatency {
                        dir: s.dir,
                        slat: s.issue_ns - s.start_ns,
                        clat: t_done.saturating_sub(s.issue_ns),
                        lat: t_done.saturating_sub(s.start_ns),
                        at_ns: t_done,
                    };
                    pending.add(&mut self.out.stats, lat, bytes);
                }
                if verifying && s.dir != 0 {
                    let io = NextIo {
                        dir: s.dir,
                        unit: s.unit,
                        units: s.units,
                    };
                    apply(&mut self.v.gens, io);
                    if self.v.backlog_len.is_some() {
                        self.v.backlog.push_back((s.unit, s.units));
                    }
                }
            }
        }
        if self.v.checking && s.dir == 0 {
            // Checked (and the slot freed) after reap returns the queue.
            self.to_check.push((slot, s));
        } else {
            if verifying {
                self.v.busy.set(s.unit, s.units, false);
            }
            self.free.push(slot);
        }
    }

    /// Counters for the live status line.
    fn publish_progress(&self) {
        let counters = [
            (&self.progress.bytes, &self.done_bytes),
            (&self.progress.ios, &self.done_ios),
        ];
        for (shown, done) in counters {
            for (p, v) in shown.iter().zip(done) {
                p.store(*v, Ordering::Relaxed);
            }
        }
    }

    /// Checks the reads the last reap completed and frees their slots.
    fn verify_reads(&mut self, q: &mut dyn IoQueue) {
        if !self.to_check.is_empty() {
            // Checking takes time: the next turn reads the clock afresh.
            self.reaped_at = None;
        }
        for (slot, s) in self.to_check.drain(..) {
            let len = usize::try_from(s.units * self.unit_bytes).unwrap_or(0);
            let buf = self.staging.get_mut(..len).unwrap_or(&mut []);
            if let Err(e) = q.read_payload(slot, buf) {
                self.out.error.get_or_insert(e);
            } else if let Some(v) = &self.v.verifier {
                check_read(self.plan, v, &self.v.gens, &s, buf, &mut self.out.verify);
            }
            self.v.busy.set(s.unit, s.units, false);
            self.free.push(slot);
        }
    }
}
