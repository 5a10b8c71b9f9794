// SPDX-License-Identifier: Apache-2.0
//! Arguments of nvmemu's fault rule methods (`nvmemu_bdev_inject_fault`, `_clear_faults`,
//! `_get_faults`); the flags are the params' names with `-` for `_`.

use clap::{ArgAction, Args};
use serde::Serialize;

use super::params::{CliParams, is_false};

/// A byte, decimal or `0x` hex (status codes are written in hex).
fn byte(text: &str) -> Result<u8, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u8::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("{text}: expected 0-255 (decimal or 0x hex)"))
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct InjectFaultArgs {
    /// The bdev.
    pub name: String,
    /// status (default), corrupt, drop, delay or reorder.
    #[arg(long)]
    pub action: Option<String>,
    /// Status Code Type (0, 1, 2, 3 or 7).
    #[arg(long, value_parser = byte)]
    pub sct: Option<u8>,
    /// Status Code (0x81: Unrecovered Read Error with --sct 2).
    #[arg(long, value_parser = byte)]
    pub sc: Option<u8>,
    /// Do Not Retry.
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(skip_serializing_if = "is_false")]
    pub dnr: bool,
    /// delay, reorder: microseconds.
    #[arg(long = "delay-us")]
    pub delay_us: Option<u64>,
    /// corrupt: the byte of the data.
    #[arg(long = "corrupt-offset")]
    pub corrupt_offset: Option<u64>,
    /// corrupt: the XOR value (1-255).
    #[arg(long = "corrupt-value", value_parser = byte)]
    pub corrupt_value: Option<u8>,
    /// read, write, flush, unmap or all.
    #[arg(long = "io-type")]
    pub io_type: Option<String>,
    /// One NVM opcode instead of --io-type.
    #[arg(long, value_parser = byte)]
    pub opcode: Option<u8>,
    /// First block of the range.
    #[arg(long = "lba-start")]
    pub lba_start: Option<u64>,
    /// Blocks in the range.
    #[arg(long = "lba-count")]
    pub lba_count: Option<u64>,
    /// Only this I/O submission queue.
    #[arg(long)]
    pub qid: Option<u16>,
    /// Fire on every Nth matched command.
    #[arg(long)]
    pub every: Option<u32>,
    /// The most commands to fire on (0: no limit; default 1).
    #[arg(long)]
    pub count: Option<u32>,
    /// The chance to fire on each matched command (0 < p <= 1).
    #[arg(long)]
    pub probability: Option<f64>,
    /// Seed of the draws.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Match from this many ms after the rule is added.
    #[arg(long = "from-ms")]
    pub from_ms: Option<u64>,
    /// ... until this many.
    #[arg(long = "until-ms")]
    pub until_ms: Option<u64>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct ClearFaultsArgs {
    /// The bdev.
    pub name: String,
    /// The rule to remove (default: all).
    #[arg(long)]
    pub id: Option<u32>,
}

#[derive(Debug, Clone, Args, Serialize)]
#[allow(missing_docs)]
pub struct GetFaultsArgs {
    /// Only this bdev.
    pub name: Option<String>,
}

impl CliParams for InjectFaultArgs {}
impl CliParams for ClearFaultsArgs {}
impl CliParams for GetFaultsArgs {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_parse_in_hex_or_decimal() {
        assert_eq!(byte("0x81"), Ok(0x81));
        assert_eq!(byte("129"), Ok(129));
        assert_eq!(byte("0XfF"), Ok(255));
        assert!(byte("0x100").is_err());
        assert!(byte("x").is_err());
    }
}
