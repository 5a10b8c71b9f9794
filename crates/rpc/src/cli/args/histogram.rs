// SPDX-License-Identifier: Apache-2.0
//! `bdev_enable_histogram` (SPDK `python/spdk/cli/bdev.py`): `-e`/`-d`, the optional values
//! sent only when set and non-zero, as `remove_null` and the `if opc:` tests there do.

use clap::{ArgAction, Args};
use serde_json::Value;

use super::params::P;

#[derive(Debug, Clone, Args)]
#[allow(missing_docs)]
pub struct EnableHistogramArgs {
    /// Enable histograms on specified device (the default).
    #[arg(short = 'e', long = "enable", action = ArgAction::SetTrue)]
    pub enable: bool,
    /// Disable histograms on specified device.
    #[arg(short = 'd', long = "disable", action = ArgAction::SetTrue, conflicts_with = "enable")]
    pub disable: bool,
    /// Enable histogram for specified io type (refused by nvmemu: it times every type).
    #[arg(short = 'o', long = "opc")]
    pub opc: Option<String>,
    /// Histogram bucket granularity.
    #[arg(long = "granularity")]
    pub granularity: Option<i64>,
    /// Histogram min value in nanoseconds.
    #[arg(long = "min-nsec")]
    pub min_nsec: Option<i64>,
    /// Histogram max value in nanoseconds.
    #[arg(long = "max-nsec")]
    pub max_nsec: Option<i64>,
    /// Bdev name.
    pub name: String,
}

impl EnableHistogramArgs {
    /// The params rpc.py sends.
    pub(super) fn params(&self) -> Value {
        P::default()
            .set("name", self.name.as_str())
            .set("enable", !self.disable)
            .opt("opc", self.opc.clone().filter(|o| !o.is_empty()))
            .opt("granularity", self.granularity.filter(|&g| g != 0))
            .opt("min_nsec", self.min_nsec.filter(|&v| v != 0))
            .opt("max_nsec", self.max_nsec.filter(|&v| v != 0))
            .done()
    }
}
