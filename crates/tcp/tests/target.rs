// SPDX-License-Identifier: Apache-2.0
//! The NVMe/TCP target against a minimal initiator over loopback: connect, identify, the
//! three ways data moves (in-capsule, R2T + H2CData, C2HData), with and without digests.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use common::*;
use nvmemu_spec::Status;
use nvmemu_tcp::TcpOptions;

/// Admin and one I/O queue up; returns the initiators (admin, I/O).
fn connected(addr: std::net::SocketAddr, digests: bool) -> (Initiator, Initiator) {
    pair(addr, digests, 64)
}

fn identify_controller(admin: &mut Initiator) -> Vec<u8> {
    let (c, data) = admin.exec(
        nvmemu_spec::Sqe {
            cdw10: 1,
            ..sqe(0x06, sgl(0x5A, 4096))
        },
        &[],
        &[],
        0,
    );
    assert_eq!(c.status(), Status::SUCCESS);
    assert_eq!(data.len(), 4096);
    data
}

#[test]
fn identify_reports_the_fabrics_fields_linux_checks() {
    let (_t, addr, _) = target(TcpOptions::default());
    let (mut admin, _io) = connected(addr, false);
    let id = identify_controller(&mut admin);
    assert_eq!(id[111], 1, "CNTRLTYPE: I/O controller");
    assert_eq!(&id[768..768 + NQN.len()], NQN.as_bytes(), "SUBNQN");
    let sgls = u32::from_le_bytes(id[536..540].try_into().unwrap());
    assert_eq!(sgls & 0b11, 1, "SGLs supported");
    let ioccsz = u32::from_le_bytes(id[1792..1796].try_into().unwrap());
    assert_eq!(
        ioccsz,
        (64 + 4096) / 16,
        "IOCCSZ: SQE plus 4 KiB in-capsule data"
    );
    assert_eq!(
        u32::from_le_bytes(id[1796..1800].try_into().unwrap()),
        1,
        "IORCSZ"
    );
    assert_eq!(u16::from_le_bytes([id[1800], id[1801]]), 0, "ICDOFF");
    assert_ne!(u16::from_le_bytes([id[320], id[321]]), 0, "KAS");
    assert_eq!(id[77], 5, "MDTS: 128 KiB");
}

