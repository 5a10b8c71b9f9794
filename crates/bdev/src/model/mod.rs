// SPDX-License-Identifier: Apache-2.0
//! Latency and throughput models of a bdev (SPDK's `delay` bdev and nvmemu's presets).
//!
//! A [`ModelConfig`] says how long each operation class takes (an average and a 99th
//! percentile, drawn as SPDK does or from a log-normal) and how many commands the device
//! serves at once (its parallel units). The control plane stores it in the bdev's
//! [`ModelSlot`]; every controller serving the bdev builds its own [`Model`] from it (its
//! own generator and unit clocks, so pollers share nothing writable) and asks it, per
//! command, when the command's completion is due.

mod presets;
mod sampler;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

pub use presets::{PRESETS, Preset, preset};
pub use sampler::Model;

/// Bdevs with a model, process-wide. A poller reads it once per pass and skips every model
/// step while it is zero.
static MODELLED_BDEVS: AtomicUsize = AtomicUsize::new(0);

/// Whether any bdev in the process has a model.
#[inline]
pub fn any_model() -> bool {
    MODELLED_BDEVS.load(Ordering::Relaxed) != 0
}

/// Most parallel units a model may have (a device's channels times dies, with room).
pub const MAX_UNITS: u32 = 1024;

/// The operation classes a model times separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpClass {
    /// Read (and Compare).
    Read,
    /// Write.
    Write,
    /// Flush.
    Flush,
    /// Deallocate (trim) and Write Zeroes.
    Trim,
}

/// How the service times between the average and the 99th percentile are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tail {
    /// SPDK's delay bdev: one command in 100 takes the p99 time, every other the average.
    #[default]
    Spdk,
    /// A log-normal distribution with that mean and 99th percentile (p99 at most 14.9
    /// times the mean; see `sampler.rs`).
    LogNormal,
}

impl Tail {
    /// The name the RPC and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            Tail::Spdk => "spdk",
            Tail::LogNormal => "lognormal",
        }
    }

    /// The tail called `name`.
    pub fn from_name(name: &str) -> Option<Tail> {
        [Tail::Spdk, Tail::LogNormal]
            .into_iter()
            .find(|t| t.name() == name)
    }
}

/// One operation class's service time, in microseconds (SPDK's unit). 0/0: immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServiceTime {
    /// The average.
    pub avg_us: u64,
    /// The 99th percentile (at least the average).
    pub p99_us: u64,
}

/// A bdev's model.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelConfig {
    /// Read and Compare.
    pub read: ServiceTime,
    /// Write.
    pub write: ServiceTime,
    /// Flush.
    pub flush: ServiceTime,
    /// Deallocate and Write Zeroes.
    pub trim: ServiceTime,
    /// How service times are drawn.
    pub tail: Tail,
    /// Commands served at once; 0: as many as the host sends (latency only, no ceiling).
    pub units: u32,
    /// Each unit's transfer rate for Read and Write data, MiB/s; 0: data moves for free.
    pub unit_mib_per_sec: u64,
    /// The generator's seed: the same seed draws the same service times in the same order.
    pub seed: u64,
    /// The preset this model started from, if any (shown, never interpreted).
    pub preset: Option<&'static str>,
}

impl ModelConfig {
    /// SPDK's delay bdev: `avg` and `p99` read and write latencies, one unit per command.
    pub fn spdk(read: ServiceTime, write: ServiceTime) -> ModelConfig {
        ModelConfig {
            read,
            write,
            ..ModelConfig::default()
        }
    }

    /// The first rule `self` breaks, as a sentence for the operator.
    pub fn check(&self) -> Result<(), String> {
        for (what, t) in [
            ("read", self.read),
            ("write", self.write),
            ("flush", self.flush),
            ("trim", self.trim),
        ] {
            if t.p99_us < t.avg_us {
                return Err(format!(
                    "{what} p99 latency {} us is below its average {} us: p99 must be at least the average",
                    t.p99_us, t.avg_us
                ));
            }
            if self.tail == Tail::LogNormal && t.p99_us > 0 {
                // exp(Z99²/2): the widest p99/mean ratio a log-normal has.
                let widest = t.avg_us.saturating_mul(149) / 10;
                if t.avg_us == 0 || t.p99_us > widest {
                    return Err(format!(
                        "{what} p99 latency {} us is more than 14.9 times its average {} us, \
                         which no log-normal has: use tail spdk (one command in 100 at p99)",
                        t.p99_us, t.avg_us
                    ));
                }
            }
            // An hour bounds every deadline far from u64 overflow in nanoseconds.
            if t.p99_us > 3_600_000_000 {
                return Err(format!(
                    "{what} p99 latency {} us is over an hour",
                    t.p99_us
                ));
            }
        }
        if self.units > MAX_UNITS {
            return Err(format!(
                "units {} is over the most, {MAX_UNITS}",
                self.units
            ));
        }
        Ok(())
    }

    /// The service time of `op`.
    pub fn time(&self, op: OpClass) -> ServiceTime {
        match op {
            OpClass::Read => self.read,
            OpClass::Write => self.write,
            OpClass::Flush => self.flush,
            OpClass::Trim => self.trim,
        }
    }
}

/// A bdev's model as the control plane set it, shared with the pollers. A poller compares
/// [`ModelSlot::generation`] (one Acquire load per namespace per pass, while some bdev has
/// a model) with the one it built from and takes the lock only when it moved.
#[derive(Debug, Default)]
pub struct ModelSlot {
    config: Mutex<Option<ModelConfig>>,
    /// Bumped (Release) after each change, under the lock.
    generation: AtomicU64,
}

impl ModelSlot {
    /// The model now, if any.
    pub fn get(&self) -> Option<ModelConfig> {
        self.config
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Changes so far (pairs with the Release increment in [`ModelSlot::set`]).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Replace the model (None: none). The caller has checked it.
    pub fn set(&self, model: Option<ModelConfig>) {
        let mut slot = self.config.lock().unwrap_or_else(PoisonError::into_inner);
        match (slot.is_some(), model.is_some()) {
            (false, true) => {
                MODELLED_BDEVS.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                MODELLED_BDEVS.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        *slot = model;
        self.generation.fetch_add(1, Ordering::Release);
    }
}

impl Drop for ModelSlot {
    fn drop(&mut self) {
        self.set(None);
    }
}
