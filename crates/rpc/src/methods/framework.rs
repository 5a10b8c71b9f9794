// SPDX-License-Identifier: Apache-2.0
//! Application-framework methods: `rpc_get_methods`, `spdk_get_version`, `framework_wait_init`,
//! `framework_get_reactors`, `spdk_kill_instance`, `save_config`, `framework_get_subsystems`,
//! `framework_get_config` (SPDK `lib/rpc/rpc.c`, `lib/event/app_rpc.c`,
//! `lib/init/subsystem_rpc.c`): parameter structs and result shapes.

use serde::{Deserialize, Serialize};

use crate::error::RpcError;

/// `rpc_get_methods` parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcGetMethodsParams {
    /// Only methods callable in the current state (all of ours, once started).
    #[serde(default)]
    pub current: bool,
    /// Include deprecated aliases (we have none).
    #[serde(default)]
    pub include_aliases: bool,
}

/// `spdk_kill_instance` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpdkKillInstanceParams {
    /// Signal name: `SIGINT`, `SIGTERM`, `SIGQUIT`, `SIGHUP` or `SIGKILL`.
    pub sig_name: String,
}

impl SpdkKillInstanceParams {
    /// Signal names SPDK accepts.
    pub const SIGNALS: [&'static str; 5] = ["SIGINT", "SIGTERM", "SIGQUIT", "SIGHUP", "SIGKILL"];

    /// Whether `sig_name` is one SPDK accepts (it answers `-32602` otherwise).
    pub fn is_valid(&self) -> bool {
        Self::SIGNALS.contains(&self.sig_name.as_str())
    }

    /// [`Self::is_valid`] as the `-32602` error naming the parameter.
    pub fn check(&self) -> Result<(), RpcError> {
        if self.is_valid() {
            return Ok(());
        }
        Err(RpcError::invalid_params(format!(
            "Invalid parameter `sig_name`: unsupported signal {:?}",
            self.sig_name
        )))
    }
}

/// `framework_get_config` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameworkGetConfigParams {
    /// Subsystem name, e.g. `bdev` or `nvmf`.
    pub name: String,
}

/// `spdk_get_version` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// Full version string, e.g. `"nvmemu v0.1.0"`.
    pub version: String,
    /// The version's parts.
    pub fields: VersionFields,
}

/// Parts of a [`VersionInfo`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionFields {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch level.
    pub patch: u32,
    /// Suffix such as `"-pre"`; empty for releases.
    pub suffix: String,
}

/// `framework_get_reactors` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReactorsInfo {
    /// Tick rate of the `busy`/`idle` counters, in Hz.
    pub tick_rate: u64,
    /// Process id.
    pub pid: u32,
    /// One entry per polling core.
    pub reactors: Vec<ReactorInfo>,
}

/// One reactor (polling thread pinned to a core).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReactorInfo {
    /// Logical core number.
    pub lcore: u32,
    /// Kernel thread id.
    pub tid: u32,
    /// Ticks spent doing work.
    pub busy: u64,
    /// Ticks spent polling without work.
    pub idle: u64,
    /// Whether the reactor sleeps on interrupts instead of polling.
    pub in_interrupt: bool,
    /// Hardware-interrupt time of the reactor's core, in clock ticks (`USER_HZ`).
    pub irq: u64,
    /// System time of the reactor's thread, in clock ticks.
    pub sys: u64,
    /// User time of the reactor's thread, in clock ticks.
    pub usr: u64,
    /// Lightweight threads scheduled on this reactor.
    pub lw_threads: Vec<LwThreadInfo>,
}

/// A lightweight thread on a reactor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LwThreadInfo {
    /// Thread name, e.g. `app_thread`.
    pub name: String,
    /// Thread id.
    pub id: u64,
    /// Hex CPU mask, e.g. `"1"`.
    pub cpumask: String,
    /// Ticks since the thread moved to this reactor.
    pub elapsed: u64,
}

/// One element of the `framework_get_subsystems` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubsystemDeps {
    /// Subsystem name.
    pub subsystem: String,
    /// Names of subsystems it depends on (all listed before it).
    pub depends_on: Vec<String>,
}
