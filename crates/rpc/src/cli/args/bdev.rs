// SPDX-License-Identifier: Apache-2.0
//! Arguments of the bdev methods (SPDK `python/spdk/cli/bdev.py`) and the params each sends.

use clap::{ArgAction, Args};
use serde_json::Value;

use super::params::{ArgError, P};

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct MallocCreateArgs {
    /// Size of malloc bdev in MB (float > 0).
    pub total_size: f64,
    /// Data block size for this bdev.
    pub block_size: i64,
    #[arg(short = 'b', long = "name")]
    pub name: Option<String>,
    #[arg(short = 'u', long = "uuid")]
    pub uuid: Option<String>,
    #[arg(short = 'p', long = "physical-block-size")]
    pub physical_block_size: Option<i64>,
    #[arg(short = 'o', long = "optimal-io-boundary")]
    pub optimal_io_boundary: Option<i64>,
    #[arg(short = 'm', long = "md-size")]
    pub md_size: Option<i64>,
    #[arg(short = 'i', long = "md-interleave", action = ArgAction::SetTrue)]
    pub md_interleave: bool,
    #[arg(short = 't', long = "dif-type", value_parser = clap::value_parser!(i64).range(0..=3))]
    pub dif_type: Option<i64>,
    #[arg(short = 'd', long = "dif-is-head-of-md", action = ArgAction::SetTrue)]
    pub dif_is_head_of_md: bool,
    #[arg(short = 'f', long = "dif-pi-format", value_parser = clap::value_parser!(i64).range(0..=2))]
    pub dif_pi_format: Option<i64>,
    #[arg(short = 'n', long = "numa-id", allow_negative_numbers = true)]
    pub numa_id: Option<i64>,
    /// nvmemu only: sparse memory, committed when first written (unwritten blocks read
    /// from the kernel's zero page).
    #[arg(long = "lazy", action = ArgAction::SetTrue)]
    pub lazy: bool,
    /// nvmemu only: back the memory with hugetlbfs pool pages (vm.nr_hugepages).
    #[arg(long = "hugepages", action = ArgAction::SetTrue)]
    pub hugepages: bool,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct NameArg {
    /// Bdev name.
    pub name: String,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct NullCreateArgs {
    /// Block device name.
    pub name: String,
    /// Size of null bdev in MB (int > 0).
    pub total_size: i64,
    /// Data block size for this bdev.
    pub block_size: i64,
    #[arg(short = 'u', long = "uuid")]
    pub uuid: Option<String>,
    #[arg(short = 'p', long = "physical-block-size")]
    pub physical_block_size: Option<i64>,
    #[arg(short = 'm', long = "md-size")]
    pub md_size: Option<i64>,
    #[arg(short = 't', long = "dif-type", value_parser = clap::value_parser!(i64).range(0..=3))]
    pub dif_type: Option<i64>,
    #[arg(short = 'd', long = "dif-is-head-of-md", action = ArgAction::SetTrue)]
    pub dif_is_head_of_md: bool,
    #[arg(short = 'f', long = "dif-pi-format", value_parser = clap::value_parser!(i64).range(0..=2))]
    pub dif_pi_format: Option<i64>,
    #[arg(short = 'a', long = "preferred-write-alignment")]
    pub preferred_write_alignment: Option<i64>,
    #[arg(short = 'g', long = "preferred-write-granularity")]
    pub preferred_write_granularity: Option<i64>,
    #[arg(short = 's', long = "optimal-write-size")]
    pub optimal_write_size: Option<i64>,
    #[arg(short = 'c', long = "preferred-unmap-alignment")]
    pub preferred_unmap_alignment: Option<i64>,
    #[arg(short = 'r', long = "preferred-unmap-granularity")]
    pub preferred_unmap_granularity: Option<i64>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct GetBdevsArgs {
    #[arg(short = 'b', long = "name")]
    pub name: Option<String>,
    /// Time in ms to wait for the bdev to appear (nvmemu serve waits at most 60 s).
    #[arg(short = 't', long = "timeout-ms")]
    pub timeout: Option<i64>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct QosLimitArgs {
    /// The bdev to limit (name or alias).
    pub name: String,
    /// Read+write I/Os per second, a multiple of 1000; 0 removes the limit.
    #[arg(long = "rw-ios-per-sec", alias = "rw_ios_per_sec")]
    pub rw_ios_per_sec: Option<u64>,
    /// Read+write MiB per second; 0 removes the limit.
    #[arg(long = "rw-mbytes-per-sec", alias = "rw_mbytes_per_sec")]
    pub rw_mbytes_per_sec: Option<u64>,
    /// Read MiB per second; 0 removes the limit.
    #[arg(long = "r-mbytes-per-sec", alias = "r_mbytes_per_sec")]
    pub r_mbytes_per_sec: Option<u64>,
    /// Write MiB per second; 0 removes the limit.
    #[arg(long = "w-mbytes-per-sec", alias = "w_mbytes_per_sec")]
    pub w_mbytes_per_sec: Option<u64>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct IostatArgs {
    #[arg(short = 'c', long = "per-channel", action = ArgAction::SetTrue)]
    pub per_channel: bool,
    #[arg(long = "reset-mode", value_parser = ["all", "maxmin", "none"])]
    pub reset_mode: Option<String>,
    #[arg(short = 'b', long = "name", conflicts_with = "names")]
    pub name: Option<String>,
    /// Comma-separated bdev names.
    #[arg(long = "names")]
    pub names: Option<String>,
}

/// `(total_MiB * 1 MiB) // block_size` as Python computes it for a float size.
fn malloc_blocks(total_mib: f64, block_size: i64) -> Result<u64, ArgError> {
    if block_size <= 0 {
        return Err(ArgError("block_size must be > 0".into()));
    }
    #[allow(clippy::cast_precision_loss)] // Block sizes are far below 2^52.
    let bs = block_size as f64;
    let bytes = total_mib * 1024.0 * 1024.0;
    let blocks = (bytes - bytes % bs) / bs;
    if !blocks.is_finite() || !(0.0..18_446_744_073_709_551_615.0).contains(&blocks) {
        return Err(ArgError(format!("total_size {total_mib} is out of range")));
    }
    // In range and integral (checked above), so the conversion is exact.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(blocks as u64)
}

/// `(total_MiB * 1 MiB) // block_size` for an integer size.
fn null_blocks(total_mib: i64, block_size: i64) -> Result<i64, ArgError> {
    if block_size <= 0 {
        return Err(ArgError("block_size must be > 0".into()));
    }
    total_mib
        .checked_mul(1024 * 1024)
        .map(|b| b.div_euclid(block_size))
        .ok_or_else(|| ArgError(format!("total_size {total_mib} is out of range")))
}

impl MallocCreateArgs {
    /// The params rpc.py sends for `bdev_malloc_create`.
    pub(super) fn params(&self) -> Result<Value, ArgError> {
        Ok(P::default()
            .set(
                "num_blocks",
                malloc_blocks(self.total_size, self.block_size)?,
            )
            .set("block_size", self.block_size)
            .opt("physical_block_size", self.physical_block_size)
            .opt("name", self.name.clone())
            .opt("uuid", self.uuid.clone())
            .opt("optimal_io_boundary", self.optimal_io_boundary)
            .opt("md_size", self.md_size)
            .set("md_interleave", self.md_interleave)
            .opt("dif_type", self.dif_type)
            .set("dif_is_head_of_md", self.dif_is_head_of_md)
            .opt("dif_pi_format", self.dif_pi_format)
            .opt("numa_id", self.numa_id)
            .opt("lazy", self.lazy.then_some(true))
            .opt("hugepages", self.hugepages.then_some(true))
            .done())
    }
}

impl NameArg {
    /// The params rpc.py sends for `bdev_malloc_delete` and `bdev_null_delete`.
    pub(super) fn params(&self) -> Value {
        P::default().set("name", self.name.as_str()).done()
    }
}

impl NullCreateArgs {
    /// The params rpc.py sends for `bdev_null_create`.
    pub(super) fn params(&self) -> Result<Value, ArgError> {
        if self.dif_type.unwrap_or(0) != 0 && self.md_size.unwrap_or(0) == 0 {
            return Err(ArgError(
                "ERROR: --md-size must be > 0 when --dif-type is > 0".into(),
            ));
        }
        Ok(P::default()
            .set("num_blocks", null_blocks(self.total_size, self.block_size)?)
            .set("block_size", self.block_size)
            .opt("physical_block_size", self.physical_block_size)
            .set("name", self.name.as_str())
            .opt("uuid", self.uuid.clone())
            .opt("md_size", self.md_size)
            .opt("dif_type", self.dif_type)
            .set("dif_is_head_of_md", self.dif_is_head_of_md)
            .opt("dif_pi_format", self.dif_pi_format)
            .opt("preferred_write_alignment", self.preferred_write_alignment)
            .opt(
                "preferred_write_granularity",
                self.preferred_write_granularity,
            )
            .opt("optimal_write_size", self.optimal_write_size)
            .opt("preferred_unmap_alignment", self.preferred_unmap_alignment)
            .opt(
                "preferred_unmap_granularity",
                self.preferred_unmap_granularity,
            )
            .done())
    }
}

impl GetBdevsArgs {
    /// The params rpc.py sends for `bdev_get_bdevs`.
    pub(super) fn params(&self) -> Value {
        P::default()
            .opt("name", self.name.clone())
            .opt("timeout", self.timeout)
            .done()
    }
}

impl QosLimitArgs {
    /// The params rpc.py sends for `bdev_set_qos_limit`: the name and the limits given.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("name", self.name.as_str())
            .opt("rw_ios_per_sec", self.rw_ios_per_sec)
            .opt("rw_mbytes_per_sec", self.rw_mbytes_per_sec)
            .opt("r_mbytes_per_sec", self.r_mbytes_per_sec)
            .opt("w_mbytes_per_sec", self.w_mbytes_per_sec)
            .done()
    }
}

impl IostatArgs {
    /// The params rpc.py sends for `bdev_get_iostat`.
    pub(super) fn params(&self) -> Value {
        let names = self.names.as_ref().map(|n| {
            n.trim()
                .split(',')
                .map(|s| Value::String(s.to_owned()))
                .collect::<Vec<_>>()
        });

        P::default()
            .opt("name", self.name.clone())
            .set("per_channel", self.per_channel)
            .opt("reset_mode", self.reset_mode.clone())
            .opt("names", names.filter(|n| !n.is_empty()))
            .done()
    }
}
