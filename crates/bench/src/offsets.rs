// SPDX-License-Identifier: Apache-2.0
//! Where a job's next I/O goes: the unit (a `bs`-sized slot of the job's range) for
//! sequential, random-map and `norandommap` workloads.
//!
//! The random map keeps fio's promise that each pass over the range touches every unit
//! exactly once, in random order, without a bitmap: a pass walks a counter through
//! `0..2^k` (the smallest power of two holding `units`), sends it through a keyed
//! bijection on `k` bits ([`Permutation`]) and skips the images at or above `units`
//! (cycle walking; fewer than one skip per unit on average). Each pass draws new keys,
//! so passes differ. Per unit that is a few multiplies and shifts: no allocation, no
//! table, no syscall.

/// splitmix64: tiny, fast, good enough for offsets and the read/write mix.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-shift.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        let wide = u128::from(self.next_u64()) * u128::from(n);
        u64::try_from(wide >> 64).unwrap_or(0)
    }
}

/// So `rand_distr`'s samplers (zipf, normal) draw from the job's generator.
impl rand::RngCore for Rng {
    fn next_u32(&mut self) -> u32 {
        u32::try_from(Rng::next_u64(self) >> 32).unwrap_or(0)
    }

    fn next_u64(&mut self) -> u64 {
        Rng::next_u64(self)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let b = Rng::next_u64(self).to_le_bytes();
            chunk.copy_from_slice(b.get(..chunk.len()).unwrap_or(&b));
        }
    }
}

/// Odd multipliers (each a bijection modulo any power of two).
const MUL_A: u64 = 0xd6e8_feb8_6659_fd93;
const MUL_B: u64 = 0xa076_1d64_78bd_642f;

/// A keyed bijection on `0..2^bits`: xor a key, multiply by an odd constant, fold the
/// high half down (xorshift), add a second key, multiply, fold again. Each step is
/// invertible modulo `2^bits`, so the whole is a permutation of `0..2^bits`.
#[derive(Debug, Clone, Copy)]
pub struct Permutation {
    mask: u64,
    shift: u32,
    keys: [u64; 2],
}

impl Permutation {
    /// The permutation of `0..2^bits` (`bits <= 64`) chosen by `keys`.
    pub fn new(bits: u32, keys: [u64; 2]) -> Permutation {
        let mask = match bits {
            0 => 0,
            b if b >= 64 => u64::MAX,
            b => (1u64 << b) - 1,
        };
        Permutation {
            mask,
            shift: (bits / 2).max(1),
            keys,
        }
    }

    /// The largest value of the domain (`2^bits - 1`).
    pub fn max(&self) -> u64 {
        self.mask
    }

    /// The image of `x` (`x <= max()`).
    #[inline]
    pub fn apply(&self, x: u64) -> u64 {
        let m = self.mask;
        let mut x = (x ^ self.keys[0]) & m;
        x = x.wrapping_mul(MUL_A) & m;
        x ^= x >> self.shift;
        x = x.wrapping_add(self.keys[1]) & m;
        x = x.wrapping_mul(MUL_B) & m;
        x ^ (x >> self.shift)
    }
}

/// Every unit of `0..units` once per pass, in a random order that changes each pass.
#[derive(Debug, Clone)]
pub struct RandomMap {
    units: u64,
    bits: u32,
    perm: Permutation,
    counter: u64,
}

impl RandomMap {
    /// A map over `0..units` (`units >= 1`), keyed for its first pass from `rng`.
    pub fn new(units: u64, rng: &mut Rng) -> RandomMap {
        let bits = 64 - units.saturating_sub(1).leading_zeros();
        RandomMap {
            units,
            bits,
            perm: Permutation::new(bits, [rng.next_u64(), rng.next_u64()]),
            counter: 0,
        }
    }

    /// The next unit; after the last unit of a pass, the first of a newly keyed pass.
    #[inline]
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        loop {
            let c = self.counter;
            let x = self.perm.apply(c);
            if c < self.perm.max() {
                self.counter = c + 1;
            } else {
                // The pass is complete once this image is used or skipped.
                self.counter = 0;
                self.perm = Permutation::new(self.bits, [rng.next_u64(), rng.next_u64()]);
            }
            if x < self.units {
                return x;
            }
        }
    }
}

