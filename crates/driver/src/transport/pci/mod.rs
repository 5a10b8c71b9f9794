// SPDX-License-Identifier: Apache-2.0
//! `Transport` on a PCI function of this machine, for a driver in userspace: bound to
//! `uio_pci_generic` (BAR0 from sysfs `resource0`, config space from sysfs `config`, DMA
//! at physical addresses) or to `vfio-pci` (BAR0 and config space through the VFIO device
//! fd; DMA through the IOMMU at an IOVA, or at physical addresses in no-IOMMU mode).
//!
//! Registers and doorbells are plain 32-bit loads and stores on the BAR0 mapping (64-bit
//! registers as low then high half, as Linux's `lo_hi_readq` does); nothing here takes an
//! interrupt: the driver polls.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use nvmemu_mem::{Iova, MmapRegion, Protection, vfio as vfio_ioctl};

use super::{Transport, TransportError};
use crate::dma::{DMA_POOL_IOVA, DmaPool};
use crate::error::DriverError;

mod address;
mod pagemap;
pub mod sysfs;
mod vfio;

pub use address::{BadPciAddress, PciAddress};

/// BAR0 offset of the first doorbell.
const DOORBELL_START: u64 = 0x1000;
/// BAR0 must reach at least here (the admin queue's doorbells and the first I/O queue's).
const BAR0_MIN: u64 = 0x2000;

/// Where BAR0 is mapped from: a sysfs `resource0` file or the VFIO device fd at an offset.
struct Bar0 {
    file: File,
    offset: u64,
    size: u64,
}

/// Where config space is read and written: sysfs `config` or the VFIO device fd.
struct ConfigAccess {
    file: File,
    offset: u64,
}

/// How the device reaches our memory.
enum Dma {
    /// Physical addresses of huge pages (uio, VFIO no-IOMMU).
    Physical,
    /// An IOVA range mapped in the IOMMU through this VFIO container.
    Iommu { container: OwnedFd },
}

/// Which kernel driver gives us the function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PciAccess {
    /// `uio_pci_generic`.
    Uio,
    /// `vfio-pci` with an IOMMU.
    Vfio,
    /// `vfio-pci` in no-IOMMU mode.
    VfioNoIommu,
}

/// An NVMe function on this machine's PCI bus, driven from userspace.
pub struct PciTransport {
    addr: PciAddress,
    access: PciAccess,
    /// BAR0 `[0, 0x1000)`: the controller registers.
    regs: MmapRegion,
    bar0: Bar0,
    config: ConfigAccess,
    dma: Dma,
    _keep: Vec<OwnedFd>,
}

impl std::fmt::Debug for PciTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PciTransport")
            .field("addr", &self.addr)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl PciTransport {
    /// Open the function at `addr` through the driver it is bound to (`uio_pci_generic` or
    /// `vfio-pci`); any other binding is an error that says how to rebind.
    pub fn open(addr: PciAddress) -> Result<PciTransport, TransportError> {
        let rebind = |now: &str| {
            TransportError::Setup(format!(
                "{addr} is {now}: bind it to a userspace driver first with \
                 `nvmemu bind {addr} uio_pci_generic` (or vfio-pci)"
            ))
        };
        let (access, bar0, config, dma, keep) = match sysfs::bound_driver(addr)?.as_deref() {
            Some("uio_pci_generic") => {
                if let Some(kind) = sysfs::translating_iommu(addr) {
                    return Err(TransportError::Setup(format!(
                        "{addr} sits behind an IOMMU that translates its DMA ({kind} domain), so \
                         uio's physical addresses would miss: bind it to vfio-pci instead, or \
                         boot with iommu=pt"
                    )));
                }
                let dir = sysfs::device_dir(addr);
                let file = sysfs::open_rw(&dir.join("resource0"))?;
                let size = file
                    .metadata()
                    .map_err(|e| sysfs::io_error(&dir.join("resource0"), e))?
                    .len();
                let config = sysfs::open_rw(&dir.join("config"))?;
                (
                    PciAccess::Uio,
                    Bar0 {
                        file,
                        offset: 0,
                        size,
                    },
                    ConfigAccess {
                        file: config,
                        offset: 0,
                    },
                    Dma::Physical,
                    Vec::new(),
                )
            }
            Some("vfio-pci") => {
                let d = vfio::open(addr)?;
                let access = match d.dma {
                    Dma::Physical => PciAccess::VfioNoIommu,
                    Dma::Iommu { .. } => PciAccess::Vfio,
                };
                (access, d.bar0, d.config, d.dma, d.keep)
            }
            Some("nvme") => {
                return Err(rebind(
                    "bound to the kernel's nvme driver (its namespaces would vanish)",
                ));
            }
            Some(other) => return Err(rebind(&format!("bound to {other}"))),
            None => return Err(rebind("bound to no driver")),
        };
        PciTransport::from_parts(addr, access, bar0, config, dma, keep)
    }

    fn from_parts(
        addr: PciAddress,
        access: PciAccess,
        bar0: Bar0,
        config: ConfigAccess,
        dma: Dma,
        keep: Vec<OwnedFd>,
    ) -> Result<PciTransport, TransportError> {
        if bar0.size < BAR0_MIN {
            return Err(TransportError::Unsupported(format!(
                "BAR0 of {addr} is {:#x} bytes, smaller than {BAR0_MIN:#x}",
                bar0.size
            )));
        }
        let regs = MmapRegion::map_shared(
            bar0.file.as_fd(),
            bar0.offset,
            DOORBELL_START,
            Protection::ReadWrite,
        )?;
        Ok(PciTransport {
            addr,
            access,
            regs,
            bar0,
            config,
            dma,
            _keep: keep,
        })
    }

    /// How the function is reached.
    pub fn access(&self) -> PciAccess {
        self.access
    }

    fn check_reg(&self, offset: u64, width: u64) -> Result<(), TransportError> {
        if !offset.is_multiple_of(width) || offset + width > DOORBELL_START {
            return Err(TransportError::BadAccess { offset });
        }
        Ok(())
    }

    fn config_io(&self, what: &'static str, e: std::io::Error) -> TransportError {
        TransportError::Io {
            what: format!("config space {what} of {}", self.addr),
            source: e,
        }
    }
}

