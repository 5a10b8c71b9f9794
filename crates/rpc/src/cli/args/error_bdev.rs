// SPDX-License-Identifier: Apache-2.0
//! Arguments of the error bdev methods (rpc.py's `bdev_error_*`, same flags).

use clap::Args;
use serde::Serialize;

use super::params::CliParams;

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct ErrorCreateArgs {
    /// Base bdev name.
    pub base_name: String,
    /// UUID for this bdev.
    #[arg(long = "uuid")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct ErrorInjectArgs {
    /// The name of the error injection bdev.
    pub name: String,
    /// io_type: 'clear' 'read' 'write' 'unmap' 'flush' 'all'.
    pub io_type: String,
    /// error_type: 'failure' 'pending' 'corrupt_data' 'nomem'.
    pub error_type: String,
    /// The number of commands you want to fail.
    #[arg(short = 'n', long = "num")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num: Option<u32>,
    /// The queue depth at which to trigger the error.
    #[arg(short = 'q', long = "queue-depth")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u64>,
    /// The offset in bytes to xor with corrupt_value.
    #[arg(short = 'o', long = "corrupt-offset")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrupt_offset: Option<u64>,
    /// The value for xor (1-255, 0 is invalid).
    #[arg(short = 'v', long = "corrupt-value")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrupt_value: Option<u8>,
}

impl CliParams for ErrorCreateArgs {}
impl CliParams for ErrorInjectArgs {}
