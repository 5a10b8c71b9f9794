// SPDX-License-Identifier: Apache-2.0
//! Log and notification methods (SPDK `lib/log/log_rpc.c`, `lib/notify/notify_rpc.c`):
//! `log_set_flag`, `log_clear_flag`, `log_get_flags`, `log_set_level`, `log_get_level`,
//! `log_set_print_level`, `log_get_print_level`, `notify_get_types` and
//! `notify_get_notifications`.

use serde::{Deserialize, Serialize};

/// `log_set_flag` and `log_clear_flag` parameters. Result: `true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogFlagParams {
    /// The flag (a component name from `log_get_flags`).
    pub flag: String,
}

/// `log_set_level` and `log_set_print_level` parameters. Result: `true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogLevelParams {
    /// One of [`LOG_LEVELS`].
    pub level: String,
}

/// SPDK's log level names, most severe first.
pub const LOG_LEVELS: [&str; 5] = ["ERROR", "WARNING", "NOTICE", "INFO", "DEBUG"];

/// `notify_get_notifications` parameters. Result: array of [`Notification`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyGetNotificationsParams {
    /// First notification id to return (default 0).
    #[serde(default)]
    pub id: u64,
    /// Most notifications to return (default: all).
    #[serde(default)]
    pub max: Option<u64>,
}

/// One notification: a bdev registered or unregistered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notification {
    /// `bdev_register` or `bdev_unregister`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The bdev's name.
    pub ctx: String,
    /// Sequence number, from 0.
    pub id: u64,
}

/// The notification types there are (`notify_get_types`).
pub const NOTIFY_TYPES: [&str; 2] = ["bdev_register", "bdev_unregister"];
