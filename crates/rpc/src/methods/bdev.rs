// SPDX-License-Identifier: Apache-2.0
//! Block-device methods: `bdev_malloc_create`, `bdev_malloc_delete`, `bdev_null_create`,
//! `bdev_null_delete`, `bdev_get_bdevs`, `bdev_get_iostat` (SPDK `module/bdev/malloc/
//! bdev_malloc_rpc.c`, `module/bdev/null/bdev_null_rpc.c`, `lib/bdev/bdev_rpc.c`): parameter
//! structs with SPDK's names and defaults, and the result shapes.

use serde::{Deserialize, Serialize};

/// `bdev_malloc_create` parameters. Result: the new bdev's name (a JSON string).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevMallocCreateParams {
    /// Bdev name; SPDK generates `MallocN` when absent.
    #[serde(default)]
    pub name: Option<String>,
    /// UUID string; generated when absent.
    #[serde(default)]
    pub uuid: Option<String>,
    /// Number of blocks (required).
    pub num_blocks: u64,
    /// Data block size in bytes, a multiple of 512 (required).
    pub block_size: u32,
    /// Physical block size in bytes; 0 means "same as `block_size`".
    #[serde(default)]
    pub physical_block_size: u32,
    /// Split I/O on this boundary, in blocks; 0 disables splitting.
    #[serde(default)]
    pub optimal_io_boundary: u32,
    /// Metadata bytes per block: 0, 8, 16, 32, 64 or 128.
    #[serde(default)]
    pub md_size: u32,
    /// Metadata interleaved with data (extended LBA) rather than separate.
    #[serde(default)]
    pub md_interleave: bool,
    /// Protection information type 0-3 (0: none).
    #[serde(default)]
    pub dif_type: u32,
    /// Protection information in the first 8 bytes of metadata.
    #[serde(default)]
    pub dif_is_head_of_md: bool,
    /// PI format: 0 = 16b guard, 1 = 32b, 2 = 64b.
    #[serde(default)]
    pub dif_pi_format: u32,
    /// NUMA node for the buffer; -1 means any.
    #[serde(default = "any_numa")]
    pub numa_id: i32,
    /// nvmemu only: keep the memory sparse (pages committed when first written; unwritten
    /// blocks read from the kernel's zero page). Default: every page backed at creation.
    /// Left out of the JSON when false, so saved configs stay loadable by SPDK.
    #[serde(default, skip_serializing_if = "is_false")]
    pub lazy: bool,
    /// nvmemu only: back the memory with hugetlbfs pool pages (`vm.nr_hugepages`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub hugepages: bool,
}

fn any_numa() -> i32 {
    -1
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

/// `bdev_malloc_delete` and `bdev_null_delete` parameters. Result: `true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevDeleteParams {
    /// Name of the bdev to delete.
    pub name: String,
}

/// `bdev_null_create` parameters. Result: the new bdev's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevNullCreateParams {
    /// Bdev name (required).
    pub name: String,
    /// UUID string; generated when absent.
    #[serde(default)]
    pub uuid: Option<String>,
    /// Number of blocks (required).
    pub num_blocks: u64,
    /// Data block size in bytes (required).
    pub block_size: u32,
    /// Physical block size; 0 means "same as `block_size`".
    #[serde(default)]
    pub physical_block_size: u32,
    /// Metadata bytes per block.
    #[serde(default)]
    pub md_size: u32,
    /// Protection information type 0-3.
    #[serde(default)]
    pub dif_type: u32,
    /// Protection information in the first 8 bytes of metadata.
    #[serde(default)]
    pub dif_is_head_of_md: bool,
    /// PI format: 0 = 16b guard, 1 = 32b, 2 = 64b.
    #[serde(default)]
    pub dif_pi_format: u32,
    /// Preferred write alignment, in blocks.
    #[serde(default)]
    pub preferred_write_alignment: u32,
    /// Preferred write granularity, in blocks.
    #[serde(default)]
    pub preferred_write_granularity: u32,
    /// Optimal write size, in blocks.
    #[serde(default)]
    pub optimal_write_size: u32,
    /// Preferred unmap alignment, in blocks.
    #[serde(default)]
    pub preferred_unmap_alignment: u32,
    /// Preferred unmap granularity, in blocks.
    #[serde(default)]
    pub preferred_unmap_granularity: u32,
}

/// `bdev_get_bdevs` parameters. Result: an array of [`BdevInfo`]; an unknown `name` is
/// SPDK's `-19` "No such device".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevGetBdevsParams {
    /// Only this bdev (name or alias).
    #[serde(default)]
    pub name: Option<String>,
    /// Milliseconds to wait for `name` to appear; 0 answers at once. `nvmemu serve` waits
    /// at most 60 s, whatever is asked.
    #[serde(default)]
    pub timeout: u64,
}

/// `bdev_set_qos_limit` parameters (SPDK `rpc_bdev_set_qos_limit`). Result: `true`. A
/// limit left out keeps its value, 0 removes it; at least one must be given.
/// `rw_ios_per_sec` is a multiple of 1000 (SPDK's granularity: -22 otherwise).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevSetQosLimitParams {
    /// The bdev (name or alias).
    pub name: String,
    /// Read and write I/Os per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rw_ios_per_sec: Option<u64>,
    /// Read and write MiB per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rw_mbytes_per_sec: Option<u64>,
    /// Read MiB per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r_mbytes_per_sec: Option<u64>,
    /// Write MiB per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_mbytes_per_sec: Option<u64>,
}

