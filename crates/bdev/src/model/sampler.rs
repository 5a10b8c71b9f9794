// SPDX-License-Identifier: Apache-2.0
//! A model's running state in one controller: the seeded generator, the service-time
//! samplers and when each parallel unit is next free. Built when the configuration changes
//! (allocates then); asking it for a deadline allocates nothing and makes no system call.

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{MAX_UNITS, ModelConfig, OpClass, ServiceTime, Tail};

/// The standard normal's 99th percentile.
const Z99: f64 = 2.326_347_874_040_841;
/// Longest service time drawn, in nanoseconds (an hour; `ModelConfig::check` keeps the
/// configured times below it).
const MAX_NS: f64 = 3.6e12;
const MAX_NS_INT: u64 = 3_600_000_000_000;
const PS_PER_SEC: u128 = 1_000_000_000_000;
/// The transfer a service time already includes.
const BASE_BYTES: u64 = 4096;

/// How one operation class's service time is drawn.
#[derive(Debug, Clone)]
enum Draw {
    Fixed(u64),
    /// One in 100 takes `p99`, the rest `avg` (SPDK's delay bdev).
    Spdk {
        avg: u64,
        p99: u64,
    },
    LogNormal(LogNormal<f64>),
}

impl Draw {
    fn new(t: ServiceTime, tail: Tail) -> Draw {
        // Unchecked values (`bdev_delay_update_latency` takes any) are capped at an hour.
        let ns = |us: u64| us.saturating_mul(1000).min(MAX_NS_INT);
        let (avg, p99) = (ns(t.avg_us), ns(t.p99_us));
        if p99 <= avg {
            return Draw::Fixed(avg);
        }
        match tail {
            Tail::Spdk => Draw::Spdk { avg, p99 },
            Tail::LogNormal => lognormal(avg, p99),
        }
    }
}

/// The log-normal with mean `avg` and 99th percentile `p99` (ns, `p99 > avg > 0`):
/// ln X ~ N(mu, sigma²) with mean exp(mu + sigma²/2) and p99 exp(mu + Z99·sigma), so
/// sigma solves sigma²/2 - Z99·sigma + ln(p99/avg) = 0 (the smaller root). Past
/// p99/avg = exp(Z99²/2), about 15, there is no root: sigma stays at Z99, the widest
/// tail a log-normal with that mean has at its 99th percentile.
fn lognormal(avg: u64, p99: u64) -> Draw {
    #[allow(clippy::cast_precision_loss)] // below 2^53: at most an hour in nanoseconds
    let (avg_f, p99_f) = (avg as f64, p99 as f64);
    let r = (p99_f / avg_f).ln();
    let disc = Z99 * Z99 - 2.0 * r;
    let sigma = if disc > 0.0 { Z99 - disc.sqrt() } else { Z99 };
    let mu = avg_f.ln() - sigma * sigma / 2.0;
    match LogNormal::new(mu, sigma) {
        Ok(d) => Draw::LogNormal(d),
        Err(_) => Draw::Fixed(avg),
    }
}

/// A model serving one namespace of one controller.
#[derive(Debug, Clone)]
pub struct Model {
    /// Read, Write, Flush, Trim.
    draws: [Draw; 4],
    rng: Xoshiro256PlusPlus,
    /// When each unit is next free, on the caller's clock (ns); empty: unlimited units.
    units: Vec<u64>,
    /// Transfer time per byte on one unit, in picoseconds (0: free).
    ps_per_byte: u64,
}

impl Model {
    /// The running state for `config` (checked by [`ModelConfig::check`]), its generator
    /// seeded from `config.seed`.
    pub fn new(config: &ModelConfig) -> Model {
        let draw = |op| Draw::new(config.time(op), config.tail);
        let units = config.units.min(MAX_UNITS);
        let ps_per_byte = match config.unit_mib_per_sec {
            0 => 0,
            rate => {
                let per = PS_PER_SEC / (u128::from(rate) << 20);
                u64::try_from(per).unwrap_or(u64::MAX)
            }
        };
        Model {
            draws: [
                draw(OpClass::Read),
                draw(OpClass::Write),
                draw(OpClass::Flush),
                draw(OpClass::Trim),
            ],
            rng: Xoshiro256PlusPlus::seed_from_u64(config.seed),
            units: vec![0; usize::try_from(units).unwrap_or(0)],
            ps_per_byte,
        }
    }

    /// The next service time of an `op` moving `bytes` of data, in nanoseconds: a draw
    /// plus, past the first 4 KiB, the transfer on one unit. Draws come from the seeded generator in call order.
    pub fn service_ns(&mut self, op: OpClass, bytes: u64) -> u64 {
        let draw = match op {
            OpClass::Read => &self.draws[0],
            OpClass::Write => &self.draws[1],
            OpClass::Flush => &self.draws[2],
            OpClass::Trim => &self.draws[3],
        };
        let base = match draw {
            Draw::Fixed(ns) => *ns,
            Draw::Spdk { avg, p99 } => {
                if self.rng.random_ratio(1, 100) {
                    *p99
                } else {
                    *avg
                }
            }
            Draw::LogNormal(d) => {
                let ns = d.sample(&mut self.rng).clamp(0.0, MAX_NS);
                // Clamped to [0, an hour] just above: fits, and is not negative.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let ns = ns as u64;
                ns
            }
        };
        // The service time is a 4 KiB command's; larger ones add their further bytes.
        let transfer = match (op, self.ps_per_byte) {
            (OpClass::Read | OpClass::Write, ps) if ps > 0 => {
                bytes.saturating_sub(BASE_BYTES).saturating_mul(ps) / 1000
            }
            _ => 0,
        };
        base.saturating_add(transfer)
    }

