// SPDX-License-Identifier: Apache-2.0
//! Controller life cycle through the real protocol: CC.EN 1 -> 0 -> 1 (NVMe Base 1.4,
//! 7.6.1), shutdown notification (7.6.2), vfio-user DEVICE_RESET, PCIe Function Level Reset
//! (PCIe Base 4.0, 6.6.2, DevCtl bit 15) and MSI-X delivery through SET_IRQS eventfds.
//! After each, the controller comes back and a new client does verified I/O.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::os::fd::AsFd;

use common::{RawHost, assert_serves_next_client, eventfd, eventfd_take, pattern, read32};
use nvmemu_spec::Status;
use nvmemu_spec::opcode::IoOpcode;
use nvmemu_spec::regs::{self, cc, csts};
use nvmemu_vfio_user::SetIrqs;

/// PCIe capability at 0x48: Device Control at +8.
const DEVCTL: u64 = 0x48 + 8;
/// MSI-X capability at 0x84: Message Control at +2.
const MSIX_CONTROL: u64 = 0x84 + 2;
const MSIX_ENABLE: u16 = 1 << 15;

fn config16(h: &mut RawHost, offset: u64) -> u16 {
    let mut b = [0u8; 2];
    h.client.region_read(7, offset, &mut b).unwrap();
    u16::from_le_bytes(b)
}

fn set_config16(h: &mut RawHost, offset: u64, value: u16) {
    h.client
        .region_write(7, offset, &value.to_le_bytes())
        .unwrap();
}

/// After a reset: CSTS, CC and the admin queue registers are back at power-on values.
fn assert_registers_reset(h: &mut RawHost) {
    assert_eq!(h.csts(), 0, "CSTS");
    assert_eq!(read32(&mut h.client, regs::CC), 0, "CC");
    assert_eq!(read32(&mut h.client, regs::AQA), 0, "AQA");
    assert_eq!(read32(&mut h.client, regs::ASQ), 0, "ASQ");
}

/// Bring the controller back on the same connection (DMA maps kept) and do verified I/O
/// on a queue created with the same QID as before the reset.
fn assert_comes_back(h: &mut RawHost) -> common::RawQueue {
    h.enable();
    assert_eq!(&h.identify_controller()[4..24], b"TESTSERIAL01        ");
    let mut q = h.create_io_pair(1, false, 0);
    h.verified_io(&mut q, 64, &pattern(4096, 0x42));
    q
}

#[test]
fn cc_en_one_zero_one_reinitialises() {
    let t = common::start_default();
    let mut h = RawHost::connect(&t);
    let mut q = h.create_io_pair(1, false, 0);
    h.verified_io(&mut q, 8, &pattern(2048, 1));
    // CC.EN 1 -> 0: CSTS.RDY goes to 0 and every queue is deleted.
    h.client
        .region_write(0, regs::CC, &0u32.to_le_bytes())
        .unwrap();
    common::wait_csts(&mut h.client, "CSTS.RDY = 0", |v| v & csts::RDY == 0);
    assert_eq!(h.csts(), 0);
    // The admin queue registers are writable again while disabled, and are kept.
    assert_ne!(read32(&mut h.client, regs::AQA), 0);
    // 0 -> 1 with a fresh admin queue. QID 1 can be created again, so the old one is gone
    // (otherwise Create would fail with Invalid Queue Identifier).
    let mut q = assert_comes_back(&mut h);
    // Data written before the disable is still there (namespaces survive a reset).
    let rd = RawHost::DATA + 0x2000;
    let r = common::rw_sqe(IoOpcode::Read, 8, 4, h.mem.iova_of(rd));
    assert_eq!(h.io(&mut q, r).status(), Status::SUCCESS);
    let mut back = vec![0u8; 2048];
    h.mem.map.copy_to(rd, &mut back).unwrap();
    assert!(back == pattern(2048, 1));
    drop(h);
    assert_serves_next_client(&t);
}

#[test]
fn shutdown_notification_completes_and_the_controller_restarts() {
    let t = common::start_default();
    let mut h = RawHost::connect(&t);
    let mut q = h.create_io_pair(1, false, 0);
    h.verified_io(&mut q, 16, &pattern(4096, 2));
    // CC.SHN = 01b (normal shutdown) with EN still 1.
    h.client
        .region_write(
            0,
            regs::CC,
            &(common::CC_ENABLE | (1 << cc::SHN_SHIFT)).to_le_bytes(),
        )
        .unwrap();
    let st = common::wait_csts(&mut h.client, "CSTS.SHST = complete", |v| {
        v & (3 << csts::SHST_SHIFT) == csts::SHST_COMPLETE
    });
    assert_eq!(st & csts::CFS, 0);
    // CC.EN = 0 clears SHST and RDY.
    h.client
        .region_write(0, regs::CC, &0u32.to_le_bytes())
        .unwrap();
    common::wait_csts(&mut h.client, "CSTS = 0", |v| v == 0);
    assert_comes_back(&mut h);
    // An abrupt shutdown (SHN = 10b) completes too.
    h.client
        .region_write(
            0,
            regs::CC,
            &(common::CC_ENABLE | (2 << cc::SHN_SHIFT)).to_le_bytes(),
        )
        .unwrap();
    common::wait_csts(&mut h.client, "CSTS.SHST = complete", |v| {
        v & (3 << csts::SHST_SHIFT) == csts::SHST_COMPLETE
    });
    drop(h);
    assert_serves_next_client(&t);
}

