// SPDX-License-Identifier: Apache-2.0
//! Arguments of the log and notification methods (rpc.py's `log_set_flag`,
//! `log_clear_flag`, `log_set_level`, `log_set_print_level`, `notify_get_notifications`)
//! and the params each sends. The thread, scheduler and getter methods take none.

use clap::Args;
use serde::Serialize;

use super::params::CliParams;

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct LogFlagArg {
    /// Log flag (see log_get_flags).
    pub flag: String,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct LogLevelArg {
    /// Log level (ERROR, WARNING, NOTICE, INFO or DEBUG).
    pub level: String,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct NotifyArgs {
    /// First ID to start fetching from.
    #[arg(short = 'i', long = "id")]
    pub id: Option<i64>,
    /// Maximum number of notifications to return in response.
    #[arg(short = 'n', long = "max")]
    pub max: Option<i64>,
}

impl CliParams for LogFlagArg {}
impl CliParams for LogLevelArg {}
impl CliParams for NotifyArgs {}