    /// When a command of class `op` moving `bytes`, arriving at `now` (ns on any monotonic
    /// clock the caller keeps using), completes: it takes the unit free soonest, waits for
    /// it, and holds it for its service time. So latency rises once the units are busy, and
    /// IOPS level off at `units / average service time`.
    pub fn due(&mut self, op: OpClass, bytes: u64, now: u64) -> u64 {
        let service = self.service_ns(op, bytes);
        let Some(unit) = self.units.iter_mut().min_by_key(|free| **free) else {
            return now.saturating_add(service);
        };
        let done = (*unit).max(now).saturating_add(service);
        *unit = done;
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(tail: Tail, avg_us: u64, p99_us: u64, seed: u64) -> ModelConfig {
        let t = ServiceTime { avg_us, p99_us };
        ModelConfig {
            read: t,
            write: t,
            tail,
            seed,
            ..ModelConfig::default()
        }
    }

    fn schedule(c: &ModelConfig, n: usize) -> Vec<u64> {
        let mut m = Model::new(c);
        (0..n).map(|_| m.service_ns(OpClass::Read, 4096)).collect()
    }

    fn percentile(sorted: &[u64], p: f64) -> u64 {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let i = ((sorted.len() as f64) * p) as usize;
        sorted[i.min(sorted.len() - 1)]
    }

    #[test]
    fn the_same_seed_draws_the_same_schedule_and_another_seed_another() {
        for tail in [Tail::Spdk, Tail::LogNormal] {
            let a = schedule(&cfg(tail, 100, 1000, 7), 2000);
            assert_eq!(a, schedule(&cfg(tail, 100, 1000, 7), 2000), "{tail:?}");
            assert_ne!(a, schedule(&cfg(tail, 100, 1000, 8), 2000), "{tail:?}");
        }
    }

    #[test]
    fn spdk_tail_takes_p99_for_one_command_in_a_hundred() {
        let s = schedule(&cfg(Tail::Spdk, 50, 900, 1), 100_000);
        let slow = s.iter().filter(|&&ns| ns == 900_000).count();
        assert!(s.iter().all(|&ns| ns == 50_000 || ns == 900_000));
        assert!((800..1200).contains(&slow), "{slow} slow of 100000");
    }

    #[test]
    fn lognormal_matches_its_mean_and_p99() {
        let mut s = schedule(&cfg(Tail::LogNormal, 80, 400, 3), 200_000);
        let mean = s.iter().sum::<u64>() / s.len() as u64;
        s.sort_unstable();
        let p99 = percentile(&s, 0.99);
        assert!((76_000..84_000).contains(&mean), "mean {mean} ns");
        assert!((380_000..420_000).contains(&p99), "p99 {p99} ns");
    }

    #[test]
    fn equal_avg_and_p99_is_a_fixed_time_and_zero_is_immediate() {
        assert!(
            schedule(&cfg(Tail::LogNormal, 20, 20, 1), 100)
                .iter()
                .all(|&n| n == 20_000)
        );
        assert!(
            schedule(&cfg(Tail::Spdk, 0, 0, 1), 100)
                .iter()
                .all(|&n| n == 0)
        );
    }

    #[test]
    fn units_queue_commands_so_iops_level_off_and_latency_rises() {
        let mut c = cfg(Tail::Spdk, 100, 100, 0);
        c.units = 4;
        let mut m = Model::new(&c);
        // Eight commands at once on four units: two waves of 100 us.
        let due: Vec<u64> = (0..8).map(|_| m.due(OpClass::Read, 0, 1_000)).collect();
        assert_eq!(
            due,
            [101_000; 4]
                .into_iter()
                .chain([201_000; 4])
                .collect::<Vec<_>>()
        );
        // A command after the units are free again waits for nothing.
        assert_eq!(m.due(OpClass::Read, 0, 500_000), 600_000);
        // Unlimited units: every command just takes its service time.
        let mut free = Model::new(&cfg(Tail::Spdk, 100, 100, 0));
        assert!((0..8).all(|_| free.due(OpClass::Read, 0, 1_000) == 101_000));
    }

    #[test]
    fn unit_bandwidth_adds_the_transfer_to_reads_and_writes_only() {
        let mut c = cfg(Tail::Spdk, 10, 10, 0);
        c.unit_mib_per_sec = 1024;
        c.flush = ServiceTime {
            avg_us: 5,
            p99_us: 5,
        };
        let mut m = Model::new(&c);
        // 1 MiB at 1 GiB/s: the 1020 KiB past 4 KiB take 972.7 us on top of the 10 us.
        let ns = m.service_ns(OpClass::Write, 1 << 20);
        assert!((982_000..983_000).contains(&ns), "{ns}");
        assert_eq!(m.service_ns(OpClass::Read, 4096), 10_000);
        assert_eq!(m.service_ns(OpClass::Flush, 1 << 20), 5_000);
    }

    #[test]
    fn unchecked_huge_latencies_are_capped_at_an_hour_not_overflowed() {
        for tail in [Tail::Spdk, Tail::LogNormal] {
            let mut m = Model::new(&cfg(tail, u64::MAX, u64::MAX, 1));
            assert_eq!(m.service_ns(OpClass::Read, 4096), 3_600_000_000_000);
            assert_eq!(m.due(OpClass::Read, 0, u64::MAX - 5), u64::MAX);
        }
    }
}
