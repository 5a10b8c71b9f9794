// SPDX-License-Identifier: Apache-2.0
//! A fake NVMe device behind the `Transport` trait, for testing the driver without a server.
//!
//! `FakeTransport` keeps the registers, maps the driver's DMA memory from the fd it is given
//! (as a real server does), and runs a device thread that polls the doorbell page and
//! executes commands against a small in-memory namespace. Faults can be injected through the
//! `FakeHandle`. This is deliberately a separate, simple implementation: it shares no code
//! with `nvmemu-ctrl`, so driver bugs are not mirrored by the device.
// Test scaffolding: the fake trusts the driver under test for sizes it decodes.
#![allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use nvmemu_mem::{Iova, MmapRegion, Protection};
use nvmemu_spec::regs::{self, cc, csts};

use crate::transport::{Transport, TransportError};

mod device;
mod vfio;

pub use vfio::{FakeVfioDevice, serve_fake};

/// What the fake device looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeConfig {
    /// CAP.MQES + 1.
    pub max_queue_entries: u16,
    /// CAP.DSTRD.
    pub dstrd: u32,
    /// Identify Controller MDTS.
    pub mdts: u8,
    /// Queues granted by Set Features Number of Queues.
    pub max_io_queues: u16,
    /// Namespace 1 size in 512-byte blocks.
    pub ns_blocks: u64,
}

impl Default for FakeConfig {
    fn default() -> FakeConfig {
        FakeConfig {
            max_queue_entries: 256,
            dstrd: 0,
            mdts: 5,
            max_io_queues: 4,
            ns_blocks: 2048,
        }
    }
}

/// A misbehaviour the device applies to its next I/O completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Post the completion twice.
    DuplicateCompletion,
    /// Post the completion with this CID instead of the right one.
    WrongCid(u16),
}

#[derive(Debug, Default)]
struct Regs {
    cap: u64,
    cc: u32,
    csts: u32,
    aqa: u32,
    asq: u64,
    acq: u64,
    pci_command: u16,
    /// Bumped on every CC.EN change; the device thread resets its queues when it moves.
    generation: u64,
}

#[derive(Debug)]
struct DmaMapping {
    iova: u64,
    size: u64,
    region: Arc<MmapRegion>,
}

#[derive(Debug)]
struct Shared {
    config: FakeConfig,
    regs: Mutex<Regs>,
    doorbells: Arc<MmapRegion>,
    /// memfd holding BAR0 [0, 0x2000): the doorbell page is its second page.
    bar0_fd: OwnedFd,
    dma: Mutex<Vec<DmaMapping>>,
    fault: Mutex<Option<Fault>>,
    /// Commands the device executed: (qid, opcode).
    executed: Mutex<Vec<(u16, u8)>>,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Inspection and fault injection for a running `FakeTransport`.
#[derive(Debug, Clone)]
pub struct FakeHandle {
    shared: Arc<Shared>,
}

impl FakeHandle {
    /// The PCI Command register as last written.
    pub fn pci_command(&self) -> u16 {
        lock(&self.shared.regs).pci_command
    }

    /// Current CC and CSTS.
    pub fn cc_csts(&self) -> (u32, u32) {
        let r = lock(&self.shared.regs);
        (r.cc, r.csts)
    }

    /// DMA regions currently mapped: (iova, size).
    pub fn dma_maps(&self) -> Vec<(u64, u64)> {
        lock(&self.shared.dma)
            .iter()
            .map(|m| (m.iova, m.size))
            .collect()
    }

    /// Misbehave on the next I/O completion.
    pub fn inject(&self, fault: Fault) {
        *lock(&self.shared.fault) = Some(fault);
    }