/// How a job picks the unit of its next I/O.
#[derive(Debug, Clone)]
pub enum Offsets {
    /// `0, 1, 2, ...`, wrapping at `units`.
    Sequential {
        /// The next unit.
        next: u64,
        /// Units in the range.
        units: u64,
    },
    /// fio's default for random workloads: each unit once per pass.
    Map(RandomMap),
    /// `norandommap`: independent uniform draws (units may repeat or be missed).
    Uniform {
        /// Units in the range.
        units: u64,
    },
}

impl Offsets {
    /// The generator for a job over `units` units (`units >= 1`).
    pub fn new(random: bool, random_map: bool, units: u64, rng: &mut Rng) -> Offsets {
        match (random, random_map) {
            (false, _) => Offsets::Sequential { next: 0, units },
            (true, true) => Offsets::Map(RandomMap::new(units, rng)),
            (true, false) => Offsets::Uniform { units },
        }
    }

    /// The next unit.
    #[inline]
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        match self {
            Offsets::Sequential { next, units } => {
                let u = *next;
                *next = if u + 1 >= *units { 0 } else { u + 1 };
                u
            }
            Offsets::Map(m) => m.next(rng),
            Offsets::Uniform { units } => rng.below(*units),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(map: &mut RandomMap, rng: &mut Rng, units: u64) -> Vec<u64> {
        (0..units).map(|_| map.next(rng)).collect()
    }

    #[test]
    fn permutation_is_a_bijection_for_every_small_width() {
        for bits in 0..=12 {
            let p = Permutation::new(bits, [0x1234_5678_9abc_def0, 0x0fed_cba9_8765_4321]);
            let n = p.max() + 1;
            let mut seen = vec![false; usize::try_from(n).unwrap()];
            for x in 0..n {
                let y = usize::try_from(p.apply(x)).unwrap();
                assert!(!seen[y], "bits {bits}: {y} twice");
                seen[y] = true;
            }
        }
    }

    #[test]
    fn each_pass_touches_every_unit_exactly_once() {
        for units in [1u64, 2, 3, 5, 7, 8, 9, 100, 1000, 4096, 4097] {
            let mut rng = Rng::new(units);
            let mut map = RandomMap::new(units, &mut rng);
            for p in 0..3 {
                let mut got = pass(&mut map, &mut rng, units);
                got.sort_unstable();
                let want: Vec<u64> = (0..units).collect();
                assert_eq!(got, want, "units {units}, pass {p}");
            }
        }
    }

    #[test]
    fn order_is_random_and_passes_differ() {
        let units = 4096;
        let mut rng = Rng::new(7);
        let mut map = RandomMap::new(units, &mut rng);
        let a = pass(&mut map, &mut rng, units);
        let b = pass(&mut map, &mut rng, units);
        assert_ne!(a, b);
        // Not sequential, and not mostly ascending.
        let ascending = a.windows(2).filter(|w| w[1] > w[0]).count();
        assert!(
            (1500..2600).contains(&ascending),
            "{ascending} ascending steps"
        );
        // Both halves of the range show up early on.
        assert!(a[..64].iter().any(|&u| u < units / 2));
        assert!(a[..64].iter().any(|&u| u >= units / 2));
    }

    #[test]
    fn same_seed_same_sequence_other_seed_other_sequence() {
        let seq = |seed: u64| {
            let mut rng = Rng::new(seed);
            let mut o = Offsets::new(true, true, 1000, &mut rng);
            (0..2500).map(|_| o.next(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(seq(1), seq(1));
        assert_ne!(seq(1), seq(2));
    }

    #[test]
    fn sequential_wraps_and_uniform_stays_in_range() {
        let mut rng = Rng::new(3);
        let mut s = Offsets::new(false, true, 3, &mut rng);
        let v: Vec<u64> = (0..7).map(|_| s.next(&mut rng)).collect();
        assert_eq!(v, [0, 1, 2, 0, 1, 2, 0]);
        let mut u = Offsets::new(true, false, 10, &mut rng);
        assert!((0..1000).all(|_| u.next(&mut rng) < 10));
    }
}
