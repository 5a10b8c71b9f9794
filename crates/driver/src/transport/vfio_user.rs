// SPDX-License-Identifier: Apache-2.0
//! `Transport` over a vfio-user socket, behaving like SPDK's client: registers by
//! REGION_READ/WRITE on BAR0 (4- and 8-byte accesses below 0x1000), doorbells through the
//! mmapped sparse area of BAR0, DMA by DMA_MAP of a memfd, config space through region 7.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use nvmemu_mem::{Iova, MmapRegion, Protection};
use nvmemu_vfio_user::{Client, ClientError, DeviceInfo, DmaMap, DmaUnmap, OwnedRegionInfo};

use super::{Transport, TransportError};

/// VFIO_PCI_BAR0_REGION_INDEX.
const BAR0: u32 = 0;
/// VFIO_PCI_CONFIG_REGION_INDEX.
const CONFIG: u32 = 7;
/// BAR0 offset of the first doorbell.
const DOORBELL_START: u64 = 0x1000;
/// The doorbell area must reach at least here (SPDK `nvme_vfio_setup_bar0`).
const DOORBELL_END: u64 = 0x2000;

fn link(op: &'static str) -> impl FnOnce(ClientError) -> TransportError {
    move |e| TransportError::Link {
        op,
        source: Box::new(e),
    }
}

/// A vfio-user connection to an NVMe device.
#[derive(Debug)]
pub struct VfioUserTransport {
    client: Client,
    info: DeviceInfo,
    bar0: OwnedRegionInfo,
    bar0_fd: Option<OwnedFd>,
}

impl VfioUserTransport {
    /// Connect to the socket at `socket_path` (VERSION), then read device info and BAR0's
    /// region info. The device must be PCI with at least 8 regions.
    pub fn connect(socket_path: &Path) -> Result<VfioUserTransport, TransportError> {
        let client = Client::connect(socket_path).map_err(link("connect"))?;
        VfioUserTransport::from_client(client)
    }

    /// [`VfioUserTransport::connect`], waiting at most `limit` for the server to accept
    /// and for each of its replies (then and later).
    pub fn connect_within(
        socket_path: &Path,
        limit: std::time::Duration,
    ) -> Result<VfioUserTransport, TransportError> {
        let client = Client::connect_within(socket_path, limit).map_err(link("connect"))?;
        VfioUserTransport::from_client(client)
    }

    /// Use an already connected client (VERSION done).
    pub fn from_client(mut client: Client) -> Result<VfioUserTransport, TransportError> {
        let info = client.device_info().map_err(link("DEVICE_GET_INFO"))?;
        if info.flags & DeviceInfo::FLAG_PCI == 0 || info.num_regions <= CONFIG {
            return Err(TransportError::Unsupported(format!(
                "not a PCI device with a config region (flags {:#x}, {} regions)",
                info.flags, info.num_regions
            )));
        }
        let (bar0, bar0_fd) = client
            .region_info(BAR0)
            .map_err(link("DEVICE_GET_REGION_INFO"))?;
        if bar0.size < DOORBELL_END {
            return Err(TransportError::Unsupported(format!(
                "BAR0 is {:#x} bytes, smaller than {DOORBELL_END:#x}",
                bar0.size
            )));
        }
        Ok(VfioUserTransport {
            client,
            info,
            bar0,
            bar0_fd,
        })
    }

    /// The device info read at connect.
    pub fn device_info(&self) -> DeviceInfo {
        self.info
    }

    /// BAR0's region info read at connect.
    pub fn bar0_info(&self) -> &OwnedRegionInfo {
        &self.bar0
    }

    /// The underlying client (for tests that send raw vfio-user messages).
    pub fn client_mut(&mut self) -> &mut Client {
        &mut self.client
    }

    fn check_reg(&self, offset: u64, width: u64) -> Result<(), TransportError> {
        if !offset.is_multiple_of(width) || offset + width > DOORBELL_START {
            return Err(TransportError::BadAccess { offset });
        }
        Ok(())
    }
}

