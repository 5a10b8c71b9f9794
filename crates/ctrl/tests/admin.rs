// SPDX-License-Identifier: Apache-2.0
//! Admin commands through a real admin queue: Identify, queue management, features, log
//! pages, AER, Abort, Doorbell Buffer Config.

use std::sync::Arc;

use nvmemu_bdev::Bdev;
use nvmemu_ctrl::test_utils::{
    TestHost, bare, create_cq, create_sq, get_feature, get_log, identify, layout, set_feature,
};
use nvmemu_ctrl::{ControllerConfig, Namespace};
use nvmemu_spec::identify::{IdentifyController, IdentifyNamespace};
use nvmemu_spec::log_page::{ErrorLogEntry, SmartLog};
use nvmemu_spec::{Nsid, Sqe, Status};

fn id_ctrl(h: &mut TestHost) -> IdentifyController {
    let s = identify(h, 1, 0);
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    h.mem.read_obj(layout::ADMIN_DATA)
}

#[test]
fn identify_controller_fields() {
    let mut h = TestHost::new();
    h.enable();
    let id = id_ctrl(&mut h);
    assert_eq!((id.vid, id.ssvid), (0x4e58, 0x4e58));
    assert_eq!(&id.sn, b"NVMEMU0001          ");
    assert_eq!(&id.mn[..22], b"nvmemu NVMe controller");
    assert!(id.mn[22..].iter().all(|&b| b == b' '));
    assert_eq!(&id.fr, b"0.1     ");
    assert_eq!((id.mdts, id.cntlid, id.ver), (8, 1, 0x0001_0400));
    assert_eq!((id.sqes, id.cqes, id.nn), (0x66, 0x44, 32));
    assert_eq!(id.oacs & (1 << 8), 1 << 8, "DBBUF");
    assert_eq!(id.oaes, 1 << 8);
    assert_eq!(id.aerl, 3);
    assert_eq!(id.elpe, 63);
    assert_eq!(id.oncs & 0b1101, 0b1101, "compare, DSM, write zeroes");
    assert_eq!(id.vwc & 1, 1);
    assert_eq!(id.sgls & 0x3, 1);
    assert_eq!(id.npss, 0);
    assert_eq!(id.psd[0].mp, 2500);
    assert_eq!(&id.subnqn[..28], b"nqn.2019-07.io.nvmemu:cnode1");
    assert_eq!(id.subnqn[28], 0);
}

#[test]
fn identify_namespace_active_list_and_descriptors() {
    let mut h = TestHost::new();
    let bdev = Arc::new(Bdev::null("null7", 4096, 100).unwrap());
    h.ctrl
        .attach_namespace(Namespace::new(Nsid(7), bdev).with_ids([3; 16], [0; 8], [4; 16]))
        .unwrap();
    h.enable();
    let s = identify(&h, 0, 7);
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    let ns: IdentifyNamespace = h.mem.read_obj(layout::ADMIN_DATA);
    assert_eq!((ns.nsze, ns.ncap, ns.nguid), (100, 100, [3; 16]));
    assert_eq!((ns.lbaf[0] >> 16) & 0xFF, 12);
    // Inactive but valid NSID: zeroes.
    h.mem.write(layout::ADMIN_DATA, &[0xEE; 64]);
    let s = identify(&h, 0, 3);
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    assert_eq!(h.mem.read_vec(layout::ADMIN_DATA, 64), vec![0; 64]);
    for bad in [0, 33, 0xFFFF_FFFF] {
        let s = identify(&h, 0, bad);
        assert_eq!(
            h.admin(s).status(),
            Status::INVALID_NAMESPACE,
            "nsid {bad:#x}"
        );
    }
    // Active list: NSIDs above CDW1.NSID, ascending.
    let s = identify(&h, 2, 0);
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    assert_eq!(
        h.mem.read_vec(layout::ADMIN_DATA, 12),
        [1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0]
    );
    let s = identify(&h, 2, 1);
    h.admin(s);
    assert_eq!(
        h.mem.read_vec(layout::ADMIN_DATA, 8),
        [7, 0, 0, 0, 0, 0, 0, 0]
    );
    // Descriptors: NGUID then UUID (EUI-64 is zero so absent).
    let s = identify(&h, 3, 7);
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    let d = h.mem.read_vec(layout::ADMIN_DATA, 44);
    assert_eq!(&d[..4], &[2, 16, 0, 0]);
    assert_eq!(&d[20..24], &[3, 16, 0, 0]);
    assert_eq!(&d[40..44], &[0, 0, 0, 0]);
    let s = identify(&h, 0x10, 0);
    assert_eq!(h.admin(s).status(), Status::INVALID_FIELD);
}

