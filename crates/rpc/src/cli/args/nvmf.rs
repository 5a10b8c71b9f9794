// SPDX-License-Identifier: Apache-2.0
//! Arguments of the nvmf methods (SPDK `python/spdk/cli/nvmf.py`) and the params each sends.

use clap::{ArgAction, Args};
use serde_json::Value;

use super::params::P;

#[derive(Debug, Clone, Args)]
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

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct GetTransportsArgs {
    #[arg(long = "trtype")]
    pub trtype: Option<String>,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args)]
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
    pub allow_any_host: bool,
    #[arg(short = 'm', long = "max-namespaces")]
    pub max_namespaces: Option<i64>,
    #[arg(short = 'r', long = "ana-reporting", action = ArgAction::SetTrue)]
    pub ana_reporting: bool,
    #[arg(short = 'i', long = "min_cntlid")]
    pub min_cntlid: Option<i64>,
    #[arg(short = 'I', long = "max_cntlid")]
    pub max_cntlid: Option<i64>,
    #[arg(long = "max-discard-size")]
    pub max_discard_size: Option<i64>,
    #[arg(long = "max-write-zeroes-size")]
    pub max_write_zeroes_size: Option<i64>,
    #[arg(short = 'p', long = "passthrough", action = ArgAction::SetTrue)]
    pub passthrough: bool,
    #[arg(short = 'n', long = "enable_nssr", action = ArgAction::SetTrue)]
    pub enable_nssr: bool,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct DeleteSubsystemArgs {
    /// Subsystem NQN to delete.
    pub subsystem_nqn: String,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct GetSubsystemsArgs {
    /// Subsystem NQN (optional).
    pub nqn: Option<String>,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct AddNsArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    /// The bdev that will back this namespace.
    pub bdev_name: String,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
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
    pub no_auto_visible: bool,
    #[arg(short = 'N', long = "hide-metadata", action = ArgAction::SetTrue)]
    pub hide_metadata: bool,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct RemoveNsArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    /// The NSID to remove.
    pub nsid: i64,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct AddListenerArgs {
    /// NVMe-oF subsystem NQN ('discovery' is the discovery NQN).
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
    pub secure_channel: bool,
    #[arg(short = 'n', long = "ana-state")]
    pub ana_state: Option<String>,
    #[arg(short = 'S', long = "sock-impl")]
    pub sock_impl: Option<String>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct RemoveListenerArgs {
    /// NVMe-oF subsystem NQN ('discovery' is the discovery NQN).
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

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct TgtNameArg {
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

const DISCOVERY_NQN: &str = "nqn.2014-08.org.nvmexpress.discovery";

fn listener_nqn(nqn: &str) -> String {
    if nqn == "discovery" {
        DISCOVERY_NQN.to_owned()
    } else {
        nqn.to_owned()
    }
}

fn listen_address(
    trtype: &str,
    traddr: &str,
    adrfam: &Option<String>,
    trsvcid: &Option<String>,
) -> Value {
    P::default()
        .set("trtype", trtype)
        .set("traddr", traddr)
        .opt("adrfam", adrfam.clone())
        .opt("trsvcid", trsvcid.clone())
        .done()
}

impl CreateTransportArgs {
    /// The params rpc.py sends for `nvmf_create_transport`.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("trtype", self.trtype.as_str())
            .opt("tgt_name", self.tgt_name.clone())
            .opt("max_queue_depth", self.max_queue_depth)
            .opt("max_io_qpairs_per_ctrlr", self.max_io_qpairs_per_ctrlr)
            .opt("in_capsule_data_size", self.in_capsule_data_size)
            .opt("max_io_size", self.max_io_size)
            .opt("io_unit_size", self.io_unit_size)
            .opt("max_aq_depth", self.max_aq_depth)
            .opt("num_shared_buffers", self.num_shared_buffers)
            .opt("buf_cache_size", self.buf_cache_size)
            .set("zcopy", self.zcopy)
            .opt("num_cqe", self.num_cqe)
            .opt("max_srq_depth", self.max_srq_depth)
            .set("no_srq", self.no_srq)
            .set("c2h_success", self.c2h_success)
            .set("dif_insert_or_strip", self.dif_insert_or_strip)
            .opt("sock_priority", self.sock_priority)
            .opt("acceptor_backlog", self.acceptor_backlog)
            .opt("abort_timeout_sec", self.abort_timeout_sec)
            .set("no_wr_batching", self.no_wr_batching)
            .opt("control_msg_num", self.control_msg_num)
            .set("disable_mappable_bar0", self.disable_mappable_bar0)
            .set("disable_adaptive_irq", self.disable_adaptive_irq)
            .set("disable_shadow_doorbells", self.disable_shadow_doorbells)
            .opt("acceptor_poll_rate", self.acceptor_poll_rate)
            .opt("ack_timeout", self.ack_timeout)
            .opt("data_wr_pool_size", self.data_wr_pool_size)
            .set("disable_command_passthru", self.disable_command_passthru)
            .opt("kas", self.kas)
            .opt("min_kato", self.min_kato)
            .done()
    }
}

impl GetTransportsArgs {
    /// The params rpc.py sends for `nvmf_get_transports`.
    pub(super) fn params(&self) -> Value {
        P::default()
            .opt("trtype", self.trtype.clone())
            .opt("tgt_name", self.tgt_name.clone())
            .done()
    }
}

impl CreateSubsystemArgs {
    /// The params rpc.py sends for `nvmf_create_subsystem`: flags only when set.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("nqn", self.nqn.as_str())
            .opt("tgt_name", self.tgt_name.clone())
            .opt("serial_number", self.serial_number.clone())
            .opt("model_number", self.model_number.clone())
            .flag("allow_any_host", self.allow_any_host)
            .opt("max_namespaces", self.max_namespaces)
            .flag("ana_reporting", self.ana_reporting)
            .opt("min_cntlid", self.min_cntlid)
            .opt("max_cntlid", self.max_cntlid)
            .opt("max_discard_size_kib", self.max_discard_size)
            .opt("max_write_zeroes_size_kib", self.max_write_zeroes_size)
            .flag("passthrough", self.passthrough)
            .flag("enable_nssr", self.enable_nssr)
            .done()
    }
}

impl DeleteSubsystemArgs {
    /// The params rpc.py sends for `nvmf_delete_subsystem`.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("nqn", self.subsystem_nqn.as_str())
            .opt("tgt_name", self.tgt_name.clone())
            .done()
    }
}

impl GetSubsystemsArgs {
    /// The params rpc.py sends for `nvmf_get_subsystems`.
    pub(super) fn params(&self) -> Value {
        P::default()
            .opt("nqn", self.nqn.clone())
            .opt("tgt_name", self.tgt_name.clone())
            .done()
    }
}

impl AddNsArgs {
    /// The params for `nvmf_subsystem_add_ns`, as rpc.py sends them except that unset flags
    /// are left out (rpc.py sends them as `false`, which a target older than the option refuses).
    pub(super) fn params(&self) -> Value {
        let ns = P::default()
            .set("bdev_name", self.bdev_name.as_str())
            .opt("ptpl_file", self.ptpl_file.clone())
            .opt("nsid", self.nsid)
            .opt("nguid", self.nguid.clone())
            .opt("eui64", self.eui64.clone())
            .opt("uuid", self.uuid.clone())
            .opt("anagrpid", self.anagrpid)
            .flag("no_auto_visible", self.no_auto_visible)
            .flag("hide_metadata", self.hide_metadata)
            .done();

        P::default()
            .set("nqn", self.nqn.as_str())
            .opt("tgt_name", self.tgt_name.clone())
            .set("namespace", ns)
            .done()
    }
}

impl RemoveNsArgs {
    /// The params rpc.py sends for `nvmf_subsystem_remove_ns`.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("nqn", self.nqn.as_str())
            .set("nsid", self.nsid)
            .opt("tgt_name", self.tgt_name.clone())
            .done()
    }
}

impl AddListenerArgs {
    /// The params for `nvmf_subsystem_add_listener`, as rpc.py sends them except that an unset
    /// `secure_channel` is left out.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("nqn", listener_nqn(&self.nqn))
            .opt("tgt_name", self.tgt_name.clone())
            .flag("secure_channel", self.secure_channel)
            .opt("ana_state", self.ana_state.clone())
            .opt("sock_impl", self.sock_impl.clone())
            .set(
                "listen_address",
                listen_address(&self.trtype, &self.traddr, &self.adrfam, &self.trsvcid),
            )
            .done()
    }
}

impl RemoveListenerArgs {
    /// The params rpc.py sends for `nvmf_subsystem_remove_listener`.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("nqn", listener_nqn(&self.nqn))
            .opt("tgt_name", self.tgt_name.clone())
            .set(
                "listen_address",
                listen_address(&self.trtype, &self.traddr, &self.adrfam, &self.trsvcid),
            )
            .done()
    }
}

impl TgtNameArg {
    /// The params rpc.py sends for `nvmf_get_stats`.
    pub(super) fn params(&self) -> Value {
        P::default().opt("tgt_name", self.tgt_name.clone()).done()
    }
}
