// SPDX-License-Identifier: Apache-2.0
//! SPDK's file bdev methods (`module/bdev/aio`, `module/bdev/uring`): a regular file or a
//! block device behind a bdev. nvmemu serves both through io_uring; they differ in name
//! and product name only.

use serde::{Deserialize, Serialize};

/// `bdev_aio_create` parameters (SPDK `rpc_bdev_aio_create`). Result: the bdev's name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevAioCreateParams {
    /// The file or block device (it must exist).
    pub filename: String,
    /// The bdev's name.
    pub name: String,
    /// Bytes per block (default, or 0: a block device's logical block size, 512 for a file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    /// Open the file read-only: writes fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    /// SPDK: Write Zeroes and Unmap through fallocate. nvmemu always punches holes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallocate: Option<bool>,
    /// The bdev's UUID (default: a new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// `bdev_uring_create` parameters (SPDK `rpc_bdev_uring_create`). Result: the bdev's name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevUringCreateParams {
    /// The file or block device (it must exist).
    pub filename: String,
    /// The bdev's name.
    pub name: String,
    /// Bytes per block (default, or 0: a block device's logical block size, 512 for a file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    /// The bdev's UUID (default: a new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}