#[test]
fn invalid_opcode_and_sgl_on_admin() {
    let mut h = TestHost::new();
    h.enable();
    assert_eq!(h.admin(bare(0x80)).status(), Status::INVALID_OPCODE);
    let mut s = identify(&h, 1, 0);
    s.cdw0 |= 1 << 14;
    assert_eq!(h.admin(s).status(), Status::INVALID_FIELD);
}

#[test]
fn queue_creation_checks() {
    let mut h = TestHost::new();
    h.enable();
    let base = h.mem.iova(layout::IO_CQ);
    let sq_base = h.mem.iova(layout::IO_SQ);
    let cases: Vec<(Sqe, Status)> = vec![
        (create_cq(0, 16, base, 0), Status::INVALID_QID),
        (create_cq(128, 16, base, 0), Status::INVALID_QID),
        (create_cq(1, 1, base, 0), Status::INVALID_QUEUE_SIZE),
        (create_cq(1, 1025, base, 0), Status::INVALID_QUEUE_SIZE),
        (create_cq(1, 16, base, 64), Status::INVALID_INTERRUPT_VECTOR),
        (
            Sqe {
                cdw11: 0b10,
                ..create_cq(1, 16, base, 0)
            },
            Status::INVALID_FIELD,
        ),
        (create_cq(1, 16, base + 8, 0), Status::INVALID_FIELD),
        (create_cq(1, 16, 0x1000, 0), Status::INVALID_FIELD),
        // CQID 0 or beyond the allocated count names no I/O CQ at all; an allocatable id
        // without a queue is an invalid CQ (SPDK's compliance suite checks both).
        (create_sq(1, 16, sq_base, 1), Status::CQ_INVALID),
        (create_sq(1, 16, sq_base, 0), Status::INVALID_QID),
        (create_sq(1, 16, sq_base, 128), Status::INVALID_QID),
        (create_cq(1, 16, base, 1), Status::SUCCESS),
        (create_cq(1, 16, base, 1), Status::INVALID_QID),
        (create_sq(1, 16, sq_base, 1), Status::SUCCESS),
        (create_sq(1, 16, sq_base, 1), Status::INVALID_QID),
        (
            Sqe {
                cdw10: 1,
                ..bare(0x04)
            },
            Status::INVALID_QUEUE_DELETION,
        ),
        (
            Sqe {
                cdw10: 0,
                ..bare(0x00)
            },
            Status::INVALID_QID,
        ),
        (
            Sqe {
                cdw10: 2,
                ..bare(0x00)
            },
            Status::INVALID_QID,
        ),
        (
            Sqe {
                cdw10: 1,
                ..bare(0x00)
            },
            Status::SUCCESS,
        ),
        (
            Sqe {
                cdw10: 1,
                ..bare(0x04)
            },
            Status::SUCCESS,
        ),
        (
            Sqe {
                cdw10: 1,
                ..bare(0x04)
            },
            Status::INVALID_QID,
        ),
    ];
    for (i, (sqe, want)) in cases.into_iter().enumerate() {
        assert_eq!(h.admin(sqe).status(), want, "case {i}");
    }
}

