// SPDX-License-Identifier: Apache-2.0
//! nvmemu's controller-level fault methods: a controller that goes fatal
//! (`nvmemu_controller_inject_fatal`) and a namespace that is not ready
//! (`nvmemu_namespace_inject_not_ready`). SPDK has no counterpart; the names and shapes
//! follow its `nvmf_subsystem_*` methods.

use serde::{Deserialize, Serialize};

/// `nvmemu_controller_inject_fatal` parameters. Result: `true`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmemuControllerInjectFatalParams {
    /// Subsystem NQN.
    pub nqn: String,
    /// The controller (its CNTLID); default: every vfio-user controller of the subsystem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cntlid: Option<u16>,
    /// Fail once this many more I/O commands have been taken (default 0: now; the
    /// controller must then be enabled by a host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_commands: Option<u32>,
}

/// `nvmemu_namespace_inject_not_ready` parameters. Result: `true`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmemuNamespaceInjectNotReadyParams {
    /// Subsystem NQN.
    pub nqn: String,
    /// The namespace.
    pub nsid: u32,
    /// Set Do Not Retry in the status (default false: the host may retry).
    #[serde(default)]
    pub dnr: bool,
    /// Make the namespace ready again instead (default false).
    #[serde(default)]
    pub clear: bool,
}

/// `nvmemu_controller_get_faults` parameters. Result: an array of [`SubsystemFaults`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmemuControllerGetFaultsParams {
    /// Only this subsystem (default: every one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nqn: Option<String>,
}

/// One subsystem's controller-level faults: what `nvmemu_controller_inject_fatal` and
/// `nvmemu_namespace_inject_not_ready` armed and what they did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubsystemFaults {
    /// Subsystem NQN.
    pub nqn: String,
    /// Its vfio-user controllers (those the fatal method reaches).
    pub controllers: Vec<ControllerFaults>,
    /// Its namespaces.
    pub namespaces: Vec<NamespaceFaults>,
}

/// Injected Controller Fatal Status on one controller.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerFaults {
    /// The controller's CNTLID.
    pub cntlid: u16,
    /// Its listener's address (the socket directory).
    pub traddr: String,
    /// I/O commands still taken before an armed fatal status fires (null: none armed).
    pub fatal_armed_after_commands: Option<u32>,
    /// Times an injection set CSTS.CFS.
    pub fatal_injected: u32,
    /// When it last did, in milliseconds since the UNIX epoch (null: never).
    pub fatal_last_injected_ms: Option<u64>,
    /// Whether the injected CSTS.CFS is still set (the host has not reset the controller).
    pub fatal_in_effect: bool,
    /// Times a reset cleared an injected CSTS.CFS.
    pub fatal_cleared_by_reset: u32,
}

/// Injected Namespace Not Ready on one namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceFaults {
    /// The namespace ID.
    pub nsid: u32,
    /// The bdev behind it.
    pub bdev_name: String,
    /// Whether it answers I/O with Namespace Not Ready now.
    pub not_ready: bool,
    /// Whether that status has Do Not Retry set.
    pub dnr: bool,
    /// I/O commands answered Namespace Not Ready since the namespace was added.
    pub not_ready_commands: u64,
}