#[test]
fn device_reset_message_resets_the_controller_and_keeps_dma_maps() {
    let t = common::start_default();
    let mut h = RawHost::connect(&t);
    let mut q = h.create_io_pair(1, false, 0);
    h.verified_io(&mut q, 24, &pattern(4096, 3));
    h.client.reset().unwrap();
    assert_registers_reset(&mut h);
    // No DMA_MAP again: the maps survive DEVICE_RESET.
    assert_comes_back(&mut h);
    // A reset of a disabled controller is fine too.
    h.client.reset().unwrap();
    h.client.reset().unwrap();
    assert_registers_reset(&mut h);
    drop(h);
    assert_serves_next_client(&t);
}

#[test]
fn function_level_reset_through_devctl_resets_controller_and_config_space() {
    let t = common::start_default();
    let mut h = RawHost::connect(&t);
    let mut q = h.create_io_pair(1, false, 0);
    h.verified_io(&mut q, 32, &pattern(4096, 4));
    set_config16(&mut h, MSIX_CONTROL, MSIX_ENABLE);
    assert_eq!(config16(&mut h, MSIX_CONTROL) & MSIX_ENABLE, MSIX_ENABLE);
    assert_ne!(config16(&mut h, 4) & 0x4, 0, "bus master set by RawHost");
    // Initiate Function Level Reset.
    let devctl = config16(&mut h, DEVCTL);
    set_config16(&mut h, DEVCTL, devctl | (1 << 15));
    assert_eq!(config16(&mut h, DEVCTL) & (1 << 15), 0, "FLR bit reads 0");
    assert_eq!(
        config16(&mut h, MSIX_CONTROL) & MSIX_ENABLE,
        0,
        "MSI-X disabled"
    );
    assert_eq!(config16(&mut h, 4), 0, "command register cleared");
    assert_registers_reset(&mut h);
    // Identity survives.
    assert_eq!(config16(&mut h, 0), 0x4e58);
    set_config16(&mut h, 4, 0x0406);
    assert_comes_back(&mut h);
    drop(h);
    assert_serves_next_client(&t);
}

/// Submit a Write on `q` and wait for its completion; then a BAR0 register read, which the
/// poller serves between polls, so the poll that posted the completion (and raised its
/// interrupt, if any) has finished when this returns.
fn write_and_settle(h: &mut RawHost, q: &mut common::RawQueue) {
    let data = RawHost::DATA;
    let w = common::rw_sqe(IoOpcode::Write, 0, 1, h.mem.iova_of(data));
    assert_eq!(h.io(q, w).status(), Status::SUCCESS);
    let _ = read32(&mut h.client, regs::CSTS);
}

#[test]
fn msix_vector_fires_only_while_msix_is_enabled() {
    let t = common::start_default();
    let mut h = RawHost::connect(&t);
    let fds = [eventfd(), eventfd(), eventfd()];
    let req = SetIrqs {
        flags: SetIrqs::DATA_EVENTFD | SetIrqs::ACTION_TRIGGER,
        index: 2,
        start: 0,
        count: 3,
    };
    let borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
    h.client.set_irqs(&req, &borrowed).unwrap();
    // I/O queue 1 on vector 1, interrupts enabled.
    let mut q = h.create_io_pair(1, true, 1);

    // MSI-X disabled (power-on state): completions raise nothing.
    write_and_settle(&mut h, &mut q);
    assert_eq!(
        eventfd_take(&fds[1]),
        0,
        "no interrupt while MSI-X is disabled"
    );

    // Enabled through the MSI-X Message Control register.
    set_config16(&mut h, MSIX_CONTROL, MSIX_ENABLE);
    let w = common::rw_sqe(IoOpcode::Write, 0, 1, h.mem.iova_of(RawHost::DATA));
    assert_eq!(h.io(&mut q, w).status(), Status::SUCCESS);
    let n = common::wait_for("vector 1 eventfd", || {
        let n = eventfd_take(&fds[1]);
        (n > 0).then_some(n)
    });
    assert!(n >= 1);
    let _ = read32(&mut h.client, regs::CSTS);
    assert_eq!(eventfd_take(&fds[2]), 0, "other vectors stay quiet");
    // Vector 0 belongs to the admin CQ (IEN = 1 there): admin completions signal it.
    let _ = eventfd_take(&fds[0]);
    h.identify_controller();
    common::wait_for("vector 0 eventfd", || {
        (eventfd_take(&fds[0]) > 0).then_some(())
    });

    // Function Mask (bit 14) masks every vector.
    set_config16(&mut h, MSIX_CONTROL, MSIX_ENABLE | (1 << 14));
    let _ = eventfd_take(&fds[1]);
    write_and_settle(&mut h, &mut q);
    assert_eq!(
        eventfd_take(&fds[1]),
        0,
        "no interrupt while the function is masked"
    );

    // Disabled again: nothing.
    set_config16(&mut h, MSIX_CONTROL, 0);
    write_and_settle(&mut h, &mut q);
    assert_eq!(
        eventfd_take(&fds[1]),
        0,
        "no interrupt after MSI-X is disabled"
    );

    // Enabled, but the eventfds de-assigned (DATA_EVENTFD with no fds): nothing, no crash.
    set_config16(&mut h, MSIX_CONTROL, MSIX_ENABLE);
    h.client.set_irqs(&req, &[]).unwrap();
    write_and_settle(&mut h, &mut q);
    assert_eq!(eventfd_take(&fds[1]), 0, "no interrupt without an eventfd");
    drop(h);
    assert_serves_next_client(&t);
}
