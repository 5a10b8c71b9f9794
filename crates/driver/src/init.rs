// SPDX-License-Identifier: Apache-2.0
//! Register-level controller state changes (NVMe Base 1.4, 7.6.1 "Initialization" and 7.6.2
//! "Shutdown"): CAP decoding, disable, enable and shutdown notification with CSTS polling.

use std::time::{Duration, Instant};

use nvmemu_spec::regs::{self, cap, cc, csts};

use crate::error::DriverError;
use crate::transport::Transport;

/// Decoded Controller Capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap(pub u64);

impl Cap {
    /// Maximum entries per queue (MQES + 1).
    pub fn max_queue_entries(self) -> u32 {
        u32::try_from(self.0 & cap::MQES_MASK).unwrap_or(0) + 1
    }

    /// Worst-case time for CSTS.RDY to change (CAP.TO in 500 ms units, at least 500 ms).
    pub fn timeout(self) -> Duration {
        let to = (self.0 >> cap::TO_SHIFT) & 0xFF;
        Duration::from_millis(500 * to.max(1))
    }

    /// Doorbell stride exponent (stride = 4 << DSTRD bytes).
    pub fn dstrd(self) -> u32 {
        u32::try_from((self.0 >> cap::DSTRD_SHIFT) & 0xF).unwrap_or(0)
    }

    /// Whether the NVM command set is supported (CSS bit 0).
    pub fn supports_nvm(self) -> bool {
        self.0 & cap::CSS_NVM != 0
    }

    /// Minimum memory page size exponent (page = 2^(12 + MPSMIN)).
    pub fn mpsmin(self) -> u32 {
        u32::try_from((self.0 >> cap::MPSMIN_SHIFT) & 0xF).unwrap_or(0)
    }
}

/// The CC value the driver enables with: EN, CSS = NVM, MPS = 0 (4 KiB), AMS = round robin,
/// IOSQES = 6 (64 bytes), IOCQES = 4 (16 bytes).
pub const CC_ENABLE: u32 = cc::EN | (6 << cc::IOSQES_SHIFT) | (4 << cc::IOCQES_SHIFT);

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Poll CSTS until `done(csts)` holds; CFS set is an error unless `tolerate_cfs`.
pub(crate) fn wait_csts(
    t: &mut dyn Transport,
    what: &'static str,
    timeout: Duration,
    tolerate_cfs: bool,
    done: impl Fn(u32) -> bool,
) -> Result<u32, DriverError> {
    let start = Instant::now();
    loop {
        let v = t.read_reg32(regs::CSTS)?;
        if done(v) {
            return Ok(v);
        }
        if v & csts::CFS != 0 && !tolerate_cfs {
            return Err(DriverError::ControllerFatal { csts: v });
        }
        if start.elapsed() > timeout {
            return Err(DriverError::Timeout {
                what,
                millis: millis(timeout),
            });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Clear CC.EN (if set) and wait for CSTS.RDY = 0. A controller in fatal state may be reset
/// this way, so CFS is tolerated here.
pub(crate) fn disable(t: &mut dyn Transport, cap: Cap) -> Result<(), DriverError> {
    let cur = t.read_reg32(regs::CC)?;
    if cur & cc::EN != 0 {
        t.write_reg32(regs::CC, cur & !cc::EN)?;
    }
    wait_csts(t, "CSTS.RDY=0", cap.timeout(), true, |v| v & csts::RDY == 0)?;
    Ok(())
}

/// Program the admin queue registers, set CC to `CC_ENABLE` and wait for CSTS.RDY = 1.
pub(crate) fn enable(
    t: &mut dyn Transport,
    cap: Cap,
    admin_depth: u16,
    asq: u64,
    acq: u64,
) -> Result<(), DriverError> {
    let z = u32::from(admin_depth.saturating_sub(1));
    t.write_reg32(regs::AQA, z | (z << 16))?;
    t.write_reg64(regs::ASQ, asq)?;
    t.write_reg64(regs::ACQ, acq)?;
    t.write_reg32(regs::CC, CC_ENABLE)?;
    wait_csts(t, "CSTS.RDY=1", cap.timeout(), false, |v| {
        v & csts::RDY != 0
    })?;
    Ok(())
}

/// Normal shutdown notification (CC.SHN = 01b) and wait for CSTS.SHST = 10b.
pub(crate) fn shutdown(t: &mut dyn Transport, cap: Cap) -> Result<(), DriverError> {
    let cur = t.read_reg32(regs::CC)?;
    let shn = cur & !(cc::SHN_MASK << cc::SHN_SHIFT) | (1 << cc::SHN_SHIFT);
    t.write_reg32(regs::CC, shn)?;
    // SPDK and Linux allow at least a few seconds regardless of CAP.TO.
    let timeout = cap.timeout().max(Duration::from_secs(5));
    wait_csts(t, "CSTS.SHST=10b", timeout, true, |v| {
        v & (0x3 << csts::SHST_SHIFT) == csts::SHST_COMPLETE
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_fields() {
        let c = Cap(0x3FF | (20 << 24) | (1u64 << 32) | cap::CSS_NVM);
        assert_eq!(c.max_queue_entries(), 1024);
        assert_eq!(c.timeout(), Duration::from_secs(10));
        assert_eq!(c.dstrd(), 1);
        assert!(c.supports_nvm());
        assert_eq!(c.mpsmin(), 0);
        assert_eq!(Cap(0).timeout(), Duration::from_millis(500));
    }

    #[test]
    fn cc_enable_value_matches_linux_and_spdk() {
        // The value SPDK issue #439 shows a client writing: 0x460001.
        assert_eq!(CC_ENABLE, 0x0046_0001);
    }
}