/// `bdev_get_iostat` parameters. Result: [`BdevIostat`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevGetIostatParams {
    /// Only this bdev.
    #[serde(default)]
    pub name: Option<String>,
    /// Report per I/O channel (per poller) instead of per bdev.
    #[serde(default)]
    pub per_channel: bool,
    /// Reset counters after reading: `"all"`, `"maxmin"` or `"none"`.
    #[serde(default)]
    pub reset_mode: Option<String>,
    /// Only these bdevs (exclusive with `name`).
    #[serde(default)]
    pub names: Option<Vec<String>>,
}

/// One element of the `bdev_get_bdevs` result (SPDK `rpc_dump_bdev_info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BdevInfo {
    /// Bdev name.
    pub name: String,
    /// Other names of the bdev.
    pub aliases: Vec<String>,
    /// `"Malloc disk"` or `"Null disk"`.
    pub product_name: String,
    /// Block size in bytes.
    pub block_size: u32,
    /// Number of blocks.
    pub num_blocks: u64,
    /// UUID string.
    pub uuid: String,
    /// Metadata size; SPDK prints it (and the DIF fields) only when nonzero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md_size: Option<u32>,
    /// Metadata interleaved; present when `md_size` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md_interleave: Option<bool>,
    /// Protection information type; present when `md_size` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dif_type: Option<u32>,
    /// QoS limits; all zero when none are set.
    pub assigned_rate_limits: RateLimits,
    /// Whether a module (e.g. an NVMe-oF namespace) holds a claim on the bdev.
    pub claimed: bool,
    /// Claim kind, present when `claimed`, e.g. `"exclusive_write"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_type: Option<String>,
    /// Zoned block device.
    pub zoned: bool,
    /// Which I/O types the bdev accepts.
    pub supported_io_types: SupportedIoTypes,
    /// Module-specific details (`{}` for malloc and null).
    pub driver_specific: serde_json::Map<String, serde_json::Value>,
}

impl BdevInfo {
    /// Product name of malloc bdevs.
    pub const MALLOC_PRODUCT: &'static str = "Malloc disk";
    /// Product name of null bdevs.
    pub const NULL_PRODUCT: &'static str = "Null disk";
}

/// QoS limits as SPDK reports them (0 = unlimited).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimits {
    /// I/O operations per second.
    pub rw_ios_per_sec: u64,
    /// Read+write MiB per second.
    pub rw_mbytes_per_sec: u64,
    /// Read MiB per second.
    pub r_mbytes_per_sec: u64,
    /// Write MiB per second.
    pub w_mbytes_per_sec: u64,
}

/// `supported_io_types`, one flag per SPDK bdev I/O type name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Field names are SPDK's I/O type names.
pub struct SupportedIoTypes {
    pub read: bool,
    pub write: bool,
    pub unmap: bool,
    pub flush: bool,
    pub reset: bool,
    pub nvme_admin: bool,
    pub nvme_io: bool,
    pub nvme_io_md: bool,
    pub write_zeroes: bool,
    pub zcopy: bool,
    pub get_zone_info: bool,
    pub zone_management: bool,
    pub zone_append: bool,
    pub compare: bool,
    pub compare_and_write: bool,
    pub abort: bool,
    pub seek_hole: bool,
    pub seek_data: bool,
    pub copy: bool,
    pub nvme_iov_md: bool,
}

impl SupportedIoTypes {
    /// What a namespace on an nvmemu bdev (malloc or null) executes: read, write, unmap
    /// (Dataset Management deallocate), flush, reset, write_zeroes, compare and abort; no
    /// copy, no fused compare-and-write and no zero-copy, as Identify Controller reports.
    pub fn nvmemu() -> Self {
        Self {
            read: true,
            write: true,
            unmap: true,
            flush: true,
            reset: true,
            write_zeroes: true,
            compare: true,
            abort: true,
            ..Self::default()
        }
    }
}

/// `bdev_get_iostat` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BdevIostat {
    /// Tick rate of the latency counters, in Hz.
    pub tick_rate: u64,
    /// Tick counter value when the snapshot was taken.
    pub ticks: u64,
    /// One entry per bdev.
    pub bdevs: Vec<BdevIostatEntry>,
}

/// Per-bdev counters of a [`BdevIostat`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Field names are SPDK's `bdev_get_iostat` keys.
pub struct BdevIostatEntry {
    pub name: String,
    pub bytes_read: u64,
    pub num_read_ops: u64,
    pub bytes_written: u64,
    pub num_write_ops: u64,
    pub bytes_unmapped: u64,
    pub num_unmap_ops: u64,
    pub bytes_copied: u64,
    pub num_copy_ops: u64,
    pub read_latency_ticks: u64,
    pub max_read_latency_ticks: u64,
    pub min_read_latency_ticks: u64,
    pub write_latency_ticks: u64,
    pub max_write_latency_ticks: u64,
    pub min_write_latency_ticks: u64,
    pub unmap_latency_ticks: u64,
    pub max_unmap_latency_ticks: u64,
    pub min_unmap_latency_ticks: u64,
    pub copy_latency_ticks: u64,
    pub max_copy_latency_ticks: u64,
    pub min_copy_latency_ticks: u64,
    pub io_error: serde_json::Map<String, serde_json::Value>,
}
