// SPDX-License-Identifier: Apache-2.0
//! Replaying a `save_config` document ([`SpdkConfig`]) through a [`Handler`]
//! (`nvmemu serve --json FILE`).
//!
//! A real SPDK configuration also carries methods nvmemu does not implement (e.g.
//! `iobuf_set_options`, `sock_impl_set_options`, `nvmf_set_config`); those are skipped and
//! reported, like SPDK skips subsystems it has no module for.

use serde_json::Value;

use crate::config_format::SpdkConfig;
use crate::dispatch::{Handler, dispatch};
use crate::error::RpcError;
use crate::methods::{METHODS, Request};

/// What [`load_config`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Calls that ran.
    pub applied: usize,
    /// Methods that were skipped because nvmemu does not implement them.
    pub skipped: Vec<String>,
}

/// Why [`load_config`] stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadConfigError {
    /// The document is not in `save_config` format.
    #[error("configuration is not in save_config format")]
    Format(#[source] FormatError),
    /// A recorded call failed.
    #[error("configuration call {method} in subsystem {subsystem} failed")]
    Call {
        /// Subsystem holding the call.
        subsystem: String,
        /// The failing method.
        method: String,
        /// The handler's error.
        #[source]
        error: RpcError,
    },
}

/// A serde error message, kept as text so [`LoadConfigError`] stays `Clone + Eq`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FormatError(pub String);

/// Replays a `save_config` document through `handler`, in order, stopping at the first
/// failing call. Methods nvmemu does not know are skipped and listed in the report.
pub fn load_config(handler: &dyn Handler, doc: &Value) -> Result<LoadReport, LoadConfigError> {
    let cfg: SpdkConfig = serde_json::from_value(doc.clone())
        .map_err(|e| LoadConfigError::Format(FormatError(e.to_string())))?;
    let mut report = LoadReport::default();
    for sub in &cfg.subsystems {
        for entry in &sub.config {
            if !METHODS.contains(&entry.method.as_str()) {
                tracing::debug!(method = %entry.method, "config: skipping unsupported method");
                report.skipped.push(entry.method.clone());
                continue;
            }
            let fail = |error| LoadConfigError::Call {
                subsystem: sub.subsystem.clone(),
                method: entry.method.clone(),
                error,
            };
            let req = Request::decode(&entry.method, entry.params.clone()).map_err(fail)?;
            dispatch(handler, req).map_err(fail)?;
            report.applied += 1;
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);
    impl Handler for Recorder {
        fn handle(&self, req: Request) -> Result<Value, RpcError> {
            if let Request::BdevMallocDelete(_) = req {
                return Err(RpcError::errno(crate::Errno::ENODEV));
            }
            self.0.lock().unwrap().push(req.method().to_owned());
            Ok(Value::Bool(true))
        }
    }

    #[test]
    fn replays_known_methods_in_order_and_skips_others() {
        let doc = json!({"subsystems": [
            {"subsystem": "iobuf", "config": [{"method": "iobuf_set_options", "params": {}}]},
            {"subsystem": "bdev", "config": [
                {"method": "bdev_malloc_create",
                 "params": {"name": "Malloc0", "num_blocks": 8184, "block_size": 512,
                            "physical_block_size": 512, "uuid": "u", "optimal_io_boundary": 0,
                            "md_size": 0, "dif_type": 0, "dif_is_head_of_md": false,
                            "dif_pi_format": 0}},
                {"method": "bdev_wait_for_examine"}]},
            {"subsystem": "scheduler", "config": null},
            {"subsystem": "nvmf", "config": [
                {"method": "nvmf_create_transport", "params": {"trtype": "VFIOUSER",
                                                                "max_queue_depth": 256}},
                {"method": "nvmf_create_subsystem", "params": {"nqn": "q", "allow_any_host": true,
                    "serial_number": "S", "model_number": "M", "max_namespaces": 32,
                    "min_cntlid": 1, "max_cntlid": 65519, "ana_reporting": false}},
                {"method": "nvmf_subsystem_add_listener", "params": {"nqn": "q",
                    "listen_address": {"trtype": "VFIOUSER", "adrfam": "IPv4",
                                       "traddr": "/tmp/vfu", "trsvcid": "0"}}},
                {"method": "nvmf_subsystem_add_ns", "params": {"nqn": "q",
                    "namespace": {"nsid": 1, "bdev_name": "Malloc0", "uuid": "u",
                                  "no_auto_visible": false}}}]}
        ]});
        let h = Recorder::default();
        let report = load_config(&h, &doc).unwrap();
        assert_eq!(report.applied, 6);
        assert_eq!(report.skipped, vec!["iobuf_set_options"]);
        assert_eq!(
            *h.0.lock().unwrap(),
            vec![
                "bdev_malloc_create",
                "bdev_wait_for_examine",
                "nvmf_create_transport",
                "nvmf_create_subsystem",
                "nvmf_subsystem_add_listener",
                "nvmf_subsystem_add_ns"
            ]
        );
    }

    #[test]
    fn failing_call_stops_with_its_error() {
        let doc = json!({"subsystems": [{"subsystem": "bdev", "config": [
            {"method": "bdev_malloc_delete", "params": {"name": "x"}},
            {"method": "bdev_malloc_create", "params": {"num_blocks": 1, "block_size": 512}}]}]});
        let h = Recorder::default();
        let err = load_config(&h, &doc).unwrap_err();
        assert!(
            matches!(err, LoadConfigError::Call { ref method, ref error, .. }
            if method == "bdev_malloc_delete" && error.code == -19)
        );
        assert!(h.0.lock().unwrap().is_empty());
    }

    #[test]
    fn bad_params_and_bad_format_are_errors() {
        let doc = json!({"subsystems": [{"subsystem": "bdev", "config": [
            {"method": "bdev_malloc_create", "params": {"block_size": 512}}]}]});
        let err = load_config(&Recorder::default(), &doc).unwrap_err();
        assert!(matches!(err, LoadConfigError::Call { ref error, .. } if error.code == -32602));
        let err = load_config(&Recorder::default(), &json!({"subsystems": 3})).unwrap_err();
        assert!(matches!(err, LoadConfigError::Format(_)));
    }
}
