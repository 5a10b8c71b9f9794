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
