// SPDX-License-Identifier: Apache-2.0
//! What a fabrics transport asks of the controller: the fabrics Identify fields and I/O
//! queues made by Connect rather than by Create I/O CQ/SQ.
#![allow(clippy::unwrap_used)]

use nvmemu_ctrl::test_utils::{TestHost, bare, identify, layout, set_feature};
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
