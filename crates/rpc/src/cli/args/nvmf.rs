// SPDX-License-Identifier: Apache-2.0
//! Arguments of the nvmf methods (SPDK `python/spdk/cli/nvmf.py`) and the params each sends.
//! The subsystem, namespace and listener methods send a flag only when it is set (as rpc.py's
//! `nvmf_create_subsystem` does), so a target older than the flag still accepts the call.

use clap::{ArgAction, Args};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::params::{ArgError, CliParams, is_false, nest, serialized};

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct CreateTransportArgs {
    #[arg(short = 't', long = "trtype")]
    pub trtype: String,
    #[arg(short = 'g', long = "tgt-name")]
    pub tgt_name: Option<String>,
    #[arg(short = 'q', long = "max-queue-depth")]
    pub max_queue_depth: Option<i64>,
    #[arg(short = 'm', long = "max-io-qpairs-per-ctrlr")]
    pub max_io_qpairs_per_ctrlr: Option<i64>,
    #[arg(short = 'c', long = "in-capsule-data-size")]
    pub in_capsule_data_size: Option<i64>,
    #[arg(short = 'i', long = "max-io-size")]
    pub max_io_size: Option<i64>,
    #[arg(short = 'u', long = "io-unit-size")]
    pub io_unit_size: Option<i64>,
    #[arg(short = 'a', long = "max-aq-depth")]
    pub max_aq_depth: Option<i64>,
    #[arg(short = 'n', long = "num-shared-buffers")]
    pub num_shared_buffers: Option<i64>,
    #[arg(short = 'b', long = "buf-cache-size")]
    pub buf_cache_size: Option<i64>,
    #[arg(short = 'z', long = "zcopy", action = ArgAction::SetTrue)]
    pub zcopy: bool,
    #[arg(short = 'd', long = "num-cqe")]
    pub num_cqe: Option<i64>,
    #[arg(short = 's', long = "max-srq-depth")]
    pub max_srq_depth: Option<i64>,
    #[arg(short = 'r', long = "no-srq", action = ArgAction::SetTrue)]
    pub no_srq: bool,
    #[arg(short = 'o', long = "c2h-success", action = ArgAction::SetFalse)]
    pub c2h_success: bool,
    #[arg(short = 'f', long = "dif-insert-or-strip", action = ArgAction::SetTrue)]
    pub dif_insert_or_strip: bool,
    #[arg(short = 'y', long = "sock-priority")]
    pub sock_priority: Option<i64>,
    #[arg(short = 'l', long = "acceptor-backlog")]
    pub acceptor_backlog: Option<i64>,
    #[arg(short = 'x', long = "abort-timeout-sec")]
    pub abort_timeout_sec: Option<i64>,
    #[arg(short = 'w', long = "no-wr-batching", action = ArgAction::SetTrue)]
    pub no_wr_batching: bool,
    #[arg(short = 'e', long = "control-msg-num")]
    pub control_msg_num: Option<i64>,
    #[arg(short = 'M', long = "disable-mappable-bar0", action = ArgAction::SetTrue)]
    pub disable_mappable_bar0: bool,
    #[arg(short = 'I', long = "disable-adaptive-irq", action = ArgAction::SetTrue)]
    pub disable_adaptive_irq: bool,
    #[arg(short = 'S', long = "disable-shadow-doorbells", action = ArgAction::SetTrue)]
    pub disable_shadow_doorbells: bool,
    #[arg(long = "acceptor-poll-rate")]
    pub acceptor_poll_rate: Option<i64>,
    #[arg(long = "ack-timeout")]
    pub ack_timeout: Option<i64>,
    #[arg(long = "data-wr-pool-size")]
    pub data_wr_pool_size: Option<i64>,
    #[arg(long = "disable-command-passthru", action = ArgAction::SetTrue)]
    pub disable_command_passthru: bool,
    #[arg(long = "kas")]
    pub kas: Option<i64>,
    #[arg(long = "min-kato")]
    pub min_kato: Option<i64>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct GetTransportsArgs {
    #[arg(long = "trtype")]
    pub trtype: Option<String>,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct CreateSubsystemArgs {
    /// Subsystem NQN (ASCII).
    pub nqn: String,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
    #[arg(short = 's', long = "serial-number")]
    pub serial_number: Option<String>,
    #[arg(short = 'd', long = "model-number")]
    pub model_number: Option<String>,
    #[arg(short = 'a', long = "allow-any-host", action = ArgAction::SetTrue)]
    #[serde(skip_serializing_if = "is_false")]
    pub allow_any_host: bool,
    #[arg(short = 'm', long = "max-namespaces")]
    pub max_namespaces: Option<i64>,
    #[arg(short = 'r', long = "ana-reporting", action = ArgAction::SetTrue)]
    #[serde(skip_serializing_if = "is_false")]
    pub ana_reporting: bool,
    #[arg(short = 'i', long = "min_cntlid")]
    pub min_cntlid: Option<i64>,
    #[arg(short = 'I', long = "max_cntlid")]
    pub max_cntlid: Option<i64>,
    #[arg(long = "max-discard-size")]
    #[serde(rename = "max_discard_size_kib")]
    pub max_discard_size: Option<i64>,
    #[arg(long = "max-write-zeroes-size")]
    #[serde(rename = "max_write_zeroes_size_kib")]
    pub max_write_zeroes_size: Option<i64>,
    #[arg(short = 'p', long = "passthrough", action = ArgAction::SetTrue)]
    #[serde(skip_serializing_if = "is_false")]
    pub passthrough: bool,
    #[arg(short = 'n', long = "enable_nssr", action = ArgAction::SetTrue)]
    #[serde(skip_serializing_if = "is_false")]
    pub enable_nssr: bool,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct DeleteSubsystemArgs {
    /// Subsystem NQN to delete.
    #[serde(rename = "nqn")]
    pub subsystem_nqn: String,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct GetSubsystemsArgs {
    /// Subsystem NQN (optional).
    pub nqn: Option<String>,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct AddNsArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
    // Sent as the nested `namespace` object; its `bdev_name` is the second positional.
    #[command(flatten)]
    pub namespace: NamespaceArgs,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)] // A doc comment here would become the method's help text.
pub struct NamespaceArgs {
    /// The bdev that will back this namespace.
    pub bdev_name: String,
    #[arg(short = 'p', long = "ptpl-file")]
    pub ptpl_file: Option<String>,
    #[arg(short = 'n', long = "nsid")]
    pub nsid: Option<i64>,
    #[arg(short = 'g', long = "nguid")]
    pub nguid: Option<String>,
    #[arg(short = 'e', long = "eui64")]
    pub eui64: Option<String>,
    #[arg(short = 'u', long = "uuid")]
    pub uuid: Option<String>,
    #[arg(short = 'a', long = "anagrpid")]
    pub anagrpid: Option<i64>,
    #[arg(short = 'i', long = "no-auto-visible", action = ArgAction::SetTrue)]
    #[serde(skip_serializing_if = "is_false")]
    pub no_auto_visible: bool,
    #[arg(short = 'N', long = "hide-metadata", action = ArgAction::SetTrue)]
    #[serde(skip_serializing_if = "is_false")]
    pub hide_metadata: bool,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct RemoveNsArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    /// The NSID to remove.
    pub nsid: i64,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct AddListenerArgs {
    /// NVMe-oF subsystem NQN ('discovery' is the discovery NQN).
    #[serde(serialize_with = "listener_nqn")]
    pub nqn: String,
    #[arg(short = 't', long = "trtype")]
    pub trtype: String,
    #[arg(short = 'a', long = "traddr")]
    pub traddr: String,
    #[arg(short = 'p', long = "tgt-name")]
    pub tgt_name: Option<String>,
    #[arg(short = 'f', long = "adrfam")]
    pub adrfam: Option<String>,
    #[arg(short = 's', long = "trsvcid")]
    pub trsvcid: Option<String>,
    #[arg(short = 'k', long = "secure-channel", action = ArgAction::SetTrue)]
    #[serde(skip_serializing_if = "is_false")]
    pub secure_channel: bool,
    #[arg(short = 'n', long = "ana-state")]
    pub ana_state: Option<String>,
    #[arg(short = 'S', long = "sock-impl")]
    pub sock_impl: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct RemoveListenerArgs {
    /// NVMe-oF subsystem NQN ('discovery' is the discovery NQN).
    #[serde(serialize_with = "listener_nqn")]
    pub nqn: String,
    #[arg(short = 't', long = "trtype")]
    pub trtype: String,
    #[arg(short = 'a', long = "traddr")]
    pub traddr: String,
    #[arg(short = 'p', long = "tgt-name")]
    pub tgt_name: Option<String>,
    #[arg(short = 'f', long = "adrfam")]
    pub adrfam: Option<String>,
    #[arg(short = 's', long = "trsvcid")]
    pub trsvcid: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct TgtNameArg {
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

const DISCOVERY_NQN: &str = "nqn.2014-08.org.nvmexpress.discovery";

/// A listener's subsystem NQN as rpc.py sends it: `discovery` is the discovery NQN.
fn listener_nqn<S: Serializer>(nqn: &impl AsRef<str>, s: S) -> Result<S::Ok, S::Error> {
    let nqn = nqn.as_ref();
    s.serialize_str(if nqn == "discovery" {
        DISCOVERY_NQN
    } else {
        nqn
    })
}

/// The listener options rpc.py sends inside `listen_address`.
const LISTEN_ADDRESS: [&str; 4] = ["trtype", "traddr", "adrfam", "trsvcid"];

impl CliParams for AddListenerArgs {
    fn params(&self) -> Result<Value, ArgError> {
        Ok(nest(serialized(self)?, "listen_address", &LISTEN_ADDRESS))
    }
}

impl CliParams for RemoveListenerArgs {
    fn params(&self) -> Result<Value, ArgError> {
        Ok(nest(serialized(self)?, "listen_address", &LISTEN_ADDRESS))
    }
}

impl CliParams for CreateTransportArgs {}
impl CliParams for GetTransportsArgs {}
impl CliParams for CreateSubsystemArgs {}
impl CliParams for DeleteSubsystemArgs {}
impl CliParams for GetSubsystemsArgs {}
impl CliParams for AddNsArgs {}
impl CliParams for RemoveNsArgs {}
impl CliParams for TgtNameArg {}
