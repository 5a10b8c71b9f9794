// SPDX-License-Identifier: Apache-2.0
//! fio's `rw=` value: the pattern ([`RwMode`]) and a sequential pattern's offset step.

use clap::ValueEnum as _;

use crate::option_values::{parse_size, size_to_string};
use crate::options::RwMode;

/// `rw=` as fio writes it: the pattern, and for a sequential one an optional `:N` (bytes,
/// may be negative) added to the offset after each I/O (`rw=write:112k` leaves holes,
/// `rw=read:-8k` with bs=4k reads backwards). Reads as its [`RwMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RwSpec {
    /// The pattern.
    pub mode: RwMode,
    /// Bytes added to the next sequential offset after each I/O.
    pub seq_add: i64,
}

impl std::ops::Deref for RwSpec {
    type Target = RwMode;
    fn deref(&self) -> &RwMode {
        &self.mode
    }
}

impl From<RwMode> for RwSpec {
    fn from(mode: RwMode) -> RwSpec {
        RwSpec { mode, seq_add: 0 }
    }
}

impl PartialEq<RwMode> for RwSpec {
    fn eq(&self, other: &RwMode) -> bool {
        self.mode == *other
    }
}

impl RwSpec {
    /// fio's spelling, with the modifier when there is one.
    pub fn to_fio(self) -> String {
        match self.seq_add {
            0 => self.mode.as_str().to_string(),
            n if n < 0 => format!(
                "{}:-{}",
                self.mode.as_str(),
                size_to_string(n.unsigned_abs())
            ),
            n => format!(
                "{}:{}",
                self.mode.as_str(),
                size_to_string(n.unsigned_abs())
            ),
        }
    }
}

/// Parses `rw`: a [`RwMode`] name, and after a sequential one an optional `:[-]SIZE`.
pub fn parse_rw(s: &str) -> Result<RwSpec, String> {
    let (name, add) = s.split_once(':').unwrap_or((s, ""));
    let mode = RwMode::from_str(name.trim(), true).map_err(|_| {
        format!(
            "{name:?} is not an rw pattern (use read, write, randread, randwrite, rw, randrw, trim, randtrim, trimwrite or randtrimwrite)"
        )
    })?;
    let add = add.trim();
    if add.is_empty() {
        return Ok(mode.into());
    }
    if mode.is_random() {
        return Err(format!(
            "{s:?}: a ':N' modifier is taken for sequential patterns only (rw=read:8k)"
        ));
    }
    let (neg, size) = add.strip_prefix('-').map_or((false, add), |v| (true, v));
    let bytes = parse_size(size).map_err(|e| e.to_string())?;
    let bytes = i64::try_from(bytes).map_err(|_| format!("{s:?}: the offset step is too large"))?;
    Ok(RwSpec {
        mode,
        seq_add: if neg { -bytes } else { bytes },
    })
}
