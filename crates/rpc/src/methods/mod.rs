// SPDX-License-Identifier: Apache-2.0
//! The typed [`Request`] enum and its decoding from a raw `(method, params)` pair.
//! Parameter and result types live in one file per method family.

pub mod bdev;
pub mod delay;
pub mod framework;
pub mod histogram;
pub mod log;
pub mod nvmf;
pub mod nvmf_host;
mod object_only;
pub mod threads;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::RpcError;
use bdev::{
    BdevDeleteParams, BdevGetBdevsParams, BdevGetIostatParams, BdevMallocCreateParams,
    BdevNullCreateParams, BdevSetQosLimitParams,
};
use delay::{BdevDelayCreateParams, BdevDelayUpdateLatencyParams, NvmemuBdevSetModelParams};
use framework::{FrameworkGetConfigParams, RpcGetMethodsParams, SpdkKillInstanceParams};
use histogram::{BdevEnableHistogramParams, BdevGetHistogramParams};
use log::{LogFlagParams, LogLevelParams, NotifyGetNotificationsParams};
use nvmf::{
    NvmfCreateSubsystemParams, NvmfCreateTransportParams, NvmfGetStatsParams,
    NvmfGetSubsystemsParams, NvmfGetTransportsParams, NvmfSubsystemAddListenerParams,
    NvmfSubsystemAddNsParams, NvmfSubsystemParams, NvmfSubsystemRemoveListenerParams,
    NvmfSubsystemRemoveNsParams,
};
use nvmf_host::{
    NvmfSubsystemAddHostParams, NvmfSubsystemAllowAnyHostParams, NvmfSubsystemQueryParams,
    NvmfSubsystemRemoveHostParams,
};

