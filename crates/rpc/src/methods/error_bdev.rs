// SPDX-License-Identifier: Apache-2.0
//! SPDK's error bdev methods (`module/bdev/error`): an error bdev `EE_<base>` shares its
//! base's blocks, and `bdev_error_inject_error` makes its next commands of a type fail,
//! hang or be retried.

use serde::{Deserialize, Serialize};

/// `bdev_error_create` parameters (SPDK `rpc_bdev_error_create`). Result: `true`. The new
/// bdev is called `EE_<base_name>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevErrorCreateParams {
    /// The bdev to inject errors into (it becomes claimed).
    pub base_name: String,
    /// The error bdev's UUID (default: a new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// `bdev_error_inject_error` parameters (SPDK `rpc_bdev_error_inject_error`). Result:
/// `true`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevErrorInjectErrorParams {
    /// The error bdev.
    pub name: String,
    /// `read`, `write`, `flush`, `unmap`, `all`, or `clear` (disarm every type).
    pub io_type: String,
    /// `failure`, `pending`, `corrupt_data` or `nomem`.
    pub error_type: String,
    /// How many commands to hit (default 1; 0 disarms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num: Option<u32>,
    /// Hit only commands taken while at least this many others are outstanding
    /// (default 0: at any depth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u64>,
    /// `corrupt_data`: the byte of each hit command's data to change (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt_offset: Option<u64>,
    /// `corrupt_data`: the value to XOR it with, 1-255.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt_value: Option<u8>,
}
