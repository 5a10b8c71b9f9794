// SPDX-License-Identifier: Apache-2.0
//! Latency methods: SPDK's `bdev_enable_histogram` and `bdev_get_histogram`
//! (`lib/bdev/bdev_rpc.c`; the histogram is SPDK's `histogram_data.h` bucket array of
//! little-endian u64 counts in TSC ticks, base64-encoded), and nvmemu's own
//! `nvmemu_get_latency_breakdown` (the target's per-layer view per controller, queue and
//! namespace).

use serde::{Deserialize, Serialize};

use crate::error::RpcError;

/// Largest `granularity` accepted (buckets per power of two: `1 << granularity`).
pub const MAX_GRANULARITY: u32 = 12;

/// `bdev_enable_histogram` parameters. Result: `true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevEnableHistogramParams {
    /// Bdev name.
    pub name: String,
    /// Turn the histogram on (a fresh one unless already on) or off (dropping it).
    pub enable: bool,
    /// SPDK: only this I/O type. nvmemu times every command; accepted only when absent.
    #[serde(default)]
    pub opc: Option<String>,
    /// Buckets per power of two as a power of two (SPDK's default: 7).
    #[serde(default)]
    pub granularity: Option<u32>,
    /// SPDK: lower end of the histogram. Not supported (the whole range is kept).
    #[serde(default)]
    pub min_nsec: Option<u64>,
    /// SPDK: upper end of the histogram. Not supported.
    #[serde(default)]
    pub max_nsec: Option<u64>,
}

impl BdevEnableHistogramParams {
    /// Reject what nvmemu does not do, naming the parameter.
    pub fn validate(&self) -> Result<(), RpcError> {
        let unsupported = |p: &str| {
            Err(RpcError::invalid_params(format!(
                "Invalid parameter `{p}`: not supported by nvmemu (histograms cover every I/O type and the whole range)"
            )))
        };
        if self.opc.is_some() {
            return unsupported("opc");
        }
        if self.min_nsec.is_some() {
            return unsupported("min_nsec");
        }
        if self.max_nsec.is_some() {
            return unsupported("max_nsec");
        }
        match self.granularity {
            Some(g) if !(1..=MAX_GRANULARITY).contains(&g) => Err(RpcError::invalid_params(
                format!("Invalid parameter `granularity`: {g} is outside 1..={MAX_GRANULARITY}"),
            )),
            _ => Ok(()),
        }
    }
}

/// `bdev_get_histogram` parameters. Result: [`BdevHistogram`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BdevGetHistogramParams {
    /// Bdev name.
    pub name: String,
}

/// The `bdev_get_histogram` result: the target total (doorbell seen to interrupt) of every
/// command on the bdev's namespaces since it was enabled (empty buckets while it is not,
/// as SPDK answers). Keys as SPDK v25.05's, plus `bucket_shift` for older clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BdevHistogram {
    /// Base64 of the bucket counts, each a little-endian u64, range 0 first.
    pub histogram: String,
    /// Buckets per range as a power of two (SPDK v25: `granularity`).
    pub granularity: u32,
    /// First range in `histogram` (always 0: every range is sent).
    pub min_range: u32,
    /// Last range in `histogram` (`64 - granularity`).
    pub max_range: u32,
    /// The same as `granularity`, under the name older SPDK releases used.
    pub bucket_shift: u32,
    /// Ticks per second of the values.
    pub tsc_rate: u64,
}

/// Percentiles and totals of one layer, in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LayerStats {
    /// Layer name: `queued`, `backend`, `complete`, `interrupt`, `total`, `sq_wait_bound`.
    pub layer: String,
    /// Commands recorded.
    pub count: u64,
    /// Sum over the commands (exact, from ticks).
    pub sum_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median (upper end of its bucket).
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

/// One namespace's layers (on one queue, or on the whole controller).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NsLatency {
    /// NSID.
    pub nsid: u32,
    /// The bdev behind it (empty when detached since).
    pub bdev: String,
    /// Per layer.
    pub layers: Vec<LayerStats>,
}

/// One I/O queue's view.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueLatency {
    /// Submission queue id.
    pub qid: u16,
    /// Commands completed on it (always counted, timing on or off; 0 once it is deleted).
    pub commands: u64,
    /// Doorbell looks that found work (timing on).
    pub depth_looks: u64,
    /// Commands queued, summed over those looks.
    pub depth_sum: u64,
    /// Mean commands queued at those looks: the queue depth the target saw.
    pub depth_mean: f64,
    /// Per layer, all its timed namespaces together.
    pub layers: Vec<LayerStats>,
    /// Per namespace.
    pub namespaces: Vec<NsLatency>,
}

