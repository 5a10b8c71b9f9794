// SPDX-License-Identifier: Apache-2.0
//! Skewed offsets (`random_distribution=zipf|pareto|normal|zoned`), drawn with replacement.
//!
//! Zipf and Pareto draw a popularity rank (0 the hottest) and send it through a keyed
//! bijection of the range ([`Permutation`], cycle-walked), so the hot blocks are
//! scattered over the range as fio scatters them, and every rank keeps its own block.
//! Normal keeps its hot area contiguous around its center. An optional center moves
//! the result by that fraction of the range. Zoned draws a zone by its access share,
//! then a unit inside it ([`crate::zones`]). Per draw: a few float operations and
//! one or two permutation rounds; nothing is allocated.

use rand_distr::{Distribution, Normal, Zipf};

use crate::offsets::{Permutation, Rng};
use crate::workload_values::RandomDistribution;

#[derive(Debug, Clone)]
enum Kind {
    Zipf(Zipf<f64>),
    /// Exponent: a uniform `u` maps to `u^pow` of the range.
    Pareto {
        pow: f64,
    },
    Normal(Normal<f64>),
    /// `(first unit, units, cumulative access percent)` per zone.
    Zoned(Vec<(u64, u64, u32)>),
}

/// A skewed generator over `0..units`.
#[derive(Debug, Clone)]
pub struct Skew {
    kind: Kind,
    units: u64,
    shift: u64,
    scatter: Permutation,
}

/// Float to an index below `units` (`as` saturates; NaN becomes 0).
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]
fn index(x: f64, units: u64) -> u64 {
    (x.max(0.0) as u64).min(units.saturating_sub(1))
}

impl Skew {
    /// The generator for `dist` over `units` (>= 1); `None` for the uniform one.
    #[allow(clippy::cast_precision_loss)]
    pub fn new(dist: RandomDistribution, units: u64, rng: &mut Rng) -> Option<Skew> {
        let n = units.max(1) as f64;
        let (kind, center) = match dist {
            RandomDistribution::Random => return None,
            RandomDistribution::Zipf { theta, center } => {
                (Kind::Zipf(Zipf::new(n, theta).ok()?), center)
            }
            RandomDistribution::Pareto { h, center } => (
                Kind::Pareto {
                    pow: h.ln() / (1.0 - h).ln(),
                },
                center,
            ),
            RandomDistribution::Normal { stddev_pct, center } => (
                Kind::Normal(Normal::new(center * n, stddev_pct / 100.0 * n).ok()?),
                0.0,
            ),
            RandomDistribution::Zoned(z) => (Kind::Zoned(z.layout(units)), 0.0),
        };
        let bits = 64 - units.saturating_sub(1).leading_zeros();
        Some(Skew {
            kind,
            units: units.max(1),
            shift: index(center * n, units),
            scatter: Permutation::new(bits, [rng.next_u64(), rng.next_u64()]),
        })
    }

    /// The popularity rank of the next draw (0 the hottest), before scattering.
    #[inline]
    fn rank(&self, rng: &mut Rng) -> u64 {
        match &self.kind {
            Kind::Zipf(z) => index(z.sample(rng) - 1.0, self.units),
            Kind::Pareto { pow } => {
                #[allow(clippy::cast_precision_loss)]
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                #[allow(clippy::cast_precision_loss)]
                index(u.powf(*pow) * self.units as f64, self.units)
            }
            Kind::Normal(d) => {
                // Redraw the tails that fall outside the range (few for sane deviations).
                let mut x = d.sample(rng);
                for _ in 0..16 {
                    #[allow(clippy::cast_precision_loss)]
                    if (0.0..self.units as f64).contains(&x) {
                        break;
                    }
                    x = d.sample(rng);
                }
                index(x, self.units)
            }
            Kind::Zoned(layout) => crate::zones::pick(layout, rng),
        }
    }

    /// The next unit.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let r = self.rank(rng);
        match self.kind {
            Kind::Normal(_) | Kind::Zoned(_) => (r + self.shift) % self.units,
            _ => self.place(r),
        }
    }

    /// Where Zipf or Pareto rank `r` lands. Cycle walking: images at or above `units`
    /// go round again (fewer than one extra round on average, the domain being under
    /// twice the range).
    pub fn place(&self, r: u64) -> u64 {
        let mut x = self.scatter.apply(r);
        while x >= self.units {
            x = self.scatter.apply(x);
        }
        (x + self.shift) % self.units
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fraction of `draws` that hit the `top` most popular units.
    fn top_share(counts: &mut [u64], top: usize, draws: u64) -> f64 {
        counts.sort_unstable_by(|a, b| b.cmp(a));
        counts[..top].iter().sum::<u64>() as f64 / draws as f64
    }

    fn draw(dist: RandomDistribution, units: u64, draws: u64) -> Vec<u64> {
        let mut rng = Rng::new(11);
        let s = Skew::new(dist, units, &mut rng).unwrap();
        let mut counts = vec![0u64; usize::try_from(units).unwrap()];
        for _ in 0..draws {
            counts[usize::try_from(s.next(&mut rng)).unwrap()] += 1;
        }
        counts
    }

    #[test]
    fn zipf_concentrates_as_theta_says() {
        let (units, draws) = (10_000u64, 400_000u64);
        for theta in [0.8, 1.2] {
            let mut c = draw(
                RandomDistribution::Zipf { theta, center: 0.0 },
                units,
                draws,
            );
            // The share of the top 10 % of ranks under Zipf(theta): H(k) / H(n).
            let h = |k: u64| (1..=k).map(|i| (i as f64).powf(-theta)).sum::<f64>();
            let want = h(units / 10) / h(units);
            let got = top_share(&mut c, (units / 10) as usize, draws);
            assert!(got > 0.3, "theta {theta}: top 10% got {got}");
            assert!((got - want).abs() < 0.03, "theta {theta}: {got} vs {want}");
        }
    }

    #[test]
    fn zipf_hot_blocks_are_scattered_and_each_rank_has_its_own() {
        let mut rng = Rng::new(3);
        let s = Skew::new(
            RandomDistribution::Zipf {
                theta: 1.2,
                center: 0.0,
            },
            1000,
            &mut rng,
        )
        .unwrap();
        let mut hot: Vec<u64> = (0..100).map(|r| s.place(r)).collect();
        assert!(hot.iter().any(|&u| u >= 500) && hot.iter().any(|&u| u < 500));
        hot.sort_unstable();
        hot.dedup();
        assert_eq!(hot.len(), 100);
    }

    #[test]
    fn pareto_h_gives_one_minus_h_to_h_of_the_blocks() {
        let (units, draws) = (10_000u64, 400_000u64);
        let mut c = draw(
            RandomDistribution::Pareto {
                h: 0.2,
                center: 0.0,
            },
            units,
            draws,
        );
        let got = top_share(&mut c, (units / 5) as usize, draws);
        assert!((got - 0.8).abs() < 0.03, "top 20% got {got}");
    }

    #[test]
    fn normal_stays_around_its_center() {
        let (units, draws) = (10_000u64, 200_000u64);
        let c = draw(
            RandomDistribution::Normal {
                stddev_pct: 5.0,
                center: 0.5,
            },
            units,
            draws,
        );
        // Within one deviation of the middle: about 68 %.
        let near: u64 = c[4500..5500].iter().sum();
        let got = near as f64 / draws as f64;
        assert!((got - 0.683).abs() < 0.02, "{got}");
    }
}
