// SPDX-License-Identifier: Apache-2.0
//! PCI configuration space of the emulated NVMe function (PCI Local Bus 3.0 type 0 header,
//! PCI Express Base 4.0 capabilities).
//!
//! Kept as a value array plus a same-size mask of writable bits, as cloud-hypervisor's
//! `pci/src/configuration.rs` does: a write only changes writable bits, so a BAR sizing probe
//! (all ones) reads back the size mask, and read-only identity fields never move. Every side
//! effect of a write is reported as a [`ConfigEvent`] by the single `write` function.

/// Size of a PCI Express configuration space.
pub const CONFIG_SPACE_SIZE: usize = 4096;

/// PCI vendor ID (the same one SPDK's vfio-user target uses).
pub const VENDOR_ID: u16 = 0x4e58;
/// PCI device ID.
pub const DEVICE_ID: u16 = 0x0001;

const COMMAND: usize = 0x04;
const STATUS: usize = 0x06;
const BAR0: usize = 0x10;
const CAP_PTR: usize = 0x34;
const INTERRUPT_LINE: usize = 0x3C;

/// Power Management capability offset.
pub const PM_CAP: usize = PM_CAP_PTR as usize;
/// PCI Express capability offset.
pub const PCIE_CAP: usize = PCIE_CAP_PTR as usize;
/// MSI-X capability offset.
pub const MSIX_CAP: usize = MSIX_CAP_PTR as usize;
const PM_CAP_PTR: u8 = 0x40;
const PCIE_CAP_PTR: u8 = 0x48;
const MSIX_CAP_PTR: u8 = 0x84;
const PCIE_DEVCTL: usize = PCIE_CAP + 0x08;
const MSIX_CONTROL: usize = MSIX_CAP + 0x02;

/// Command register: Memory Space Enable.
pub const COMMAND_MEMORY: u16 = 1 << 1;
/// Command register: Bus Master Enable.
pub const COMMAND_BUS_MASTER: u16 = 1 << 2;
/// Command register: Interrupt Disable (INTx).
pub const COMMAND_INTX_DISABLE: u16 = 1 << 10;
const MSIX_ENABLE: u16 = 1 << 15;
const MSIX_FUNCTION_MASK: u16 = 1 << 14;
const DEVCTL_INITIATE_FLR: u16 = 1 << 15;

/// What the device must do after a config write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConfigEvent {
    /// MSI-X Enable or Function Mask changed.
    pub msix_changed: bool,
    /// The guest asked for a Function Level Reset.
    pub flr: bool,
}

/// Why a config access was refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// The access does not fit in the 4 KiB config space.
    #[error("config access at {offset:#x} of {len} bytes is outside the config space")]
    OutOfRange {
        /// Offset of the access.
        offset: u64,
        /// Length of the access.
        len: usize,
    },
}

/// Sizes of the memory BARs the function implements (0 = not implemented).
#[derive(Debug, Clone, Copy)]
pub struct BarSizes(pub [u32; 6]);

/// The config space: values and writable-bit mask.
#[derive(Debug, Clone)]
pub struct ConfigSpace {
    values: Box<[u8; CONFIG_SPACE_SIZE]>,
    writable: Box<[u8; CONFIG_SPACE_SIZE]>,
    defaults: Box<[u8; CONFIG_SPACE_SIZE]>,
}

