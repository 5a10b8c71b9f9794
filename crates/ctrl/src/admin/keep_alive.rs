// SPDX-License-Identifier: Apache-2.0
//! The Keep Alive Timeout of a fabrics controller (NVMe Base 2.0, 3.9.5 and the Keep
//! Alive Timer feature, FID 0Fh). Connect sets it, Get/Set Features read and change it; the
//! transport owns the timer itself (it sees every command arrive) and reads the timeout
//! from here. The value belongs to the association, so a controller reset keeps it.
//!
//! A PCIe controller reports KAS 0: no timer, KATO reads 0 and only 0 may be set.

use std::time::Duration;

use nvmemu_spec::Status;

use crate::Controller;

/// One KAS unit: KAS counts the timer's granularity in 100 ms units.
const KAS_UNIT_MS: u32 = 100;

impl Controller {
    /// The timer's granularity, or None without keep alive support (KAS 0).
    pub(crate) fn keep_alive_granularity_ms(&self) -> Option<u32> {
        let kas = self.config.fabrics.map_or(0, |f| f.kas);
        (kas != 0).then(|| u32::from(kas) * KAS_UNIT_MS)
    }

    /// Set the Keep Alive Timeout to `ms` (0 disables the timer), rounded up to the KAS
    /// granularity as SPDK's target does; returns the value kept. Connect's KATO comes
    /// this way. Without keep alive support nothing is kept and 0 is returned.
    pub fn set_keep_alive_timeout(&mut self, ms: u32) -> u32 {
        let Some(unit) = self.keep_alive_granularity_ms() else {
            return 0;
        };
        self.kato_ms = ms.div_ceil(unit).saturating_mul(unit);
        self.kato_ms
    }

    /// The Keep Alive Timeout in effect (None: no timer runs).
    pub fn keep_alive_timeout(&self) -> Option<Duration> {
        (self.kato_ms != 0).then(|| Duration::from_millis(u64::from(self.kato_ms)))
    }

    /// The timer's granularity (KAS), for a transport's tolerance of a late Keep Alive.
    pub fn keep_alive_granularity(&self) -> Option<Duration> {
        self.keep_alive_granularity_ms()
            .map(|ms| Duration::from_millis(u64::from(ms)))
    }

    /// Set Features Keep Alive Timer: any value with keep alive support (0 disables, as
    /// Linux's target allows); only 0 without (no timer to enable).
    pub(crate) fn set_keep_alive_feature(&mut self, value: u32) -> Result<u32, Status> {
        if self.keep_alive_granularity_ms().is_none() {
            if value == 0 {
                return Ok(0);
            }
            tracing::debug!(target: "guest", value, "Keep Alive Timer without keep alive support");
            return Err(Status::INVALID_FIELD);
        }
        self.set_keep_alive_timeout(value);
        Ok(0)
    }
}