/// One decoded JSON-RPC call, one variant per supported SPDK method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `rpc_get_methods` → array of method names (answered by [`crate::dispatch`]).
    RpcGetMethods(RpcGetMethodsParams),
    /// `spdk_get_version` → [`framework::VersionInfo`].
    SpdkGetVersion,
    /// `framework_wait_init` → `true` once the target is initialised.
    FrameworkWaitInit,
    /// `framework_get_reactors` → [`framework::ReactorsInfo`].
    FrameworkGetReactors,
    /// `spdk_kill_instance` → `true`, then the server stops.
    SpdkKillInstance(SpdkKillInstanceParams),
    /// `save_config` → the whole configuration as a [`crate::SpdkConfig`] (an nvmemu
    /// server-side method; rpc.py builds the same from the next two methods).
    SaveConfig,
    /// `framework_get_subsystems` → array of [`framework::SubsystemDeps`] (answered by
    /// [`crate::dispatch`] from `SaveConfig`).
    FrameworkGetSubsystems,
    /// `framework_get_config` → the subsystem's config array (answered by
    /// [`crate::dispatch`] from `SaveConfig`).
    FrameworkGetConfig(FrameworkGetConfigParams),
    /// `bdev_malloc_create` → bdev name.
    BdevMallocCreate(BdevMallocCreateParams),
    /// `bdev_malloc_delete` → `true`.
    BdevMallocDelete(BdevDeleteParams),
    /// `bdev_null_create` → bdev name.
    BdevNullCreate(BdevNullCreateParams),
    /// `bdev_null_delete` → `true`.
    BdevNullDelete(BdevDeleteParams),
    /// `bdev_get_bdevs` → array of [`bdev::BdevInfo`].
    BdevGetBdevs(BdevGetBdevsParams),
    /// `bdev_set_qos_limit` → `true`.
    BdevSetQosLimit(BdevSetQosLimitParams),
    /// `bdev_delay_create` → the new bdev's name.
    BdevDelayCreate(BdevDelayCreateParams),
    /// `bdev_delay_delete` → `true`.
    BdevDelayDelete(BdevDeleteParams),
    /// `bdev_delay_update_latency` → `true`.
    BdevDelayUpdateLatency(BdevDelayUpdateLatencyParams),
    /// `nvmemu_bdev_set_model` → `true`.
    NvmemuBdevSetModel(NvmemuBdevSetModelParams),
    /// `bdev_get_iostat` → [`bdev::BdevIostat`].
    BdevGetIostat(BdevGetIostatParams),
    /// `nvmf_create_transport` → `true`.
    NvmfCreateTransport(NvmfCreateTransportParams),
    /// `nvmf_get_transports` → array of [`nvmf::TransportInfo`].
    NvmfGetTransports(NvmfGetTransportsParams),
    /// `nvmf_create_subsystem` → `true`.
    NvmfCreateSubsystem(NvmfCreateSubsystemParams),
    /// `nvmf_delete_subsystem` → `true`.
    NvmfDeleteSubsystem(NvmfSubsystemParams),
    /// `nvmf_get_subsystems` → array of [`nvmf::SubsystemInfo`].
    NvmfGetSubsystems(NvmfGetSubsystemsParams),
    /// `nvmf_subsystem_add_ns` → NSID.
    NvmfSubsystemAddNs(NvmfSubsystemAddNsParams),
    /// `nvmf_subsystem_remove_ns` → `true`.
    NvmfSubsystemRemoveNs(NvmfSubsystemRemoveNsParams),
    /// `nvmf_subsystem_add_listener` → `true`.
    NvmfSubsystemAddListener(NvmfSubsystemAddListenerParams),
    /// `nvmf_subsystem_remove_listener` → `true`.
    NvmfSubsystemRemoveListener(NvmfSubsystemRemoveListenerParams),
    /// `nvmf_get_stats` → [`nvmf::NvmfStats`].
    NvmfGetStats(NvmfGetStatsParams),
    /// `nvmf_subsystem_add_host` → `true`.
    NvmfSubsystemAddHost(NvmfSubsystemAddHostParams),
    /// `nvmf_subsystem_remove_host` → `true`.
    NvmfSubsystemRemoveHost(NvmfSubsystemRemoveHostParams),
    /// `nvmf_subsystem_allow_any_host` → `true`.
    NvmfSubsystemAllowAnyHost(NvmfSubsystemAllowAnyHostParams),
    /// `nvmf_subsystem_get_controllers` → array of [`nvmf_host::ControllerInfo`].
    NvmfSubsystemGetControllers(NvmfSubsystemQueryParams),
    /// `nvmf_subsystem_get_qpairs` → array of [`nvmf_host::QpairInfo`].
    NvmfSubsystemGetQpairs(NvmfSubsystemQueryParams),
    /// `nvmf_subsystem_get_listeners` → array of [`nvmf_host::SubsystemListener`].
    NvmfSubsystemGetListeners(NvmfSubsystemQueryParams),
    /// `bdev_enable_histogram` → `true`.
    BdevEnableHistogram(BdevEnableHistogramParams),
    /// `bdev_get_histogram` → [`histogram::BdevHistogram`].
    BdevGetHistogram(BdevGetHistogramParams),
    /// `nvmemu_get_latency_breakdown` → [`histogram::LatencyBreakdown`].
    NvmemuGetLatencyBreakdown,
    /// `bdev_wait_for_examine` → `true` (bdevs are examined when created).
    BdevWaitForExamine,
    /// `thread_get_stats` → [`threads::ThreadStats`].
    ThreadGetStats,
    /// `thread_get_pollers` → [`threads::ThreadPollers`].
    ThreadGetPollers,
    /// `thread_get_io_channels` → [`threads::ThreadIoChannels`].
    ThreadGetIoChannels,
    /// `framework_get_scheduler` → [`threads::SchedulerInfo`].
    FrameworkGetScheduler,
    /// `log_set_flag` → `true`.
    LogSetFlag(LogFlagParams),
    /// `log_clear_flag` → `true`.
    LogClearFlag(LogFlagParams),
    /// `log_get_flags` → object of flag name → enabled.
    LogGetFlags,
    /// `log_set_level` → `true`.
    LogSetLevel(LogLevelParams),
    /// `log_get_level` → level name.
    LogGetLevel,
    /// `log_set_print_level` → `true`.
    LogSetPrintLevel(LogLevelParams),
    /// `log_get_print_level` → level name.
    LogGetPrintLevel,
    /// `notify_get_types` → array of type names.
    NotifyGetTypes,
    /// `notify_get_notifications` → array of [`log::Notification`].
    NotifyGetNotifications(NotifyGetNotificationsParams),
}

