// SPDX-License-Identifier: Apache-2.0
//! SPDK's delay bdev methods (`module/bdev/delay`) and nvmemu's `nvmemu_bdev_set_model`,
//! which sets the rest of a latency model (presets, tails, units, seed) on any bdev.
//! Latencies are in microseconds, as SPDK's.

use serde::{Deserialize, Serialize};

/// `bdev_delay_create` parameters (SPDK `rpc_bdev_delay_create`). Result: the new bdev's
/// name. One read (write) in 100 takes the p99 latency, the others the average.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevDelayCreateParams {
    /// The bdev to put the delay on (it becomes claimed).
    pub base_bdev_name: String,
    /// The delay bdev's name.
    pub name: String,
    /// Average read latency, us.
    pub avg_read_latency: u64,
    /// p99 read latency, us (at least the average).
    pub p99_read_latency: u64,
    /// Average write latency, us.
    pub avg_write_latency: u64,
    /// p99 write latency, us (at least the average).
    pub p99_write_latency: u64,
    /// The delay bdev's UUID (default: a new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// `bdev_delay_update_latency` parameters (SPDK `rpc_bdev_delay_update_latency`). Result:
/// `true`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevDelayUpdateLatencyParams {
    /// The delay bdev.
    pub delay_bdev_name: String,
    /// One of `avg_read`, `avg_write`, `p99_read`, `p99_write`.
    pub latency_type: String,
    /// The new value, us.
    pub latency_us: u64,
}

/// `nvmemu_bdev_set_model` parameters. Result: `true`. Starts from `preset` if given,
/// else from the bdev's model now (else from nothing); the fields given replace its
/// values. `remove` takes the model off instead.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmemuBdevSetModelParams {
    /// The bdev (name or alias).
    pub name: String,
    /// A named model (`scm`, `tlc`, `qlc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Average read (and Compare) latency, us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_read_latency: Option<u64>,
    /// p99 read latency, us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_read_latency: Option<u64>,
    /// Average write latency, us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_write_latency: Option<u64>,
    /// p99 write latency, us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_write_latency: Option<u64>,
    /// Average Flush latency, us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_flush_latency: Option<u64>,
    /// p99 Flush latency, us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_flush_latency: Option<u64>,
    /// Average Deallocate / Write Zeroes latency, us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_trim_latency: Option<u64>,
    /// p99 Deallocate / Write Zeroes latency, us.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_trim_latency: Option<u64>,
    /// `spdk` (1 in 100 at p99) or `lognormal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<String>,
    /// Commands served at once (0: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<u32>,
    /// Each unit's transfer rate past the first 4 KiB of a command, MiB/s (0: free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_mib_per_sec: Option<u64>,
    /// The generator's seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Take the model off (no other field may be given).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remove: bool,
}