impl Transport for PciTransport {
    fn read_reg32(&mut self, offset: u64) -> Result<u32, TransportError> {
        self.check_reg(offset, 4)?;
        Ok(self.regs.load_acquire_u32(offset)?)
    }

    fn read_reg64(&mut self, offset: u64) -> Result<u64, TransportError> {
        self.check_reg(offset, 8)?;
        let lo = self.regs.load_acquire_u32(offset)?;
        let hi = self.regs.load_acquire_u32(offset + 4)?;
        Ok(u64::from(lo) | (u64::from(hi) << 32))
    }

    fn write_reg32(&mut self, offset: u64, value: u32) -> Result<(), TransportError> {
        self.check_reg(offset, 4)?;
        Ok(self.regs.store_release_u32(offset, value)?)
    }

    fn write_reg64(&mut self, offset: u64, value: u64) -> Result<(), TransportError> {
        self.check_reg(offset, 8)?;
        #[allow(clippy::cast_possible_truncation)] // the two halves, on purpose
        let (lo, hi) = (value as u32, (value >> 32) as u32);
        self.regs.store_release_u32(offset, lo)?;
        Ok(self.regs.store_release_u32(offset + 4, hi)?)
    }

    fn map_doorbells(&mut self) -> Result<Arc<MmapRegion>, TransportError> {
        let region = MmapRegion::map_shared(
            self.bar0.file.as_fd(),
            self.bar0.offset + DOORBELL_START,
            self.bar0.size - DOORBELL_START,
            Protection::ReadWrite,
        )?;
        Ok(Arc::new(region))
    }

    fn create_dma_pool(&mut self, bytes: u64) -> Result<DmaPool, DriverError> {
        match &self.dma {
            Dma::Physical => Ok(DmaPool::physical(bytes, pagemap::physical_pages)?),
            Dma::Iommu { container } => {
                let pool = DmaPool::new(bytes, Iova(DMA_POOL_IOVA))?;
                vfio_ioctl::map_dma(container.as_fd(), pool.region(), DMA_POOL_IOVA).map_err(
                    vfio::ioctl_failed(
                        "VFIO_IOMMU_MAP_DMA of the DMA pool (locked memory limit? \
                         raise ulimit -l or run as root)"
                            .into(),
                    ),
                )?;
                Ok(pool)
            }
        }
    }

    fn dma_map(
        &mut self,
        _fd: BorrowedFd<'_>,
        _fd_offset: u64,
        _iova: Iova,
        _size: u64,
    ) -> Result<(), TransportError> {
        Err(TransportError::Unsupported(
            "a PCI function's DMA memory comes from create_dma_pool".into(),
        ))
    }

    fn dma_unmap(&mut self, iova: Iova, size: u64) -> Result<(), TransportError> {
        match &self.dma {
            Dma::Physical => Ok(()),
            Dma::Iommu { container } => vfio_ioctl::unmap_dma(container.as_fd(), iova.0, size)
                .map_err(vfio::ioctl_failed("VFIO_IOMMU_UNMAP_DMA".into())),
        }
    }

