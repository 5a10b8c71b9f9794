// SPDX-License-Identifier: Apache-2.0
//! rpc.py's argument syntax for the supported methods (SPDK `python/spdk/cli/{app,misc,
//! bdev,nvmf}.py`) and the exact params each sends: one clap `Args` struct per method
//! family file, which also derives the params ([`CliParams`]). [`MethodArgs`], the
//! subcommand per method, comes from the method table (`table.rs`).
//!
//! rpc.py passes every argparse value through `remove_null`: options not given are omitted,
//! but `store_true` flags are always sent (as `false` when absent). That is mirrored here,
//! except that the nvmf subsystem, namespace and listener methods send a flag only when it
//! is set, as rpc.py's `nvmf_create_subsystem` does (a target older than a flag refuses it).

mod app;
mod bdev;
mod ctrl_faults;
mod delay;
mod error_bdev;
mod fault;
mod file_bdev;
mod histogram;
mod monitor;
mod nvmf;
mod nvmf_host;
mod params;

use serde_json::Value;

pub use app::*;
pub use bdev::*;
pub use ctrl_faults::*;
pub use delay::*;
pub use error_bdev::*;
pub use fault::*;
pub use file_bdev::*;
pub use histogram::*;
pub use monitor::*;
pub use nvmf::*;
pub use nvmf_host::*;
pub use params::{ArgError, CliParams, NoArgs};

pub use crate::table::MethodArgs;

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
