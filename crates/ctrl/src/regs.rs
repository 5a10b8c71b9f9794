// SPDX-License-Identifier: Apache-2.0
//! The BAR0 register file (NVMe Base 1.4, 3.1 "Register Definition"): a value array plus
//! a same-size mask of host-writable bits.
//!
//! This type only stores; the side effects of a write (CC.EN, CC.SHN, INTMS/INTMC) live in
//! one place, `Controller::write_register`.

use nvmemu_spec::regs::{self, cap};

use crate::config::ControllerConfig;

/// 32-bit registers covered: CAP .. CMBSZ (0x00..0x40). Everything else below 0x1000 reads
/// as zero and ignores writes.
const WORDS: usize = 16;

/// CC bits the host may set: EN, CSS, MPS, AMS, SHN, IOSQES, IOCQES.
const CC_WRITABLE: u32 = 0x00FF_FFF1;
/// AQA: ASQS (11:0) and ACQS (27:16).
const AQA_WRITABLE: u32 = 0x0FFF_0FFF;
/// ASQ/ACQ low dword: bits 11:0 are reserved, so bases are always 4 KiB aligned.
const QBASE_LO_WRITABLE: u32 = 0xFFFF_F000;

/// CAP.TO: 20 x 500 ms = 10 s for CSTS.RDY to follow CC.EN.
const TIMEOUT_500MS: u64 = 20;

/// Word index of a register offset.
pub(crate) const fn word(offset: u64) -> usize {
    (offset / 4) as usize
}

/// Register values and writable masks.
#[derive(Debug, Clone)]
pub(crate) struct RegisterFile {
    values: [u32; WORDS],
    writable: [u32; WORDS],
}

impl RegisterFile {
    /// Power-on values for `config`.
    pub(crate) fn new(config: &ControllerConfig) -> RegisterFile {
        let mqes = u64::from(config.max_queue_entries.saturating_sub(1).max(1));
        let cap =
            (mqes & cap::MQES_MASK) | cap::CQR | (TIMEOUT_500MS << cap::TO_SHIFT) | cap::CSS_NVM;
        let mut values = [0u32; WORDS];
        let mut writable = [0u32; WORDS];
        let [lo, hi] = split64(cap);
        set(&mut values, word(regs::CAP), lo);
        set(&mut values, word(regs::CAP) + 1, hi);
        set(&mut values, word(regs::VS), regs::VERSION_1_4);
        set(&mut writable, word(regs::CC), CC_WRITABLE);
        set(&mut writable, word(regs::AQA), AQA_WRITABLE);
        set(&mut writable, word(regs::ASQ), QBASE_LO_WRITABLE);
        set(&mut writable, word(regs::ASQ) + 1, u32::MAX);
        set(&mut writable, word(regs::ACQ), QBASE_LO_WRITABLE);
        set(&mut writable, word(regs::ACQ) + 1, u32::MAX);
        RegisterFile { values, writable }
    }

    /// The dword at word index `w` (zero past the file).
    pub(crate) fn get(&self, w: usize) -> u32 {
        self.values.get(w).copied().unwrap_or(0)
    }

    /// A 64-bit register from two words.
    pub(crate) fn get64(&self, offset: u64) -> u64 {
        u64::from(self.get(word(offset))) | (u64::from(self.get(word(offset) + 1)) << 32)
    }

    /// Store the host-writable bits of `value`; returns the previous value.
    pub(crate) fn write_masked(&mut self, w: usize, value: u32) -> u32 {
        let mask = self.writable.get(w).copied().unwrap_or(0);
        match self.values.get_mut(w) {
            Some(v) => {
                let old = *v;
                *v = (old & !mask) | (value & mask);
                old
            }
            None => 0,
        }
    }

    /// Store a device-owned value (CSTS, the interrupt mask).
    pub(crate) fn set(&mut self, w: usize, value: u32) {
        set(&mut self.values, w, value);
    }

    /// CC.
    pub(crate) fn cc(&self) -> u32 {
        self.get(word(regs::CC))
    }

    /// CAP.MQES + 1: the largest queue size.
    pub(crate) fn max_queue_entries(&self) -> u32 {
        (self.get(word(regs::CAP)) & 0xFFFF) + 1
    }
}

/// The low and high dwords of a 64-bit value.
pub(crate) fn split64(v: u64) -> [u32; 2] {
    let b = v.to_le_bytes();
    let dw = |i: usize| {
        u32::from_le_bytes([
            b.get(i).copied().unwrap_or(0),
            b.get(i + 1).copied().unwrap_or(0),
            b.get(i + 2).copied().unwrap_or(0),
            b.get(i + 3).copied().unwrap_or(0),
        ])
    };
    [dw(0), dw(4)]
}

fn set(array: &mut [u32; WORDS], w: usize, value: u32) {
    if let Some(v) = array.get_mut(w) {
        *v = value;
    }
}

/// Decoded CC fields (NVMe Base 1.4, Figure 78).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cc {
    pub(crate) en: bool,
    pub(crate) css: u32,
    pub(crate) mps: u32,
    pub(crate) ams: u32,
    pub(crate) shn: u32,
    pub(crate) iosqes: u32,
    pub(crate) iocqes: u32,
}

impl Cc {
    pub(crate) fn decode(v: u32) -> Cc {
        use regs::cc;
        Cc {
            en: v & cc::EN != 0,
            css: (v >> cc::CSS_SHIFT) & 0x7,
            mps: (v >> cc::MPS_SHIFT) & 0xF,
            ams: (v >> cc::AMS_SHIFT) & 0x7,
            shn: (v >> cc::SHN_SHIFT) & cc::SHN_MASK,
            iosqes: (v >> cc::IOSQES_SHIFT) & 0xF,
            iocqes: (v >> cc::IOCQES_SHIFT) & 0xF,
        }
    }
}

/// Decoded AQA: admin queue sizes, one-based.
pub(crate) fn aqa_sizes(aqa: u32) -> (u32, u32) {
    ((aqa & 0xFFF) + 1, ((aqa >> 16) & 0xFFF) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_on_values_and_masks() {
        let mut r = RegisterFile::new(&ControllerConfig::default());
        let cap = r.get64(regs::CAP);
        assert_eq!(cap & 0xFFFF, 1023);
        assert_ne!(cap & cap::CQR, 0);
        assert_eq!((cap >> cap::TO_SHIFT) & 0xFF, 20);
        assert_eq!((cap >> cap::DSTRD_SHIFT) & 0xF, 0);
        assert_ne!(cap & cap::CSS_NVM, 0);
        assert_eq!((cap >> cap::MPSMIN_SHIFT) & 0xF, 0);
        assert_eq!(r.get(word(regs::VS)), 0x0001_0400);
        // CAP is read-only; ASQ drops its reserved low bits.
        assert_eq!(r.write_masked(word(regs::CAP), 0), split64(cap)[0]);
        assert_eq!(r.get64(regs::CAP), cap);
        r.write_masked(word(regs::ASQ), 0x1234_5678);
        assert_eq!(r.get(word(regs::ASQ)), 0x1234_5000);
        assert_eq!(r.max_queue_entries(), 1024);
    }

    #[test]
    fn cc_and_aqa_decode() {
        let cc = Cc::decode(0x0046_0001 | (1 << 14));
        assert!(cc.en);
        assert_eq!((cc.iosqes, cc.iocqes, cc.shn, cc.mps), (6, 4, 1, 0));
        assert_eq!(aqa_sizes(0x001F_001F), (32, 32));
    }
}