    /// Every (qid, opcode) the device executed, in order.
    pub fn executed(&self) -> Vec<(u16, u8)> {
        lock(&self.shared.executed).clone()
    }
}

/// A `Transport` to an in-process fake NVMe device.
#[derive(Debug)]
pub struct FakeTransport {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl FakeTransport {
    /// Start a fake device.
    pub fn new(config: FakeConfig) -> (FakeTransport, FakeHandle) {
        let bar0_fd = nvmemu_mem::create_memfd("fake-nvme-bar0", 0x2000, false)
            .expect("memfd for the fake device's BAR0");
        let doorbells = Arc::new(
            MmapRegion::map_shared(bar0_fd.as_fd(), 0x1000, 0x1000, Protection::ReadWrite)
                .expect("mapping the fake device's doorbell page"),
        );
        let cap = u64::from(config.max_queue_entries.saturating_sub(1))
            | (2u64 << regs::cap::TO_SHIFT)
            | (u64::from(config.dstrd) << regs::cap::DSTRD_SHIFT)
            | regs::cap::CSS_NVM;
        let shared = Arc::new(Shared {
            config,
            regs: Mutex::new(Regs {
                cap,
                ..Regs::default()
            }),
            doorbells,
            bar0_fd,
            dma: Mutex::new(Vec::new()),
            fault: Mutex::new(None),
            executed: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let dev = Arc::clone(&shared);
        let thread = std::thread::spawn(move || device::run(&dev));
        let handle = FakeHandle {
            shared: Arc::clone(&shared),
        };
        (
            FakeTransport {
                shared,
                thread: Some(thread),
            },
            handle,
        )
    }
}

impl Drop for FakeTransport {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Transport for FakeTransport {
    fn read_reg32(&mut self, offset: u64) -> Result<u32, TransportError> {
        let r = lock(&self.shared.regs);
        Ok(match offset {
            regs::CAP => (r.cap & 0xFFFF_FFFF) as u32,
            0x04 => (r.cap >> 32) as u32,
            regs::VS => regs::VERSION_1_4,
            regs::CC => r.cc,
            regs::CSTS => r.csts,
            regs::AQA => r.aqa,
            _ => 0,
        })
    }

    fn read_reg64(&mut self, offset: u64) -> Result<u64, TransportError> {
        let r = lock(&self.shared.regs);
        Ok(match offset {
            regs::CAP => r.cap,
            regs::ASQ => r.asq,
            regs::ACQ => r.acq,
            _ => 0,
        })
    }

    fn write_reg32(&mut self, offset: u64, value: u32) -> Result<(), TransportError> {
        let mut r = lock(&self.shared.regs);
        match offset {
            regs::CC => {
                let was = r.cc & cc::EN != 0;
                let now = value & cc::EN != 0;
                if was != now {
                    r.generation += 1;
                    r.csts = if now { csts::RDY } else { 0 };
                }
                if (value >> cc::SHN_SHIFT) & cc::SHN_MASK != 0 {
                    r.csts = (r.csts & !(0x3 << csts::SHST_SHIFT)) | csts::SHST_COMPLETE;
                }
                r.cc = value;
            }
            regs::AQA => r.aqa = value,
            _ => {}
        }
        Ok(())
    }

    fn write_reg64(&mut self, offset: u64, value: u64) -> Result<(), TransportError> {
        let mut r = lock(&self.shared.regs);
        match offset {
            regs::ASQ => r.asq = value,
            regs::ACQ => r.acq = value,
            _ => {}
        }
        Ok(())
    }

    fn map_doorbells(&mut self) -> Result<Arc<MmapRegion>, TransportError> {
        Ok(Arc::clone(&self.shared.doorbells))
    }

    fn dma_map(
        &mut self,
        fd: BorrowedFd<'_>,
        fd_offset: u64,
        iova: Iova,
        size: u64,
    ) -> Result<(), TransportError> {
        let region = MmapRegion::map_shared(fd, fd_offset, size, Protection::ReadWrite)?;
        lock(&self.shared.dma).push(DmaMapping {
            iova: iova.0,
            size,
            region: Arc::new(region),
        });
        Ok(())
    }

    fn dma_unmap(&mut self, iova: Iova, size: u64) -> Result<(), TransportError> {
        let mut maps = lock(&self.shared.dma);
        let before = maps.len();
        maps.retain(|m| !(m.iova == iova.0 && m.size == size));
        if maps.len() == before {
            return Err(TransportError::Unsupported(format!(
                "no DMA map {:#x}+{size:#x}",
                iova.0
            )));
        }
        Ok(())
    }

    fn config_read16(&mut self, offset: u64) -> Result<u16, TransportError> {
        Ok(match offset {
            0x00 => 0x1b36,
            0x04 => lock(&self.shared.regs).pci_command,
            _ => 0,
        })
    }

    fn config_write16(&mut self, offset: u64, value: u16) -> Result<(), TransportError> {
        if offset == 0x04 {
            lock(&self.shared.regs).pci_command = value;
        }
        Ok(())
    }
}
