// SPDX-License-Identifier: Apache-2.0
//! The nvmf methods about who may connect to a subsystem and who is connected: the host
//! allow list (`nvmf_subsystem_add_host`, `nvmf_subsystem_remove_host`,
//! `nvmf_subsystem_allow_any_host`) and the per-subsystem listings
//! (`nvmf_subsystem_get_controllers`, `nvmf_subsystem_get_qpairs`,
//! `nvmf_subsystem_get_listeners`). Names and shapes are SPDK's (`lib/nvmf/nvmf_rpc.c`).

use serde::{Deserialize, Serialize};

use super::nvmf::ListenerInfo;

/// `nvmf_subsystem_add_host` parameters. Result: `true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfSubsystemAddHostParams {
    /// Subsystem NQN.
    pub nqn: String,
    /// Host NQN to allow.
    pub host: String,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
    /// TLS PSK (TCP only; refused here).
    #[serde(default)]
    pub psk: Option<String>,
    /// DH-HMAC-CHAP key name (refused here: vfio-user has no authentication).
    #[serde(default)]
    pub dhchap_key: Option<String>,
    /// DH-HMAC-CHAP controller key name (refused here).
    #[serde(default)]
    pub dhchap_ctrlr_key: Option<String>,
}

/// `nvmf_subsystem_remove_host` parameters. Result: `true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfSubsystemRemoveHostParams {
    /// Subsystem NQN.
    pub nqn: String,
    /// Host NQN to remove from the allow list.
    pub host: String,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
}

/// `nvmf_subsystem_allow_any_host` parameters. Result: `true`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfSubsystemAllowAnyHostParams {
    /// Subsystem NQN.
    pub nqn: String,
    /// Allow any host (`true`) or only the listed ones (`false`).
    pub allow_any_host: bool,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
}

/// Parameters of the per-subsystem listings. Result: an array of [`ControllerInfo`],
/// [`QpairInfo`] or [`SubsystemListener`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmfSubsystemQueryParams {
    /// Subsystem NQN.
    pub nqn: String,
    /// Parent target name.
    #[serde(default)]
    pub tgt_name: Option<String>,
}

/// An `nvmf_subsystem_get_controllers` element: a controller a host has enabled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerInfo {
    /// Controller ID.
    pub cntlid: u16,
    /// The host's NQN: empty, as SPDK reports for vfio-user (a client presents none).
    pub hostnqn: String,
    /// The host identifier as a UUID: all zeroes for vfio-user.
    pub hostid: String,
    /// I/O queue pairs the host has now.
    pub num_io_qpairs: u64,
}

/// An `nvmf_subsystem_get_qpairs` element: one live queue pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpairInfo {
    /// Controller ID.
    pub cntlid: u16,
    /// Queue ID (0: admin).
    pub qid: u16,
    /// `"enabled"` (SPDK's name for a connected queue pair).
    pub state: String,
    /// The poll group (poller) serving it, e.g. `"nvmf_tgt_poll_group_000"`.
    pub thread: String,
    /// The host's NQN (empty for vfio-user).
    pub hostnqn: String,
    /// The listener it came through.
    pub listen_address: ListenerInfo,
    /// The host's address: empty for vfio-user (SPDK reports `adrfam` `"unknown"`).
    pub peer_address: ListenerInfo,
}

/// An `nvmf_subsystem_get_listeners` element.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubsystemListener {
    /// The listen address.
    pub address: ListenerInfo,
}
