// SPDX-License-Identifier: Apache-2.0
//! Arguments of the file bdev methods (rpc.py's `bdev_aio_*` and `bdev_uring_*`, same
//! flags).

use clap::Args;
use serde::Serialize;

use super::params::CliParams;

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct AioCreateArgs {
    /// Path to device or file (ex: /dev/sda).
    pub filename: String,
    /// Block device name.
    pub name: String,
    /// Block size for this bdev.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    /// Set this bdev as read-only.
    #[arg(short = 'r', long = "readonly")]
    pub readonly: bool,
    /// Support unmap/writezeros by fallocate.
    #[arg(long = "fallocate")]
    pub fallocate: bool,
    /// UUID of the bdev (optional).
    #[arg(short = 'u', long = "uuid")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct UringCreateArgs {
    /// Path to device or file (ex: /dev/nvme0n1).
    pub filename: String,
    /// bdev name.
    pub name: String,
    /// Block size for this bdev.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    /// UUID of the bdev.
    #[arg(short = 'u', long = "uuid")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

impl CliParams for AioCreateArgs {}
impl CliParams for UringCreateArgs {}
