// SPDX-License-Identifier: Apache-2.0
//! The emulated NVMe PCI function as a vfio-user device.
//!
//! This runs on the controller's control thread. It owns what the socket changes (config
//! space, MSI-X table, the DMA table, interrupt eventfds) and forwards anything that touches
//! the NVMe controller to the poller that owns it, through the mailbox. The doorbells live in
//! a memfd page the client maps, so the I/O path never comes through here; each client
//! session gets a fresh page (see `renew_doorbells`).

use std::cell::Cell;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use nvmemu_mem::{DmaBacking, DmaError, DmaRegion, GuestMemory, Iova, MmapRegion, Protection};
use nvmemu_vfio_user::{
    Device, DeviceInfo, DmaMap, DmaUnmap, Errno, IrqData, IrqInfo, RegionInfo, SetIrqs, SparseArea,
};

use crate::budget::{ClientBudget, MapUsage};
use crate::irq::{IrqState, NUM_IRQS};
use crate::mailbox::Mailbox;
use crate::pci::config::{BarSizes, ConfigSpace};
use crate::poller::PollerState;
use crate::regions::*;
use crate::resync::PollerLink;
use crate::{Admission, ControllerId};

/// The PCI function of one emulated controller, as its control thread sees it.
#[derive(Debug)]
pub struct NvmeFunction {
    id: ControllerId,
    mailbox: Arc<Mailbox<PollerState>>,
    config: ConfigSpace,
    doorbell_fd: OwnedFd,
    doorbells: Arc<MmapRegion>,
    msix_table: Vec<u8>,
    guest: Arc<GuestMemory>,
    irqs: IrqState,
    /// How long a mailbox call may take before the client is dropped.
    call_timeout: Duration,
    /// Whether this side and the poller agree (a timed-out call may still run later).
    link: PollerLink,
    /// No fresh doorbell page could be made for the next client: serves nobody.
    failed: Cell<bool>,
    /// What the client may map, what it has mapped, and whether a refusal was logged.
    budget: ClientBudget,
    usage: MapUsage,
    budget_warned: bool,
    /// Whether new clients are admitted (the subsystem's host policy).
    admission: Admission,
}

/// Create the doorbell memfd (BAR0 file layout: doorbells at file offset 0x1000) and the
/// server's own mapping of the doorbell page.
pub fn create_doorbells() -> Result<(OwnedFd, Arc<MmapRegion>), nvmemu_mem::MemError> {
    let fd = nvmemu_mem::create_memfd("nvmemu-bar0", DOORBELL_OFFSET + DOORBELL_SIZE, false)?;
    let page = MmapRegion::map_shared(
        fd.as_fd(),
        DOORBELL_OFFSET,
        DOORBELL_SIZE,
        Protection::ReadWrite,
    )?;
    Ok((fd, Arc::new(page)))
}

impl NvmeFunction {
    /// A function for controller `id`, whose NVMe state lives on the poller behind `mailbox`;
    /// a call the poller does not answer within `call_timeout` drops the client, and the
    /// controller serves again once the poller answers (see `resync.rs`).
    pub fn new(
        id: ControllerId,
        mailbox: Arc<Mailbox<PollerState>>,
        doorbell_fd: OwnedFd,
        doorbells: Arc<MmapRegion>,
        msix_vectors: u16,
        call_timeout: Duration,
    ) -> NvmeFunction {
        let bars = BarSizes([BAR0_SIZE_U32, 0, 0, 0, MSIX_BAR_SIZE_U32, MSIX_BAR_SIZE_U32]);
        NvmeFunction {
            id,
            mailbox,
            config: ConfigSpace::new(bars, msix_vectors, 0),
            doorbell_fd,
            doorbells,
            msix_table: vec![0; usize::try_from(MSIX_BAR_SIZE).unwrap_or(4096)],
            guest: Arc::new(GuestMemory::new()),
            irqs: IrqState::new(msix_vectors),
            call_timeout,
            link: PollerLink::new(id, call_timeout),
            failed: Cell::new(false),
            budget: ClientBudget::default(),
            usage: MapUsage::default(),
            budget_warned: false,
            admission: Admission::default(),
        }
    }

