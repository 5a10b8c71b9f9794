// SPDX-License-Identifier: Apache-2.0
//! rpc.py's argument syntax for the supported methods (SPDK `python/spdk/cli/{app,misc,
//! bdev,nvmf}.py`) and the exact params each sends.
//!
//! rpc.py passes every argparse value through `remove_null`: options not given are omitted,
//! but `store_true` flags are always sent (as `false` when absent). That is mirrored here,
//! except that the nvmf subsystem, namespace and listener methods send a flag only when it
//! is set, as rpc.py's `nvmf_create_subsystem` does (a target older than a flag refuses it).

mod app;
mod bdev;
mod delay;
mod histogram;
mod monitor;
mod nvmf;
mod nvmf_host;
mod params;

use clap::Subcommand;
use serde_json::Value;

pub use app::{KillArgs, RpcGetMethodsArgs, SaveConfigArgs};
pub use bdev::{GetBdevsArgs, IostatArgs, MallocCreateArgs, NameArg, NullCreateArgs, QosLimitArgs};
pub use delay::{DelayCreateArgs, DelayUpdateArgs, SetModelArgs};
pub use histogram::EnableHistogramArgs;
pub use monitor::{LogFlagArg, LogLevelArg, NotifyArgs};
pub use nvmf::{
    AddListenerArgs, AddNsArgs, CreateSubsystemArgs, CreateTransportArgs, DeleteSubsystemArgs,
    GetSubsystemsArgs, GetTransportsArgs, RemoveListenerArgs, RemoveNsArgs, TgtNameArg,
};
pub use nvmf_host::{AddHostArgs, AllowAnyHostArgs, RemoveHostArgs, SubsystemArgs};
pub use params::ArgError;
use params::P;

/// How rpc.py prints a method's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrintStyle {
    /// `print_dict`: JSON with indent 2.
    Dict,
    /// `print_json`: JSON with indent 2, surrounding quotes stripped (bare strings).
    Json,
    /// Nothing is printed.
    Nothing,
}

/// One call the CLI will make.
#[derive(Debug, Clone, PartialEq)]
pub struct CliCall {
    /// Method name.
    pub method: &'static str,
    /// Params exactly as rpc.py sends them.
    pub params: Value,
    /// How to print the result.
    pub print: PrintStyle,
}

