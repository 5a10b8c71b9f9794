// SPDX-License-Identifier: Apache-2.0
//! The job's workload as a deterministic stream of I/Os: direction (the `rwmixread`
//! draw), size in grains (`bs`/`bssplit`/`bsrange`) and first unit (sequential, the
//! random map, `norandommap` or a skewed `random_distribution`), all drawn from one
//! seeded generator in that order. The same seed and options give the same stream,
//! whatever the device's timing, which is what `verify_only` replays.
//!
//! With the random map and sizes above one grain, a pass still covers every unit
//! exactly once: an I/O stops before the first unit this pass already covered (as fio
//! shortens it), and starts already covered are skipped; one bit per unit, cleared when
//! the pass is complete.

use crate::offsets::{Offsets, Rng};
use crate::sizes::Sizes;
use crate::skew::Skew;
use crate::workload_values::RandomDistribution;

/// One I/O of the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextIo {
    /// 0 read, 1 write, 2 trim.
    pub dir: usize,
    /// First unit.
    pub unit: u64,
    /// Units covered (>= 1).
    pub units: u64,
}

/// Units covered in the current pass of the random map.
#[derive(Debug, Clone)]
struct Covered {
    bits: Vec<u64>,
    count: u64,
}

impl Covered {
    fn get(&self, u: u64) -> bool {
        let i = usize::try_from(u / 64).unwrap_or(usize::MAX);
        self.bits.get(i).is_some_and(|w| w & (1 << (u % 64)) != 0)
    }

    fn set(&mut self, u: u64) {
        let i = usize::try_from(u / 64).unwrap_or(usize::MAX);
        if let Some(w) = self.bits.get_mut(i) {
            *w |= 1 << (u % 64);
            self.count += 1;
        }
    }
}

/// The workload generator of one job.
#[derive(Debug, Clone)]
pub struct IoSource {
    rng: Rng,
    offsets: Offsets,
    skew: Option<Skew>,
    sizes: Sizes,
    read_pct: u8,
    trim: bool,
    trim_write: bool,
    /// trimwrite: the rest of the last trimmed range, to write next (next unit, end).
    to_write: Option<(u64, u64)>,
    units: u64,
    sequential: bool,
    seq_add: i64,
    cursor: u64,
    covered: Option<Covered>,
}

/// What [`IoSource::new`] needs.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// Seed of the job's generator.
    pub seed: u64,
    /// Random offsets (else sequential).
    pub random: bool,
    /// fio's random map (ignored for skewed distributions, which draw with replacement).
    pub random_map: bool,
    /// Offset distribution.
    pub distribution: RandomDistribution,
    /// Units in the range (>= 1).
    pub units: u64,
    /// Sizes per direction, in units.
    pub sizes: Sizes,
    /// Percentage of reads (reads and writes).
    pub read_pct: u8,
    /// Every I/O is a trim.
    pub trim: bool,
    /// Trims, each trimmed range then written (fio's trimwrite); wins over `trim`.
    pub trim_write: bool,
    /// Units a sequential workload adds after each I/O (may be negative; wraps).
    pub seq_add: i64,
}

impl IoSource {
    /// The generator for `spec`.
    pub fn new(spec: SourceSpec) -> IoSource {
        let mut rng = Rng::new(spec.seed);
        let units = spec.units.max(1);
        let skew = if spec.random {
            Skew::new(spec.distribution, units, &mut rng)
        } else {
            None
        };
        let map = spec.random_map && skew.is_none();
        let offsets = Offsets::new(spec.random, map, units, &mut rng);
        let covered = (spec.random && map && spec.sizes.max() > 1).then(|| Covered {
            bits: vec![0; usize::try_from(units.div_ceil(64)).unwrap_or(0)],
            count: 0,
        });
        IoSource {
            rng,
            offsets,
            skew,
            sizes: spec.sizes,
            read_pct: spec.read_pct,
            trim: spec.trim || spec.trim_write,
            trim_write: spec.trim_write,
            to_write: None,
            units,
            sequential: !spec.random,
            seq_add: spec.seq_add,
            cursor: 0,
            covered,
        }
    }

    /// The next I/O.
    #[inline]
    pub fn next(&mut self) -> NextIo {
        if let Some((unit, end)) = self.to_write {
            let units = self.sizes.pick(1, &mut self.rng).min(end - unit).max(1);
            self.to_write = (unit + units < end).then_some((unit + units, end));
            return NextIo {
                dir: 1,
                unit,
                units,
            };
        }
        let io = self.draw();
        if self.trim_write {
            self.to_write = Some((io.unit, io.unit + io.units));
        }
        io
    }

    /// Whether a trimwrite job has part of its last trimmed range still to write.
    pub fn writing_trimmed(&self) -> bool {
        self.to_write.is_some()
    }

