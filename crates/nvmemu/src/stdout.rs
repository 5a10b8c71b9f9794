// SPDX-License-Identifier: Apache-2.0
//! Reports to standard output that fail as errors, not panics: `print!` panics when the
//! reader has gone (`nvmemu bench --ceiling | head -1`), where a command must end with
//! one line that says what happened.

use std::io::Write as _;

use anyhow::{Context as _, Result};

/// Writes `text` to standard output and flushes it.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to standard output")
}
