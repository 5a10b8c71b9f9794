// SPDX-License-Identifier: Apache-2.0
//! Arguments of the delay bdev methods (rpc.py's `bdev_delay_*`, same flags) and of
//! nvmemu's `nvmemu_bdev_set_model`, and the params each sends.

use clap::{ArgAction, Args};
use serde::Serialize;

use super::params::{CliParams, is_false};

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct DelayCreateArgs {
    /// Name of the existing bdev.
    #[arg(short = 'b', long = "base-bdev-name")]
    pub base_bdev_name: String,
    /// Name of the delay bdev.
    #[arg(short = 'd', long = "name")]
    pub name: String,
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
    /// UUID of the bdev (optional).
    #[arg(short = 'u', long = "uuid")]
    pub uuid: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct DelayUpdateArgs {
    /// The name of the given delay bdev.
    pub delay_bdev_name: String,
    /// One of: avg_read, avg_write, p99_read, p99_write.
    pub latency_type: String,
    /// New latency value in microseconds.
    pub latency_us: u64,
}

#[derive(Debug, Clone, Args, Serialize)]
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
    #[serde(skip_serializing_if = "is_false")]
    pub remove: bool,
}

impl CliParams for DelayCreateArgs {}
impl CliParams for DelayUpdateArgs {}
impl CliParams for SetModelArgs {}