impl ConfigSpace {
    /// Build the NVMe function's config space. `msix_vectors` is 1..=2048; BAR sizes must be
    /// powers of two of at least 16 bytes (QEMU asserts power-of-two BAR sizes).
    pub fn new(bars: BarSizes, msix_vectors: u16, subsystem_id: u16) -> ConfigSpace {
        let mut cs = ConfigSpace {
            values: Box::new([0; CONFIG_SPACE_SIZE]),
            writable: Box::new([0; CONFIG_SPACE_SIZE]),
            defaults: Box::new([0; CONFIG_SPACE_SIZE]),
        };
        cs.set_u16(0x00, VENDOR_ID);
        cs.set_u16(0x02, DEVICE_ID);
        // Memory, Bus Master, Parity and SERR enables, Interrupt Disable.
        cs.set_mask_u16(
            COMMAND,
            COMMAND_MEMORY | COMMAND_BUS_MASTER | (1 << 6) | (1 << 8) | COMMAND_INTX_DISABLE,
        );
        cs.set_u16(STATUS, 1 << 4); // Capabilities List.
        // Class code: mass storage (01h), non-volatile memory (08h), NVM Express (02h).
        cs.set_u8(0x09, 0x02);
        cs.set_u8(0x0A, 0x08);
        cs.set_u8(0x0B, 0x01);
        cs.set_mask_u8(0x0C, 0xFF); // Cache Line Size.
        for (i, &size) in bars.0.iter().enumerate() {
            if size != 0 {
                debug_assert!(size.is_power_of_two() && size >= 16);
                // 32-bit non-prefetchable memory BAR: the type bits read 0, address bits
                // above the size are writable.
                cs.set_mask_u32(BAR0 + 4 * i, !(size - 1));
            }
        }
        cs.set_u16(0x2C, VENDOR_ID);
        cs.set_u16(0x2E, subsystem_id);
        // ROM BAR reads back 0 whatever is written: "no expansion ROM" (QEMU probes it).
        cs.set_u8(CAP_PTR, PM_CAP_PTR);
        cs.set_mask_u8(INTERRUPT_LINE, 0xFF);
        cs.set_u8(INTERRUPT_LINE + 1, 1); // Interrupt Pin: INTA#.

        // Power Management: version 3; PMCSR power state writable, No_Soft_Reset set.
        cs.set_u8(PM_CAP, 0x01);
        cs.set_u8(PM_CAP + 1, PCIE_CAP_PTR);
        cs.set_u16(PM_CAP + 2, 0x0003);
        cs.set_u16(PM_CAP + 4, 1 << 3);
        cs.set_mask_u16(PM_CAP + 4, 0x0003);

        // PCI Express capability v2, endpoint; FLR and role-based error reporting.
        cs.set_u8(PCIE_CAP, 0x10);
        cs.set_u8(PCIE_CAP + 1, MSIX_CAP_PTR);
        cs.set_u16(PCIE_CAP + 2, 0x0002);
        cs.set_u32(PCIE_CAP + 0x04, (1 << 28) | (1 << 15));
        cs.set_mask_u16(PCIE_DEVCTL, 0x7FFF | DEVCTL_INITIATE_FLR);
        cs.set_u16(PCIE_DEVCTL, 0x2810 & 0x7FFF); // Max read request 512 B, relaxed ordering, no-snoop.
        cs.set_u32(PCIE_CAP + 0x0C, 0x0000_0011); // Link: 2.5 GT/s, x1.
        cs.set_u16(PCIE_CAP + 0x12, 0x0011);
        cs.set_u32(PCIE_CAP + 0x24, 1 << 4); // DevCap2: completion timeout disable supported.
        cs.set_mask_u16(PCIE_CAP + 0x28, 0x041F);

        // MSI-X: table in BAR4 at offset 0, PBA in BAR5 at offset 0.
        cs.set_u8(MSIX_CAP, 0x11);
        cs.set_u8(MSIX_CAP + 1, 0x00);
        cs.set_u16(MSIX_CONTROL, msix_vectors.clamp(1, 2048) - 1);
        cs.set_mask_u16(MSIX_CONTROL, MSIX_ENABLE | MSIX_FUNCTION_MASK);
        cs.set_u32(MSIX_CAP + 4, 4);
        cs.set_u32(MSIX_CAP + 8, 5);

        cs.defaults.copy_from_slice(&cs.values[..]);
        cs
    }

