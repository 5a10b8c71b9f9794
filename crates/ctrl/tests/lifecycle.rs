// SPDX-License-Identifier: Apache-2.0
//! Register access and the enable / disable / shutdown / reset life cycle, driven through
//! BAR0 accesses as a host driver does.

use nvmemu_ctrl::test_utils::{TestHost, get_feature, layout};
use nvmemu_ctrl::{CtrlState, MmioError};
use nvmemu_spec::Status;
use nvmemu_spec::regs::{self, csts};

#[test]
fn cap_and_vs_read_as_64_and_as_two_halves() {
    let mut h = TestHost::new();
    let cap = h.read_reg64(regs::CAP);
    let lo = u64::from(h.read_reg32(regs::CAP));
    let hi = u64::from(h.read_reg32(regs::CAP + 4));
    assert_eq!(cap, lo | (hi << 32));
    assert_eq!(cap & 0xFFFF, 1023, "MQES");
    assert_eq!(h.read_reg32(regs::VS), 0x0001_0400);
}

#[test]
fn odd_sizes_and_unaligned_accesses_are_refused() {
    let mut h = TestHost::new();
    let mut two = [0u8; 2];
    assert_eq!(
        h.ctrl.mmio_read(0, &mut two),
        Err(MmioError::BadSize { offset: 0, len: 2 })
    );
    assert_eq!(
        h.ctrl.mmio_write(0x16, &[0; 4]),
        Err(MmioError::Unaligned {
            offset: 0x16,
            len: 4
        })
    );
    assert_eq!(
        h.ctrl.mmio_write(0x24, &[0; 8]),
        Err(MmioError::Unaligned {
            offset: 0x24,
            len: 8
        })
    );
    let mut four = [0u8; 4];
    assert_eq!(
        h.ctrl.mmio_read(0x2000, &mut four),
        Err(MmioError::OutOfRange { offset: 0x2000 })
    );
}

#[test]
fn enable_disable_cycle() {
    let mut h = TestHost::new();
    assert_eq!(h.read_reg32(regs::CSTS), 0);
    assert_eq!(h.enable(), csts::RDY);
    assert!(h.ctrl.is_ready());
    // Admin queue registers are frozen while enabled.
    h.write_reg32(regs::AQA, 0);
    assert_eq!(h.read_reg32(regs::AQA), 31 | (31 << 16));
    let c = h.admin(get_feature(0x01, 0, 0));
    assert_eq!(c.status(), Status::SUCCESS);
    h.write_reg32(regs::CC, 0);
    assert_eq!(h.read_reg32(regs::CSTS), 0);
    assert_eq!(h.ctrl.state(), CtrlState::Disabled);
    // Re-enable: a fresh admin queue works again from slot 0.
    assert_eq!(h.enable(), csts::RDY);
    assert_eq!(h.admin(get_feature(0x01, 0, 0)).status(), Status::SUCCESS);
}

#[test]
fn shutdown_completes_immediately_and_stops_processing() {
    let mut h = TestHost::new();
    h.enable();
    h.write_reg32(regs::CC, TestHost::CC_ENABLE | (1 << 14));
    assert_eq!(h.read_reg32(regs::CSTS), csts::RDY | csts::SHST_COMPLETE);
    h.submit(0, get_feature(0x01, 0, 0));
    assert_eq!(h.poll(), 0);
    assert!(h.reap(0).is_none());
    h.write_reg32(regs::CC, 0);
    assert_eq!(h.read_reg32(regs::CSTS), 0);
}

#[test]
fn bad_enables_set_cfs_until_disabled() {
    // MPS 8 KiB, an empty admin queue, and an unmapped admin SQ are all refused.
    for case in 0..3 {
        let mut h = TestHost::new();
        h.write_reg32(regs::AQA, if case == 1 { 0 } else { 31 | (31 << 16) });
        let asq = if case == 2 {
            0x1000
        } else {
            h.mem.iova(layout::ASQ)
        };
        h.write_reg64(regs::ASQ, asq);
        h.write_reg64(regs::ACQ, h.mem.iova(layout::ACQ));
        let mps = if case == 0 { 1 << 7 } else { 0 };
        h.write_reg32(regs::CC, TestHost::CC_ENABLE | mps);
        assert_eq!(h.read_reg32(regs::CSTS), csts::CFS, "case {case}");
        h.write_reg32(regs::CC, 0);
        assert_eq!(h.read_reg32(regs::CSTS), 0);
    }
}

#[test]
fn reset_restores_registers_and_keeps_namespaces() {
    let mut h = TestHost::ready(16);
    h.ctrl.reset();
    assert_eq!(h.read_reg32(regs::CSTS), 0);
    assert_eq!(h.read_reg32(regs::CC), 0);
    assert_eq!(h.read_reg32(regs::AQA), 0);
    assert_eq!(h.ctrl.namespaces().count(), 1);
    assert_eq!(h.enable(), csts::RDY);
    // I/O queues are gone after the reset: qid 1 can be created again.
    h.create_io_pair(1, 16);
}

/// QEMU unmaps and remaps guest RAM while firmware has queues live: the queues pause while
/// their memory is gone and resume, with nothing lost, once it is mapped again.
#[test]
fn unmapped_queue_memory_pauses_the_queue_until_it_is_mapped_again() {
    let mut h = TestHost::ready(16);
    h.ctrl
        .set_guest_memory(std::sync::Arc::new(nvmemu_mem::GuestMemory::new()));
    assert_eq!(
        h.read_reg32(regs::CSTS),
        csts::RDY,
        "still ready, not fatal"
    );
    // A Get Features rung while the admin queue is unmapped is not taken yet.
    let cid = h.submit(0, get_feature(0x01, 0, 0));
    assert_eq!(h.poll(), 0);
    assert_eq!(h.poll(), 0);
    // Mapped again: the command runs and completes normally.
    h.ctrl.set_guest_memory(h.mem.guest());
    assert_eq!(h.poll(), 1);
    let cqe = h.reap(0).unwrap();
    assert_eq!((cqe.cid, cqe.status().is_success()), (cid.0, true));
    assert_eq!(h.read_reg32(regs::CSTS), csts::RDY);
}

#[test]
fn doorbell_writes_through_mmio_reach_the_page() {
    let mut h = TestHost::new();
    h.enable();
    let cid = {
        // Write the SQE by hand and ring through mmio_write instead of the shared page.
        let sqe = nvmemu_spec::Sqe {
            cdw0: 0x18 | (7 << 16),
            ..Default::default()
        };
        h.mem.write_obj(layout::ASQ, &sqe);
        7
    };
    h.write_reg32(regs::DOORBELL_BASE, 1);
    h.queues[0].as_mut().unwrap().sq_tail = 1;
    assert_eq!(h.poll(), 1);
    assert_eq!(h.reap(0).unwrap().cid, cid);
}
