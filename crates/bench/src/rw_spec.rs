// SPDX-License-Identifier: Apache-2.0
//! fio's `rw=` value: the pattern ([`RwMode`]) and a sequential pattern's offset step.

use clap::ValueEnum;

use crate::option_values::{parse_size, size_to_string};

/// fio's `rw=` workload kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RwMode {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    Randread,
    /// Random writes.
    Randwrite,
    /// Sequential mixed reads and writes (`rw`/`readwrite`).
    #[value(alias = "readwrite")]
    Rw,
    /// Random mixed reads and writes.
    Randrw,
    /// Sequential trims (Dataset Management, Deallocate).
    Trim,
    /// Random trims.
    Randtrim,
    /// Sequential trims, each range then written (in write-sized I/Os).
    Trimwrite,
    /// Random trims, each range then written.
    Randtrimwrite,
}

impl RwMode {
    /// Offsets are random rather than sequential.
    pub fn is_random(self) -> bool {
        matches!(
            self,
            RwMode::Randread
                | RwMode::Randwrite
                | RwMode::Randrw
                | RwMode::Randtrim
                | RwMode::Randtrimwrite
        )
    }

    /// Every I/O is a trim.
    pub fn is_trim(self) -> bool {
        matches!(self, RwMode::Trim | RwMode::Randtrim)
    }

    /// Each trimmed range is written next.
    pub fn is_trimwrite(self) -> bool {
        matches!(self, RwMode::Trimwrite | RwMode::Randtrimwrite)
    }

    /// Percentage of I/Os that are reads, given `rwmixread`.
    pub fn read_pct(self, rwmixread: u8) -> u8 {
        match self {
            RwMode::Read | RwMode::Randread => 100,
            RwMode::Write
            | RwMode::Randwrite
            | RwMode::Trim
            | RwMode::Randtrim
            | RwMode::Trimwrite
            | RwMode::Randtrimwrite => 0,
            RwMode::Rw | RwMode::Randrw => rwmixread,
        }
    }

    /// fio's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
            RwMode::Randread => "randread",
            RwMode::Randwrite => "randwrite",
            RwMode::Rw => "rw",
            RwMode::Randrw => "randrw",
            RwMode::Trim => "trim",
            RwMode::Randtrim => "randtrim",
            RwMode::Trimwrite => "trimwrite",
            RwMode::Randtrimwrite => "randtrimwrite",
        }
    }
}

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