#[test]
fn number_of_queues_and_features() {
    let mut h = TestHost::new();
    h.enable();
    let c = h.admin(set_feature(0x07, 0x00FF_0003));
    assert_eq!((c.status(), c.dw0), (Status::SUCCESS, 0x007E_0003));
    // Only 4 SQs are allocated now.
    h.admin(create_cq(1, 16, h.mem.iova(layout::IO_CQ), 0));
    assert_eq!(
        h.admin(create_sq(5, 16, h.mem.iova(layout::IO_SQ), 1))
            .status(),
        Status::INVALID_QID
    );
    // Too late once queues exist.
    assert_eq!(
        h.admin(set_feature(0x07, 0)).status(),
        Status::COMMAND_SEQUENCE_ERROR
    );
    assert_eq!(h.admin(get_feature(0x07, 0, 0)).dw0, 0x007E_0003);
    assert_eq!(h.admin(get_feature(0x07, 1, 0)).dw0, 0x007E_007E, "default");
    assert_eq!(h.admin(get_feature(0x07, 3, 0)).dw0, 0b100, "changeable");
    assert_eq!(
        h.admin(get_feature(0x07, 4, 0)).status(),
        Status::INVALID_FIELD
    );
    // Volatile write cache, arbitration, interrupt vector configuration.
    assert_eq!(h.admin(set_feature(0x06, 0)).status(), Status::SUCCESS);
    assert_eq!(h.admin(get_feature(0x06, 0, 0)).dw0, 0);
    assert_eq!(
        h.admin(set_feature(0x09, 5 | (1 << 16))).status(),
        Status::SUCCESS
    );
    assert_eq!(h.admin(get_feature(0x09, 0, 5)).dw0, 5 | (1 << 16));
    assert_eq!(
        h.admin(set_feature(0x09, 64)).status(),
        Status::INVALID_FIELD
    );
    assert_eq!(
        h.admin(set_feature(0x02, 1)).status(),
        Status::INVALID_FIELD,
        "one power state"
    );
    assert_eq!(
        h.admin(set_feature(0x0C, 0)).status(),
        Status::INVALID_FIELD,
        "APST"
    );
    assert_eq!(
        h.admin(set_feature(0x7E, 0)).status(),
        Status::INVALID_FIELD
    );
    let save = Sqe {
        cdw10: 0x06 | (1 << 31),
        ..set_feature(0x06, 1)
    };
    assert_eq!(h.admin(save).status(), Status::FEATURE_NOT_SAVEABLE);
    // Features return to defaults on reset.
    h.write_reg32(nvmemu_spec::regs::CC, 0);
    h.enable();
    assert_eq!(h.admin(get_feature(0x06, 0, 0)).dw0, 1);
}

#[test]
fn temperature_threshold_sets_the_smart_warning() {
    let mut h = TestHost::new();
    h.enable();
    let smart = |h: &mut TestHost| {
        let s = get_log(h, 0x02, 128, 0, 0xFFFF_FFFF);
        assert_eq!(h.admin(s).status(), Status::SUCCESS);
        h.mem.read_obj::<SmartLog>(layout::ADMIN_DATA)
    };
    let s = smart(&mut h);
    assert_eq!(s.critical_warning, 0);
    assert_eq!(u16::from_le_bytes(s.composite_temperature), 300);
    assert_eq!(s.available_spare, 100);
    assert_eq!(h.admin(set_feature(0x04, 290)).status(), Status::SUCCESS);
    assert_eq!(h.admin(get_feature(0x04, 0, 0)).dw0, 290);
    assert_eq!(smart(&mut h).critical_warning, 1 << 1);
    assert_eq!(
        h.admin(set_feature(0x04, 1 << 16)).status(),
        Status::INVALID_FIELD,
        "no sensor 1"
    );
}

#[test]
fn log_pages_offsets_and_unknown_ids() {
    let mut h = TestHost::new();
    h.enable();
    // Two errors, then the error log: newest first.
    h.admin(bare(0x80));
    h.admin(identify(&h, 0x10, 0));
    let s = get_log(&h, 0x01, 32, 0, 0);
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    let e: ErrorLogEntry = h.mem.read_obj(layout::ADMIN_DATA);
    assert_eq!(
        (e.error_count, e.status >> 1),
        (2, Status::INVALID_FIELD.to_field())
    );
    let e: ErrorLogEntry = h.mem.read_obj(layout::ADMIN_DATA + 64);
    assert_eq!(
        (e.error_count, e.status >> 1),
        (1, Status::INVALID_OPCODE.to_field())
    );
    // Partial read at an offset: the second entry only.
    h.mem.write(layout::ADMIN_DATA, &[0xAA; 128]);
    let s = get_log(&h, 0x01, 16, 64, 0);
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    let e: ErrorLogEntry = h.mem.read_obj(layout::ADMIN_DATA);
    assert_eq!(e.error_count, 1);
    assert_eq!(h.mem.read_vec(layout::ADMIN_DATA + 64, 4), [0xAA; 4]);
    // Firmware slot: slot 1 active with the firmware revision.
    let s = get_log(&h, 0x03, 128, 0, 0);
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    assert_eq!(
        h.mem.read_vec(layout::ADMIN_DATA, 16),
        b"\x01\0\0\0\0\0\0\x000.1     "
    );
    // Commands supported: Read is there, 0x7F is not.
    let s = get_log(&h, 0x05, 1024, 0, 0);
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    assert_eq!(
        h.mem.read_vec(layout::ADMIN_DATA + 1024 + 8, 4),
        [1, 0, 0, 0]
    );
    assert_eq!(
        h.mem.read_vec(layout::ADMIN_DATA + 1024 + 0x7F * 4, 4),
        [0, 0, 0, 0]
    );
    let cases = [
        (get_log(&h, 0x7F, 16, 0, 0), Status::INVALID_LOG_PAGE),
        (
            get_log(&h, 0x02, 16, 512, 0xFFFF_FFFF),
            Status::INVALID_FIELD,
        ),
        (get_log(&h, 0x02, 16, 2, 0xFFFF_FFFF), Status::INVALID_FIELD),
        (get_log(&h, 0x02, 16, 0, 1), Status::INVALID_FIELD),
        (get_log(&h, 0x01, 0x10_0000, 0, 0), Status::INVALID_FIELD),
    ];
    for (i, (s, want)) in cases.into_iter().enumerate() {
        assert_eq!(h.admin(s).status(), want, "case {i}");
    }
}