    /// The same function with this per-client map budget.
    pub fn with_budget(mut self, budget: ClientBudget) -> NvmeFunction {
        self.budget = budget;
        self
    }

    /// This function admits clients only while `admission` says so.
    pub fn with_admission(mut self, admission: Admission) -> NvmeFunction {
        self.admission = admission;
        self
    }

    /// Run `f` on this controller's poller.
    fn on_controller<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut crate::poller::PolledController) -> R + Send + 'static,
    ) -> Result<R, Errno> {
        let id = self.id;
        if !self.link.in_sync() {
            return Err(Errno::NODEV);
        }
        match self
            .mailbox
            .call_with_timeout(self.call_timeout, move |st| st.get_mut(id).map(f))
        {
            Ok(Some(r)) => Ok(r),
            Ok(None) => {
                tracing::error!("controller {id:?} is not on its poller");
                Err(Errno::NODEV)
            }
            Err(crate::mailbox::MailboxError::Timeout(after)) => {
                self.link.lost(after);
                Err(Errno::TIMEDOUT)
            }
        }
    }

    fn publish_guest_memory(&mut self, mem: GuestMemory) -> Result<(), Errno> {
        let mem = Arc::new(mem);
        let for_poller = mem.clone();
        self.on_controller(move |c| c.ctrl.set_guest_memory(for_poller))?;
        // The poller now holds the new table; dropping ours releases any unmapped region.
        self.guest = mem;
        Ok(())
    }

    fn publish_interrupts(&self) -> Result<(), Errno> {
        let sink = self.irqs.msix_sink(self.config.msix_active());
        self.on_controller(move |c| c.irq = sink)
    }

    /// Controller reset (DEVICE_RESET, FLR, disconnect): queues torn down, doorbells zeroed.
    fn reset_controller(&self) -> Result<(), Errno> {
        let doorbells = self.doorbells.clone();
        self.on_controller(move |c| {
            c.ctrl.reset();
            // Stale tails from the last client must not look like new work.
            let _ = doorbells.fill(0, doorbells.len(), 0);
        })
    }

    /// Give the next client doorbells no earlier client can reach: a fresh memfd page,
    /// swapped in by a mailbox call, so between two polling passes (the poller never reads a
    /// page while it is replaced, and the next client cannot ring before it has this page's
    /// fd). The old page is unmapped here once the poller has let go of it; a client that
    /// kept its fd or mapping then writes into memory nobody reads. A page that cannot be
    /// made fails the controller: reusing the old one would hand it to the next client.
    fn renew_doorbells(&mut self) -> Result<(), Errno> {
        let fail = |why: &dyn std::fmt::Display| {
            tracing::error!(
                "controller {:?} failed: no fresh doorbell page for the next client ({why}); \
                 later clients are refused until its listener is removed and added again",
                self.id
            );
            self.failed.set(true);
        };
        let (fd, page) = create_doorbells().map_err(|e| {
            fail(&e);
            Errno::NOMEM
        })?;
        let for_poller = page.clone();
        if self
            .on_controller(move |c| c.ctrl.replace_doorbells(for_poller))?
            .is_err()
        {
            // Unreachable: the same constructor made both pages, so their lengths match.
            fail(&"the controller refused the page");
            return Err(Errno::INVAL);
        }
        self.doorbell_fd = fd;
        self.doorbells = page;
        Ok(())
    }

    fn bar0_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), Errno> {
        let end = offset + data.len() as u64; // check_access bounded both.
        if end <= DOORBELL_OFFSET {
            let len = data.len();
            let bytes = self.on_controller(move |c| {
                let mut buf = [0u8; 8];
                let out = buf.get_mut(..len).ok_or(())?;
                c.ctrl
                    .mmio_read(offset, out)
                    .map_err(|e| tracing::debug!(target: "guest", "{e}"))?;
                Ok::<_, ()>(buf)
            })?;
            let bytes = bytes.map_err(|()| Errno::INVAL)?;
            data.copy_from_slice(bytes.get(..data.len()).ok_or(Errno::INVAL)?);
            Ok(())
        } else if offset >= DOORBELL_OFFSET && end <= DOORBELL_OFFSET + DOORBELL_SIZE {
            self.doorbells
                .copy_to(offset - DOORBELL_OFFSET, data)
                .map_err(|_| Errno::INVAL)
        } else if offset >= DOORBELL_OFFSET + DOORBELL_SIZE {
            data.fill(0);
            Ok(())
        } else {
            Err(Errno::INVAL)
        }
    }

    fn bar0_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Errno> {
        let end = offset + data.len() as u64;
        if end <= DOORBELL_OFFSET {
            let mut buf = [0u8; 8];
            let len = data.len();
            buf.get_mut(..len)
                .ok_or(Errno::INVAL)?
                .copy_from_slice(data);
            let r = self.on_controller(move |c| {
                c.ctrl
                    .mmio_write(offset, &buf[..len])
                    .map_err(|e| tracing::debug!(target: "guest", "{e}"))
            })?;
            r.map_err(|()| Errno::INVAL)
        } else if offset >= DOORBELL_OFFSET && end <= DOORBELL_OFFSET + DOORBELL_SIZE {
            // A doorbell written by message (client without the mapping): it lands in the
            // same page the poller polls. Dword writes only, as the spec defines doorbells.
            let value: [u8; 4] = data.try_into().map_err(|_| Errno::INVAL)?;
            if !offset.is_multiple_of(4) {
                return Err(Errno::INVAL);
            }
            // Release: pairs with the poller's Acquire load of the tail, as a host store would.
            self.doorbells
                .store_release_u32(offset - DOORBELL_OFFSET, u32::from_le_bytes(value))
                .map_err(|_| Errno::INVAL)
        } else if offset >= DOORBELL_OFFSET + DOORBELL_SIZE {
            Ok(())
        } else {
            Err(Errno::INVAL)
        }
    }
}

