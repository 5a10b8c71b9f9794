// SPDX-License-Identifier: Apache-2.0
//! nvmemu's fault rules on any bdev (`nvmemu_bdev_inject_fault`, `nvmemu_bdev_clear_faults`,
//! `nvmemu_bdev_get_faults`): what to do to which commands and when, with counters.

use serde::{Deserialize, Serialize};

/// A probability (0 < p <= 1). Compared by its bits, so the params stay `Eq`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Probability(pub f64);

impl PartialEq for Probability {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Probability {}

/// `nvmemu_bdev_inject_fault` parameters. Result: the new rule's id. docs/device-models.md
/// says what each one does and its default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmemuBdevInjectFaultParams {
    /// The bdev (name or alias).
    pub name: String,
    /// `status` (default), `corrupt`, `drop`, `delay` or `reorder`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// `status`: Status Code Type (0, 1, 2, 3 or 7; default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sct: Option<u8>,
    /// `status`: Status Code (default 6, Internal Error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sc: Option<u8>,
    /// `status`: Do Not Retry.
    #[serde(default, skip_serializing_if = "super::bdev::is_false")]
    pub dnr: bool,
    /// `delay`, `reorder`: microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_us: Option<u64>,
    /// `corrupt`: the byte of the data (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt_offset: Option<u64>,
    /// `corrupt`: the XOR value, 1-255 (default 255).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt_value: Option<u8>,
    /// `read`, `write`, `flush`, `unmap` or `all` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_type: Option<String>,
    /// One NVM opcode instead of `io_type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opcode: Option<u8>,
    /// First block of the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lba_start: Option<u64>,
    /// Blocks in the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lba_count: Option<u64>,
    /// Only this I/O submission queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qid: Option<u16>,
    /// Fire on every Nth matched command (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<u32>,
    /// The most commands to fire on (default 1; 0: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// The chance to fire on each (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<Probability>,
    /// Seed of the draws (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Match from this many ms after the rule is added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_ms: Option<u64>,
    /// ... until this many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
}

/// `nvmemu_bdev_clear_faults` parameters. Result: `true`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmemuBdevClearFaultsParams {
    /// The bdev.
    pub name: String,
    /// The rule to remove (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
}

/// `nvmemu_bdev_get_faults` parameters. Result: an array of `{"name", "faults": [...]}`,
/// one per bdev with rules (or the one named).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmemuBdevGetFaultsParams {
    /// Only this bdev.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// One bdev in the `nvmemu_bdev_get_faults` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BdevFaults {
    /// The bdev.
    pub name: String,
    /// Its rules, in the order they apply.
    pub faults: Vec<FaultRuleCounters>,
}

/// The identity and counters of one rule in that result (it also carries every parameter
/// of the rule under its `nvmemu_bdev_inject_fault` name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRuleCounters {
    /// The rule's id.
    pub id: u32,
    /// `status`, `corrupt`, `drop`, `delay`, `reorder` (or SPDK's `nomem`).
    pub action: String,
    /// `read`, `write`, `flush`, `unmap` or `all`.
    pub io_type: String,
    /// Commands it matched.
    pub matched: u64,
    /// Commands it fired on.
    pub injected: u64,
}
