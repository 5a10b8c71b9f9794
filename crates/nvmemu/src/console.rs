// SPDX-License-Identifier: Apache-2.0
//! What the commands write for the user, without the panics of `print!` and `eprintln!`
//! when the pipe's reader has gone (`nvmemu bench --ceiling | head -1`, `nvmemu serve 2>&1
//! | head`): `eprintln!` then even aborts the process. A report that cannot be written is
//! the command's error; a note on stderr that cannot be written is lost, and the command
//! (or the daemon serving its clients) goes on.

use std::io::Write as _;

use anyhow::{Context as _, Result};

/// Writes `text` to standard output and flushes it.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to standard output")
}

/// Writes one line to standard error, if it can; [`say!`](crate::say) formats it.
pub fn say(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// `eprintln!` for notes: the line is formatted as `eprintln!` would, and lost rather than
/// aborting the process when standard error cannot take it ([`say`]).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::console::say(::std::format_args!($($arg)*))
    };
}