/// Every method name [`Request::decode`] accepts, in `rpc_get_methods` order.
pub const METHODS: &[&str] = &[
    "rpc_get_methods",
    "spdk_get_version",
    "framework_wait_init",
    "framework_get_reactors",
    "spdk_kill_instance",
    "save_config",
    "framework_get_subsystems",
    "framework_get_config",
    "bdev_malloc_create",
    "bdev_malloc_delete",
    "bdev_null_create",
    "bdev_null_delete",
    "bdev_get_bdevs",
    "bdev_get_iostat",
    "bdev_set_qos_limit",
    "bdev_delay_create",
    "bdev_delay_delete",
    "bdev_delay_update_latency",
    "nvmemu_bdev_set_model",
    "nvmf_create_transport",
    "nvmf_get_transports",
    "nvmf_create_subsystem",
    "nvmf_delete_subsystem",
    "nvmf_get_subsystems",
    "nvmf_subsystem_add_ns",
    "nvmf_subsystem_remove_ns",
    "nvmf_subsystem_add_listener",
    "nvmf_subsystem_remove_listener",
    "nvmf_get_stats",
    "nvmf_subsystem_add_host",
    "nvmf_subsystem_remove_host",
    "nvmf_subsystem_allow_any_host",
    "nvmf_subsystem_get_controllers",
    "nvmf_subsystem_get_qpairs",
    "nvmf_subsystem_get_listeners",
    "bdev_enable_histogram",
    "bdev_get_histogram",
    "nvmemu_get_latency_breakdown",
    "bdev_wait_for_examine",
    "thread_get_stats",
    "thread_get_pollers",
    "thread_get_io_channels",
    "framework_get_scheduler",
    "log_set_flag",
    "log_clear_flag",
    "log_get_flags",
    "log_set_level",
    "log_get_level",
    "log_set_print_level",
    "log_get_print_level",
    "notify_get_types",
    "notify_get_notifications",
];