/// The methods `nvmemu rpc` knows, with rpc.py's arguments.
#[derive(Debug, Clone, Subcommand)]
#[command(rename_all = "snake_case")]
#[allow(missing_docs)] // Each variant's doc is its method's help text.
pub enum MethodArgs {
    /// Get list of supported RPC methods.
    RpcGetMethods(RpcGetMethodsArgs),
    /// Get the version.
    SpdkGetVersion,
    /// Block until subsystems have been initialized.
    FrameworkWaitInit,
    /// Display list of all reactors.
    FrameworkGetReactors,
    /// Send signal to instance.
    SpdkKillInstance(KillArgs),
    /// Write current (live) configuration to stdout.
    SaveConfig(SaveConfigArgs),
    /// Create a bdev with malloc backend.
    BdevMallocCreate(MallocCreateArgs),
    /// Delete a malloc disk.
    BdevMallocDelete(NameArg),
    /// Add a bdev with null backend.
    BdevNullCreate(NullCreateArgs),
    /// Delete a null bdev.
    BdevNullDelete(NameArg),
    /// Display current blockdev list or required blockdev.
    BdevGetBdevs(GetBdevsArgs),
    /// Display current I/O statistics of all the blockdevs or specified blockdev.
    BdevGetIostat(IostatArgs),
    /// Set QoS rate limit on a blockdev.
    BdevSetQosLimit(QosLimitArgs),
    /// Add a delay bdev on existing bdev.
    BdevDelayCreate(DelayCreateArgs),
    /// Delete a delay bdev.
    BdevDelayDelete(NameArg),
    /// Update one of the latency values for a given delay bdev.
    BdevDelayUpdateLatency(DelayUpdateArgs),
    /// nvmemu: set a bdev's latency and throughput model (preset, latencies, tail, units, seed).
    NvmemuBdevSetModel(SetModelArgs),
    /// Create NVMf transport.
    NvmfCreateTransport(CreateTransportArgs),
    /// Display nvmf transports or required transport.
    NvmfGetTransports(GetTransportsArgs),
    /// Create an NVMe-oF subsystem.
    NvmfCreateSubsystem(CreateSubsystemArgs),
    /// Delete a nvmf subsystem.
    NvmfDeleteSubsystem(DeleteSubsystemArgs),
    /// Display nvmf subsystems or required subsystem.
    NvmfGetSubsystems(GetSubsystemsArgs),
    /// Add a namespace to an NVMe-oF subsystem.
    NvmfSubsystemAddNs(AddNsArgs),
    /// Remove a namespace from an NVMe-oF subsystem.
    NvmfSubsystemRemoveNs(RemoveNsArgs),
    /// Add a listener to an NVMe-oF subsystem.
    NvmfSubsystemAddListener(AddListenerArgs),
    /// Remove a listener from an NVMe-oF subsystem.
    NvmfSubsystemRemoveListener(RemoveListenerArgs),
    /// Display current statistics for NVMf subsystem.
    NvmfGetStats(TgtNameArg),
    /// Add a host to an NVMe-oF subsystem.
    NvmfSubsystemAddHost(AddHostArgs),
    /// Remove a host from an NVMe-oF subsystem.
    NvmfSubsystemRemoveHost(RemoveHostArgs),
    /// Allow any host to connect to the subsystem.
    NvmfSubsystemAllowAnyHost(AllowAnyHostArgs),
    /// Display controllers of an NVMe-oF subsystem.
    NvmfSubsystemGetControllers(SubsystemArgs),
    /// Display queue pairs of an NVMe-oF subsystem.
    NvmfSubsystemGetQpairs(SubsystemArgs),
    /// Display listeners of an NVMe-oF subsystem.
    NvmfSubsystemGetListeners(SubsystemArgs),
    /// Enable or disable histogram for specified bdev.
    BdevEnableHistogram(EnableHistogramArgs),
    /// Get histogram for specified bdev.
    BdevGetHistogram(NameArg),
    /// nvmemu: the target's per-layer latency per controller, queue and namespace.
    NvmemuGetLatencyBreakdown,
    /// Block until all bdevs have been examined by bdev modules.
    BdevWaitForExamine,
    /// Display current statistics of all the threads.
    ThreadGetStats,
    /// Display current pollers of all the threads.
    ThreadGetPollers,
    /// Display current I/O channels of all the threads.
    ThreadGetIoChannels,
    /// Display currently set scheduler and its properties.
    FrameworkGetScheduler,
    /// Set log flag.
    LogSetFlag(LogFlagArg),
    /// Clear log flag.
    LogClearFlag(LogFlagArg),
    /// Get log flags.
    LogGetFlags,
    /// Set log level.
    LogSetLevel(LogLevelArg),
    /// Get log level.
    LogGetLevel,
    /// Set log print level.
    LogSetPrintLevel(LogLevelArg),
    /// Get log print level.
    LogGetPrintLevel,
    /// List available notifications that can be subscribed to.
    NotifyGetTypes,
    /// Get notifications.
    NotifyGetNotifications(NotifyArgs),
}

