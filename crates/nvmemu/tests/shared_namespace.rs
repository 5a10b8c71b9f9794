// SPDX-License-Identifier: Apache-2.0
//! Two clients on two controllers sharing one namespace (what two listeners of one
//! subsystem give): Identify says it is shared, and a reservation taken through one
//! controller is enforced on the other's I/O.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use nvmemu_bdev::Bdev;
use nvmemu_ctrl::{ControllerConfig, Namespace};
use nvmemu_device::{ControllerSpec, Target};
use nvmemu_driver::{AttachOptions, AttachedController, DmaBuf, IoQpair, NvmeError};
use nvmemu_spec::{Cid, Lba, Nsid, Psdt, Sqe, Status};

struct Shared {
    _target: Target,
    dirs: [tempfile::TempDir; 2],
}

/// A target with controllers 1 and 2, each on its own socket, both serving one namespace.
fn shared() -> Shared {
    let target = common::test_target(
        nvmemu_device::Deadlines::default(),
        nvmemu_device::ClientBudget::default(),
    );
    let bdev = Arc::new(Bdev::malloc("shared", 512, 1 << 12).unwrap());
    let ns = Namespace::new(Nsid(1), bdev);
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for (cntlid, dir) in [1u16, 2].into_iter().zip(&dirs) {
        target
            .add_controller(ControllerSpec {
                socket_dir: dir.path().to_path_buf(),
                socket_mode: 0o600,
                config: ControllerConfig {
                    cntlid,
                    ..ControllerConfig::default()
                },
                namespaces: vec![ns.clone()],
                admission: nvmemu_device::Admission::default(),
            })
            .unwrap();
    }
    Shared {
        _target: target,
        dirs,
    }
}

fn attach(dir: &Path) -> AttachedController {
    let opts = AttachOptions {
        io_queues: 1,
        queue_depth: 16,
        dma_pool_bytes: 4 << 20,
        ..AttachOptions::default()
    };
    AttachedController::attach(dir, opts).unwrap()
}

fn command(opcode: u8, cdw10: u32) -> Sqe {
    Sqe {
        cdw0: Sqe::make_cdw0(opcode, Psdt::Prp, Cid(0)),
        nsid: 1,
        cdw10,
        ..Sqe::default()
    }
}

fn identify_raw(c: &mut AttachedController, cns: u32, nsid: u32) -> Vec<u8> {
    let buf = c.alloc_dma(4096).unwrap();
    let sqe = Sqe {
        nsid,
        ..command(0x06, cns)
    };
    let cqe = c.admin_raw_with_data(sqe, Some((&buf, 4096))).unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
    let mut out = vec![0u8; 4096];
    buf.copy_to(0, &mut out).unwrap();
    out
}

fn set_host_id(c: &mut AttachedController, id: u8) {
    let buf = c.alloc_dma(4096).unwrap();
    buf.copy_from(0, &[id; 16]).unwrap();
    let sqe = Sqe {
        cdw11: 1,
        nsid: 0,
        ..command(0x09, 0x81)
    };
    let cqe = c.admin_raw_with_data(sqe, Some((&buf, 16))).unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
}

/// A reservation command with `keys` in its data buffer.
fn resv(c: &AttachedController, q: &mut IoQpair, opcode: u8, cdw10: u32, keys: &[u64]) -> Status {
    let buf = c.alloc_dma(4096).unwrap();
    let bytes: Vec<u8> = keys.iter().flat_map(|k| k.to_le_bytes()).collect();
    buf.copy_from(0, &bytes).unwrap();
    let len = bytes.len() as u64;
    q.execute_raw(command(opcode, cdw10), Some((&buf, len)))
        .unwrap()
        .status()
}

fn write(q: &mut IoQpair, buf: &DmaBuf) -> Result<(), Status> {
    match q.write_blocking(Nsid(1), Lba(8), 8, buf) {
        Ok(_) => Ok(()),
        Err(NvmeError::Status(s)) => Err(s),
        Err(e) => panic!("write: {e}"),
    }
}

