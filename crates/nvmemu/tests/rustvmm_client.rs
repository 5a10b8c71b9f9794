// SPDX-License-Identifier: Apache-2.0
//! Interop with a second, independent vfio-user client: rust-vmm's `vfio_user` 0.1.7 crate
//! (the one Cloud Hypervisor uses). It connects, reads device and region info, reads config
//! space and NVMe registers, DMA-maps a memfd, and brings the controller up far enough to run
//! an admin Identify through the mmapped doorbell page.
//!
//! Known bugs of that client, and what this test does about them:
//! * `resettable()` parses the RESET flag inverted (`flags & RESET != RESET`): our device
//!   advertises RESET, so it reports `false`. Asserted as such, next to our own client's view.
//! * It asserts that a region-info reply with capabilities is exactly `argsz` bytes: our
//!   reply is, so `Client::new` (which queries every region) succeeds.
//! * It never checks the ERROR flag and reads fixed-size replies, so an error reply would
//!   desynchronise or hang it: only requests that must succeed are sent through it.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::os::fd::{AsFd, AsRawFd};

use common::{Bar0, HostMem, RawQueue, eventfd, eventfd_take, map_doorbells};
use nvmemu_spec::opcode::AdminOpcode;
use nvmemu_spec::{Sqe, Status};

/// BAR0 registers through rust-vmm's REGION_READ/WRITE.
struct RustVmm(vfio_user::Client);

impl Bar0 for RustVmm {
    fn read32(&mut self, offset: u64) -> u32 {
        let mut b = [0u8; 4];
        self.0.region_read(0, offset, &mut b).unwrap();
        u32::from_le_bytes(b)
    }
    fn write32(&mut self, offset: u64, value: u32) {
        self.0
            .region_write(0, offset, &value.to_le_bytes())
            .unwrap();
    }
    fn write64(&mut self, offset: u64, value: u64) {
        self.0
            .region_write(0, offset, &value.to_le_bytes())
            .unwrap();
    }
}

impl RustVmm {
    fn config32(&mut self, offset: u64) -> u32 {
        let mut b = [0u8; 4];
        self.0.region_read(7, offset, &mut b).unwrap();
        u32::from_le_bytes(b)
    }
}

const HOST_IOVA: u64 = 0x8000_0000;

#[test]
fn rust_vmm_client_identifies_the_controller_through_mmapped_doorbells() {
    let t = common::start_default();
    let client = vfio_user::Client::new(&t.socket()).expect("rust-vmm client connects");
    let mut c = RustVmm(client);

    // Inverted RESET parsing (see the module docs): our own client sees RESET | PCI.
    assert!(!c.0.resettable(), "rust-vmm 0.1.7 reports RESET inverted");

    // Region info, as it parsed it.
    let bar0 = c.0.region(0).expect("BAR0");
    assert_eq!(bar0.size, 0x4000);
    assert_eq!(bar0.flags & 0x7, 0x7, "READ | WRITE | MMAP");
    assert_eq!(bar0.sparse_areas.len(), 1);
    assert_eq!(
        (bar0.sparse_areas[0].offset, bar0.sparse_areas[0].size),
        (0x1000, 0x1000)
    );
    let fo = bar0.file_offset.as_ref().expect("BAR0 came with its fd");
    let db = map_doorbells(fo.file().as_fd(), fo.start());
    let config = c.0.region(7).expect("config region");
    assert_eq!((config.size, config.flags), (4096, 3));
    assert!(config.file_offset.is_none(), "no fd for a trapped region");
    assert_eq!(c.0.region(1).expect("BAR1").size, 0);
    assert_eq!(c.0.region(4).expect("BAR4").size, 0x1000);
    assert_eq!(c.0.get_irq_info(2).unwrap().count, 64);

    // Config space: vendor and class code.
    assert_eq!(c.config32(0) & 0xFFFF, 0x4e58);
    assert_eq!(c.config32(8) >> 8, 0x01_08_02);
    // NVMe registers: CAP (NVM command set, CQR) and VS 1.4.
    let mut cap = [0u8; 8];
    c.0.region_read(0, 0, &mut cap).unwrap();
    let cap = u64::from_le_bytes(cap);
    assert_ne!(cap & (1 << 37), 0, "CAP.CSS NVM");
    assert_ne!(cap & (1 << 16), 0, "CAP.CQR");
    assert_eq!(c.read32(8), 0x0001_0400, "VS 1.4");

    // DMA-map a memfd (its DMA_MAP ignores error replies, so the Identify below is what
    // proves the map worked).
    let mem = HostMem::new(1 << 20, HOST_IOVA);
    c.0.dma_map(0, HOST_IOVA, mem.size(), mem.fd.as_raw_fd())
        .unwrap();
    // Bus master on, INTx off; MSI-X vector 0 on an eventfd, MSI-X enabled.
    c.0.region_write(7, 4, &0x0406u16.to_le_bytes()).unwrap();
    let irq = eventfd();
    c.0.set_irqs(2, 0x4 | 0x20, 0, 1, &[irq.as_raw_fd()])
        .unwrap();
    c.0.region_write(7, 0x86, &(1u16 << 15).to_le_bytes())
        .unwrap();

    // Enable with a 16-entry admin queue in the memfd and Identify Controller.
    common::enable_controller(&mut c, 16, HOST_IOVA, HOST_IOVA + 0x1000);
    let mut admin = RawQueue::new(0, 16, 0, 0x1000);
    let cqe = admin.exec(
        &mem.map,
        &db,
        Sqe {
            cdw0: u32::from(u8::from(AdminOpcode::Identify)),
            dptr1: HOST_IOVA + 0x2000,
            cdw10: 1,
            ..Sqe::default()
        },
    );
    assert_eq!(cqe.status(), Status::SUCCESS);
    let mut id = vec![0u8; 4096];
    mem.map.copy_to(0x2000, &mut id).unwrap();
    assert_eq!(u16::from_le_bytes([id[0], id[1]]), 0x4e58, "VID");
    assert_eq!(&id[4..24], b"TESTSERIAL01        ", "SN");
    assert_eq!(&id[24..46], b"nvmemu test controller", "MN");
    // The admin CQ interrupts on vector 0.
    common::wait_for("MSI-X vector 0", || (eventfd_take(&irq) > 0).then_some(()));

    // DEVICE_RESET and DMA_UNMAP through it, then hang up.
    c.0.reset().unwrap();
    assert_eq!(c.read32(0x1C), 0, "CSTS after DEVICE_RESET");
    c.0.dma_unmap(HOST_IOVA, mem.size()).unwrap();
    c.0.shutdown().unwrap();
    drop(c);

    // Our own client on the next connection: RESET | PCI, and the server still serves.
    let mut ours = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    assert_eq!(ours.device_info().unwrap().flags, 3);
    drop(ours);
    common::assert_serves_next_client(&t);
}