impl MethodArgs {
    /// The call rpc.py makes for these arguments. `save_config` is not a single call (the
    /// CLI runs `framework_get_subsystems` and `framework_get_config`); for it this returns
    /// the `framework_get_subsystems` step.
    pub fn to_call(&self) -> Result<CliCall, ArgError> {
        use PrintStyle::{Dict, Json, Nothing};
        let c = |method, params, print| {
            Ok(CliCall {
                method,
                params,
                print,
            })
        };
        match self {
            MethodArgs::RpcGetMethods(a) => c(
                "rpc_get_methods",
                P::default()
                    .set("current", a.current)
                    .set("include_aliases", a.include_aliases)
                    .done(),
                Dict,
            ),
            MethodArgs::SpdkGetVersion => c("spdk_get_version", P::default().done(), Json),
            MethodArgs::FrameworkWaitInit => c("framework_wait_init", P::default().done(), Nothing),
            MethodArgs::FrameworkGetReactors => {
                c("framework_get_reactors", P::default().done(), Dict)
            }
            MethodArgs::SpdkKillInstance(a) => c(
                "spdk_kill_instance",
                P::default().set("sig_name", a.sig_name.as_str()).done(),
                Nothing,
            ),
            MethodArgs::SaveConfig(_) => {
                c("framework_get_subsystems", P::default().done(), Nothing)
            }
            MethodArgs::BdevMallocCreate(a) => c("bdev_malloc_create", a.params()?, Json),
            MethodArgs::BdevMallocDelete(a) => c("bdev_malloc_delete", a.params(), Nothing),
            MethodArgs::BdevNullCreate(a) => c("bdev_null_create", a.params()?, Json),
            MethodArgs::BdevNullDelete(a) => c("bdev_null_delete", a.params(), Nothing),
            MethodArgs::BdevGetBdevs(a) => c("bdev_get_bdevs", a.params(), Dict),
            MethodArgs::BdevGetIostat(a) => c("bdev_get_iostat", a.params(), Dict),
            MethodArgs::BdevSetQosLimit(a) => c("bdev_set_qos_limit", a.params(), Nothing),
            MethodArgs::BdevDelayCreate(a) => c("bdev_delay_create", a.params(), Json),
            MethodArgs::BdevDelayDelete(a) => c("bdev_delay_delete", a.params(), Nothing),
            MethodArgs::BdevDelayUpdateLatency(a) => {
                c("bdev_delay_update_latency", a.params(), Json)
            }
            MethodArgs::NvmemuBdevSetModel(a) => c("nvmemu_bdev_set_model", a.params(), Nothing),
            MethodArgs::NvmfCreateTransport(a) => c("nvmf_create_transport", a.params(), Nothing),
            MethodArgs::NvmfGetTransports(a) => c("nvmf_get_transports", a.params(), Dict),
            MethodArgs::NvmfCreateSubsystem(a) => c("nvmf_create_subsystem", a.params(), Nothing),
            MethodArgs::NvmfDeleteSubsystem(a) => c("nvmf_delete_subsystem", a.params(), Nothing),
            MethodArgs::NvmfGetSubsystems(a) => c("nvmf_get_subsystems", a.params(), Dict),
            MethodArgs::NvmfSubsystemAddNs(a) => c("nvmf_subsystem_add_ns", a.params(), Nothing),
            MethodArgs::NvmfSubsystemRemoveNs(a) => {
                c("nvmf_subsystem_remove_ns", a.params(), Nothing)
            }
            MethodArgs::NvmfSubsystemAddListener(a) => {
                c("nvmf_subsystem_add_listener", a.params(), Nothing)
            }
            MethodArgs::NvmfSubsystemRemoveListener(a) => {
                c("nvmf_subsystem_remove_listener", a.params(), Nothing)
            }
            MethodArgs::NvmfGetStats(a) => c("nvmf_get_stats", a.params(), Dict),
            MethodArgs::NvmfSubsystemAddHost(a) => {
                c("nvmf_subsystem_add_host", a.params(), Nothing)
            }
            MethodArgs::NvmfSubsystemRemoveHost(a) => {
                c("nvmf_subsystem_remove_host", a.params(), Nothing)
            }
            MethodArgs::NvmfSubsystemAllowAnyHost(a) => {
                c("nvmf_subsystem_allow_any_host", a.params(), Nothing)
            }
            MethodArgs::NvmfSubsystemGetControllers(a) => {
                c("nvmf_subsystem_get_controllers", a.params(), Dict)
            }
            MethodArgs::NvmfSubsystemGetQpairs(a) => {
                c("nvmf_subsystem_get_qpairs", a.params(), Dict)
            }
            MethodArgs::NvmfSubsystemGetListeners(a) => {
                c("nvmf_subsystem_get_listeners", a.params(), Dict)
            }
            MethodArgs::BdevEnableHistogram(a) => c("bdev_enable_histogram", a.params(), Nothing),
            MethodArgs::BdevGetHistogram(a) => c("bdev_get_histogram", a.params(), Dict),
            MethodArgs::NvmemuGetLatencyBreakdown => {
                c("nvmemu_get_latency_breakdown", P::default().done(), Dict)
            }
            MethodArgs::BdevWaitForExamine => {
                c("bdev_wait_for_examine", P::default().done(), Nothing)
            }
            MethodArgs::ThreadGetStats => c("thread_get_stats", P::default().done(), Dict),
            MethodArgs::ThreadGetPollers => c("thread_get_pollers", P::default().done(), Dict),
            MethodArgs::ThreadGetIoChannels => {
                c("thread_get_io_channels", P::default().done(), Dict)
            }
            MethodArgs::FrameworkGetScheduler => {
                c("framework_get_scheduler", P::default().done(), Dict)
            }
            MethodArgs::LogSetFlag(a) => c("log_set_flag", a.params(), Nothing),
            MethodArgs::LogClearFlag(a) => c("log_clear_flag", a.params(), Nothing),
            MethodArgs::LogGetFlags => c("log_get_flags", P::default().done(), Dict),
            MethodArgs::LogSetLevel(a) => c("log_set_level", a.params(), Nothing),
            MethodArgs::LogGetLevel => c("log_get_level", P::default().done(), Dict),
            MethodArgs::LogSetPrintLevel(a) => c("log_set_print_level", a.params(), Nothing),
            MethodArgs::LogGetPrintLevel => c("log_get_print_level", P::default().done(), Dict),
            MethodArgs::NotifyGetTypes => c("notify_get_types", P::default().done(), Dict),
            MethodArgs::NotifyGetNotifications(a) => {
                c("notify_get_notifications", a.params(), Dict)
            }
        }
    }
}
