// SPDX-License-Identifier: Apache-2.0
//! The method table: every JSON-RPC method nvmemu serves, declared once. A row gives the
//! [`Request`] variant and its doc, the SPDK method name, the params type (from the family's
//! file in [`crate::methods`]) with an optional check run after decoding, and, for methods
//! `nvmemu rpc` can call, the command-line args type (from the family's file in
//! [`crate::cli::args`]), how rpc.py prints the result, and rpc.py's help line.
//! `declare.rs` says what the rows become. Rows are in `rpc_get_methods` order, which is
//! also `nvmemu rpc --help`'s.

// Globs, so a type added to a family's file is in scope here without another list.
use crate::cli::args::*;
#[allow(unused_imports)] // The modules the variants' docs link to.
use crate::methods::{
    bdev, ctrl_faults, delay, error_bdev, fault, framework, histogram, log, nvmf, nvmf_host,
    threads,
};
use crate::methods::{
    bdev::*, ctrl_faults::*, delay::*, error_bdev::*, fault::*, file_bdev::*, framework::*,
    histogram::*, log::*, nvmf::*, nvmf_host::*,
};

rpc_methods! {
    /// `rpc_get_methods` → array of method names (answered by [`crate::dispatch`]).
    RpcGetMethods = "rpc_get_methods" (RpcGetMethodsParams),
        cli(RpcGetMethodsArgs, Dict, "Get list of supported RPC methods.");
    /// `spdk_get_version` → [`framework::VersionInfo`].
    SpdkGetVersion = "spdk_get_version",
        cli(NoArgs, Json, "Get the version.");
    /// `framework_wait_init` → `true` once the target is initialised.
    FrameworkWaitInit = "framework_wait_init",
        cli(NoArgs, Nothing, "Block until subsystems have been initialized.");
    /// `framework_get_reactors` → [`framework::ReactorsInfo`].
    FrameworkGetReactors = "framework_get_reactors",
        cli(NoArgs, Dict, "Display list of all reactors.");
    /// `spdk_kill_instance` → `true`, then the server stops.
    SpdkKillInstance = "spdk_kill_instance" (SpdkKillInstanceParams, check = SpdkKillInstanceParams::check),
        cli(KillArgs, Nothing, "Send signal to instance.");
    /// `save_config` → the whole configuration as a [`crate::SpdkConfig`] (an nvmemu
    /// server-side method; rpc.py builds the same from the next two methods).
    SaveConfig = "save_config",
        cli(SaveConfigArgs, Nothing, "Write current (live) configuration to stdout.");
    /// `framework_get_subsystems` → array of [`framework::SubsystemDeps`] (answered by
    /// [`crate::dispatch`] from `SaveConfig`).
    FrameworkGetSubsystems = "framework_get_subsystems";
    /// `framework_get_config` → the subsystem's config array (answered by
    /// [`crate::dispatch`] from `SaveConfig`).
    FrameworkGetConfig = "framework_get_config" (FrameworkGetConfigParams);
    /// `bdev_malloc_create` → bdev name.
    BdevMallocCreate = "bdev_malloc_create" (BdevMallocCreateParams),
        cli(MallocCreateArgs, Json, "Create a bdev with malloc backend.");
    /// `bdev_malloc_delete` → `true`.
    BdevMallocDelete = "bdev_malloc_delete" (BdevDeleteParams),
        cli(NameArg, Nothing, "Delete a malloc disk.");
    /// `bdev_null_create` → bdev name.
    BdevNullCreate = "bdev_null_create" (BdevNullCreateParams),
        cli(NullCreateArgs, Json, "Add a bdev with null backend.");
    /// `bdev_null_delete` → `true`.
    BdevNullDelete = "bdev_null_delete" (BdevDeleteParams),
        cli(NameArg, Nothing, "Delete a null bdev.");
    /// `bdev_get_bdevs` → array of [`bdev::BdevInfo`].
    BdevGetBdevs = "bdev_get_bdevs" (BdevGetBdevsParams),
        cli(GetBdevsArgs, Dict, "Display current blockdev list or required blockdev.");
    /// `bdev_get_iostat` → [`bdev::BdevIostat`].
    BdevGetIostat = "bdev_get_iostat" (BdevGetIostatParams),
        cli(IostatArgs, Dict, "Display current I/O statistics of all the blockdevs or specified blockdev.");
    /// `bdev_set_qos_limit` → `true`.
    BdevSetQosLimit = "bdev_set_qos_limit" (BdevSetQosLimitParams),
        cli(QosLimitArgs, Nothing, "Set QoS rate limit on a blockdev.");
    /// `bdev_delay_create` → the new bdev's name.
    BdevDelayCreate = "bdev_delay_create" (BdevDelayCreateParams),
        cli(DelayCreateArgs, Json, "Add a delay bdev on existing bdev.");
    /// `bdev_delay_delete` → `true`.
    BdevDelayDelete = "bdev_delay_delete" (BdevDeleteParams),
        cli(NameArg, Nothing, "Delete a delay bdev.");
    /// `bdev_delay_update_latency` → `true`.
    BdevDelayUpdateLatency = "bdev_delay_update_latency" (BdevDelayUpdateLatencyParams),
        cli(DelayUpdateArgs, Json, "Update one of the latency values for a given delay bdev.");
    /// `bdev_error_create` → `true` (the bdev is `EE_<base_name>`).
    BdevErrorCreate = "bdev_error_create" (BdevErrorCreateParams),
        cli(ErrorCreateArgs, Json, "Add bdev with error injection backend");
    /// `bdev_error_delete` → `true`.
    BdevErrorDelete = "bdev_error_delete" (BdevDeleteParams),
        cli(NameArg, Nothing, "Delete an error bdev");
    /// `bdev_error_inject_error` → `true`.
    BdevErrorInjectError = "bdev_error_inject_error" (BdevErrorInjectErrorParams),
        cli(ErrorInjectArgs, Nothing, "bdev inject error");
    /// `bdev_aio_create` → the new bdev's name.
    BdevAioCreate = "bdev_aio_create" (BdevAioCreateParams),
        cli(AioCreateArgs, Json, "Add a bdev with aio backend");
    /// `bdev_aio_delete` → `true`.
    BdevAioDelete = "bdev_aio_delete" (BdevDeleteParams),
        cli(NameArg, Nothing, "Delete an aio disk");
    /// `bdev_uring_create` → the new bdev's name.
    BdevUringCreate = "bdev_uring_create" (BdevUringCreateParams),
        cli(UringCreateArgs, Json, "Create a bdev with io_uring backend");
    /// `bdev_uring_delete` → `true`.
    BdevUringDelete = "bdev_uring_delete" (BdevDeleteParams),
        cli(NameArg, Nothing, "Delete a uring bdev");
    /// `nvmemu_bdev_set_model` → `true`.
    NvmemuBdevSetModel = "nvmemu_bdev_set_model" (NvmemuBdevSetModelParams),
        cli(SetModelArgs, Nothing, "nvmemu: set a bdev's latency and throughput model (preset, latencies, tail, units, seed).");
    /// `nvmemu_bdev_inject_fault` → the new rule's id ([`fault`]).
    NvmemuBdevInjectFault = "nvmemu_bdev_inject_fault" (NvmemuBdevInjectFaultParams),
        cli(InjectFaultArgs, Json, "nvmemu: add a fault rule to a bdev (status, corrupt, drop, delay or reorder; which commands; when).");
    /// `nvmemu_bdev_clear_faults` → `true`.
    NvmemuBdevClearFaults = "nvmemu_bdev_clear_faults" (NvmemuBdevClearFaultsParams),
        cli(ClearFaultsArgs, Nothing, "nvmemu: remove one fault rule of a bdev, or all.");
    /// `nvmemu_bdev_get_faults` → the bdevs' fault rules with their counters.
    NvmemuBdevGetFaults = "nvmemu_bdev_get_faults" (NvmemuBdevGetFaultsParams),
        cli(GetFaultsArgs, Dict, "nvmemu: show the fault rules of the bdevs, with their counters.");
    /// `nvmf_create_transport` → `true`.
    NvmfCreateTransport = "nvmf_create_transport" (NvmfCreateTransportParams),
        cli(CreateTransportArgs, Nothing, "Create NVMf transport.");
    /// `nvmf_get_transports` → array of [`nvmf::TransportInfo`].
    NvmfGetTransports = "nvmf_get_transports" (NvmfGetTransportsParams),
        cli(GetTransportsArgs, Dict, "Display nvmf transports or required transport.");
    /// `nvmf_create_subsystem` → `true`.
    NvmfCreateSubsystem = "nvmf_create_subsystem" (NvmfCreateSubsystemParams),
        cli(CreateSubsystemArgs, Nothing, "Create an NVMe-oF subsystem.");
    /// `nvmf_delete_subsystem` → `true`.
    NvmfDeleteSubsystem = "nvmf_delete_subsystem" (NvmfSubsystemParams),
        cli(DeleteSubsystemArgs, Nothing, "Delete a nvmf subsystem.");
    /// `nvmf_get_subsystems` → array of [`nvmf::SubsystemInfo`].
    NvmfGetSubsystems = "nvmf_get_subsystems" (NvmfGetSubsystemsParams),
        cli(GetSubsystemsArgs, Dict, "Display nvmf subsystems or required subsystem.");
    /// `nvmf_subsystem_add_ns` → NSID.
    NvmfSubsystemAddNs = "nvmf_subsystem_add_ns" (NvmfSubsystemAddNsParams),
        cli(AddNsArgs, Nothing, "Add a namespace to an NVMe-oF subsystem.");
    /// `nvmf_subsystem_remove_ns` → `true`.
    NvmfSubsystemRemoveNs = "nvmf_subsystem_remove_ns" (NvmfSubsystemRemoveNsParams),
        cli(RemoveNsArgs, Nothing, "Remove a namespace from an NVMe-oF subsystem.");
    /// `nvmemu_controller_inject_fatal` → `true`.
    NvmemuControllerInjectFatal = "nvmemu_controller_inject_fatal" (NvmemuControllerInjectFatalParams),
        cli(InjectFatalArgs, Nothing, "nvmemu: put a subsystem's controllers in Controller Fatal Status (CSTS.CFS), now or after N more I/O commands, until the host resets them.");
    /// `nvmemu_namespace_inject_not_ready` → `true`.
    NvmemuNamespaceInjectNotReady = "nvmemu_namespace_inject_not_ready" (NvmemuNamespaceInjectNotReadyParams),
        cli(InjectNotReadyArgs, Nothing, "nvmemu: make a namespace's I/O complete with Namespace Not Ready (82h), with or without DNR, until --clear.");
    /// `nvmemu_controller_get_faults` → array of [`ctrl_faults::SubsystemFaults`].
    NvmemuControllerGetFaults = "nvmemu_controller_get_faults" (NvmemuControllerGetFaultsParams),
        cli(GetCtrlFaultsArgs, Dict, "nvmemu: show the injected controller fatal statuses and not-ready namespaces of the subsystems, with their counters.");
    /// `nvmf_subsystem_add_listener` → `true`.
    NvmfSubsystemAddListener = "nvmf_subsystem_add_listener" (NvmfSubsystemAddListenerParams),
        cli(AddListenerArgs, Nothing, "Add a listener to an NVMe-oF subsystem.");
    /// `nvmf_subsystem_remove_listener` → `true`.
    NvmfSubsystemRemoveListener = "nvmf_subsystem_remove_listener" (NvmfSubsystemRemoveListenerParams),
        cli(RemoveListenerArgs, Nothing, "Remove a listener from an NVMe-oF subsystem.");
    /// `nvmf_get_stats` → [`nvmf::NvmfStats`].
    NvmfGetStats = "nvmf_get_stats" (NvmfGetStatsParams),
        cli(TgtNameArg, Dict, "Display current statistics for NVMf subsystem.");
    /// `nvmf_subsystem_add_host` → `true`.
    NvmfSubsystemAddHost = "nvmf_subsystem_add_host" (NvmfSubsystemAddHostParams),
        cli(AddHostArgs, Nothing, "Add a host to an NVMe-oF subsystem.");
    /// `nvmf_subsystem_remove_host` → `true`.
    NvmfSubsystemRemoveHost = "nvmf_subsystem_remove_host" (NvmfSubsystemRemoveHostParams),
        cli(RemoveHostArgs, Nothing, "Remove a host from an NVMe-oF subsystem.");
    /// `nvmf_subsystem_allow_any_host` → `true`.
    NvmfSubsystemAllowAnyHost = "nvmf_subsystem_allow_any_host" (NvmfSubsystemAllowAnyHostParams),
        cli(AllowAnyHostArgs, Nothing, "Allow any host to connect to the subsystem.");
    /// `nvmf_subsystem_get_controllers` → array of [`nvmf_host::ControllerInfo`].
    NvmfSubsystemGetControllers = "nvmf_subsystem_get_controllers" (NvmfSubsystemQueryParams),
        cli(SubsystemArgs, Dict, "Display controllers of an NVMe-oF subsystem.");
    /// `nvmf_subsystem_get_qpairs` → array of [`nvmf_host::QpairInfo`].
    NvmfSubsystemGetQpairs = "nvmf_subsystem_get_qpairs" (NvmfSubsystemQueryParams),
        cli(SubsystemArgs, Dict, "Display queue pairs of an NVMe-oF subsystem.");
    /// `nvmf_subsystem_get_listeners` → array of [`nvmf_host::SubsystemListener`].
    NvmfSubsystemGetListeners = "nvmf_subsystem_get_listeners" (NvmfSubsystemQueryParams),
        cli(SubsystemArgs, Dict, "Display listeners of an NVMe-oF subsystem.");
    /// `bdev_enable_histogram` → `true`.
    BdevEnableHistogram = "bdev_enable_histogram" (BdevEnableHistogramParams, check = BdevEnableHistogramParams::validate),
        cli(EnableHistogramArgs, Nothing, "Enable or disable histogram for specified bdev.");
    /// `bdev_get_histogram` → [`histogram::BdevHistogram`].
    BdevGetHistogram = "bdev_get_histogram" (BdevGetHistogramParams),
        cli(NameArg, Dict, "Get histogram for specified bdev.");
    /// `nvmemu_get_latency_breakdown` → [`histogram::LatencyBreakdown`].
    NvmemuGetLatencyBreakdown = "nvmemu_get_latency_breakdown",
        cli(NoArgs, Dict, "nvmemu: the target's per-layer latency per controller, queue and namespace.");
    /// `bdev_wait_for_examine` → `true` (bdevs are examined when created).
    BdevWaitForExamine = "bdev_wait_for_examine",
        cli(NoArgs, Nothing, "Block until all bdevs have been examined by bdev modules.");
    /// `thread_get_stats` → [`threads::ThreadStats`].
    ThreadGetStats = "thread_get_stats",
        cli(NoArgs, Dict, "Display current statistics of all the threads.");
    /// `thread_get_pollers` → [`threads::ThreadPollers`].
    ThreadGetPollers = "thread_get_pollers",
        cli(NoArgs, Dict, "Display current pollers of all the threads.");
    /// `thread_get_io_channels` → [`threads::ThreadIoChannels`].
    ThreadGetIoChannels = "thread_get_io_channels",
        cli(NoArgs, Dict, "Display current I/O channels of all the threads.");
    /// `framework_get_scheduler` → [`threads::SchedulerInfo`].
    FrameworkGetScheduler = "framework_get_scheduler",
        cli(NoArgs, Dict, "Display currently set scheduler and its properties.");
    /// `log_set_flag` → `true`.
    LogSetFlag = "log_set_flag" (LogFlagParams),
        cli(LogFlagArg, Nothing, "Set log flag.");
    /// `log_clear_flag` → `true`.
    LogClearFlag = "log_clear_flag" (LogFlagParams),
        cli(LogFlagArg, Nothing, "Clear log flag.");
    /// `log_get_flags` → object of flag name → enabled.
    LogGetFlags = "log_get_flags",
        cli(NoArgs, Dict, "Get log flags.");
    /// `log_set_level` → `true`.
    LogSetLevel = "log_set_level" (LogLevelParams),
        cli(LogLevelArg, Nothing, "Set log level.");
    /// `log_get_level` → level name.
    LogGetLevel = "log_get_level",
        cli(NoArgs, Dict, "Get log level.");
    /// `log_set_print_level` → `true`.
    LogSetPrintLevel = "log_set_print_level" (LogLevelParams),
        cli(LogLevelArg, Nothing, "Set log print level.");
    /// `log_get_print_level` → level name.
    LogGetPrintLevel = "log_get_print_level",
        cli(NoArgs, Dict, "Get log print level.");
    /// `notify_get_types` → array of type names.
    NotifyGetTypes = "notify_get_types",
        cli(NoArgs, Dict, "List available notifications that can be subscribed to.");
    /// `notify_get_notifications` → array of [`log::Notification`].
    NotifyGetNotifications = "notify_get_notifications" (NotifyGetNotificationsParams),
        cli(NotifyArgs, Dict, "Get notifications.");
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Subcommand;

    /// `nvmemu rpc` offers every served method, in `rpc_get_methods` order, but the two
    /// rpc.py calls only to build `save_config`.
    #[test]
    fn cli_offers_every_method_in_table_order() {
        let cmd = MethodArgs::augment_subcommands(clap::Command::new("rpc"));
        let cli: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
        let served: Vec<&str> = METHODS
            .iter()
            .copied()
            .filter(|m| !matches!(*m, "framework_get_subsystems" | "framework_get_config"))
            .collect();
        assert_eq!(cli, served);
    }

    #[test]
    fn method_names_are_unique() {
        let mut names = METHODS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METHODS.len());
    }
}
