// SPDX-License-Identifier: Apache-2.0
//! Arguments of the delay bdev methods (rpc.py's `bdev_delay_*`, same flags) and of
//! nvmemu's `nvmemu_bdev_set_model`, and the params each sends.

use clap::{ArgAction, Args};
use serde_json::Value;

use super::params::P;

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct DelayCreateArgs {
    /// Name of the existing bdev.
    #[arg(short = 'b', long = "base-bdev-name")]
    pub base_bdev_name: String,
    /// Name of the delay bdev.
    #[arg(short = 'd', long = "name")]
    pub name: String,
    /// UUID of the bdev (optional).
    #[arg(short = 'u', long = "uuid")]
    pub uuid: Option<String>,
    /// Average latency to apply before completing read ops (in microseconds).
    #[arg(short = 'r', long = "avg-read-latency")]
    pub avg_read_latency: u64,
    /// Latency to apply to 1 in 100 read ops (in microseconds).
    #[arg(short = 't', long = "nine-nine-read-latency")]
    pub p99_read_latency: u64,
    /// Average latency to apply before completing write ops (in microseconds).
    #[arg(short = 'w', long = "avg-write-latency")]
    pub avg_write_latency: u64,
    /// Latency to apply to 1 in 100 write ops (in microseconds).
    #[arg(short = 'n', long = "nine-nine-write-latency")]
    pub p99_write_latency: u64,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct DelayUpdateArgs {
    /// The name of the given delay bdev.
    pub delay_bdev_name: String,
    /// One of: avg_read, avg_write, p99_read, p99_write.
    pub latency_type: String,
    /// New latency value in microseconds.
    pub latency_us: u64,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct SetModelArgs {
    /// The bdev (name or alias).
    pub name: String,
    /// Start from a named model: scm, tlc or qlc.
    #[arg(long)]
    pub preset: Option<String>,
    /// Average / p99 latencies in microseconds, per operation class.
    #[arg(long = "avg-read-latency")]
    pub avg_read_latency: Option<u64>,
    #[arg(long = "p99-read-latency")]
    pub p99_read_latency: Option<u64>,
    #[arg(long = "avg-write-latency")]
    pub avg_write_latency: Option<u64>,
    #[arg(long = "p99-write-latency")]
    pub p99_write_latency: Option<u64>,
    #[arg(long = "avg-flush-latency")]
    pub avg_flush_latency: Option<u64>,
    #[arg(long = "p99-flush-latency")]
    pub p99_flush_latency: Option<u64>,
    #[arg(long = "avg-trim-latency")]
    pub avg_trim_latency: Option<u64>,
    #[arg(long = "p99-trim-latency")]
    pub p99_trim_latency: Option<u64>,
    /// spdk (1 in 100 at p99) or lognormal.
    #[arg(long)]
    pub tail: Option<String>,
    /// Commands served at once (0: unlimited).
    #[arg(long)]
    pub units: Option<u32>,
    /// Each unit's transfer rate past a command's first 4 KiB, MiB/s (0: free).
    #[arg(long = "unit-mib-per-sec")]
    pub unit_mib_per_sec: Option<u64>,
    /// Seed of the service-time generator.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Take the model off.
    #[arg(long, action = ArgAction::SetTrue)]
    pub remove: bool,
}

impl DelayCreateArgs {
    /// The params rpc.py sends for `bdev_delay_create`.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("base_bdev_name", self.base_bdev_name.as_str())
            .set("name", self.name.as_str())
            .set("avg_read_latency", self.avg_read_latency)
            .set("p99_read_latency", self.p99_read_latency)
            .set("avg_write_latency", self.avg_write_latency)
            .set("p99_write_latency", self.p99_write_latency)
            .opt("uuid", self.uuid.as_deref())
            .done()
    }
}

impl DelayUpdateArgs {
    /// The params rpc.py sends for `bdev_delay_update_latency`.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("delay_bdev_name", self.delay_bdev_name.as_str())
            .set("latency_type", self.latency_type.as_str())
            .set("latency_us", self.latency_us)
            .done()
    }
}

impl SetModelArgs {
    /// The params of `nvmemu_bdev_set_model`: the name and the fields given.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("name", self.name.as_str())
            .opt("preset", self.preset.as_deref())
            .opt("avg_read_latency", self.avg_read_latency)
            .opt("p99_read_latency", self.p99_read_latency)
            .opt("avg_write_latency", self.avg_write_latency)
            .opt("p99_write_latency", self.p99_write_latency)
            .opt("avg_flush_latency", self.avg_flush_latency)
            .opt("p99_flush_latency", self.p99_flush_latency)
            .opt("avg_trim_latency", self.avg_trim_latency)
            .opt("p99_trim_latency", self.p99_trim_latency)
            .opt("tail", self.tail.as_deref())
            .opt("units", self.units)
            .opt("unit_mib_per_sec", self.unit_mib_per_sec)
            .opt("seed", self.seed)
            .flag("remove", self.remove)
            .done()
    }
}
