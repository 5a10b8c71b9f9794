// SPDX-License-Identifier: Apache-2.0
//! rpc.py's argument syntax for the supported methods (SPDK `python/spdk/cli/{app,misc,
//! bdev,nvmf}.py`) and the exact params each sends.
//!
//! rpc.py passes every argparse value through `remove_null`: options not given are omitted,
//! but `store_true` flags are always sent (as `false` when absent). That is mirrored here.

use clap::{ArgAction, Args, Subcommand};
use serde_json::{Map, Value};

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

/// A command line rpc.py would reject after parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArgError(pub String);

/// Builds a params object the way `remove_null(kwargs)` does.
#[derive(Default)]
struct P(Map<String, Value>);

impl P {
    fn set(mut self, k: &str, v: impl Into<Value>) -> Self {
        self.0.insert(k.to_owned(), v.into());
        self
    }
    fn opt<T: Into<Value>>(self, k: &str, v: Option<T>) -> Self {
        match v {
            Some(v) => self.set(k, v),
            None => self,
        }
    }
    fn done(self) -> Value {
        Value::Object(self.0)
    }
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
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct RpcGetMethodsArgs {
    /// Get list of RPC methods only callable in the current state.
    #[arg(short = 'c', long = "current", action = ArgAction::SetTrue)]
    pub current: bool,
    /// Include RPC aliases.
    #[arg(short = 'i', long = "include-aliases", action = ArgAction::SetTrue)]
    pub include_aliases: bool,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct KillArgs {
    /// Signal to send to the server.
    pub sig_name: String,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct SaveConfigArgs {
    /// Indent level; a value below 0 means compact.
    #[arg(
        short = 'i',
        long = "indent",
        default_value_t = 2,
        allow_negative_numbers = true
    )]
    pub indent: i64,
    /// Comma-separated list of subsystems (and their dependencies) to save.
    #[arg(short = 's', long = "subsystems")]
    pub subsystems: Option<String>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct MallocCreateArgs {
    /// Size of malloc bdev in MB (float > 0).
    pub total_size: f64,
    /// Data block size for this bdev.
    pub block_size: i64,
    #[arg(short = 'b', long = "name")]
    pub name: Option<String>,
    #[arg(short = 'u', long = "uuid")]
    pub uuid: Option<String>,
    #[arg(short = 'p', long = "physical-block-size")]
    pub physical_block_size: Option<i64>,
    #[arg(short = 'o', long = "optimal-io-boundary")]
    pub optimal_io_boundary: Option<i64>,
    #[arg(short = 'm', long = "md-size")]
    pub md_size: Option<i64>,
    #[arg(short = 'i', long = "md-interleave", action = ArgAction::SetTrue)]
    pub md_interleave: bool,
    #[arg(short = 't', long = "dif-type", value_parser = clap::value_parser!(i64).range(0..=3))]
    pub dif_type: Option<i64>,
    #[arg(short = 'd', long = "dif-is-head-of-md", action = ArgAction::SetTrue)]
    pub dif_is_head_of_md: bool,
    #[arg(short = 'f', long = "dif-pi-format", value_parser = clap::value_parser!(i64).range(0..=2))]
    pub dif_pi_format: Option<i64>,
    #[arg(short = 'n', long = "numa-id", allow_negative_numbers = true)]
    pub numa_id: Option<i64>,
    /// nvmemu only: sparse memory, committed when first written (unwritten blocks read
    /// from the kernel's zero page).
    #[arg(long = "lazy", action = ArgAction::SetTrue)]
    pub lazy: bool,
    /// nvmemu only: back the memory with hugetlbfs pool pages (vm.nr_hugepages).
    #[arg(long = "hugepages", action = ArgAction::SetTrue)]
    pub hugepages: bool,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct NameArg {
    /// Bdev name.
    pub name: String,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct NullCreateArgs {
    /// Block device name.
    pub name: String,
    /// Size of null bdev in MB (int > 0).
    pub total_size: i64,
    /// Data block size for this bdev.
    pub block_size: i64,
    #[arg(short = 'u', long = "uuid")]
    pub uuid: Option<String>,
    #[arg(short = 'p', long = "physical-block-size")]
    pub physical_block_size: Option<i64>,
    #[arg(short = 'm', long = "md-size")]
    pub md_size: Option<i64>,
    #[arg(short = 't', long = "dif-type", value_parser = clap::value_parser!(i64).range(0..=3))]
    pub dif_type: Option<i64>,
    #[arg(short = 'd', long = "dif-is-head-of-md", action = ArgAction::SetTrue)]
    pub dif_is_head_of_md: bool,
    #[arg(short = 'f', long = "dif-pi-format", value_parser = clap::value_parser!(i64).range(0..=2))]
    pub dif_pi_format: Option<i64>,
    #[arg(short = 'a', long = "preferred-write-alignment")]
    pub preferred_write_alignment: Option<i64>,
    #[arg(short = 'g', long = "preferred-write-granularity")]
    pub preferred_write_granularity: Option<i64>,
    #[arg(short = 's', long = "optimal-write-size")]
    pub optimal_write_size: Option<i64>,
    #[arg(short = 'c', long = "preferred-unmap-alignment")]
    pub preferred_unmap_alignment: Option<i64>,
    #[arg(short = 'r', long = "preferred-unmap-granularity")]
    pub preferred_unmap_granularity: Option<i64>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct GetBdevsArgs {
    #[arg(short = 'b', long = "name")]
    pub name: Option<String>,
    /// Time in ms to wait for the bdev to appear.
    #[arg(short = 't', long = "timeout-ms")]
    pub timeout: Option<i64>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct IostatArgs {
    #[arg(short = 'c', long = "per-channel", action = ArgAction::SetTrue)]
    pub per_channel: bool,
    #[arg(long = "reset-mode", value_parser = ["all", "maxmin", "none"])]
    pub reset_mode: Option<String>,
    #[arg(short = 'b', long = "name", conflicts_with = "names")]
    pub name: Option<String>,
    /// Comma-separated bdev names.
    #[arg(long = "names")]
    pub names: Option<String>,
}

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

/// `(total_MiB * 1 MiB) // block_size` as Python computes it for a float size.
fn malloc_blocks(total_mib: f64, block_size: i64) -> Result<u64, ArgError> {
    if block_size <= 0 {
        return Err(ArgError("block_size must be > 0".into()));
    }
    #[allow(clippy::cast_precision_loss)] // Block sizes are far below 2^52.
    let bs = block_size as f64;
    let bytes = total_mib * 1024.0 * 1024.0;
    let blocks = (bytes - bytes % bs) / bs;
    if !blocks.is_finite() || !(0.0..18_446_744_073_709_551_615.0).contains(&blocks) {
        return Err(ArgError(format!("total_size {total_mib} is out of range")));
    }
    // In range and integral (checked above), so the conversion is exact.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(blocks as u64)
}

/// `(total_MiB * 1 MiB) // block_size` for an integer size.
fn null_blocks(total_mib: i64, block_size: i64) -> Result<i64, ArgError> {
    if block_size <= 0 {
        return Err(ArgError("block_size must be > 0".into()));
    }
    total_mib
        .checked_mul(1024 * 1024)
        .map(|b| b.div_euclid(block_size))
        .ok_or_else(|| ArgError(format!("total_size {total_mib} is out of range")))
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
            MethodArgs::BdevMallocCreate(a) => c(
                "bdev_malloc_create",
                P::default()
                    .set("num_blocks", malloc_blocks(a.total_size, a.block_size)?)
                    .set("block_size", a.block_size)
                    .opt("physical_block_size", a.physical_block_size)
                    .opt("name", a.name.clone())
                    .opt("uuid", a.uuid.clone())
                    .opt("optimal_io_boundary", a.optimal_io_boundary)
                    .opt("md_size", a.md_size)
                    .set("md_interleave", a.md_interleave)
                    .opt("dif_type", a.dif_type)
                    .set("dif_is_head_of_md", a.dif_is_head_of_md)
                    .opt("dif_pi_format", a.dif_pi_format)
                    .opt("numa_id", a.numa_id)
                    .opt("lazy", a.lazy.then_some(true))
                    .opt("hugepages", a.hugepages.then_some(true))
                    .done(),
                Json,
            ),
            MethodArgs::BdevMallocDelete(a) => c(
                "bdev_malloc_delete",
                P::default().set("name", a.name.as_str()).done(),
                Nothing,
            ),
            MethodArgs::BdevNullCreate(a) => {
                if a.dif_type.unwrap_or(0) != 0 && a.md_size.unwrap_or(0) == 0 {
                    return Err(ArgError(
                        "ERROR: --md-size must be > 0 when --dif-type is > 0".into(),
                    ));
                }
                c(
                    "bdev_null_create",
                    P::default()
                        .set("num_blocks", null_blocks(a.total_size, a.block_size)?)
                        .set("block_size", a.block_size)
                        .opt("physical_block_size", a.physical_block_size)
                        .set("name", a.name.as_str())
                        .opt("uuid", a.uuid.clone())
                        .opt("md_size", a.md_size)
                        .opt("dif_type", a.dif_type)
                        .set("dif_is_head_of_md", a.dif_is_head_of_md)
                        .opt("dif_pi_format", a.dif_pi_format)
                        .opt("preferred_write_alignment", a.preferred_write_alignment)
                        .opt("preferred_write_granularity", a.preferred_write_granularity)
                        .opt("optimal_write_size", a.optimal_write_size)
                        .opt("preferred_unmap_alignment", a.preferred_unmap_alignment)
                        .opt("preferred_unmap_granularity", a.preferred_unmap_granularity)
                        .done(),
                    Json,
                )
            }
            MethodArgs::BdevNullDelete(a) => c(
                "bdev_null_delete",
                P::default().set("name", a.name.as_str()).done(),
                Nothing,
            ),
            MethodArgs::BdevGetBdevs(a) => c(
                "bdev_get_bdevs",
                P::default()
                    .opt("name", a.name.clone())
                    .opt("timeout", a.timeout)
                    .done(),
                Dict,
            ),
            MethodArgs::BdevGetIostat(a) => {
                let names = a.names.as_ref().map(|n| {
                    n.trim()
                        .split(',')
                        .map(|s| Value::String(s.to_owned()))
                        .collect::<Vec<_>>()
                });
                c(
                    "bdev_get_iostat",
                    P::default()
                        .opt("name", a.name.clone())
                        .set("per_channel", a.per_channel)
                        .opt("reset_mode", a.reset_mode.clone())
                        .opt("names", names.filter(|n| !n.is_empty()))
                        .done(),
                    Dict,
                )
            }
            MethodArgs::NvmfCreateTransport(a) => c(
                "nvmf_create_transport",
                P::default()
                    .set("trtype", a.trtype.as_str())
                    .opt("tgt_name", a.tgt_name.clone())
                    .opt("max_queue_depth", a.max_queue_depth)
                    .opt("max_io_qpairs_per_ctrlr", a.max_io_qpairs_per_ctrlr)
                    .opt("in_capsule_data_size", a.in_capsule_data_size)
                    .opt("max_io_size", a.max_io_size)
                    .opt("io_unit_size", a.io_unit_size)
                    .opt("max_aq_depth", a.max_aq_depth)
                    .opt("num_shared_buffers", a.num_shared_buffers)
                    .opt("buf_cache_size", a.buf_cache_size)
                    .set("zcopy", a.zcopy)
                    .opt("num_cqe", a.num_cqe)
                    .opt("max_srq_depth", a.max_srq_depth)
                    .set("no_srq", a.no_srq)
                    .set("c2h_success", a.c2h_success)
                    .set("dif_insert_or_strip", a.dif_insert_or_strip)
                    .opt("sock_priority", a.sock_priority)
                    .opt("acceptor_backlog", a.acceptor_backlog)
                    .opt("abort_timeout_sec", a.abort_timeout_sec)
                    .set("no_wr_batching", a.no_wr_batching)
                    .opt("control_msg_num", a.control_msg_num)
                    .set("disable_mappable_bar0", a.disable_mappable_bar0)
                    .set("disable_adaptive_irq", a.disable_adaptive_irq)
                    .set("disable_shadow_doorbells", a.disable_shadow_doorbells)
                    .opt("acceptor_poll_rate", a.acceptor_poll_rate)
                    .opt("ack_timeout", a.ack_timeout)
                    .opt("data_wr_pool_size", a.data_wr_pool_size)
                    .set("disable_command_passthru", a.disable_command_passthru)
                    .opt("kas", a.kas)
                    .opt("min_kato", a.min_kato)
                    .done(),
                Nothing,
            ),
            MethodArgs::NvmfGetTransports(a) => c(
                "nvmf_get_transports",
                P::default()
                    .opt("trtype", a.trtype.clone())
                    .opt("tgt_name", a.tgt_name.clone())
                    .done(),
                Dict,
            ),
            MethodArgs::NvmfCreateSubsystem(a) => c(
                "nvmf_create_subsystem",
                P::default()
                    .set("nqn", a.nqn.as_str())
                    .opt("tgt_name", a.tgt_name.clone())
                    .opt("serial_number", a.serial_number.clone())
                    .opt("model_number", a.model_number.clone())
                    .set("allow_any_host", a.allow_any_host)
                    .opt("max_namespaces", a.max_namespaces)
                    .set("ana_reporting", a.ana_reporting)
                    .opt("min_cntlid", a.min_cntlid)
                    .opt("max_cntlid", a.max_cntlid)
                    .opt("max_discard_size_kib", a.max_discard_size)
                    .opt("max_write_zeroes_size_kib", a.max_write_zeroes_size)
                    .set("passthrough", a.passthrough)
                    .set("enable_nssr", a.enable_nssr)
                    .done(),
                Nothing,
            ),
            MethodArgs::NvmfDeleteSubsystem(a) => c(
                "nvmf_delete_subsystem",
                P::default()
                    .set("nqn", a.subsystem_nqn.as_str())
                    .opt("tgt_name", a.tgt_name.clone())
                    .done(),
                Nothing,
            ),
            MethodArgs::NvmfGetSubsystems(a) => c(
                "nvmf_get_subsystems",
                P::default()
                    .opt("nqn", a.nqn.clone())
                    .opt("tgt_name", a.tgt_name.clone())
                    .done(),
                Dict,
            ),
            MethodArgs::NvmfSubsystemAddNs(a) => {
                let ns = P::default()
                    .set("bdev_name", a.bdev_name.as_str())
                    .opt("ptpl_file", a.ptpl_file.clone())
                    .opt("nsid", a.nsid)
                    .opt("nguid", a.nguid.clone())
                    .opt("eui64", a.eui64.clone())
                    .opt("uuid", a.uuid.clone())
                    .opt("anagrpid", a.anagrpid)
                    .set("no_auto_visible", a.no_auto_visible)
                    .set("hide_metadata", a.hide_metadata)
                    .done();
                c(
                    "nvmf_subsystem_add_ns",
                    P::default()
                        .set("nqn", a.nqn.as_str())
                        .opt("tgt_name", a.tgt_name.clone())
                        .set("namespace", ns)
                        .done(),
                    Nothing,
                )
            }
            MethodArgs::NvmfSubsystemRemoveNs(a) => c(
                "nvmf_subsystem_remove_ns",
                P::default()
                    .set("nqn", a.nqn.as_str())
                    .set("nsid", a.nsid)
                    .opt("tgt_name", a.tgt_name.clone())
                    .done(),
                Nothing,
            ),
            MethodArgs::NvmfSubsystemAddListener(a) => c(
                "nvmf_subsystem_add_listener",
                P::default()
                    .set("nqn", listener_nqn(&a.nqn))
                    .opt("tgt_name", a.tgt_name.clone())
                    .set("secure_channel", a.secure_channel)
                    .opt("ana_state", a.ana_state.clone())
                    .opt("sock_impl", a.sock_impl.clone())
                    .set(
                        "listen_address",
                        listen_address(&a.trtype, &a.traddr, &a.adrfam, &a.trsvcid),
                    )
                    .done(),
                Nothing,
            ),
            MethodArgs::NvmfSubsystemRemoveListener(a) => c(
                "nvmf_subsystem_remove_listener",
                P::default()
                    .set("nqn", listener_nqn(&a.nqn))
                    .opt("tgt_name", a.tgt_name.clone())
                    .set(
                        "listen_address",
                        listen_address(&a.trtype, &a.traddr, &a.adrfam, &a.trsvcid),
                    )
                    .done(),
                Nothing,
            ),
            MethodArgs::NvmfGetStats(a) => c(
                "nvmf_get_stats",
                P::default().opt("tgt_name", a.tgt_name.clone()).done(),
                Dict,
            ),
        }
    }
}