impl Device for NvmeFunction {
    fn device_info(&self) -> DeviceInfo {
        DeviceInfo {
            flags: DeviceInfo::FLAG_RESET | DeviceInfo::FLAG_PCI,
            num_regions: NUM_REGIONS,
            num_irqs: NUM_IRQS,
        }
    }

    fn region_info(&self, index: u32) -> Result<RegionInfo<'_>, Errno> {
        let size = region_size(index).ok_or(Errno::INVAL)?;
        let rw = if size == 0 {
            0
        } else {
            RegionInfo::FLAG_READ | RegionInfo::FLAG_WRITE
        };
        let mut info = RegionInfo {
            flags: rw,
            size,
            file_offset: 0,
            sparse: Vec::new(),
            fd: None,
        };
        if index == BAR0 {
            info.flags |= RegionInfo::FLAG_MMAP;
            info.sparse.push(SparseArea {
                offset: DOORBELL_OFFSET,
                size: DOORBELL_SIZE,
            });
            info.fd = Some(self.doorbell_fd.as_fd());
        }
        Ok(info)
    }

    fn irq_info(&self, index: u32) -> Result<IrqInfo, Errno> {
        self.irqs.info(index)
    }

    fn set_irqs(&mut self, req: &SetIrqs, data: IrqData) -> Result<(), Errno> {
        if self.irqs.set(req, data)? {
            self.publish_interrupts()?;
        }
        Ok(())
    }

    fn region_read(&mut self, index: u32, offset: u64, data: &mut [u8]) -> Result<(), Errno> {
        if !check_access(index, offset, data.len()) {
            return Err(Errno::INVAL);
        }
        match index {
            BAR0 => self.bar0_read(offset, data),
            BAR4 => {
                let start = usize::try_from(offset).map_err(|_| Errno::INVAL)?;
                let src = self
                    .msix_table
                    .get(start..start + data.len())
                    .ok_or(Errno::INVAL)?;
                data.copy_from_slice(src);
                Ok(())
            }
            // No vector is ever left pending by us: QEMU tracks masked vectors itself.
            BAR5 => {
                data.fill(0);
                Ok(())
            }
            CONFIG => self.config.read(offset, data).map_err(|_| Errno::INVAL),
            _ => Err(Errno::INVAL),
        }
    }

    fn region_write(&mut self, index: u32, offset: u64, data: &[u8]) -> Result<(), Errno> {
        if !check_access(index, offset, data.len()) {
            return Err(Errno::INVAL);
        }
        match index {
            BAR0 => self.bar0_write(offset, data),
            BAR4 => {
                let start = usize::try_from(offset).map_err(|_| Errno::INVAL)?;
                let dst = self
                    .msix_table
                    .get_mut(start..start + data.len())
                    .ok_or(Errno::INVAL)?;
                dst.copy_from_slice(data);
                Ok(())
            }
            BAR5 => Ok(()),
            CONFIG => {
                let event = self.config.write(offset, data).map_err(|_| Errno::INVAL)?;
                if event.flr {
                    tracing::info!("controller {:?}: function level reset", self.id);
                    self.config.reset();
                    self.msix_table.fill(0);
                    self.reset_controller()?;
                    self.publish_interrupts()?;
                } else if event.msix_changed {
                    self.publish_interrupts()?;
                }
                Ok(())
            }
            _ => Err(Errno::INVAL),
        }
    }

    fn dma_map(&mut self, map: &DmaMap, fd: Option<OwnedFd>) -> Result<(), Errno> {
        let writable = map.flags & DmaMap::FLAG_WRITE != 0;
        // VERSION advertised `max_dma_maps`; fd-less maps count too (each grows the table).
        if self.guest.len() >= MAX_DMA_MAPS {
            tracing::debug!(target: "guest", "DMA_MAP {:#x}+{:#x}: already {MAX_DMA_MAPS} maps", map.iova, map.size);
            return Err(Errno::NOSPC);
        }
        let backing = match fd {
            Some(fd) => {
                self.usage
                    .admit(&self.budget, map.size, (self.id, &mut self.budget_warned))?;
                // A map past the end of the file would SIGBUS on first touch.
                let st = rustix::fs::fstat(&fd)?;
                let file_size = u64::try_from(st.st_size).map_err(|_| Errno::INVAL)?;
                let end = map.offset.checked_add(map.size).ok_or(Errno::INVAL)?;
                if end > file_size {
                    tracing::debug!(target: "guest", "DMA_MAP {:#x}+{:#x} beyond its fd's {file_size:#x} bytes", map.offset, map.size);
                    return Err(Errno::INVAL);
                }
                let prot = if writable {
                    Protection::ReadWrite
                } else {
                    Protection::Read
                };
                let region = MmapRegion::map_shared(fd.as_fd(), map.offset, map.size, prot).map_err(|e| {
                    tracing::debug!(target: "guest", "DMA_MAP {:#x}+{:#x}: {e}", map.iova, map.size);
                    map_errno(&e)
                })?;
                DmaBacking::Mapped(Arc::new(region))
            }
            None => DmaBacking::NoFd,
        };
        let mapped = matches!(backing, DmaBacking::Mapped(_));
        let region = DmaRegion {
            iova: Iova(map.iova),
            size: map.size,
            writable,
            backing,
        };
        let table = self.guest.with_region(region).map_err(dma_errno)?;
        self.publish_guest_memory(table)?;
        if mapped {
            self.usage.add(map.size);
        }
        Ok(())
    }

    fn dma_unmap(&mut self, unmap: &DmaUnmap) -> Result<(), Errno> {
        let table = if unmap.is_all() {
            GuestMemory::new()
        } else {
            let (table, removed) = self
                .guest
                .without_range(Iova(unmap.iova), unmap.size)
                .map_err(dma_errno)?;
            if removed == 0 {
                // QEMU with a virtual IOMMU unmaps ranges it never mapped; like the kernel's
                // VFIO, that succeeds and changes nothing.
                return Ok(());
            }
            table
        };
        self.publish_guest_memory(table)?;
        self.usage = MapUsage::of(&self.guest);
        Ok(())
    }

    fn reset(&mut self) -> Result<(), Errno> {
        tracing::info!("controller {:?}: device reset", self.id);
        self.reset_controller()
    }

    fn disconnected(&mut self) {
        tracing::info!("controller {:?}: client disconnected", self.id);
        self.irqs.clear();
        self.config.reset();
        self.msix_table.fill(0);
        // Reset first so no queue refers to client memory, then drop the DMA table.
        let _ = self.reset_controller();
        let _ = self.renew_doorbells();
        let _ = self.publish_guest_memory(GuestMemory::new());
        let _ = self.publish_interrupts();
        self.usage = MapUsage::default();
        self.budget_warned = false;
        if !self.link.in_sync() {
            // Nothing reached the poller; this side lets the client's memory go, and the
            // poller is brought to the same state once it answers, with a fresh doorbell
            // page (the one the client leaves may still be mapped by it).
            self.guest = Arc::new(GuestMemory::new());
            match create_doorbells() {
                Ok((fd, page)) => {
                    self.doorbell_fd = fd;
                    self.doorbells = page;
                }
                Err(e) => {
                    tracing::error!(
                        "controller {:?} failed: no fresh doorbell page for the next client \
                         ({e}); later clients are refused until its listener is removed and \
                         added again",
                        self.id
                    );
                    self.failed.set(true);
                }
            }
            self.link.client_gone(&self.mailbox, self.doorbells.clone());
        }
    }

    fn failed(&self) -> bool {
        self.failed.get() || !self.link.can_serve()
    }

    fn admits_clients(&self) -> bool {
        let admits = self.admission.admits();
        if !admits {
            tracing::warn!(
                "controller {:?}: client refused: its subsystem does not allow any host, and a \
                 vfio-user client presents no host NQN (nvmf_subsystem_allow_any_host -e admits it)",
                self.id
            );
        }
        admits
    }
}