fn write_read_cycle(digests: bool) {
    let (_t, addr, _) = target(TcpOptions::default());
    let (_admin, mut io) = connected(addr, digests);
    // In-capsule write (4 KiB = the in-capsule data size), read back in one C2HData.
    let small = pattern(4096, 3);
    let (c, _) = io.exec(rw(0x01, 8, 8, sgl(0x01, 4096)), &small, &[], 0);
    assert_eq!(c.status(), Status::SUCCESS, "in-capsule write");
    let (c, back) = io.exec(rw(0x02, 8, 8, sgl(0x5A, 4096)), &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
    assert_eq!(back, small);
    // 128 KiB through R2T, answered in 16 KiB H2CData PDUs.
    let big = pattern(128 * 1024, 9);
    let (c, _) = io.exec(
        rw(0x01, 64, 256, sgl(0x5A, 128 * 1024)),
        &[],
        &big,
        16 * 1024,
    );
    assert_eq!(c.status(), Status::SUCCESS, "R2T write");
    let (c, back) = io.exec(rw(0x02, 64, 256, sgl(0x5A, 128 * 1024)), &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
    assert!(back == big, "128 KiB read back differs");
}

#[test]
fn write_and_read_back_without_digests() {
    write_read_cycle(false);
}

#[test]
fn write_and_read_back_with_header_and_data_digests() {
    write_read_cycle(true);
}

#[test]
fn transfer_beyond_mdts_is_refused_with_sgl_length_invalid() {
    let (_t, addr, _) = target(TcpOptions::default());
    let (_admin, mut io) = connected(addr, false);
    let (c, _) = io.exec(rw(0x02, 0, 512, sgl(0x5A, 256 * 1024)), &[], &[], 0);
    assert_eq!(c.status(), Status::DATA_SGL_LENGTH_INVALID);
    // The queue goes on.
    let (c, _) = io.exec(rw(0x02, 0, 1, sgl(0x5A, 512)), &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
}

#[test]
fn host_not_on_the_allow_list_gets_connect_invalid_host() {
    let (_t, addr, _) = target(TcpOptions::default());
    let mut i = Initiator::new(addr, false, false);
    let c = i.connect(NQN, 0, 31, 0xFFFF, "nqn.2014-08.org.example:intruder", 0);
    assert_eq!(c.status().sc, 0x84);
}

#[test]
fn io_connect_to_an_unknown_controller_is_refused() {
    let (_t, addr, _) = target(TcpOptions::default());
    let mut i = Initiator::new(addr, false, false);
    let c = connect(&mut i, 1, 31, 42, 0);
    assert_eq!(c.status().sc, 0x82, "Connect Invalid Parameters");
    assert_eq!(c.dw0, 1 | (16 << 16), "IATTR data, IPO CNTLID");
}

#[test]
fn queue_commands_are_refused_on_the_admin_queue() {
    let (_t, addr, _) = target(TcpOptions::default());
    let (mut admin, _io) = connected(addr, false);
    let create_sq = nvmemu_spec::Sqe {
        cdw10: 2 | (15 << 16),
        cdw11: 1 | (1 << 16),
        ..sqe(0x01, sgl(0x5A, 0))
    };
    let (c, _) = admin.exec(create_sq, &[], &[], 0);
    assert_eq!(c.status(), Status::INVALID_OPCODE);
}

#[test]
fn disconnecting_the_admin_queue_ends_the_io_queues() {
    let (_t, addr, _) = target(TcpOptions::default());
    let (mut admin, mut io) = connected(addr, false);
    let (c, _) = admin.exec(
        nvmemu_spec::Sqe {
            nsid: 0x08,
            ..sqe(0x7F, sgl(0x5A, 0))
        },
        &[],
        &[],
        0,
    );
    assert_eq!(c.status(), Status::SUCCESS, "Disconnect");
    assert!(admin.try_recv().is_none(), "admin connection closed");
    assert!(
        io.try_recv().is_none(),
        "I/O connection closed with its controller"
    );
}

#[test]
fn discovery_controller_lists_the_subsystem_and_its_listener() {
    let (t, addr, _) = target(TcpOptions::default());
    t.subsystems()
        .lock()
        .get_mut(NQN)
        .unwrap()
        .listeners
        .push(addr);
    let mut i = Initiator::new(addr, false, false);
    let mut data = vec![0u8; 1024];
    data[16..18].copy_from_slice(&0xFFFFu16.to_le_bytes());
    let d = nvmemu_tcp::DISCOVERY_NQN.as_bytes();
    data[256..256 + d.len()].copy_from_slice(d);
    data[512..512 + HOSTNQN.len()].copy_from_slice(HOSTNQN.as_bytes());
    let connect = nvmemu_spec::Sqe {
        nsid: 0x01,
        cdw11: 31,
        ..sqe(0x7F, sgl(0x01, 1024))
    };
    let (c, _) = i.exec(connect, &data, &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
    assert_eq!(i.prop_set(0x14, 1), Status::SUCCESS);
    assert_eq!(i.prop_get(0x1C, false).1 & 1, 1);
    let id = identify_controller(&mut i);
    assert_eq!(id[111], 2, "CNTRLTYPE: discovery");
    // Get Log Page 70h, 4 KiB from offset 0.
    let (c, page) = i.exec(
        nvmemu_spec::Sqe {
            cdw10: 0x70 | (1023 << 16),
            ..sqe(0x02, sgl(0x5A, 4096))
        },
        &[],
        &[],
        0,
    );
    assert_eq!(c.status(), Status::SUCCESS);
    assert_eq!(
        u64::from_le_bytes(page[8..16].try_into().unwrap()),
        1,
        "NUMREC"
    );
    let e = &page[1024..2048];
    assert_eq!(e[0], 3, "TRTYPE TCP");
    assert_eq!(&e[256..256 + NQN.len()], NQN.as_bytes());
    let port = addr.port().to_string();
    assert_eq!(&e[32..32 + port.len()], port.as_bytes());
}

#[test]
fn read_and_write_move_their_blocks_not_their_sgl_length() {
    let (_t, addr, _) = target(TcpOptions::default());
    let (_admin, mut io) = connected(addr, false);
    // 16 blocks (8 KiB) asked for with a 4 KiB SGL: refused before the controller sees it.
    let (c, data) = io.exec(rw(0x02, 0, 16, sgl(0x5A, 4096)), &[], &[], 0);
    assert_eq!(c.status(), Status::DATA_SGL_LENGTH_INVALID);
    assert!(data.is_empty());
    let (c, _) = io.exec(rw(0x01, 0, 16, sgl(0x5A, 4096)), &[], &[0; 4096], 4096);
    assert_eq!(c.status(), Status::DATA_SGL_LENGTH_INVALID);
    // 2 blocks with a 16 KiB SGL: 1 KiB moves each way.
    let d = pattern(1024, 5);
    let (c, _) = io.exec(rw(0x01, 4, 2, sgl(0x5A, 16384)), &[], &d, 16384);
    assert_eq!(c.status(), Status::SUCCESS);
    let (c, back) = io.exec(rw(0x02, 4, 2, sgl(0x5A, 16384)), &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
    assert_eq!(back, d);
}

#[test]
fn admin_connect_fits_in_the_capsule_whatever_the_io_in_capsule_size() {
    let (_t, addr, _) = target(TcpOptions {
        in_capsule_data_size: 0,
        ..TcpOptions::default()
    });
    let mut admin = Initiator::new(addr, false, false);
    enable(&mut admin);
    let id = identify_controller(&mut admin);
    assert_eq!(
        u32::from_le_bytes(id[1792..1796].try_into().unwrap()),
        4,
        "IOCCSZ: the SQE only"
    );
}

#[test]
fn keep_alive_succeeds_on_a_controller_that_advertises_kas() {
    let (_t, addr, _) = target(TcpOptions::default());
    let (mut admin, _io) = connected(addr, false);
    let (c, _) = admin.exec(sqe(0x18, sgl(0x5A, 0)), &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS, "Keep Alive");
}
