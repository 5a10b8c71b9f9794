// SPDX-License-Identifier: Apache-2.0
//! NVMe-oF target methods (SPDK `lib/nvmf/nvmf_rpc.c`): transports, subsystems, namespaces,
//! listeners and statistics. Parameter structs use SPDK's names and defaults; the `*Info`
//! types are the result shapes of the `nvmf_get_*` methods.

use serde::{Deserialize, Serialize};

/// `nvmf_create_transport` parameters. Result: `true`.
///
/// SPDK decodes these "relaxed" (unknown keys are ignored, since each transport reads its own
/// options from the same object), so this struct does not deny unknown fields. Options left
/// `None` take the transport's defaults; for VFIOUSER those are [`VfioUserDefaults`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmfCreateTransportParams {
    /// Transport type, e.g. `"VFIOUSER"` (case-insensitive in SPDK).
    pub trtype: String,
    /// Parent target name (only the default target exists here).
    #[serde(default)]
    pub tgt_name: Option<String>,
    /// Max entries per I/O queue.
    #[serde(default)]
    pub max_queue_depth: Option<u32>,
    /// Max I/O queue pairs per controller.
    #[serde(default)]
    pub max_io_qpairs_per_ctrlr: Option<u32>,
    /// Max in-capsule data size.
    #[serde(default)]
    pub in_capsule_data_size: Option<u32>,
    /// Max I/O size in bytes (bounds MDTS).
    #[serde(default)]
    pub max_io_size: Option<u32>,
    /// I/O unit size in bytes.
    #[serde(default)]
    pub io_unit_size: Option<u32>,
    /// Max admin queue depth.
    #[serde(default)]
    pub max_aq_depth: Option<u32>,
    /// Pooled data buffers.
    #[serde(default)]
    pub num_shared_buffers: Option<u32>,
    /// Buffers cached per poll group.
    #[serde(default)]
    pub buf_cache_size: Option<u32>,
    /// Use zero-copy operations.
    #[serde(default)]
    pub zcopy: bool,
    /// TCP: a successful read's C2HData carries SUCCESS in place of a response capsule
    /// (SPDK's default: on).
    #[serde(default)]
    pub c2h_success: Option<bool>,
    /// Abort execution timeout, seconds.
    #[serde(default)]
    pub abort_timeout_sec: Option<u32>,
    /// Acceptor polling interval, microseconds.
    #[serde(default)]
    pub acceptor_poll_rate: Option<u32>,
    /// Keep Alive Support granularity (KAS), in 100 ms units.
    #[serde(default)]
    pub kas: Option<u32>,
    /// Minimum keep alive timeout, milliseconds.
    #[serde(default)]
    pub min_kato: Option<u32>,
    /// Disallow command passthrough.
    #[serde(default)]
    pub disable_command_passthru: bool,
    /// VFIOUSER: do not offer BAR0 (doorbells) for mmap.
    #[serde(default)]
    pub disable_mappable_bar0: bool,
    /// VFIOUSER: disable adaptive interrupt coalescing.
    #[serde(default)]
    pub disable_adaptive_irq: bool,
    /// VFIOUSER: do not support the Doorbell Buffer Config (shadow doorbells) command.
    #[serde(default)]
    pub disable_shadow_doorbells: bool,
}

/// SPDK's VFIOUSER transport defaults (`lib/nvmf/vfio_user.c`).
#[derive(Debug, Clone, Copy)]
pub struct VfioUserDefaults;

impl VfioUserDefaults {
    /// Default `max_queue_depth`.
    pub const MAX_QUEUE_DEPTH: u32 = 256;
    /// Default `max_io_qpairs_per_ctrlr`.
    pub const MAX_IO_QPAIRS_PER_CTRLR: u32 = 127;
    /// Default `in_capsule_data_size`.
    pub const IN_CAPSULE_DATA_SIZE: u32 = 0;
    /// Default `max_io_size`.
    pub const MAX_IO_SIZE: u32 = 131_072;
    /// Default `io_unit_size`.
    pub const IO_UNIT_SIZE: u32 = 131_072;
    /// Default `max_aq_depth`.
    pub const MAX_AQ_DEPTH: u32 = 32;
}

