// SPDX-License-Identifier: Apache-2.0
//! The fake device served over a real vfio-user socket, so `VfioUserTransport` and the whole
//! driver can be tested end to end without the nvmemu target.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::thread::JoinHandle;

use nvmemu_mem::Iova;
use nvmemu_vfio_user::{
    DEFAULT_SOCKET_MODE, Device, DeviceInfo, DmaMap, DmaUnmap, Errno, IrqData, IrqInfo, Listener,
    RegionInfo, SetIrqs, SparseArea, StopHandle, serve_connection,
};

use super::{FakeConfig, FakeHandle, FakeTransport};
use crate::transport::Transport;

/// A vfio-user `Device` backed by a `FakeTransport`: BAR0 registers by message, the doorbell
/// page as a sparse mmap area [0x1000, 0x2000) of a memfd, config space region 7.
#[derive(Debug)]
pub struct FakeVfioDevice {
    fake: FakeTransport,
}

impl FakeVfioDevice {
    /// A fake device and its inspection handle.
    pub fn new(config: FakeConfig) -> (FakeVfioDevice, FakeHandle) {
        let (fake, handle) = FakeTransport::new(config);
        (FakeVfioDevice { fake }, handle)
    }
}

fn errno(_: crate::TransportError) -> Errno {
    Errno::INVAL
}

impl Device for FakeVfioDevice {
    fn device_info(&self) -> DeviceInfo {
        DeviceInfo {
            flags: DeviceInfo::FLAG_PCI | DeviceInfo::FLAG_RESET,
            num_regions: 9,
            num_irqs: 5,
        }
    }

    fn region_info(&self, index: u32) -> Result<RegionInfo<'_>, Errno> {
        let empty = RegionInfo {
            flags: 0,
            size: 0,
            file_offset: 0,
            sparse: vec![],
            fd: None,
        };
        match index {
            0 => Ok(RegionInfo {
                flags: RegionInfo::FLAG_READ | RegionInfo::FLAG_WRITE | RegionInfo::FLAG_MMAP,
                size: 0x4000,
                file_offset: 0,
                sparse: vec![SparseArea {
                    offset: 0x1000,
                    size: 0x1000,
                }],
                fd: Some(self.fake.shared.bar0_fd.as_fd()),
            }),
            7 => Ok(RegionInfo {
                flags: RegionInfo::FLAG_READ | RegionInfo::FLAG_WRITE,
                size: 0x1000,
                ..empty
            }),
            1..=8 => Ok(empty),
            _ => Err(Errno::INVAL),
        }
    }

    fn irq_info(&self, index: u32) -> Result<IrqInfo, Errno> {
        match index {
            0..=4 => Ok(IrqInfo { flags: 1, count: 1 }),
            _ => Err(Errno::INVAL),
        }
    }

    fn set_irqs(&mut self, _req: &SetIrqs, _data: IrqData) -> Result<(), Errno> {
        Ok(())
    }

    fn region_read(&mut self, index: u32, offset: u64, data: &mut [u8]) -> Result<(), Errno> {
        match (index, data.len()) {
            (0, 4) => {
                let v = self.fake.read_reg32(offset).map_err(errno)?;
                data.copy_from_slice(&v.to_le_bytes());
            }
            (0, 8) => {
                let v = self.fake.read_reg64(offset).map_err(errno)?;
                data.copy_from_slice(&v.to_le_bytes());
            }
            (7, 2) => {
                let v = self.fake.config_read16(offset).map_err(errno)?;
                data.copy_from_slice(&v.to_le_bytes());
            }
            (7, _) => data.fill(0),
            _ => return Err(Errno::INVAL),
        }
        Ok(())
    }

    fn region_write(&mut self, index: u32, offset: u64, data: &[u8]) -> Result<(), Errno> {
        match (index, data) {
            (0, &[a, b, c, d]) => self
                .fake
                .write_reg32(offset, u32::from_le_bytes([a, b, c, d])),
            (0, d) if d.len() == 8 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(d);
                self.fake.write_reg64(offset, u64::from_le_bytes(b))
            }
            (7, &[a, b]) => self.fake.config_write16(offset, u16::from_le_bytes([a, b])),
            (7, _) => Ok(()),
            _ => return Err(Errno::INVAL),
        }
        .map_err(errno)
    }

    fn dma_map(&mut self, map: &DmaMap, fd: Option<OwnedFd>) -> Result<(), Errno> {
        let fd = fd.ok_or(Errno::INVAL)?;
        self.fake
            .dma_map(fd.as_fd(), map.offset, Iova(map.iova), map.size)
            .map_err(errno)
    }

    fn dma_unmap(&mut self, unmap: &DmaUnmap) -> Result<(), Errno> {
        self.fake
            .dma_unmap(Iova(unmap.iova), unmap.size)
            .map_err(errno)
    }

    fn reset(&mut self) -> Result<(), Errno> {
        Ok(())
    }

    fn disconnected(&mut self) {}
}

/// Serve one fake device at `<dir>/cntrl` for one client, on a new thread. The thread ends
/// when the client disconnects or `stop` is stopped.
pub fn serve_fake(
    dir: &Path,
    config: FakeConfig,
    stop: StopHandle,
) -> std::io::Result<(FakeHandle, JoinHandle<()>)> {
    let listener = Listener::bind(dir, DEFAULT_SOCKET_MODE)?;
    let (mut dev, handle) = FakeVfioDevice::new(config);
    let thread = std::thread::spawn(move || {
        if let Ok(Some(stream)) = listener.accept(&stop) {
            let _ = serve_connection(stream, &mut dev, &stop, &Default::default());
        }
    });
    Ok((handle, thread))
}