impl Request {
    /// Decodes a method name and its `params` (absent or `null` = no parameters).
    ///
    /// Unknown methods give `-32601`; missing, unknown or mistyped parameters give `-32602`
    /// with a message naming the parameter (e.g. "missing field `block_size`").
    pub fn decode(method: &str, params: Option<Value>) -> Result<Request, RpcError> {
        let p = params;
        Ok(match method {
            "rpc_get_methods" => Request::RpcGetMethods(parse(p)?),
            "spdk_get_version" => no_params(method, p, Request::SpdkGetVersion)?,
            "framework_wait_init" => no_params(method, p, Request::FrameworkWaitInit)?,
            "framework_get_reactors" => no_params(method, p, Request::FrameworkGetReactors)?,
            "spdk_kill_instance" => {
                let k: SpdkKillInstanceParams = parse(p)?;
                if !k.is_valid() {
                    return Err(RpcError::invalid_params(format!(
                        "Invalid parameter `sig_name`: unsupported signal {:?}",
                        k.sig_name
                    )));
                }
                Request::SpdkKillInstance(k)
            }
            "save_config" => no_params(method, p, Request::SaveConfig)?,
            "framework_get_subsystems" => no_params(method, p, Request::FrameworkGetSubsystems)?,
            "framework_get_config" => Request::FrameworkGetConfig(parse(p)?),
            "bdev_malloc_create" => Request::BdevMallocCreate(parse(p)?),
            "bdev_malloc_delete" => Request::BdevMallocDelete(parse(p)?),
            "bdev_null_create" => Request::BdevNullCreate(parse(p)?),
            "bdev_null_delete" => Request::BdevNullDelete(parse(p)?),
            "bdev_get_bdevs" => Request::BdevGetBdevs(parse(p)?),
            "bdev_set_qos_limit" => Request::BdevSetQosLimit(parse(p)?),
            "bdev_delay_create" => Request::BdevDelayCreate(parse(p)?),
            "bdev_delay_delete" => Request::BdevDelayDelete(parse(p)?),
            "bdev_delay_update_latency" => Request::BdevDelayUpdateLatency(parse(p)?),
            "nvmemu_bdev_set_model" => Request::NvmemuBdevSetModel(parse(p)?),
            "bdev_get_iostat" => Request::BdevGetIostat(parse(p)?),
            "nvmf_create_transport" => Request::NvmfCreateTransport(parse(p)?),
            "nvmf_get_transports" => Request::NvmfGetTransports(parse(p)?),
            "nvmf_create_subsystem" => Request::NvmfCreateSubsystem(parse(p)?),
            "nvmf_delete_subsystem" => Request::NvmfDeleteSubsystem(parse(p)?),
            "nvmf_get_subsystems" => Request::NvmfGetSubsystems(parse(p)?),
            "nvmf_subsystem_add_ns" => Request::NvmfSubsystemAddNs(parse(p)?),
            "nvmf_subsystem_remove_ns" => Request::NvmfSubsystemRemoveNs(parse(p)?),
            "nvmf_subsystem_add_listener" => Request::NvmfSubsystemAddListener(parse(p)?),
            "nvmf_subsystem_remove_listener" => Request::NvmfSubsystemRemoveListener(parse(p)?),
            "nvmf_get_stats" => Request::NvmfGetStats(parse(p)?),
            "nvmf_subsystem_add_host" => Request::NvmfSubsystemAddHost(parse(p)?),
            "nvmf_subsystem_remove_host" => Request::NvmfSubsystemRemoveHost(parse(p)?),
            "nvmf_subsystem_allow_any_host" => Request::NvmfSubsystemAllowAnyHost(parse(p)?),
            "nvmf_subsystem_get_controllers" => Request::NvmfSubsystemGetControllers(parse(p)?),
            "nvmf_subsystem_get_qpairs" => Request::NvmfSubsystemGetQpairs(parse(p)?),
            "nvmf_subsystem_get_listeners" => Request::NvmfSubsystemGetListeners(parse(p)?),
            "bdev_enable_histogram" => {
                let h: BdevEnableHistogramParams = parse(p)?;
                h.validate()?;
                Request::BdevEnableHistogram(h)
            }
            "bdev_get_histogram" => Request::BdevGetHistogram(parse(p)?),
            "nvmemu_get_latency_breakdown" => {
                no_params(method, p, Request::NvmemuGetLatencyBreakdown)?
            }
            "bdev_wait_for_examine" => no_params(method, p, Request::BdevWaitForExamine)?,
            "thread_get_stats" => no_params(method, p, Request::ThreadGetStats)?,
            "thread_get_pollers" => no_params(method, p, Request::ThreadGetPollers)?,
            "thread_get_io_channels" => no_params(method, p, Request::ThreadGetIoChannels)?,
            "framework_get_scheduler" => no_params(method, p, Request::FrameworkGetScheduler)?,
            "log_set_flag" => Request::LogSetFlag(parse(p)?),
            "log_clear_flag" => Request::LogClearFlag(parse(p)?),
            "log_get_flags" => no_params(method, p, Request::LogGetFlags)?,
            "log_set_level" => Request::LogSetLevel(parse(p)?),
            "log_get_level" => no_params(method, p, Request::LogGetLevel)?,
            "log_set_print_level" => Request::LogSetPrintLevel(parse(p)?),
            "log_get_print_level" => no_params(method, p, Request::LogGetPrintLevel)?,
            "notify_get_types" => no_params(method, p, Request::NotifyGetTypes)?,
            "notify_get_notifications" => Request::NotifyGetNotifications(parse(p)?),
            other => return Err(RpcError::method_not_found(other)),
        })
    }