/// `nvmf_get_transports` parameters. Result: array of [`TransportInfo`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfGetTransportsParams {
    /// Only this transport type.
    #[serde(default)]
    pub trtype: Option<String>,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
}

/// `nvmf_create_subsystem` parameters. Result: `true`. A taken NQN is an error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfCreateSubsystemParams {
    /// Subsystem NQN (required).
    pub nqn: String,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
    /// Serial number; SPDK's default is `"00000000000000000000"`.
    #[serde(default)]
    pub serial_number: Option<String>,
    /// Model number; SPDK's default is `"SPDK bdev Controller"`.
    #[serde(default)]
    pub model_number: Option<String>,
    /// Admin label (accepted, unused).
    #[serde(default)]
    pub admin_label: Option<String>,
    /// Max namespaces; 0 means SPDK's default (32).
    #[serde(default)]
    pub max_namespaces: u32,
    /// Allow any host NQN to connect.
    #[serde(default)]
    pub allow_any_host: bool,
    /// Enable ANA reporting.
    #[serde(default)]
    pub ana_reporting: bool,
    /// Minimum controller ID (default 1).
    #[serde(default = "default_min_cntlid")]
    pub min_cntlid: u16,
    /// Maximum controller ID (default 0xFFEF).
    #[serde(default = "default_max_cntlid")]
    pub max_cntlid: u16,
    /// Maximum discard size, KiB.
    #[serde(default)]
    pub max_discard_size_kib: Option<u64>,
    /// Maximum write-zeroes size, KiB.
    #[serde(default)]
    pub max_write_zeroes_size_kib: Option<u64>,
    /// Pass all I/O commands through to the bdev.
    #[serde(default)]
    pub passthrough: bool,
    /// Enable NVM Subsystem Reset support.
    #[serde(default)]
    pub enable_nssr: bool,
}

/// SPDK's default minimum controller ID.
pub const DEFAULT_MIN_CNTLID: u16 = 1;
/// SPDK's default maximum controller ID.
pub const DEFAULT_MAX_CNTLID: u16 = 0xFFEF;
/// SPDK's default serial number.
pub const DEFAULT_SERIAL_NUMBER: &str = "00000000000000000000";
/// SPDK's default model number.
pub const DEFAULT_MODEL_NUMBER: &str = "SPDK bdev Controller";
/// SPDK's default namespace limit when `max_namespaces` is 0.
pub const DEFAULT_MAX_NAMESPACES: u32 = 32;

fn default_min_cntlid() -> u16 {
    DEFAULT_MIN_CNTLID
}

fn default_max_cntlid() -> u16 {
    DEFAULT_MAX_CNTLID
}

/// Parameters of methods that name one subsystem: `nvmf_delete_subsystem`. Result: `true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfSubsystemParams {
    /// Subsystem NQN.
    pub nqn: String,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
}

/// `nvmf_get_subsystems` parameters. Result: array of [`SubsystemInfo`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfGetSubsystemsParams {
    /// Only this subsystem (unknown NQN: `-19`/`-32602` error).
    #[serde(default)]
    pub nqn: Option<String>,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
}

/// `nvmf_subsystem_add_ns` parameters. Result: the NSID (a JSON number).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfSubsystemAddNsParams {
    /// Subsystem NQN.
    pub nqn: String,
    /// The namespace to add.
    #[serde(deserialize_with = "super::object_only::object_only")]
    pub namespace: NamespaceParams,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
}

/// The `namespace` object of `nvmf_subsystem_add_ns`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceParams {
    /// Backing bdev (required).
    pub bdev_name: String,
    /// Requested NSID; 0 picks the lowest free one.
    #[serde(default)]
    pub nsid: u32,
    /// NGUID as 32 hex digits.
    #[serde(default)]
    pub nguid: Option<String>,
    /// EUI-64 as 16 hex digits.
    #[serde(default)]
    pub eui64: Option<String>,
    /// Namespace UUID.
    #[serde(default)]
    pub uuid: Option<String>,
    /// Persistent-reservation file.
    #[serde(default)]
    pub ptpl_file: Option<String>,
    /// ANA group ID; 0 means "same as NSID".
    #[serde(default)]
    pub anagrpid: u32,
    /// Do not attach to controllers automatically.
    #[serde(default)]
    pub no_auto_visible: bool,
    /// Hide bdev metadata from the host.
    #[serde(default)]
    pub hide_metadata: bool,
}

