// SPDX-License-Identifier: Apache-2.0
//! Parameter and result types, one file per method family, and how a method's raw `params`
//! are decoded. The [`Request`] enum, [`METHODS`] and `Request::decode` come from the
//! method table (`table.rs`).

pub mod bdev;
pub mod ctrl_faults;
pub mod delay;
pub mod error_bdev;
pub mod fault;
pub mod file_bdev;
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
pub use crate::table::{METHODS, Request};

/// Decodes `params` into `T`; absent or `null` decodes as `{}` (so optional-only methods
/// accept no params and required fields report "missing field `x`"). Positional params (an
/// array) are refused as SPDK's decoder does: serde would otherwise fill the struct's
/// fields in declaration order, so `["x", 60000]` would become a name and a timeout.
pub(crate) fn parse<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
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
pub(crate) fn no_params(
    method: &str,
    params: Option<Value>,
    req: Request,
) -> Result<Request, RpcError> {
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
                | "bdev_error_delete"
                | "bdev_aio_delete"
                | "bdev_uring_delete"
                | "nvmemu_bdev_set_model"
                | "nvmemu_bdev_inject_fault"
                | "nvmemu_bdev_clear_faults" => {
                    json!({"name": "x"})
                }
                "bdev_enable_histogram" => json!({"name": "x", "enable": true}),
                "bdev_delay_create" => json!({"base_bdev_name": "b", "name": "d",
                    "avg_read_latency": 1, "p99_read_latency": 2,
                    "avg_write_latency": 1, "p99_write_latency": 2}),
                "bdev_error_create" => json!({"base_name": "b"}),
                "bdev_aio_create" | "bdev_uring_create" => json!({"filename": "/f", "name": "a"}),
                "bdev_error_inject_error" => json!({"name": "EE_b", "io_type": "all",
                    "error_type": "failure"}),
                "bdev_delay_update_latency" => json!({"delay_bdev_name": "d",
                    "latency_type": "avg_read", "latency_us": 5}),
                "bdev_null_create" => json!({"name": "n", "num_blocks": 8, "block_size": 512}),
                "nvmf_create_transport" => json!({"trtype": "VFIOUSER"}),
                "nvmf_create_subsystem" | "nvmf_delete_subsystem" => json!({"nqn": "q"}),
                "nvmf_subsystem_add_ns" => json!({"nqn": "q", "namespace": {"bdev_name": "b"}}),
                "nvmf_subsystem_remove_ns" | "nvmemu_namespace_inject_not_ready" => {
                    json!({"nqn": "q", "nsid": 1})
                }
                "nvmemu_controller_inject_fatal" => json!({"nqn": "q"}),
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
