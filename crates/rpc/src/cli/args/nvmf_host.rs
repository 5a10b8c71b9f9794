// SPDX-License-Identifier: Apache-2.0
//! Arguments of the nvmf host and per-subsystem listing methods (rpc.py's
//! `nvmf_subsystem_{add,remove}_host`, `nvmf_subsystem_allow_any_host`,
//! `nvmf_subsystem_get_{controllers,qpairs,listeners}`) and the params each sends.

use clap::{ArgAction, Args};
use serde_json::Value;

use super::params::P;

#[derive(Debug, Clone, Args)]
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

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct RemoveHostArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    /// Host NQN to remove.
    pub host: String,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct AllowAnyHostArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    /// Enable allowing any host.
    #[arg(short = 'e', long = "enable", action = ArgAction::SetTrue)]
    pub enable: bool,
    /// Disable allowing any host.
    #[arg(short = 'd', long = "disable", action = ArgAction::SetTrue)]
    pub disable: bool,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct SubsystemArgs {
    /// NVMe-oF subsystem NQN.
    pub nqn: String,
    #[arg(short = 't', long = "tgt-name")]
    pub tgt_name: Option<String>,
}

impl AddHostArgs {
    /// The params rpc.py sends for `nvmf_subsystem_add_host`.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("nqn", self.nqn.as_str())
            .set("host", self.host.as_str())
            .opt("tgt_name", self.tgt_name.clone())
            .opt("psk", self.psk.clone())
            .opt("dhchap_key", self.dhchap_key.clone())
            .opt("dhchap_ctrlr_key", self.dhchap_ctrlr_key.clone())
            .done()
    }
}

impl RemoveHostArgs {
    /// The params rpc.py sends for `nvmf_subsystem_remove_host`.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("nqn", self.nqn.as_str())
            .set("host", self.host.as_str())
            .opt("tgt_name", self.tgt_name.clone())
            .done()
    }
}

impl AllowAnyHostArgs {
    /// The params rpc.py sends for `nvmf_subsystem_allow_any_host`: `-d` disables, anything
    /// else (`-e` or neither) enables.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("nqn", self.nqn.as_str())
            .set("allow_any_host", !self.disable)
            .opt("tgt_name", self.tgt_name.clone())
            .done()
    }
}

impl SubsystemArgs {
    /// The params rpc.py sends for the `nvmf_subsystem_get_*` listings.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("nqn", self.nqn.as_str())
            .opt("tgt_name", self.tgt_name.clone())
            .done()
    }
}
