// SPDX-License-Identifier: Apache-2.0
//! A cheap monotonic clock for hot loops: the CPU's time-stamp counter, calibrated once
//! against `Instant`, with an `Instant` fallback where there is no invariant TSC.
//!
//! `clock_gettime` through the vDSO costs 20-50 ns and showed up at 12-19% of a poller's and
//! a bench job's cycles; `rdtsc` costs a few ns. The TSC is only used when the CPU reports
//! `constant_tsc` and `nonstop_tsc` (it then ticks at one rate on every core, in every
//! C-state), so readings taken on different cores compare.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Calibration: ticks to nanoseconds as a 32.32 fixed-point factor.
#[derive(Debug, Clone, Copy)]
struct Calib {
    /// Nanoseconds per tick << 32 (0: no usable TSC, `Instant` is used instead).
    ns_per_tick_q32: u64,
    /// Ticks per microsecond (for callers that want raw ticks).
    ticks_per_us: f64,
}

static CALIB: OnceLock<Calib> = OnceLock::new();

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC exists on every x86_64 CPU, needs no target feature, reads no memory and
    // has no side effect; it is unprivileged unless CR4.TSD is set, which Linux does not do
    // for ordinary processes (prctl PR_SET_TSC is the only way, and nvmemu never calls it).
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn rdtsc() -> u64 {
    0
}

fn invariant_tsc() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let flags = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

fn calibrate() -> Calib {
    let none = Calib {
        ns_per_tick_q32: 0,
        ticks_per_us: 1000.0,
    };
    if !invariant_tsc() {
        return none;
    }
    // Two 5 ms windows; keep the one that agrees with itself (a preemption stretches a
    // window's Instant side and its TSC side alike, so one window suffices in practice).
    let t0 = Instant::now();
    let c0 = rdtsc();
    while t0.elapsed() < Duration::from_millis(10) {
        std::hint::spin_loop();
    }
    let c1 = rdtsc();
    let ns = t0.elapsed().as_nanos() as f64;
    let ticks = c1.wrapping_sub(c0) as f64;
    if ticks < 1000.0 || ns <= 0.0 {
        return none;
    }
    let ns_per_tick = ns / ticks;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let q32 = (ns_per_tick * 4_294_967_296.0) as u64;
    Calib {
        ns_per_tick_q32: q32.max(1),
        ticks_per_us: ticks / ns * 1000.0,
    }
}

fn calib() -> Calib {
    *CALIB.get_or_init(calibrate)
}

/// A calibrated reading clock: `now_ns` counts nanoseconds from the clock's creation.
///
/// Copy it into each thread that reads it (it is two words); creating one calibrates the
/// process-wide TSC factor once (about 10 ms, on the first call only).
#[derive(Debug, Clone, Copy)]
pub struct TscClock {
    start_ticks: u64,
    ns_per_tick_q32: u64,
    epoch: Instant,
}

impl Default for TscClock {
    fn default() -> Self {
        Self::new()
    }
}

impl TscClock {
    /// A clock reading 0 now.
    pub fn new() -> TscClock {
        let c = calib();
        TscClock {
            start_ticks: rdtsc(),
            ns_per_tick_q32: c.ns_per_tick_q32,
            epoch: Instant::now(),
        }
    }

    /// True when readings come from the TSC (false: `Instant` fallback).
    pub fn is_tsc(&self) -> bool {
        self.ns_per_tick_q32 != 0
    }

    /// Nanoseconds since `new`.
    ///
    /// A counter reading below the start (another core's TSC a few ticks behind the one that
    /// created the clock) reads as 0, not as a wrapped ~2^64-tick interval.
    #[inline(always)]
    pub fn now_ns(&self) -> u64 {
        if self.ns_per_tick_q32 == 0 {
            return u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        }
        self.ticks_to_ns(rdtsc().saturating_sub(self.start_ticks))
    }

    /// Raw counter ticks (0 without a TSC): for timestamps converted later with `ticks_to_ns`.
    #[inline(always)]
    pub fn ticks() -> u64 {
        rdtsc()
    }

    /// Nanoseconds in `ticks` counter ticks.
    #[inline(always)]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        let wide = u128::from(ticks) * u128::from(self.ns_per_tick_q32);
        u64::try_from(wide >> 32).unwrap_or(u64::MAX)
    }

    /// Counter ticks per microsecond (about the TSC frequency in MHz).
    pub fn ticks_per_us() -> f64 {
        calib().ticks_per_us
    }
}

/// The process-wide clock (created on first use).
pub fn global_clock() -> &'static TscClock {
    static G: OnceLock<TscClock> = OnceLock::new();
    G.get_or_init(TscClock::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_before_the_start_is_zero_not_a_wrap() {
        let c = TscClock {
            start_ticks: u64::MAX,
            ns_per_tick_q32: 1 << 32,
            epoch: Instant::now(),
        };
        if cfg!(target_arch = "x86_64") {
            assert_eq!(c.now_ns(), 0);
        }
    }

    #[test]
    fn tsc_clock_tracks_instant() {
        let c = TscClock::new();
        let t = Instant::now();
        let a = c.now_ns();
        std::thread::sleep(Duration::from_millis(20));
        let b = c.now_ns();
        let real = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        assert!(b > a);
        // Within 20% of the Instant reading (calibration error is far below that).
        let d = b - a;
        assert!(
            d * 10 >= real * 8 && d * 10 <= real * 12,
            "tsc {d} ns vs {real} ns"
        );
    }
}