impl Transport for VfioUserTransport {
    fn read_reg32(&mut self, offset: u64) -> Result<u32, TransportError> {
        self.check_reg(offset, 4)?;
        let mut b = [0u8; 4];
        self.client
            .region_read(BAR0, offset, &mut b)
            .map_err(link("REGION_READ"))?;
        Ok(u32::from_le_bytes(b))
    }

    fn read_reg64(&mut self, offset: u64) -> Result<u64, TransportError> {
        self.check_reg(offset, 8)?;
        let mut b = [0u8; 8];
        self.client
            .region_read(BAR0, offset, &mut b)
            .map_err(link("REGION_READ"))?;
        Ok(u64::from_le_bytes(b))
    }

    fn write_reg32(&mut self, offset: u64, value: u32) -> Result<(), TransportError> {
        self.check_reg(offset, 4)?;
        self.client
            .region_write(BAR0, offset, &value.to_le_bytes())
            .map_err(link("REGION_WRITE"))
    }

    fn write_reg64(&mut self, offset: u64, value: u64) -> Result<(), TransportError> {
        self.check_reg(offset, 8)?;
        self.client
            .region_write(BAR0, offset, &value.to_le_bytes())
            .map_err(link("REGION_WRITE"))
    }

    fn map_doorbells(&mut self) -> Result<Arc<MmapRegion>, TransportError> {
        let area = self
            .bar0
            .sparse
            .iter()
            .find(|a| {
                a.offset <= DOORBELL_START
                    && a.offset
                        .checked_add(a.size)
                        .is_some_and(|e| e >= DOORBELL_END)
            })
            .copied()
            .ok_or_else(|| {
                TransportError::Unsupported(
                    "BAR0 has no mmappable area covering [0x1000, 0x2000)".into(),
                )
            })?;
        let fd = self.bar0_fd.as_ref().ok_or_else(|| {
            TransportError::Unsupported("BAR0 region info came without an fd".into())
        })?;
        // Map from BAR0 0x1000, so offset 0 of the mapping is the admin SQ tail doorbell.
        let end = area.offset + area.size;
        let file_offset = self
            .bar0
            .file_offset
            .checked_add(DOORBELL_START)
            .ok_or_else(|| TransportError::Unsupported("BAR0 file offset overflows".into()))?;
        let region = MmapRegion::map_shared(
            fd.as_fd(),
            file_offset,
            end - DOORBELL_START,
            Protection::ReadWrite,
        )?;
        Ok(Arc::new(region))
    }

    fn dma_map(
        &mut self,
        fd: BorrowedFd<'_>,
        fd_offset: u64,
        iova: Iova,
        size: u64,
    ) -> Result<(), TransportError> {
        let map = DmaMap {
            flags: DmaMap::FLAG_READ | DmaMap::FLAG_WRITE,
            offset: fd_offset,
            iova: iova.0,
            size,
        };
        self.client.dma_map(&map, Some(fd)).map_err(link("DMA_MAP"))
    }

    fn dma_unmap(&mut self, iova: Iova, size: u64) -> Result<(), TransportError> {
        let unmap = DmaUnmap {
            flags: 0,
            iova: iova.0,
            size,
        };
        self.client.dma_unmap(&unmap).map_err(link("DMA_UNMAP"))
    }

    fn config_read16(&mut self, offset: u64) -> Result<u16, TransportError> {
        let mut b = [0u8; 2];
        self.client
            .region_read(CONFIG, offset, &mut b)
            .map_err(link("REGION_READ"))?;
        Ok(u16::from_le_bytes(b))
    }

    fn config_write16(&mut self, offset: u64, value: u16) -> Result<(), TransportError> {
        self.client
            .region_write(CONFIG, offset, &value.to_le_bytes())
            .map_err(link("REGION_WRITE"))
    }
}
