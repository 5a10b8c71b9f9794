// SPDX-License-Identifier: Apache-2.0
//! I/O sizes per direction (`bs`, `bssplit`, `bsrange`) in units of the job's grain:
//! the greatest common divisor of every size, so each I/O covers whole units of the
//! random map and of the verify generation table. Built once per job; a pick is one
//! random draw and a short scan, with no allocation.

use crate::offsets::Rng;
use crate::workload_values::BlockSizes;

/// How one direction picks its size, in grains.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Choice {
    Fixed(u64),
    /// Cumulative weights and sizes; a draw below `total` picks the first entry above it.
    Split {
        total: u64,
        entries: Vec<(u64, u64)>,
    },
    /// `min * (1 + below(steps))`.
    Range {
        min: u64,
        steps: u64,
    },
}

/// Sizes of the three directions (read, write, trim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizes {
    choices: [Choice; 3],
    max: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Sizes {
    /// The grain (bytes) of `lists`: the gcd of every size they can produce, and of `bs`
    /// when a direction has no list.
    pub fn grain(lists: Option<&[BlockSizes; 3]>, bs: u64) -> u64 {
        match lists {
            None => bs,
            Some(l) => l.iter().flat_map(BlockSizes::sizes).fold(0, gcd),
        }
    }

    /// Sizes in grains of `grain` bytes: `lists` (bssplit or bsrange) or a fixed `bs`.
    pub fn new(lists: Option<&[BlockSizes; 3]>, bs: u64, grain: u64) -> Sizes {
        let g = grain.max(1);
        let choice = |l: Option<&BlockSizes>| match l {
            None => Choice::Fixed(bs / g),
            Some(BlockSizes::Split(v)) => {
                let mut total = 0;
                let entries = v
                    .iter()
                    .filter(|&&(_, p)| p > 0)
                    .map(|&(s, p)| {
                        total += u64::from(p);
                        (total, s / g)
                    })
                    .collect();
                Choice::Split { total, entries }
            }
            Some(BlockSizes::Range { min, max }) => Choice::Range {
                min: min / g,
                steps: (max / min).max(1),
            },
        };
        let choices = [0, 1, 2].map(|d| choice(lists.and_then(|l| l.get(d))));
        let max = choices
            .iter()
            .map(|c| match c {
                Choice::Fixed(k) => *k,
                Choice::Split { entries, .. } => entries.iter().map(|e| e.1).max().unwrap_or(1),
                Choice::Range { min, steps } => min * steps,
            })
            .max()
            .unwrap_or(1)
            .max(1);
        Sizes { choices, max }
    }

    /// The largest I/O, in grains.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The next size of direction `dir` (0 read, 1 write, 2 trim), in grains (>= 1).
    #[inline]
    pub fn pick(&self, dir: usize, rng: &mut Rng) -> u64 {
        let k = match self.choices.get(dir) {
            None => 1,
            Some(Choice::Fixed(k)) => *k,
            Some(Choice::Split { total, entries }) => {
                let r = rng.below((*total).max(1));
                entries.iter().find(|e| e.0 > r).map_or(1, |e| e.1)
            }
            Some(Choice::Range { min, steps }) => min * (1 + rng.below(*steps)),
        };
        k.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload_values::parse_bssplit;

    #[test]
    fn grain_is_the_gcd_of_every_size() {
        let s = parse_bssplit("4k/50:64k/40:1m/10").unwrap();
        assert_eq!(Sizes::grain(Some(&s.0), 4096), 4096);
        let s = parse_bssplit("8k/50:12k/50").unwrap();
        assert_eq!(Sizes::grain(Some(&s.0), 4096), 4096);
        assert_eq!(Sizes::grain(None, 8192), 8192);
    }

    #[test]
    fn split_shares_are_honoured() {
        let s = parse_bssplit("4k/50:64k/40:1m/10").unwrap();
        let sizes = Sizes::new(Some(&s.0), 4096, 4096);
        assert_eq!(sizes.max(), 256);
        let mut rng = Rng::new(5);
        let mut counts = [0u32; 3];
        for _ in 0..100_000 {
            match sizes.pick(1, &mut rng) {
                1 => counts[0] += 1,
                16 => counts[1] += 1,
                256 => counts[2] += 1,
                k => panic!("size {k}"),
            }
        }
        for (c, want) in counts.iter().zip([50_000, 40_000, 10_000]) {
            assert!(c.abs_diff(want) < 1500, "{counts:?}");
        }
    }

    #[test]
    fn range_picks_multiples_of_the_minimum_up_to_the_maximum() {
        let r = crate::workload_values::parse_bsrange("4k-16k").unwrap();
        let sizes = Sizes::new(Some(&r.0), 4096, 4096);
        let mut rng = Rng::new(1);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let k = sizes.pick(0, &mut rng);
            assert!((1..=4).contains(&k));
            seen[usize::try_from(k).unwrap()] = true;
        }
        assert!(seen[1..].iter().all(|&s| s));
    }
}
