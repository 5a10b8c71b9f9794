// SPDX-License-Identifier: Apache-2.0
//! Arguments of the framework methods (SPDK `python/spdk/cli/{app,misc}.py`).

use clap::{ArgAction, Args};

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
