// SPDX-License-Identifier: Apache-2.0
//! Arguments of nvmemu's controller-level fault methods.

use clap::{ArgAction, Args};
use serde::Serialize;

use super::params::CliParams;

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct InjectFatalArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    /// The controller's CNTLID (default: every controller of the subsystem).
    #[arg(short = 'c', long = "cntlid")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cntlid: Option<u16>,
    /// Fail once this many more I/O commands have been taken (default 0: now).
    #[arg(short = 'a', long = "after-commands")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_commands: Option<u32>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct InjectNotReadyArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    /// The namespace ID.
    pub nsid: u32,
    /// Set Do Not Retry in the status.
    #[arg(short = 'd', long = "dnr", action = ArgAction::SetTrue)]
    pub dnr: bool,
    /// Make the namespace ready again.
    #[arg(long = "clear", action = ArgAction::SetTrue)]
    pub clear: bool,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct GetCtrlFaultsArgs {
    /// Only this subsystem's NQN.
    #[arg(short = 'n', long = "nqn")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nqn: Option<String>,
}

impl CliParams for InjectFatalArgs {}
impl CliParams for InjectNotReadyArgs {}
impl CliParams for GetCtrlFaultsArgs {}