#[test]
fn aer_completes_on_namespace_attach_and_respects_the_limit() {
    let mut h = TestHost::new();
    h.enable();
    assert_eq!(h.admin(set_feature(0x0B, 1 << 8)).status(), Status::SUCCESS);
    let cids: Vec<_> = (0..4).map(|_| h.submit(0, bare(0x0C))).collect();
    h.poll();
    assert!(h.reap(0).is_none(), "AERs are held");
    assert_eq!(h.admin(bare(0x0C)).status(), Status::AER_LIMIT_EXCEEDED);
    let bdev = Arc::new(Bdev::null("hot", 512, 8).unwrap());
    h.ctrl
        .attach_namespace(Namespace::new(Nsid(5), bdev))
        .unwrap();
    assert_eq!(h.poll(), 1);
    let c = h.reap(0).unwrap();
    assert_eq!(
        (c.cid, c.status(), c.dw0),
        (cids[0].0, Status::SUCCESS, 0x0004_0002)
    );
    // The changed list names NSID 5; reading it clears the list and re-arms the event.
    let s = get_log(&h, 0x04, 1024, 0, 0);
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    assert_eq!(
        h.mem.read_vec(layout::ADMIN_DATA, 8),
        [5, 0, 0, 0, 0, 0, 0, 0]
    );
    h.ctrl.detach_namespace(Nsid(5)).unwrap();
    assert_eq!(h.poll(), 1);
    assert_eq!(h.reap(0).unwrap().cid, cids[1].0);
    // Disabling drops the held requests.
    h.write_reg32(nvmemu_spec::regs::CC, 0);
    h.enable();
    assert_eq!(h.admin(set_feature(0x0B, 1 << 8)).status(), Status::SUCCESS);
    let bdev = Arc::new(Bdev::null("hot2", 512, 8).unwrap());
    h.ctrl
        .attach_namespace(Namespace::new(Nsid(6), bdev))
        .unwrap();
    assert_eq!(h.poll(), 0);
}

#[test]
fn abort_of_an_unknown_command() {
    let mut h = TestHost::new();
    h.enable();
    let c = h.admin(Sqe {
        cdw10: 1 | (9 << 16),
        ..bare(0x08)
    });
    assert_eq!((c.status(), c.dw0), (Status::SUCCESS, 1));
}

#[test]
fn keep_alive_is_not_offered_on_pcie() {
    let mut h = TestHost::new();
    h.enable();
    assert_eq!(id_ctrl(&mut h).kas, 0);
    // Commands Supported and Effects: no CSUPP for opcode 18h.
    let s = get_log(&h, 0x05, 1024, 0, 0);
    assert_eq!(h.admin(s).status(), Status::SUCCESS);
    assert_eq!(h.mem.read_vec(layout::ADMIN_DATA + 0x18 * 4, 4), vec![0; 4]);
    assert_eq!(h.mem.read_vec(layout::ADMIN_DATA + 0x06 * 4, 1), vec![1]);
    assert_eq!(h.admin(bare(0x18)).status(), Status::INVALID_OPCODE);
    // KATO reads 0 (disabled: SPDK's nvme_compliance gets it) and cannot be turned on.
    let c = h.admin(get_feature(0x0F, 0, 0));
    assert_eq!((c.status(), c.dw0), (Status::SUCCESS, 0));
    assert_eq!(h.admin(set_feature(0x0F, 0)).status(), Status::SUCCESS);
    assert_eq!(
        h.admin(set_feature(0x0F, 1000)).status(),
        Status::INVALID_FIELD
    );
}

