// SPDX-License-Identifier: Apache-2.0
//! The thread and scheduler methods a monitoring script reads (SPDK `lib/event/app_rpc.c`,
//! `lib/thread/thread_rpc.c`, `lib/event/scheduler_rpc.c`): `thread_get_stats`,
//! `thread_get_pollers`, `thread_get_io_channels` and `framework_get_scheduler`. None takes
//! parameters; these are their result shapes. Ticks are nanoseconds (`tick_rate` 1 GHz).

use serde::{Deserialize, Serialize};

/// `thread_get_stats` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadStats {
    /// Ticks per second.
    pub tick_rate: u64,
    /// One entry per thread.
    pub threads: Vec<ThreadStat>,
}

/// A `thread_get_stats` thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Field names are SPDK's keys.
pub struct ThreadStat {
    pub name: String,
    pub id: u64,
    pub cpumask: String,
    pub busy: u64,
    pub idle: u64,
    pub active_pollers_count: u64,
    pub timed_pollers_count: u64,
    pub paused_pollers_count: u64,
}

/// `thread_get_pollers` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadPollers {
    /// Ticks per second.
    pub tick_rate: u64,
    /// One entry per thread.
    pub threads: Vec<ThreadPollerList>,
}

/// A `thread_get_pollers` thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Field names are SPDK's keys.
pub struct ThreadPollerList {
    pub name: String,
    pub id: u64,
    pub active_pollers: Vec<PollerInfo>,
    pub timed_pollers: Vec<PollerInfo>,
    pub paused_pollers: Vec<PollerInfo>,
}

/// One poller: how often it ran and how often it found work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Field names are SPDK's keys.
pub struct PollerInfo {
    pub name: String,
    pub id: u64,
    /// `"waiting"` or `"running"`.
    pub state: String,
    pub run_count: u64,
    pub busy_count: u64,
    /// Timed pollers only: the period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ticks: Option<u64>,
}

/// `thread_get_io_channels` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadIoChannels {
    /// Ticks per second.
    pub tick_rate: u64,
    /// One entry per thread.
    pub threads: Vec<ThreadChannels>,
}

/// A `thread_get_io_channels` thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadChannels {
    /// Thread name.
    pub name: String,
    /// The I/O channels the thread holds.
    pub io_channels: Vec<IoChannelInfo>,
}

/// One I/O channel and how many users hold it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoChannelInfo {
    /// Channel name (`nvmf_tgt`, `bdev_NAME`).
    pub name: String,
    /// Reference count.
    #[serde(rename = "ref")]
    pub refs: u64,
}

/// `framework_get_scheduler` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedulerInfo {
    /// `"static"`: pollers stay on the cores of the mask.
    pub scheduler_name: String,
    /// Scheduling period in microseconds (0: the static scheduler never runs).
    pub scheduler_period: u64,
    /// Cores kept from scheduling, as a hex mask.
    pub isolated_core_mask: String,
    /// The core the scheduler runs on (the first of the mask).
    pub scheduling_core: u64,
}