/// Most DMA regions one client may have, as VERSION advertises (`max_dma_maps`).
const MAX_DMA_MAPS: usize = 65535;

/// The errno for a failed mapping of a client's fd: ENOMEM when the process is out of
/// mappings or address space (the kernel's ENOMEM, or `nvmemu_mem`'s budget of shared
/// mappings), EINVAL for anything the request itself got wrong.
fn map_errno(e: &nvmemu_mem::MemError) -> Errno {
    match e {
        nvmemu_mem::MemError::Os { source, .. }
            if source.raw_os_error() == Some(Errno::NOMEM.raw_os_error()) =>
        {
            Errno::NOMEM
        }
        _ => Errno::INVAL,
    }
}

fn dma_errno(e: DmaError) -> Errno {
    tracing::debug!(target: "guest", "{e}");
    match e {
        DmaError::Overlap { .. } => Errno::EXIST,
        _ => Errno::INVAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_mappings_is_enomem_and_bad_requests_are_einval() {
        let nomem = nvmemu_mem::MemError::Os {
            op: "mmap",
            source: std::io::Error::from_raw_os_error(Errno::NOMEM.raw_os_error()),
        };
        assert_eq!(map_errno(&nomem), Errno::NOMEM);
        let inval = nvmemu_mem::MemError::Os {
            op: "mmap",
            source: std::io::Error::from_raw_os_error(Errno::INVAL.raw_os_error()),
        };
        assert_eq!(map_errno(&inval), Errno::INVAL);
        let oob = nvmemu_mem::MemError::OutOfBounds {
            offset: 0,
            len: 1,
            size: 0,
        };
        assert_eq!(map_errno(&oob), Errno::INVAL);
    }

    #[test]
    fn the_advertised_map_limit_is_the_enforced_one() {
        let advertised = format!("\"max_dma_maps\":{MAX_DMA_MAPS}");
        assert!(nvmemu_vfio_user::SERVER_CAPABILITIES.contains(&advertised));
    }
}
