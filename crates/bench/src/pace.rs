// SPDX-License-Identifier: Apache-2.0
//! `rate` and `rate_iops`: per-direction pacing of submissions.
//!
//! Each direction keeps the earliest time its next I/O may be submitted; an I/O moves
//! it on by its share of the budget (`1 / rate_iops`, `bytes / rate`, the longer of
//! the two). A direction that fell behind (a slow device) may catch up by at most
//! [`CATCH_UP_NS`], so a stall is not followed by a burst. The job loop keeps polling
//! completions while it waits: a clock read per check, no sleep, no syscall.
//!
//! In a mixed job the direction drawn by the mix gives way to the other one when that one
//! is due first ([`Pacer::pick`]), as fio does: each direction then reaches its own rate
//! (`rate_iops=1000,500` gives 1000 reads and 500 writes per second, not the mix's 50/50).

use crate::workload_values::DirRates;

/// How far behind schedule a direction may run before its schedule is moved up.
pub const CATCH_UP_NS: u64 = 10_000_000;

/// Per-direction submission schedule; directions without a limit are always ready.
#[derive(Debug, Clone, Default)]
pub struct Pacer {
    iops: [Option<u64>; 3],
    bytes_per_s: [Option<u64>; 3],
    next_ns: [u64; 3],
}

impl Pacer {
    /// A pacer for `rate` (bytes/s) and `rate_iops`; `None` when neither limits anything.
    pub fn new(rate: Option<DirRates>, rate_iops: Option<DirRates>) -> Option<Pacer> {
        let p = Pacer {
            iops: rate_iops.map_or([None; 3], |r| r.0),
            bytes_per_s: rate.map_or([None; 3], |r| r.0),
            next_ns: [0; 3],
        };
        (p.iops.iter().chain(&p.bytes_per_s).any(Option::is_some)).then_some(p)
    }

    /// Whether direction `dir` may submit at `now_ns`.
    #[inline]
    pub fn ready(&self, dir: usize, now_ns: u64) -> bool {
        self.next_ns.get(dir).is_none_or(|&n| now_ns >= n)
    }

    /// The direction a mixed job's next I/O takes when the mix drew `dir` (0 read, 1
    /// write): `dir` if it is due, else the other one if that is due, else whichever is due
    /// first (fio's rule).
    #[inline]
    pub fn pick(&self, dir: usize, now_ns: u64) -> usize {
        let other = match dir {
            0 => 1,
            1 => 0,
            _ => return dir,
        };
        let next = |d: usize| self.next_ns.get(d).copied().unwrap_or(0);
        if self.ready(dir, now_ns) || next(dir) <= next(other) {
            dir
        } else {
            other
        }
    }

    /// Charges one I/O of `bytes` submitted at `now_ns` to direction `dir`.
    #[inline]
    pub fn charge(&mut self, dir: usize, bytes: u64, now_ns: u64) {
        let per_io = self
            .iops
            .get(dir)
            .copied()
            .flatten()
            .map_or(0, |n| 1_000_000_000 / n.max(1));
        let per_bytes = self.bytes_per_s.get(dir).copied().flatten().map_or(0, |r| {
            u64::try_from(u128::from(bytes) * 1_000_000_000 / u128::from(r.max(1)))
                .unwrap_or(u64::MAX)
        });
        if let Some(n) = self.next_ns.get_mut(dir) {
            // The first I/O starts the schedule; later ones keep it, within the catch-up.
            let from = if *n == 0 {
                now_ns
            } else {
                (*n).max(now_ns.saturating_sub(CATCH_UP_NS))
            };
            *n = from.saturating_add(per_io.max(per_bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_limit_no_pacer() {
        assert!(Pacer::new(None, None).is_none());
        assert!(Pacer::new(None, Some(DirRates([None; 3]))).is_none());
    }

    #[test]
    fn iops_are_spaced_and_directions_are_independent() {
        let mut p = Pacer::new(None, Some(DirRates([Some(1000), None, None]))).unwrap();
        let t0 = 50_000_000;
        assert!(p.ready(0, t0));
        p.charge(0, 4096, t0);
        assert!(!p.ready(0, t0 + 999_999));
        assert!(p.ready(0, t0 + 1_000_000));
        // Writes are not limited.
        p.charge(1, 4096, t0);
        assert!(p.ready(1, t0));
    }

    #[test]
    fn a_mixed_job_takes_whichever_direction_is_due_first() {
        let mut p = Pacer::new(None, Some(DirRates([Some(1000), Some(500), None]))).unwrap();
        let t0 = 50_000_000;
        assert_eq!(p.pick(1, t0), 1);
        p.charge(1, 4096, t0);
        // Writes wait 2 ms; reads are due: a drawn write goes as a read.
        assert_eq!(p.pick(1, t0 + 1_000), 0);
        p.charge(0, 4096, t0 + 1_000);
        // Both wait; writes are due at t0 + 2 ms, reads at t0 + 1.001 ms.
        assert_eq!(p.pick(1, t0 + 2_000), 0);
        assert_eq!(p.pick(0, t0 + 2_000), 0);
        assert_eq!(p.pick(1, t0 + 2_000_000), 1);
        assert_eq!(p.pick(2, t0), 2);
        // Over a simulated second each direction reaches its own rate.
        let mut p = Pacer::new(None, Some(DirRates([Some(1000), Some(500), None]))).unwrap();
        let mut done = [0u32; 2];
        let mut drawn = 0usize;
        let mut t = t0;
        while t < t0 + 1_000_000_000 {
            let d = p.pick(drawn % 2, t);
            if p.ready(d, t) {
                p.charge(d, 4096, t);
                done[d] += 1;
                drawn += 1;
            }
            t += 10_000;
        }
        assert!((995..=1001).contains(&done[0]), "{done:?}");
        assert!((495..=501).contains(&done[1]), "{done:?}");
    }

    #[test]
    fn byte_rate_scales_with_size_and_the_slower_limit_wins() {
        let mut p = Pacer::new(
            Some(DirRates([Some(1 << 20); 3])),
            Some(DirRates([Some(1_000_000); 3])),
        )
        .unwrap();
        let t0 = 50_000_000;
        p.charge(1, 1 << 20, t0);
        assert!(!p.ready(1, t0 + 999_000_000));
        assert!(p.ready(1, t0 + 1_000_000_000));
    }

    #[test]
    fn a_stall_allows_only_a_bounded_burst() {
        let mut p = Pacer::new(None, Some(DirRates([Some(1000); 3]))).unwrap();
        p.charge(0, 512, 50_000_000);
        // One second later, only a bounded burst may go at once.
        let t = 1_050_000_000;
        let mut burst = 0;
        while p.ready(0, t) {
            p.charge(0, 512, t);
            burst += 1;
        }
        // The one due now plus CATCH_UP_NS worth.
        assert_eq!(burst, CATCH_UP_NS / 1_000_000 + 1);
    }
}