    fn config_read16(&mut self, offset: u64) -> Result<u16, TransportError> {
        let mut b = [0u8; 2];
        use std::os::unix::fs::FileExt;
        self.config
            .file
            .read_exact_at(&mut b, self.config.offset + offset)
            .map_err(|e| self.config_io("read", e))?;
        Ok(u16::from_le_bytes(b))
    }

    fn config_write16(&mut self, offset: u64, value: u16) -> Result<(), TransportError> {
        use std::os::unix::fs::FileExt;
        self.config
            .file
            .write_all_at(&value.to_le_bytes(), self.config.offset + offset)
            .map_err(|e| self.config_io("write", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{PCI_COMMAND, PCI_COMMAND_MASTER, enable_bus_master};
    use std::os::unix::fs::FileExt;

    /// A transport on plain files standing in for `resource0` and `config`.
    fn on_files(bar_size: u64) -> (PciTransport, File, File) {
        let bar = tempfile::tempfile().unwrap();
        bar.set_len(bar_size).unwrap();
        let config = tempfile::tempfile().unwrap();
        config.set_len(256).unwrap();
        let t = PciTransport::from_parts(
            "0000:01:00.0".parse().unwrap(),
            PciAccess::Uio,
            Bar0 {
                file: bar.try_clone().unwrap(),
                offset: 0,
                size: bar_size,
            },
            ConfigAccess {
                file: config.try_clone().unwrap(),
                offset: 0,
            },
            Dma::Physical,
            Vec::new(),
        );
        (t.unwrap(), bar, config)
    }

    #[test]
    fn registers_are_32_bit_accesses_low_half_first() {
        let (mut t, bar, _) = on_files(0x4000);
        t.write_reg64(0x28, 0x1122_3344_5566_7788).unwrap();
        let mut b = [0u8; 8];
        bar.read_exact_at(&mut b, 0x28).unwrap();
        assert_eq!(u64::from_le_bytes(b), 0x1122_3344_5566_7788);
        assert_eq!(t.read_reg32(0x2C).unwrap(), 0x1122_3344);
        bar.write_all_at(&0xDEAD_BEEF_0000_0001u64.to_le_bytes(), 0)
            .unwrap();
        assert_eq!(t.read_reg64(0).unwrap(), 0xDEAD_BEEF_0000_0001);
        assert!(matches!(
            t.read_reg32(0x1000),
            Err(TransportError::BadAccess { offset: 0x1000 })
        ));
        assert!(matches!(
            t.write_reg64(0x2C, 0),
            Err(TransportError::BadAccess { offset: 0x2C })
        ));
    }

    #[test]
    fn doorbells_start_at_bar0_0x1000() {
        let (mut t, bar, _) = on_files(0x4000);
        let db = t.map_doorbells().unwrap();
        assert_eq!(db.len(), 0x3000);
        db.store_release_u32(4, 7).unwrap(); // admin CQ head doorbell (DSTRD 0)
        let mut b = [0u8; 4];
        bar.read_exact_at(&mut b, 0x1004).unwrap();
        assert_eq!(u32::from_le_bytes(b), 7);
    }

    #[test]
    fn bus_mastering_is_written_to_config_space() {
        let (mut t, _, config) = on_files(0x2000);
        config
            .write_all_at(&0x0400u16.to_le_bytes(), PCI_COMMAND)
            .unwrap();
        enable_bus_master(&mut t).unwrap();
        let mut b = [0u8; 2];
        config.read_exact_at(&mut b, PCI_COMMAND).unwrap();
        assert_ne!(u16::from_le_bytes(b) & PCI_COMMAND_MASTER, 0);
        assert_eq!(t.config_read16(PCI_COMMAND).unwrap(), u16::from_le_bytes(b));
    }

    #[test]
    fn a_small_bar0_and_a_missing_function_are_refused() {
        let bar = tempfile::tempfile().unwrap();
        bar.set_len(0x1000).unwrap();
        let r = PciTransport::from_parts(
            "0000:01:00.0".parse().unwrap(),
            PciAccess::Uio,
            Bar0 {
                file: bar,
                offset: 0,
                size: 0x1000,
            },
            ConfigAccess {
                file: tempfile::tempfile().unwrap(),
                offset: 0,
            },
            Dma::Physical,
            Vec::new(),
        );
        assert!(matches!(r, Err(TransportError::Unsupported(_))));
        let e = PciTransport::open("00ff:ff:1f.7".parse().unwrap()).unwrap_err();
        assert!(
            e.to_string().starts_with("no PCI function 00ff:ff:1f.7"),
            "{e}"
        );
    }
}