    /// Read `data.len()` bytes at `offset`.
    pub fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), ConfigError> {
        let range = Self::range(offset, data.len())?;
        data.copy_from_slice(&self.values[range]);
        Ok(())
    }

    /// Write `data` at `offset`, changing only writable bits; returns what changed.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<ConfigEvent, ConfigError> {
        let range = Self::range(offset, data.len())?;
        let msix_before = self.u16_at(MSIX_CONTROL);
        for (i, &byte) in range.clone().zip(data) {
            let mask = self.writable[i];
            self.values[i] = (self.values[i] & !mask) | (byte & mask);
        }
        let mut event = ConfigEvent {
            msix_changed: self.u16_at(MSIX_CONTROL) != msix_before,
            flr: false,
        };
        if self.u16_at(PCIE_DEVCTL) & DEVCTL_INITIATE_FLR != 0 {
            // "Initiate Function Level Reset" always reads 0.
            let v = self.u16_at(PCIE_DEVCTL) & !DEVCTL_INITIATE_FLR;
            self.set_u16(PCIE_DEVCTL, v);
            event.flr = true;
        }
        Ok(event)
    }

    /// Back to the power-on state (Function Level Reset).
    pub fn reset(&mut self) {
        self.values.copy_from_slice(&self.defaults[..]);
    }

    /// Whether MSI-X is enabled and the function is not masked.
    pub fn msix_active(&self) -> bool {
        let control = self.u16_at(MSIX_CONTROL);
        control & MSIX_ENABLE != 0 && control & MSIX_FUNCTION_MASK == 0
    }

    /// The command register.
    pub fn command(&self) -> u16 {
        self.u16_at(COMMAND)
    }

    fn range(offset: u64, len: usize) -> Result<std::ops::Range<usize>, ConfigError> {
        let err = ConfigError::OutOfRange { offset, len };
        let start = usize::try_from(offset).map_err(|_| err.clone())?;
        let end = start.checked_add(len).ok_or(err.clone())?;
        if end > CONFIG_SPACE_SIZE {
            return Err(err);
        }
        Ok(start..end)
    }

    fn u16_at(&self, offset: usize) -> u16 {
        let mut b = [0u8; 2];
        b.copy_from_slice(&self.values[offset..offset + 2]);
        u16::from_le_bytes(b)
    }

    fn set_u8(&mut self, offset: usize, v: u8) {
        self.values[offset] = v;
    }

    fn set_u16(&mut self, offset: usize, v: u16) {
        self.values[offset..offset + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn set_u32(&mut self, offset: usize, v: u32) {
        self.values[offset..offset + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn set_mask_u8(&mut self, offset: usize, m: u8) {
        self.writable[offset] = m;
    }

    fn set_mask_u16(&mut self, offset: usize, m: u16) {
        self.writable[offset..offset + 2].copy_from_slice(&m.to_le_bytes());
    }

    fn set_mask_u32(&mut self, offset: usize, m: u32) {
        self.writable[offset..offset + 4].copy_from_slice(&m.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> ConfigSpace {
        ConfigSpace::new(BarSizes([0x4000, 0, 0, 0, 0x1000, 0x1000]), 64, 0)
    }

    fn read_u32(cs: &ConfigSpace, off: u64) -> u32 {
        let mut b = [0u8; 4];
        cs.read(off, &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    #[test]
    fn identity_and_class_code() {
        let cs = space();
        assert_eq!(read_u32(&cs, 0), 0x0001_4e58);
        assert_eq!(read_u32(&cs, 8) >> 8, 0x01_08_02);
        assert_eq!(read_u32(&cs, 0x2C), 0x0000_4e58);
    }

    #[test]
    fn bar_probe_returns_size_mask() {
        let mut cs = space();
        cs.write(0x10, &u32::MAX.to_le_bytes()).unwrap();
        assert_eq!(read_u32(&cs, 0x10), 0xFFFF_C000);
        cs.write(0x20, &u32::MAX.to_le_bytes()).unwrap();
        assert_eq!(read_u32(&cs, 0x20), 0xFFFF_F000);
        cs.write(0x14, &u32::MAX.to_le_bytes()).unwrap();
        assert_eq!(read_u32(&cs, 0x14), 0, "unimplemented BAR stays 0");
        cs.write(0x30, &0xFFFF_F800u32.to_le_bytes()).unwrap();
        assert_eq!(read_u32(&cs, 0x30), 0, "no expansion ROM");
    }

    #[test]
    fn identity_is_read_only() {
        let mut cs = space();
        cs.write(0, &[0xFF; 12]).unwrap();
        assert_eq!(read_u32(&cs, 0), 0x0001_4e58);
        assert_eq!(read_u32(&cs, 8) >> 8, 0x01_08_02);
    }

    #[test]
    fn capability_chain_is_walkable() {
        let cs = space();
        let mut ids = vec![];
        let mut b = [0u8; 2];
        cs.read(0x34, &mut b[..1]).unwrap();
        let mut next = u64::from(b[0]);
        while next != 0 {
            cs.read(next, &mut b).unwrap();
            ids.push(b[0]);
            next = u64::from(b[1]);
        }
        assert_eq!(ids, vec![0x01, 0x10, 0x11]);
    }

    #[test]
    fn msix_enable_and_flr_raise_events() {
        let mut cs = space();
        assert!(!cs.msix_active());
        let ev = cs.write(0x86, &(1u16 << 15 | 63).to_le_bytes()).unwrap();
        assert!(ev.msix_changed && cs.msix_active());
        let mut ctl = [0u8; 2];
        cs.read(0x86, &mut ctl).unwrap();
        assert_eq!(
            u16::from_le_bytes(ctl) & 0x7FF,
            63,
            "table size is read-only"
        );
        let ev = cs.write(0x50, &(1u16 << 15).to_le_bytes()).unwrap();
        assert!(ev.flr);
        cs.read(0x50, &mut ctl).unwrap();
        assert_eq!(u16::from_le_bytes(ctl) & (1 << 15), 0);
        cs.reset();
        assert!(!cs.msix_active());
    }

    #[test]
    fn out_of_range_is_refused() {
        let mut cs = space();
        let mut b = [0u8; 4];
        assert!(cs.read(4094, &mut b).is_err());
        assert!(cs.write(u64::MAX, &b).is_err());
        assert!(cs.read(4092, &mut b).is_ok());
    }
}