    fn draw(&mut self) -> NextIo {
        let dir = if self.trim {
            2
        } else if self.read_pct >= 100 {
            0
        } else if self.read_pct == 0 || self.rng.below(100) >= u64::from(self.read_pct) {
            1
        } else {
            0
        };
        let want = self.sizes.pick(dir, &mut self.rng);
        let (unit, units) = if self.sequential {
            let u = self.cursor;
            let k = want.min(self.units - u);
            // The next offset follows this I/O plus fio's step, wrapping both ways.
            let next = i128::from(u) + i128::from(k) + i128::from(self.seq_add);
            let next = next.rem_euclid(i128::from(self.units));
            self.cursor = u64::try_from(next).unwrap_or(0);
            (u, k)
        } else if let Some(s) = &self.skew {
            let u = s.next(&mut self.rng);
            (u, want.min(self.units - u))
        } else if let Some(c) = &mut self.covered {
            if c.count >= self.units {
                c.bits.fill(0);
                c.count = 0;
            }
            let mut u = self.offsets.next(&mut self.rng);
            while c.get(u) {
                u = self.offsets.next(&mut self.rng);
            }
            let mut k = 0;
            while k < want && u + k < self.units && !c.get(u + k) {
                c.set(u + k);
                k += 1;
            }
            (u, k.max(1))
        } else {
            let u = self.offsets.next(&mut self.rng);
            (u, want.min(self.units - u))
        };
        NextIo { dir, unit, units }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload_values::parse_bssplit;

    fn spec(random: bool, sizes: Sizes, units: u64) -> SourceSpec {
        SourceSpec {
            seed: 9,
            random,
            random_map: true,
            distribution: RandomDistribution::Random,
            units,
            sizes,
            read_pct: 0,
            trim: false,
            trim_write: false,
            seq_add: 0,
        }
    }

    fn split() -> Sizes {
        let s = parse_bssplit("4k/50:16k/30:64k/20").unwrap();
        Sizes::new(Some(&s.0), 4096, 4096)
    }

    /// Issues I/Os until `bytes` units are covered, returning how often each unit was hit.
    fn cover(src: &mut IoSource, units: u64, passes: u64) -> Vec<u32> {
        let mut hits = vec![0u32; usize::try_from(units).unwrap()];
        let mut done = 0;
        while done < units * passes {
            let io = src.next();
            assert!(io.units >= 1 && io.unit + io.units <= units, "{io:?}");
            for u in io.unit..io.unit + io.units {
                hits[usize::try_from(u).unwrap()] += 1;
            }
            done += io.units;
        }
        assert_eq!(done, units * passes, "a pass ends exactly at the range");
        hits
    }

    #[test]
    fn random_map_with_bssplit_covers_every_unit_once_per_pass() {
        for units in [1u64, 7, 100, 1000, 4099] {
            let mut src = IoSource::new(spec(true, split(), units));
            let hits = cover(&mut src, units, 2);
            assert!(hits.iter().all(|&h| h == 2), "units {units}");
        }
    }

    #[test]
    fn sequential_with_bssplit_walks_the_range_in_order() {
        let mut src = IoSource::new(spec(false, split(), 1000));
        let mut next = 0;
        for _ in 0..500 {
            let io = src.next();
            assert_eq!(io.unit, next);
            next = (io.unit + io.units) % 1000;
        }
    }

    #[test]
    fn same_seed_same_stream() {
        let run = |seed| {
            let mut s = spec(true, split(), 1000);
            s.seed = seed;
            s.read_pct = 70;
            let mut src = IoSource::new(s);
            (0..3000).map(|_| src.next()).collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn rwmixread_sets_the_read_share() {
        let mut s = spec(true, Sizes::new(None, 4096, 4096), 1000);
        s.read_pct = 70;
        let mut src = IoSource::new(s);
        let reads = (0..100_000).filter(|_| src.next().dir == 0).count();
        assert!((69_000..71_000).contains(&reads), "{reads}");
    }

    #[test]
    fn a_sequential_step_leaves_holes_or_walks_backwards_and_wraps() {
        let sizes = Sizes::new(None, 1, 1);
        let walk = |add: i64| {
            let mut src = IoSource::new(SourceSpec {
                seq_add: add,
                ..spec(false, sizes.clone(), 10)
            });
            (0..6).map(|_| src.next().unit).collect::<Vec<_>>()
        };
        assert_eq!(walk(0), [0, 1, 2, 3, 4, 5]);
        // write:2 units: one written, two skipped.
        assert_eq!(walk(2), [0, 3, 6, 9, 2, 5]);
        // read:-2 units with one-unit I/Os: backwards from the end.
        assert_eq!(walk(-2), [0, 9, 8, 7, 6, 5]);
    }
}