#[test]
fn identify_says_shared_and_a_reservation_holds_across_controllers() {
    let s = shared();
    let mut a = attach(s.dirs[0].path());
    let mut b = attach(s.dirs[1].path());
    // CMIC (byte 76): multi-port, multi-controller; NMIC and RESCAP (bytes 30, 31).
    assert_eq!(identify_raw(&mut a, 1, 0)[76], 0b11);
    assert_eq!(b.info().cntlid, 2);
    assert_eq!(&identify_raw(&mut b, 0, 1)[30..32], &[1, 0xFE]);
    set_host_id(&mut a, 0xA1);
    set_host_id(&mut b, 0xB2);
    let mut qa = a.take_qpair().unwrap();
    let mut qb = b.take_qpair().unwrap();
    let data = a.alloc_dma(4096).unwrap();
    data.copy_from(0, &[0x3C; 4096]).unwrap();
    let other = b.alloc_dma(4096).unwrap();

    // A registers key 0xA and takes Write Exclusive.
    assert_eq!(resv(&a, &mut qa, 0x0D, 0, &[0, 0xA]), Status::SUCCESS);
    assert_eq!(resv(&a, &mut qa, 0x11, 1 << 8, &[0xA, 0]), Status::SUCCESS);
    write(&mut qa, &data).unwrap();
    // B may read what A wrote, but not write.
    qb.read_blocking(Nsid(1), Lba(8), 8, &other).unwrap();
    let mut back = vec![0u8; 4096];
    other.copy_to(0, &mut back).unwrap();
    assert!(back.iter().all(|&x| x == 0x3C));
    assert_eq!(write(&mut qb, &other), Err(Status::RESERVATION_CONFLICT));

    // B's report (extended): one registrant, controller 1, holding it with key 0xA.
    let report = b.alloc_dma(4096).unwrap();
    let cqe = qb
        .execute_raw(
            Sqe {
                cdw11: 1,
                ..command(0x0E, 4096 / 4 - 1)
            },
            Some((&report, 4096)),
        )
        .unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
    let mut r = vec![0u8; 128];
    report.copy_to(0, &mut r).unwrap();
    assert_eq!((r[4], u16::from_le_bytes([r[5], r[6]])), (1, 1));
    assert_eq!(&r[64..67], &[1, 0, 1]);
    assert_eq!(&r[72..80], &0xAu64.to_le_bytes());
    assert_eq!(&r[80..96], &[0xA1; 16]);

    // A releases: B writes again.
    assert_eq!(resv(&a, &mut qa, 0x15, 1 << 8, &[0xA]), Status::SUCCESS);
    write(&mut qb, &other).unwrap();
    drop((qa, qb));
    a.shutdown().unwrap();
    b.shutdown().unwrap();
}

/// The Reservation Notification log page (80h): (log page count, type, NSID).
fn notice_page(c: &mut AttachedController) -> (u64, u8, u32) {
    let buf = c.alloc_dma(4096).unwrap();
    let sqe = Sqe {
        nsid: 0,
        ..command(0x02, 0x80 | ((64 / 4 - 1) << 16))
    };
    let cqe = c.admin_raw_with_data(sqe, Some((&buf, 64))).unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
    let mut p = [0u8; 64];
    buf.copy_to(0, &mut p).unwrap();
    (
        u64::from_le_bytes(p[0..8].try_into().unwrap()),
        p[8],
        u32::from_le_bytes(p[12..16].try_into().unwrap()),
    )
}

#[test]
fn a_preempt_through_one_controller_leaves_a_notice_on_the_other() {
    let s = shared();
    let mut a = attach(s.dirs[0].path());
    let mut b = attach(s.dirs[1].path());
    set_host_id(&mut a, 0xA1);
    set_host_id(&mut b, 0xB2);
    let mut qa = a.take_qpair().unwrap();
    let mut qb = b.take_qpair().unwrap();
    assert_eq!(resv(&a, &mut qa, 0x0D, 0, &[0, 0xA]), Status::SUCCESS);
    assert_eq!(resv(&b, &mut qb, 0x0D, 0, &[0, 0xB]), Status::SUCCESS);
    assert_eq!(resv(&b, &mut qb, 0x11, 1 << 8, &[0xB, 0]), Status::SUCCESS);
    // A preempts B's Write Exclusive reservation (and registration).
    assert_eq!(
        resv(&a, &mut qa, 0x11, 1 | (1 << 8), &[0xA, 0xB]),
        Status::SUCCESS
    );
    // B's poller turns the notice into a page; give it a few passes.
    let mut page = notice_page(&mut b);
    for _ in 0..100 {
        if page != (0, 0, 0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        page = notice_page(&mut b);
    }
    assert_eq!(page, (1, 1, 1), "registration preempted on namespace 1");
    assert_eq!(
        notice_page(&mut a),
        (0, 0, 0),
        "nothing for the preempting host"
    );
    drop((qa, qb));
    a.shutdown().unwrap();
    b.shutdown().unwrap();
}