/// `nvmf_subsystem_remove_ns` parameters. Result: `true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfSubsystemRemoveNsParams {
    /// Subsystem NQN.
    pub nqn: String,
    /// NSID to remove.
    pub nsid: u32,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
}

/// The `listen_address` object of the listener methods. For VFIOUSER, `traddr` is a
/// directory; the controller's socket is `<traddr>/cntrl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenAddress {
    /// Transport type, e.g. `"VFIOUSER"`.
    pub trtype: String,
    /// Address family, e.g. `"IPv4"`; unused by VFIOUSER.
    #[serde(default)]
    pub adrfam: Option<String>,
    /// Transport address.
    pub traddr: String,
    /// Transport service id; VFIOUSER ignores it (rpc.py users pass `-s 0`).
    #[serde(default)]
    pub trsvcid: Option<String>,
}

/// `nvmf_subsystem_add_listener` parameters. Result: `true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfSubsystemAddListenerParams {
    /// Subsystem NQN.
    pub nqn: String,
    /// Where to listen.
    #[serde(deserialize_with = "super::object_only::object_only")]
    pub listen_address: ListenAddress,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
    /// Establish a secure channel (TCP only).
    #[serde(default)]
    pub secure_channel: bool,
    /// Initial ANA state.
    #[serde(default)]
    pub ana_state: Option<String>,
    /// Socket implementation (TCP only).
    #[serde(default)]
    pub sock_impl: Option<String>,
}

/// `nvmf_subsystem_remove_listener` parameters. Result: `true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfSubsystemRemoveListenerParams {
    /// Subsystem NQN.
    pub nqn: String,
    /// The listener to remove.
    #[serde(deserialize_with = "super::object_only::object_only")]
    pub listen_address: ListenAddress,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
}

/// `nvmf_get_stats` parameters. Result: [`NvmfStats`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfGetStatsParams {
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
}

/// One element of the `nvmf_get_transports` result; also the `nvmf_create_transport`
/// parameters of `save_config`, which records every effective option like SPDK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Field names are SPDK's transport option names.
pub struct TransportInfo {
    pub trtype: String,
    pub max_queue_depth: u32,
    pub max_io_qpairs_per_ctrlr: u32,
    pub in_capsule_data_size: u32,
    pub max_io_size: u32,
    pub io_unit_size: u32,
    pub max_aq_depth: u32,
    pub num_shared_buffers: u32,
    pub buf_cache_size: u32,
    pub dif_insert_or_strip: bool,
    pub zcopy: bool,
    pub abort_timeout_sec: u32,
    /// RDMA's; SPDK lists it for every transport (0 for VFIOUSER).
    pub ack_timeout: u32,
    /// RDMA's; SPDK lists it for every transport (0 for VFIOUSER).
    pub data_wr_pool_size: u32,
    pub disable_mappable_bar0: bool,
    pub disable_adaptive_irq: bool,
    pub disable_shadow_doorbells: bool,
    /// TCP's; absent for VFIOUSER, as SPDK lists it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c2h_success: Option<bool>,
}

/// One element of the `nvmf_get_subsystems` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubsystemInfo {
    /// Subsystem NQN.
    pub nqn: String,
    /// `"NVMe"` or `"Discovery"`.
    pub subtype: String,
    /// Listeners.
    pub listen_addresses: Vec<ListenerInfo>,
    /// Whether any host may connect.
    pub allow_any_host: bool,
    /// Allowed hosts.
    pub hosts: Vec<HostInfo>,
    /// Serial number (NVMe subsystems only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    /// Model number (NVMe subsystems only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_number: Option<String>,
    /// Namespace limit; SPDK omits it when 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_namespaces: Option<u32>,
    /// Minimum controller ID (NVMe subsystems only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_cntlid: Option<u16>,
    /// Maximum controller ID (NVMe subsystems only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cntlid: Option<u16>,
    /// Namespaces (NVMe subsystems only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<NamespaceInfo>>,
}

