// SPDX-License-Identifier: Apache-2.0
//! What a fabrics transport asks of the controller: the fabrics Identify fields and I/O
//! queues made by Connect rather than by Create I/O CQ/SQ.
#![allow(clippy::unwrap_used)]

use nvmemu_ctrl::test_utils::{
    TestHost, bare, get_feature, get_log, identify, layout, set_feature,
};
use nvmemu_ctrl::{ControllerConfig, FabricsIdentity};
use nvmemu_spec::{Qid, Status};

fn fabrics_host() -> TestHost {
    let mut h = TestHost::with_config(ControllerConfig {
        fabrics: Some(FabricsIdentity {
            ioccsz: 260,
            iorcsz: 1,
            kas: 10,
        }),
        ..ControllerConfig::default()
    });
    assert_eq!(h.enable() & 1, 1);
    h
}

#[test]
fn identify_controller_carries_the_fabrics_fields() {
    let mut h = fabrics_host();
    let c = h.admin(identify(&h, 1, 0));
    assert_eq!(c.status(), Status::SUCCESS);
    let id = h.mem.read_vec(layout::ADMIN_DATA, 4096);
    assert_eq!(id[111], 1, "CNTRLTYPE");
    assert_eq!(u16::from_le_bytes([id[320], id[321]]), 10, "KAS");
    assert_eq!(u32::from_le_bytes(id[1792..1796].try_into().unwrap()), 260);
    assert_eq!(u32::from_le_bytes(id[1796..1800].try_into().unwrap()), 1);
    assert_eq!(id[1803], 1, "MSDBD");
    // A PCIe controller leaves them zero.
    let mut pcie = TestHost::new();
    pcie.enable();
    pcie.admin(identify(&pcie, 1, 0));
    let id = pcie.mem.read_vec(layout::ADMIN_DATA, 4096);
    assert_eq!((id[111], id[1792]), (0, 0));
}

#[test]
fn connect_io_queue_needs_the_number_of_queues_and_a_free_qid() {
    let mut h = fabrics_host();
    let sq = h.mem.iova(layout::IO_SQ);
    let cq = h.mem.iova(layout::IO_CQ);
    // Number of Queues defaults to what the controller offers; ask for one pair only.
    assert_eq!(h.admin(set_feature(0x07, 0)).status(), Status::SUCCESS);
    assert_eq!(
        h.ctrl.connect_io_queue(Qid(2), 16, sq, cq),
        Err(Status::INVALID_QID)
    );
    assert_eq!(h.ctrl.connect_io_queue(Qid(1), 16, sq, cq), Ok(()));
    assert_eq!(
        h.ctrl.connect_io_queue(Qid(1), 16, sq, cq),
        Err(Status::INVALID_QID)
    );
    h.ctrl.disconnect_io_queue(Qid(1));
    assert_eq!(h.ctrl.connect_io_queue(Qid(1), 16, sq, cq), Ok(()));
}

#[test]
fn connect_io_queue_is_refused_while_disabled() {
    let mut h = TestHost::new();
    let sq = h.mem.iova(layout::IO_SQ);
    let cq = h.mem.iova(layout::IO_CQ);
    assert_eq!(
        h.ctrl.connect_io_queue(Qid(1), 16, sq, cq),
        Err(Status::COMMAND_SEQUENCE_ERROR)
    );
}

#[test]
fn keep_alive_succeeds_on_a_fabrics_controller() {
    // Linux's nvme-tcp sends it every KATO/2 and resets the controller when it fails.
    let mut h = fabrics_host();
    assert_eq!(h.admin(bare(0x18)).status(), Status::SUCCESS);
}

/// Admin opcode `op`'s Commands Supported and Effects entry (log page 05h).
fn admin_effects(h: &mut TestHost, op: usize) -> u32 {
    let c = h.admin(get_log(h, 0x05, 1024, 0, 0));
    assert_eq!(c.status(), Status::SUCCESS);
    let e = h.mem.read_vec(layout::ADMIN_DATA + op as u64 * 4, 4);
    u32::from_le_bytes(e.try_into().unwrap())
}

#[test]
fn command_effects_list_what_a_fabrics_controller_accepts() {
    let mut h = fabrics_host();
    // Keep Alive and the Fabrics commands (7Fh) are supported...
    for op in [0x02, 0x06, 0x08, 0x09, 0x0A, 0x0C, 0x18, 0x7F] {
        assert_eq!(admin_effects(&mut h, op) & 1, 1, "CSUPP of admin {op:#x}");
    }
    // ...queue creation and deletion and Doorbell Buffer Config are not.
    for op in [0x00, 0x01, 0x04, 0x05, 0x7C] {
        assert_eq!(admin_effects(&mut h, op), 0, "admin {op:#x}");
    }
    // A PCIe controller is the other way round.
    let mut pcie = TestHost::new();
    pcie.enable();
    assert_eq!(admin_effects(&mut pcie, 0x01) & 1, 1);
    assert_eq!(admin_effects(&mut pcie, 0x7C) & 1, 1);
    assert_eq!(admin_effects(&mut pcie, 0x7F), 0);
}

#[test]
fn keep_alive_timer_feature_reads_and_sets_the_association_timeout() {
    let mut h = fabrics_host();
    let kato = |h: &mut TestHost| {
        let c = h.admin(get_feature(0x0F, 0, 0));
        assert_eq!(c.status(), Status::SUCCESS);
        c.dw0
    };
    // Connect's KATO, rounded up to the KAS granularity (10 x 100 ms).
    assert_eq!(h.ctrl.set_keep_alive_timeout(1500), 2000);
    assert_eq!(kato(&mut h), 2000);
    assert_eq!(
        h.ctrl.keep_alive_timeout(),
        Some(std::time::Duration::from_secs(2))
    );
    // Set Features changes it, with the same rounding.
    assert_eq!(h.admin(set_feature(0x0F, 300)).status(), Status::SUCCESS);
    assert_eq!(kato(&mut h), 1000);
    // The default select reads the default (no timeout), not the current value.
    assert_eq!(h.admin(get_feature(0x0F, 1, 0)).dw0, 0);
    // A controller reset (CC.EN = 0, then 1) keeps it: it belongs to the association.
    h.write_reg32(0x14, 0);
    assert_eq!(h.enable() & 1, 1);
    assert_eq!(kato(&mut h), 1000);
    // 0 stops the timer.
    assert_eq!(h.admin(set_feature(0x0F, 0)).status(), Status::SUCCESS);
    assert_eq!(h.ctrl.keep_alive_timeout(), None);
    assert_eq!(kato(&mut h), 0);
}

#[test]
fn identify_advertises_traffic_based_keep_alive_and_disconnect() {
    let mut h = fabrics_host();
    h.admin(identify(&h, 1, 0));
    let id = h.mem.read_vec(layout::ADMIN_DATA, 4096);
    let ctratt = u32::from_le_bytes(id[96..100].try_into().unwrap());
    assert_eq!(ctratt & (1 << 6), 1 << 6, "CTRATT.TBKAS");
    assert_eq!(id[1804] & 1, 1, "OFCS: Disconnect");
    assert_ne!(u16::from_le_bytes([id[514], id[515]]), 0, "MAXCMD");
    let mut pcie = TestHost::new();
    pcie.enable();
    pcie.admin(identify(&pcie, 1, 0));
    let id = pcie.mem.read_vec(layout::ADMIN_DATA, 4096);
    assert_eq!(id[96] & (1 << 6), 0, "no TBKAS without keep alive");
    assert_eq!(id[1804], 0);
}
