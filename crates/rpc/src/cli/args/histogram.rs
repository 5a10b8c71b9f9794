// SPDX-License-Identifier: Apache-2.0
//! `bdev_enable_histogram` (SPDK `python/spdk/cli/bdev.py`): `-e`/`-d`, the optional values
//! sent only when set and non-zero, as `remove_null` and the `if opc:` tests there do.

use clap::{ArgAction, Args};
use serde::Serialize;

use super::params::{CliParams, negated, unset_or_empty};

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct EnableHistogramArgs {
    /// Bdev name.
    pub name: String,
    /// Enable histograms on specified device (the default).
    #[arg(short = 'e', long = "enable", action = ArgAction::SetTrue)]
    #[serde(skip)]
    pub enable: bool,
    /// Disable histograms on specified device.
    #[arg(short = 'd', long = "disable", action = ArgAction::SetTrue, conflicts_with = "enable")]
    #[serde(rename = "enable", serialize_with = "negated")]
    pub disable: bool,
    /// Enable histogram for specified io type (refused by nvmemu: it times every type).
    #[arg(short = 'o', long = "opc")]
    #[serde(skip_serializing_if = "unset_or_empty")]
    pub opc: Option<String>,
    /// Histogram bucket granularity.
    #[arg(long = "granularity")]
    #[serde(skip_serializing_if = "unset_or_empty")]
    pub granularity: Option<i64>,
    /// Histogram min value in nanoseconds.
    #[arg(long = "min-nsec")]
    #[serde(skip_serializing_if = "unset_or_empty")]
    pub min_nsec: Option<i64>,
    /// Histogram max value in nanoseconds.
    #[arg(long = "max-nsec")]
    #[serde(skip_serializing_if = "unset_or_empty")]
    pub max_nsec: Option<i64>,
}

impl CliParams for EnableHistogramArgs {}