    /// The SPDK method name of this request.
    pub fn method(&self) -> &'static str {
        match self {
            Request::RpcGetMethods(_) => "rpc_get_methods",
            Request::SpdkGetVersion => "spdk_get_version",
            Request::FrameworkWaitInit => "framework_wait_init",
            Request::FrameworkGetReactors => "framework_get_reactors",
            Request::SpdkKillInstance(_) => "spdk_kill_instance",
            Request::SaveConfig => "save_config",
            Request::FrameworkGetSubsystems => "framework_get_subsystems",
            Request::FrameworkGetConfig(_) => "framework_get_config",
            Request::BdevMallocCreate(_) => "bdev_malloc_create",
            Request::BdevMallocDelete(_) => "bdev_malloc_delete",
            Request::BdevNullCreate(_) => "bdev_null_create",
            Request::BdevNullDelete(_) => "bdev_null_delete",
            Request::BdevGetBdevs(_) => "bdev_get_bdevs",
            Request::BdevSetQosLimit(_) => "bdev_set_qos_limit",
            Request::BdevDelayCreate(_) => "bdev_delay_create",
            Request::BdevDelayDelete(_) => "bdev_delay_delete",
            Request::BdevDelayUpdateLatency(_) => "bdev_delay_update_latency",
            Request::NvmemuBdevSetModel(_) => "nvmemu_bdev_set_model",
            Request::BdevGetIostat(_) => "bdev_get_iostat",
            Request::NvmfCreateTransport(_) => "nvmf_create_transport",
            Request::NvmfGetTransports(_) => "nvmf_get_transports",
            Request::NvmfCreateSubsystem(_) => "nvmf_create_subsystem",
            Request::NvmfDeleteSubsystem(_) => "nvmf_delete_subsystem",
            Request::NvmfGetSubsystems(_) => "nvmf_get_subsystems",
            Request::NvmfSubsystemAddNs(_) => "nvmf_subsystem_add_ns",
            Request::NvmfSubsystemRemoveNs(_) => "nvmf_subsystem_remove_ns",
            Request::NvmfSubsystemAddListener(_) => "nvmf_subsystem_add_listener",
            Request::NvmfSubsystemRemoveListener(_) => "nvmf_subsystem_remove_listener",
            Request::NvmfGetStats(_) => "nvmf_get_stats",
            Request::NvmfSubsystemAddHost(_) => "nvmf_subsystem_add_host",
            Request::NvmfSubsystemRemoveHost(_) => "nvmf_subsystem_remove_host",
            Request::NvmfSubsystemAllowAnyHost(_) => "nvmf_subsystem_allow_any_host",
            Request::NvmfSubsystemGetControllers(_) => "nvmf_subsystem_get_controllers",
            Request::NvmfSubsystemGetQpairs(_) => "nvmf_subsystem_get_qpairs",
            Request::NvmfSubsystemGetListeners(_) => "nvmf_subsystem_get_listeners",
            Request::BdevEnableHistogram(_) => "bdev_enable_histogram",
            Request::BdevGetHistogram(_) => "bdev_get_histogram",
            Request::NvmemuGetLatencyBreakdown => "nvmemu_get_latency_breakdown",
            Request::BdevWaitForExamine => "bdev_wait_for_examine",
            Request::ThreadGetStats => "thread_get_stats",
            Request::ThreadGetPollers => "thread_get_pollers",
            Request::ThreadGetIoChannels => "thread_get_io_channels",
            Request::FrameworkGetScheduler => "framework_get_scheduler",
            Request::LogSetFlag(_) => "log_set_flag",
            Request::LogClearFlag(_) => "log_clear_flag",
            Request::LogGetFlags => "log_get_flags",
            Request::LogSetLevel(_) => "log_set_level",
            Request::LogGetLevel => "log_get_level",
            Request::LogSetPrintLevel(_) => "log_set_print_level",
            Request::LogGetPrintLevel => "log_get_print_level",
            Request::NotifyGetTypes => "notify_get_types",
            Request::NotifyGetNotifications(_) => "notify_get_notifications",
        }
    }
}

/// Decodes `params` into `T`; absent or `null` decodes as `{}` (so optional-only methods
/// accept no params and required fields report "missing field `x`"). Positional params (an
/// array) are refused as SPDK's decoder does: serde would otherwise fill the struct's
/// fields in declaration order, so `["x", 60000]` would become a name and a timeout.
fn parse<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    let value = match params {
        None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "Invalid parameters: params must be an object",
            ));
        }
    };
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            RpcError::invalid_params(format!("Invalid parameters: {inner}"))
        } else {
            RpcError::invalid_params(format!("Invalid parameter `{path}`: {inner}"))
        }
    })
}

