// SPDX-License-Identifier: Apache-2.0
//! Arguments of the nvmf host and per-subsystem listing methods (rpc.py's
//! `nvmf_subsystem_{add,remove}_host`, `nvmf_subsystem_allow_any_host`,
//! `nvmf_subsystem_get_{controllers,qpairs,listeners}`) and the params each sends.

use clap::{ArgAction, Args};
use serde::Serialize;

use super::params::{CliParams, negated};

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct AddHostArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    /// Host NQN to allow.
    pub host: String,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
    #[arg(long = "psk")]
    pub psk: Option<String>,
    #[arg(long = "dhchap-key")]
    pub dhchap_key: Option<String>,
    #[arg(long = "dhchap-ctrlr-key")]
    pub dhchap_ctrlr_key: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct RemoveHostArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    /// Host NQN to remove.
    pub host: String,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct AllowAnyHostArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    /// Enable allowing any host.
    #[arg(short = 'e', long = "enable", action = ArgAction::SetTrue)]
    #[serde(skip)]
    pub enable: bool,
    /// Disable allowing any host.
    // rpc.py: `-d` disables, anything else (`-e` or neither) enables.
    #[arg(short = 'd', long = "disable", action = ArgAction::SetTrue)]
    #[serde(rename = "allow_any_host", serialize_with = "negated")]
    pub disable: bool,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct SubsystemArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

impl CliParams for AddHostArgs {}
impl CliParams for RemoveHostArgs {}
impl CliParams for AllowAnyHostArgs {}
impl CliParams for SubsystemArgs {}
