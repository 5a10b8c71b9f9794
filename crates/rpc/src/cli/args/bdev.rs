// SPDX-License-Identifier: Apache-2.0
//! Arguments of the bdev methods (SPDK `python/spdk/cli/bdev.py`) and the params each sends.

use clap::{ArgAction, Args};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::params::{ArgError, CliParams, is_false, serialized};

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct MallocCreateArgs {
    /// Size of malloc bdev in MB (float > 0).
    #[serde(skip)]
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
    #[serde(skip_serializing_if = "is_false")]
    pub lazy: bool,
    /// nvmemu only: back the memory with hugetlbfs pool pages (vm.nr_hugepages).
    #[arg(long = "hugepages", action = ArgAction::SetTrue)]
    #[serde(skip_serializing_if = "is_false")]
    pub hugepages: bool,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct NameArg {
    /// Bdev name.
    pub name: String,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct NullCreateArgs {
    /// Block device name.
    pub name: String,
    /// Size of null bdev in MB (int > 0).
    #[serde(skip)]
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

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct GetBdevsArgs {
    #[arg(short = 'b', long = "name")]
    pub name: Option<String>,
    /// Time in ms to wait for the bdev to appear (nvmemu serve waits at most 60 s).
    #[arg(short = 't', long = "timeout-ms")]
    pub timeout: Option<i64>,
}

#[derive(Debug, Clone, Args, Serialize)]
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

#[derive(Debug, Clone, Args, Serialize)]
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
    #[serde(serialize_with = "comma_list")]
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

/// `"a,b"` as rpc.py sends `--names`: `["a", "b"]` (surrounding blanks trimmed).
fn comma_list<S: Serializer>(names: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match names {
        Some(n) => s.collect_seq(n.trim().split(',')),
        None => s.serialize_none(),
    }
}

/// `params` with the block count computed from the size in MiB first, as rpc.py sends it.
fn with_num_blocks(num_blocks: Value, args: &impl Serialize) -> Result<Value, ArgError> {
    let mut params = serialized(args)?;
    params.shift_insert(0, "num_blocks".to_owned(), num_blocks);
    Ok(Value::Object(params))
}

impl CliParams for MallocCreateArgs {
    fn params(&self) -> Result<Value, ArgError> {
        with_num_blocks(
            malloc_blocks(self.total_size, self.block_size)?.into(),
            self,
        )
    }
}

impl CliParams for NullCreateArgs {
    fn params(&self) -> Result<Value, ArgError> {
        if self.dif_type.unwrap_or(0) != 0 && self.md_size.unwrap_or(0) == 0 {
            return Err(ArgError(
                "ERROR: --md-size must be > 0 when --dif-type is > 0".into(),
            ));
        }
        with_num_blocks(null_blocks(self.total_size, self.block_size)?.into(), self)
    }
}

impl CliParams for NameArg {}
impl CliParams for GetBdevsArgs {}
impl CliParams for QosLimitArgs {}
impl CliParams for IostatArgs {}