/// A `listen_addresses` element.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Same fields as `ListenAddress`.
pub struct ListenerInfo {
    pub trtype: String,
    pub adrfam: String,
    pub traddr: String,
    pub trsvcid: String,
}

/// A `hosts` element.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    /// Host NQN.
    pub nqn: String,
}

/// A `namespaces` element.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceInfo {
    /// Namespace ID.
    pub nsid: u32,
    /// Backing bdev.
    pub bdev_name: String,
    /// Same as `bdev_name` (kept by SPDK for compatibility).
    pub name: String,
    /// NGUID, 32 upper-case hex digits; omitted when zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nguid: Option<String>,
    /// EUI-64, 16 upper-case hex digits; omitted when zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eui64: Option<String>,
    /// UUID; omitted when zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// `nvmf_get_stats` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvmfStats {
    /// Tick rate, Hz.
    pub tick_rate: u64,
    /// One entry per poll group (poller thread).
    pub poll_groups: Vec<PollGroupStats>,
}

/// Per-poll-group statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // Field names are SPDK's `nvmf_get_stats` keys.
pub struct PollGroupStats {
    pub name: String,
    pub admin_qpairs: u64,
    pub io_qpairs: u64,
    pub current_admin_qpairs: u64,
    pub current_io_qpairs: u64,
    pub pending_bdev_io: u64,
    pub completed_nvme_io: u64,
    pub transports: Vec<TransportPollGroupStats>,
}

/// A poll group's entry for one transport: SPDK's VFIOUSER transport dumps its counters;
/// its TCP transport has none of its own (its qpairs and commands count in the poll group),
/// so SPDK's entry is the transport type alone. nvmemu's adds its TCP poll group's pass and
/// socket call counts where a TCP poll group shares the poll group's index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TransportPollGroupStats {
    /// `trtype: "VFIOUSER"` with its counters.
    VfioUser(PollGroupTransportStats),
    /// `trtype: "TCP"`.
    Tcp {
        /// Transport type.
        trtype: String,
        /// The TCP poll group's counters (absent where no TCP poll group has this index).
        #[serde(flatten)]
        counters: TcpPollGroupCounters,
    },
}

/// nvmemu's TCP poll group counters in its `nvmf_get_stats` TCP entry. `polls` has the
/// meaning SPDK's VFIOUSER and RDMA entries give it; SPDK's TCP target counts no socket
/// calls, so those keys are nvmemu's own. Each is absent, never 0 by default, where no TCP
/// poll group has the entry's index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpPollGroupCounters {
    /// Polling passes of the TCP poll group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polls: Option<u64>,
    /// `recv` calls on its connections (one per connection per pass with data waiting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_reads: Option<u64>,
    /// `send` calls on its connections (one per connection per pass with PDUs to send).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_writes: Option<u64>,
}

/// Per-transport entry of a [`PollGroupStats`]: SPDK's VFIOUSER counters. nvmemu's pollers
/// count passes and commands; the counters of SPDK's interrupt mode, adaptive interrupts
/// and kicks (which nvmemu does not have) and of passes that found nothing (not counted
/// on the I/O path) are 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // Field names are SPDK's keys.
pub struct PollGroupTransportStats {
    /// Transport type.
    pub trtype: String,
    pub ctrlr_intr: u64,
    pub ctrlr_kicks: u64,
    pub pg_kicks: u64,
    pub won: u64,
    pub lost: u64,
    pub lost_count: u64,
    pub rearms: u64,
    pub cq_full: u64,
    pub pg_process_count: u64,
    pub intr: u64,
    /// Polling passes.
    pub polls: u64,
    pub polls_spurious: u64,
    /// Commands the passes took.
    pub poll_reqs: u64,
    pub poll_reqs_variance: f64,
    pub cqh_admin_writes: u64,
    pub cqh_io_writes: u64,
}