#[test]
fn doorbell_buffer_config_validation() {
    let mut h = TestHost::new();
    h.enable();
    let dbbc = |h: &TestHost, a: u64, b: u64| Sqe {
        dptr1: h.mem.iova(a),
        dptr2: h.mem.iova(b),
        ..bare(0x7C)
    };
    assert_eq!(
        h.admin(dbbc(&h, layout::SHADOW + 8, layout::EVENT_IDX))
            .status(),
        Status::INVALID_FIELD
    );
    assert_eq!(
        h.admin(dbbc(&h, layout::SHADOW, layout::SHADOW)).status(),
        Status::INVALID_FIELD
    );
    let unmapped = Sqe {
        dptr1: 0x1000,
        dptr2: h.mem.iova(layout::EVENT_IDX),
        ..bare(0x7C)
    };
    assert_eq!(h.admin(unmapped).status(), Status::INVALID_FIELD);
    assert_eq!(
        h.admin(dbbc(&h, layout::SHADOW, layout::EVENT_IDX))
            .status(),
        Status::SUCCESS
    );
    let mut off = TestHost::with_config(ControllerConfig {
        shadow_doorbells: false,
        ..Default::default()
    });
    off.enable();
    let id = id_ctrl(&mut off);
    assert_eq!(id.oacs & (1 << 8), 0);
    assert_eq!(
        off.admin(dbbc(&off, layout::SHADOW, layout::EVENT_IDX))
            .status(),
        Status::INVALID_OPCODE
    );
}

/// Get / Set Features, Host Behavior Support (FID 16h): a 512-byte structure through the
/// data pointer, ACRE the one field that can be set.
#[test]
fn host_behavior_support_round_trips_acre_through_the_data_buffer() {
    let mut h = TestHost::new();
    h.enable();
    let buf = h.mem.iova(layout::ADMIN_DATA);
    let with_buf = |sqe: Sqe| Sqe { dptr1: buf, ..sqe };
    let get = |h: &mut TestHost, sel: u8| {
        h.mem.write(layout::ADMIN_DATA, &[0xA5; 512]);
        let c = h.admin(with_buf(get_feature(0x16, sel, 0)));
        (c.status(), h.mem.read_vec(layout::ADMIN_DATA, 512))
    };
    assert_eq!(get(&mut h, 0), (Status::SUCCESS, vec![0; 512]), "current");

    let mut data = [0u8; 512];
    data[0] = 1;
    h.mem.write(layout::ADMIN_DATA, &data);
    let c = h.admin(with_buf(set_feature(0x16, 0)));
    assert_eq!(c.status(), Status::SUCCESS, "ACRE = 1");
    assert_eq!(get(&mut h, 0), (Status::SUCCESS, data.to_vec()));
    assert_eq!(get(&mut h, 1), (Status::SUCCESS, vec![0; 512]), "default");
    assert_eq!(h.admin(get_feature(0x16, 3, 0)).dw0, 0b100, "changeable");

    // Fields this controller does not implement are refused, and change nothing.
    for (at, byte) in [(0usize, 0b10u8), (1, 1), (511, 0x80)] {
        let mut bad = [0u8; 512];
        bad[at] = byte;
        h.mem.write(layout::ADMIN_DATA, &bad);
        let c = h.admin(with_buf(set_feature(0x16, 0)));
        assert_eq!(c.status(), Status::INVALID_FIELD, "byte {at} = {byte:#x}");
    }
    assert_eq!(get(&mut h, 0).1[0], 1);

    // A data pointer outside client memory fails the transfer, not the server.
    let c = h.admin(Sqe {
        dptr1: 0x1000,
        ..get_feature(0x16, 0, 0)
    });
    assert_eq!(c.status(), Status::DATA_TRANSFER_ERROR);

    // A controller reset returns it to its default.
    h.write_reg32(nvmemu_spec::regs::CC, 0);
    h.enable();
    assert_eq!(get(&mut h, 0), (Status::SUCCESS, vec![0; 512]));
}