/// One controller's view.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ControllerLatency {
    /// Its transport, as SPDK spells it: `VFIOUSER` or `TCP` (absent from older
    /// nvmemu's answers, which had only vfio-user controllers).
    #[serde(default = "vfio_user")]
    pub trtype: String,
    /// vfio-user: its socket directory (the listener's `traddr`). TCP: the host's address
    /// on the admin queue's connection (`IP:port`).
    pub traddr: String,
    /// TCP: its controller ID (a vfio-user controller's is in `nvmf_subsystem_get_controllers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cntlid: Option<u16>,
    /// TCP: its subsystem's NQN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnqn: Option<String>,
    /// TCP: the host NQN its Connect gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostnqn: Option<String>,
    /// Whether any of its namespaces is timed.
    pub timing: bool,
    /// I/O commands completed.
    pub io_commands: u64,
    /// Bytes read by the host.
    pub bytes_read: u64,
    /// Bytes written by the host.
    pub bytes_written: u64,
    /// Commands the timing buffer had no room for (expected 0).
    pub untimed: u64,
    /// Per layer, every timed command of the controller.
    pub layers: Vec<LayerStats>,
    /// Per I/O queue.
    pub queues: Vec<QueueLatency>,
    /// Per namespace, all queues together.
    pub namespaces: Vec<NsLatency>,
}

fn vfio_user() -> String {
    "VFIOUSER".to_owned()
}

/// One poller's load: a vfio-user poller or an NVMe/TCP poll group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PollerLoad {
    /// Its thread's name in `thread_get_stats`.
    #[serde(default)]
    pub name: String,
    /// The transport it serves: `VFIOUSER` or `TCP`.
    #[serde(default = "vfio_user")]
    pub trtype: String,
    /// The CPU it is pinned to, if any.
    pub cpu: Option<usize>,
    /// Commands completed.
    pub commands: u64,
    /// Nanoseconds in passes that found work (or were not idle long enough to tell).
    pub busy_ns: u64,
    /// Nanoseconds since it started.
    pub elapsed_ns: u64,
}

/// The `nvmemu_get_latency_breakdown` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyBreakdown {
    /// Ticks per second of the histograms (the values here are in ns already).
    pub tsc_rate: u64,
    /// Per vfio-user poller, then per NVMe/TCP poll group.
    pub pollers: Vec<PollerLoad>,
    /// Per controller.
    pub controllers: Vec<ControllerLatency>,
}

#[cfg(test)]
mod tests {
    use crate::Request;
    use crate::error::INVALID_PARAMS;
    use serde_json::json;

    #[test]
    fn enable_takes_spdk_params_and_names_what_is_unsupported() {
        let r = Request::decode(
            "bdev_enable_histogram",
            Some(json!({"name": "Malloc0", "enable": true, "granularity": 5})),
        )
        .unwrap();
        assert!(matches!(r, Request::BdevEnableHistogram(p) if p.granularity == Some(5)));
        for (params, word) in [
            (json!({"name": "M", "enable": true, "opc": "read"}), "opc"),
            (
                json!({"name": "M", "enable": true, "min_nsec": 1}),
                "min_nsec",
            ),
            (
                json!({"name": "M", "enable": true, "granularity": 0}),
                "granularity",
            ),
            (
                json!({"name": "M", "enable": true, "granularity": 40}),
                "granularity",
            ),
            (json!({"name": "M"}), "enable"),
            (json!({"enable": true}), "name"),
            (json!({"name": "M", "enable": "yes"}), "enable"),
        ] {
            let e = Request::decode("bdev_enable_histogram", Some(params)).unwrap_err();
            assert_eq!(e.code, INVALID_PARAMS);
            assert!(e.message.contains(word), "{}", e.message);
        }
        let e = Request::decode("bdev_get_histogram", Some(json!({}))).unwrap_err();
        assert!(e.message.contains("name"), "{}", e.message);
        assert!(Request::decode("nvmemu_get_latency_breakdown", None).is_ok());
        assert!(Request::decode("nvmemu_get_latency_breakdown", Some(json!({"x": 1}))).is_err());
    }
}