/// SPDK rejects any params for parameterless methods; absent, `null` and `{}` are accepted.
fn no_params(method: &str, params: Option<Value>, req: Request) -> Result<Request, RpcError> {
    match params {
        None | Some(Value::Null) => Ok(req),
        Some(Value::Object(m)) if m.is_empty() => Ok(req),
        Some(_) => Err(RpcError::invalid_params(format!(
            "`{method}` requires no parameters"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{INVALID_PARAMS, METHOD_NOT_FOUND};
    use serde_json::json;

    #[test]
    fn every_listed_method_decodes_with_minimal_params() {
        let minimal = |m: &str| -> Option<Value> {
            Some(match m {
                "spdk_kill_instance" => json!({"sig_name": "SIGTERM"}),
                "framework_get_config" => json!({"name": "bdev"}),
                "bdev_malloc_create" => json!({"num_blocks": 8, "block_size": 512}),
                "bdev_malloc_delete"
                | "bdev_null_delete"
                | "bdev_get_histogram"
                | "bdev_set_qos_limit"
                | "bdev_delay_delete"
                | "nvmemu_bdev_set_model" => {
                    json!({"name": "x"})
                }
                "bdev_enable_histogram" => json!({"name": "x", "enable": true}),
                "bdev_delay_create" => json!({"base_bdev_name": "b", "name": "d",
                    "avg_read_latency": 1, "p99_read_latency": 2,
                    "avg_write_latency": 1, "p99_write_latency": 2}),
                "bdev_delay_update_latency" => json!({"delay_bdev_name": "d",
                    "latency_type": "avg_read", "latency_us": 5}),
                "bdev_null_create" => json!({"name": "n", "num_blocks": 8, "block_size": 512}),
                "nvmf_create_transport" => json!({"trtype": "VFIOUSER"}),
                "nvmf_create_subsystem" | "nvmf_delete_subsystem" => json!({"nqn": "q"}),
                "nvmf_subsystem_add_ns" => json!({"nqn": "q", "namespace": {"bdev_name": "b"}}),
                "nvmf_subsystem_remove_ns" => json!({"nqn": "q", "nsid": 1}),
                "nvmf_subsystem_add_host" | "nvmf_subsystem_remove_host" => {
                    json!({"nqn": "q", "host": "h"})
                }
                "nvmf_subsystem_allow_any_host" => json!({"nqn": "q", "allow_any_host": true}),
                "log_set_flag" | "log_clear_flag" => json!({"flag": "nvmf"}),
                "log_set_level" | "log_set_print_level" => json!({"level": "DEBUG"}),
                "nvmf_subsystem_get_controllers"
                | "nvmf_subsystem_get_qpairs"
                | "nvmf_subsystem_get_listeners" => json!({"nqn": "q"}),
                "nvmf_subsystem_add_listener" | "nvmf_subsystem_remove_listener" => {
                    json!({"nqn": "q", "listen_address": {"trtype": "VFIOUSER", "traddr": "/t"}})
                }
                _ => return None,
            })
        };
        for m in METHODS {
            let req = Request::decode(m, minimal(m)).unwrap();
            assert_eq!(req.method(), *m);
        }
    }

    #[test]
    fn unknown_method_is_32601() {
        let e = Request::decode("bdev_frobnicate", None).unwrap_err();
        assert_eq!(e.code, METHOD_NOT_FOUND);
        assert!(e.message.contains("bdev_frobnicate"));
    }

    #[test]
    fn positional_params_are_refused() {
        // serde would read ["x", 60000] as name "x" and a 60 s timeout.
        let e = Request::decode("bdev_get_bdevs", Some(json!(["x", 60000]))).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert!(e.message.contains("must be an object"), "{}", e.message);
        let e = Request::decode("bdev_malloc_create", Some(json!([8, 512]))).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
    }

    #[test]
    fn missing_required_field_is_named() {
        let e = Request::decode("bdev_malloc_create", Some(json!({"num_blocks": 8}))).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert!(e.message.contains("block_size"), "{}", e.message);
        let e = Request::decode("bdev_malloc_create", None).unwrap_err();
        assert!(e.message.contains("num_blocks"), "{}", e.message);
    }

    #[test]
    fn wrong_type_is_named_by_path() {
        let e = Request::decode(
            "bdev_malloc_create",
            Some(json!({"num_blocks": "lots", "block_size": 512})),
        )
        .unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert!(e.message.contains("`num_blocks`"), "{}", e.message);
        let e = Request::decode(
            "nvmf_subsystem_add_ns",
            Some(json!({"nqn": "q", "namespace": {"bdev_name": 7}})),
        )
        .unwrap_err();
        assert!(e.message.contains("namespace.bdev_name"), "{}", e.message);
    }

    #[test]
    fn nested_objects_given_as_arrays_are_refused() {
        let e = Request::decode(
            "nvmf_subsystem_add_ns",
            Some(json!({"nqn": "q", "namespace": ["b"]})),
        )
        .unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert!(e.message.contains("`namespace`"), "{}", e.message);
        assert!(e.message.contains("expected an object"), "{}", e.message);
        let e = Request::decode(
            "nvmf_subsystem_add_listener",
            Some(json!({"nqn": "q", "listen_address": ["VFIOUSER", "/t"]})),
        )
        .unwrap_err();
        assert!(e.message.contains("`listen_address`"), "{}", e.message);
    }

    #[test]
    fn unknown_field_is_rejected_and_named() {
        let e = Request::decode("bdev_malloc_delete", Some(json!({"name": "a", "bogus": 1})))
            .unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert!(e.message.contains("bogus"), "{}", e.message);
    }

    #[test]
    fn create_transport_tolerates_other_transports_options() {
        let r = Request::decode(
            "nvmf_create_transport",
            Some(json!({"trtype": "VFIOUSER", "c2h_success": true, "no_srq": false})),
        )
        .unwrap();
        assert!(matches!(r, Request::NvmfCreateTransport(p) if p.trtype == "VFIOUSER"));
    }

    #[test]
    fn defaults_match_spdk() {
        let Request::BdevMallocCreate(p) = Request::decode(
            "bdev_malloc_create",
            Some(json!({"num_blocks": 8, "block_size": 512})),
        )
        .unwrap() else {
            panic!("wrong variant")
        };
        assert_eq!((p.numa_id, p.md_size, p.name.as_deref()), (-1, 0, None));
        // nvmemu's own parameters: off by default, and not written when off.
        assert_eq!((p.lazy, p.hugepages), (false, false));
        let out = serde_json::to_value(&p).unwrap();
        assert!(out.get("lazy").is_none() && out.get("hugepages").is_none());
        let Request::BdevMallocCreate(p) = Request::decode(
            "bdev_malloc_create",
            Some(json!({"num_blocks": 8, "block_size": 512, "lazy": true})),
        )
        .unwrap() else {
            panic!("wrong variant")
        };
        assert!(p.lazy && !p.hugepages);
        assert_eq!(serde_json::to_value(&p).unwrap()["lazy"], json!(true));
        let Request::NvmfCreateSubsystem(s) =
            Request::decode("nvmf_create_subsystem", Some(json!({"nqn": "q"}))).unwrap()
        else {
            panic!("wrong variant")
        };
        assert_eq!(
            (s.min_cntlid, s.max_cntlid, s.allow_any_host),
            (1, 0xFFEF, false)
        );
    }

    #[test]
    fn parameterless_methods_reject_params() {
        assert!(Request::decode("spdk_get_version", Some(json!({}))).is_ok());
        let e = Request::decode("spdk_get_version", Some(json!({"x": 1}))).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
    }

    #[test]
    fn bad_signal_is_invalid_params() {
        let e =
            Request::decode("spdk_kill_instance", Some(json!({"sig_name": "SIGFOO"}))).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert!(e.message.contains("sig_name"));
    }
}
