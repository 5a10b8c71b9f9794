// SPDX-License-Identifier: Apache-2.0
//! Arguments of the framework methods (SPDK `python/spdk/cli/{app,misc}.py`).

use clap::{ArgAction, Args};
use serde::Serialize;
use serde_json::{Value, json};

use super::params::{ArgError, CliParams};

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct RpcGetMethodsArgs {
    /// Get list of RPC methods only callable in the current state.
    #[arg(short = 'c', long = "current", action = ArgAction::SetTrue)]
    pub current: bool,
    /// Include RPC aliases.
    #[arg(short = 'i', long = "include-aliases", action = ArgAction::SetTrue)]
    pub include_aliases: bool,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct KillArgs {
    /// Signal to send to the server.
    pub sig_name: String,
}

#[derive(Debug, Clone, Args, Serialize)]
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

impl CliParams for RpcGetMethodsArgs {}
impl CliParams for KillArgs {}

/// `save_config` is not one call: `nvmemu rpc` builds it from `framework_get_subsystems` and
/// `framework_get_config` calls, which take these params.
impl CliParams for SaveConfigArgs {
    fn params(&self) -> Result<Value, ArgError> {
        Ok(json!({}))
    }
}
