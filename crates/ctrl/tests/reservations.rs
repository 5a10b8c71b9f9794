// SPDX-License-Identifier: Apache-2.0
//! Reservations between two controllers sharing one namespace, as two listeners of one
//! subsystem share it: registration, acquire, preempt, release, the report, the Host
//! Identifier feature, and conflicts enforced on I/O.

use nvmemu_ctrl::test_utils::{TestHost, identify, layout, rw, sqe};
use nvmemu_spec::identify::{IdentifyController, IdentifyNamespace, ctrl_bits};
use nvmemu_spec::{DataPtr, Sqe, Status};

mod resv_common;

use resv_common::*;

fn read(h: &mut TestHost) -> Status {
    h.read_blocks(1, 0, 1).0
}

fn write(h: &mut TestHost) -> Status {
    h.write_blocks(1, 0, &[0x5A; 512])
}

/// Reservation Report into the data area: (generation, rtype, registrant count, entries).
fn report(h: &mut TestHost, eds: bool) -> Result<(u32, u8, u16, Vec<u8>), Status> {
    h.mem.write(layout::DATA, &[0xEE; 4096]);
    let s = Sqe {
        nsid: 1,
        cdw10: 1024 - 1,
        cdw11: u32::from(eds),
        ..sqe(0x0E, h.prps(layout::DATA, 4096))
    };
    let status = h.cmd(1, s).status();
    if status != Status::SUCCESS {
        return Err(status);
    }
    let d = h.mem.read_vec(layout::DATA, 4096);
    let generation = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
    let count = u16::from_le_bytes([d[5], d[6]]);
    let header = if eds { 64 } else { 24 };
    Ok((generation, d[4], count, d[header..].to_vec()))
}

#[test]
fn identify_reports_a_shared_namespace_with_reservations() {
    let (mut a, _) = pair();
    assert_eq!(a.admin(identify(&a, 1, 0)).status(), Status::SUCCESS);
    let c: IdentifyController = a.mem.read_obj(layout::ADMIN_DATA);
    assert_eq!(
        c.cmic,
        ctrl_bits::CMIC_MULTI_PORT | ctrl_bits::CMIC_MULTI_CTRLR
    );
    assert_eq!(
        c.oncs & ctrl_bits::ONCS_RESERVATIONS,
        ctrl_bits::ONCS_RESERVATIONS
    );
    assert_eq!(c.ctratt & ctrl_bits::CTRATT_EXHID, ctrl_bits::CTRATT_EXHID);
    assert_eq!(a.admin(identify(&a, 0, 1)).status(), Status::SUCCESS);
    let ns: IdentifyNamespace = a.mem.read_obj(layout::ADMIN_DATA);
    assert_eq!((ns.nmic, ns.rescap), (1, 0xFE));
}

#[test]
fn write_exclusive_lets_only_the_holder_write() {
    let (mut a, mut b) = pair();
    assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
    assert_eq!(acquire(&mut a, 0, WRITE_EXCLUSIVE, 0xA, 0), Status::SUCCESS);
    assert_eq!(write(&mut b), Status::RESERVATION_CONFLICT);
    assert_eq!(read(&mut b), Status::SUCCESS);
    assert_eq!(write(&mut a), Status::SUCCESS);
    // Other write commands conflict too; a registrant that does not hold it is no better.
    assert_eq!(register(&mut b, 0, 0xB), Status::SUCCESS);
    let zeroes = Sqe {
        nsid: 1,
        cdw12: 0,
        ..sqe(0x08, DataPtr::Prp { prp1: 0, prp2: 0 })
    };
    assert_eq!(b.cmd(1, zeroes).status(), Status::RESERVATION_CONFLICT);
    let flush = Sqe {
        nsid: 1,
        ..sqe(0x00, DataPtr::Prp { prp1: 0, prp2: 0 })
    };
    assert_eq!(b.cmd(1, flush).status(), Status::RESERVATION_CONFLICT);
    // Releasing with another type is refused; with the held one, writes are open again.
    assert_eq!(
        release(&mut a, 0, EXCLUSIVE_ACCESS, 0xA),
        Status::INVALID_FIELD
    );
    assert_eq!(release(&mut a, 0, WRITE_EXCLUSIVE, 0xA), Status::SUCCESS);
    assert_eq!(write(&mut b), Status::SUCCESS);
}

#[test]
fn exclusive_access_registrants_only_admits_every_registrant() {
    let (mut a, mut b) = pair();
    assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
    assert_eq!(
        acquire(&mut a, 0, EXCLUSIVE_ACCESS_REGISTRANTS_ONLY, 0xA, 0),
        Status::SUCCESS
    );
    assert_eq!(read(&mut b), Status::RESERVATION_CONFLICT);
    let compare = rw(0x05, 1, 0, 1, b.prps(layout::DATA, 512));
    assert_eq!(b.cmd(1, compare).status(), Status::RESERVATION_CONFLICT);
    assert_eq!(register(&mut b, 0, 0xB), Status::SUCCESS);
    assert_eq!(read(&mut b), Status::SUCCESS);
    assert_eq!(write(&mut b), Status::SUCCESS);
    // B may not acquire what A holds.
    assert_eq!(
        acquire(&mut b, 0, EXCLUSIVE_ACCESS_REGISTRANTS_ONLY, 0xB, 0),
        Status::RESERVATION_CONFLICT
    );
    // A unregisters: the holder is gone, so is the reservation.
    assert_eq!(resv(&mut a, 0x0D, 1, &[0xA, 0]), Status::SUCCESS);
    assert_eq!(report(&mut b, true).unwrap().1, 0);
    assert_eq!(read(&mut a), Status::SUCCESS);
}

#[test]
fn keys_are_checked_and_only_registrants_act() {
    let (mut a, mut b) = pair();
    assert_eq!(
        acquire(&mut a, 0, WRITE_EXCLUSIVE, 0, 0),
        Status::RESERVATION_CONFLICT
    );
    assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
    // Same key again: nothing changes; another key: conflict.
    assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
    assert_eq!(register(&mut a, 0, 0xC), Status::RESERVATION_CONFLICT);
    assert_eq!(
        acquire(&mut a, 0, WRITE_EXCLUSIVE, 0xBAD, 0),
        Status::RESERVATION_CONFLICT
    );
    assert_eq!(acquire(&mut a, 0, 7, 0xA, 0), Status::INVALID_FIELD);
    // Replace needs the current key unless IEKEY is set.
    assert_eq!(
        resv(&mut a, 0x0D, 2, &[0xBAD, 0xD]),
        Status::RESERVATION_CONFLICT
    );
    assert_eq!(
        resv(&mut a, 0x0D, 2 | 1 << 3, &[0xBAD, 0xD]),
        Status::SUCCESS
    );
    assert_eq!(acquire(&mut a, 0, WRITE_EXCLUSIVE, 0xD, 0), Status::SUCCESS);
    // Persist Through Power Loss is not offered.
    assert_eq!(
        resv(&mut b, 0x0D, 3 << 30, &[0, 0xB]),
        Status::INVALID_FIELD
    );
    assert_eq!(
        release(&mut b, 0, WRITE_EXCLUSIVE, 0xB),
        Status::RESERVATION_CONFLICT
    );
    assert_eq!(register(&mut b, 0, 0xB), Status::SUCCESS);
    // Releasing what one does not hold succeeds and changes nothing.
    assert_eq!(release(&mut b, 0, WRITE_EXCLUSIVE, 0xB), Status::SUCCESS);
    assert_eq!(write(&mut b), Status::RESERVATION_CONFLICT);
    // Clear drops the reservation and every registration.
    assert_eq!(release(&mut b, 1, 0, 0xB), Status::SUCCESS);
    assert_eq!(report(&mut a, true).unwrap().2, 0);
    assert_eq!(write(&mut b), Status::SUCCESS);
}

#[test]
fn preempt_takes_the_reservation_and_unregisters_the_holder() {
    let (mut a, mut b) = pair();
    assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
    assert_eq!(register(&mut b, 0, 0xB), Status::SUCCESS);
    assert_eq!(acquire(&mut a, 0, WRITE_EXCLUSIVE, 0xA, 0), Status::SUCCESS);
    let (generation, _, _, _) = report(&mut b, true).unwrap();
    assert_eq!(generation, 2);
    assert_eq!(
        acquire(&mut b, 1, EXCLUSIVE_ACCESS, 0xB, 0xA),
        Status::SUCCESS
    );
    assert_eq!(read(&mut a), Status::RESERVATION_CONFLICT);
    assert_eq!(read(&mut b), Status::SUCCESS);
    let (generation, rtype, count, entries) = report(&mut a, true).unwrap();
    assert_eq!((generation, rtype, count), (3, EXCLUSIVE_ACCESS, 1));
    // Extended entry: CNTLID, RCSTS (holds), RKEY, 128-bit HOSTID.
    assert_eq!(&entries[..3], &[2, 0, 1]);
    assert_eq!(&entries[8..16], &0xBu64.to_le_bytes());
    assert_eq!(&entries[16..32], &[0xB2; 16]);
    assert_eq!(&entries[64..66], &[0, 0], "one entry only");
    // Preempting a key nobody has is a conflict; PRKEY 0 against a single holder is invalid.
    assert_eq!(
        acquire(&mut b, 1, EXCLUSIVE_ACCESS, 0xB, 0x99),
        Status::RESERVATION_CONFLICT
    );
    assert_eq!(
        acquire(&mut b, 1, EXCLUSIVE_ACCESS, 0xB, 0),
        Status::INVALID_FIELD
    );
}

#[test]
fn all_registrants_types_make_every_registrant_a_holder() {
    let (mut a, mut b) = pair();
    assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
    assert_eq!(register(&mut b, 0, 0xB), Status::SUCCESS);
    assert_eq!(
        acquire(&mut a, 0, WRITE_EXCLUSIVE_ALL_REGISTRANTS, 0xA, 0),
        Status::SUCCESS
    );
    let (_, _, count, entries) = report(&mut a, true).unwrap();
    assert_eq!((count, entries[2], entries[64 + 2]), (2, 1, 1));
    // A leaving keeps it: B still holds it. B leaving too ends it.
    assert_eq!(resv(&mut a, 0x0D, 1, &[0xA, 0]), Status::SUCCESS);
    assert_eq!(write(&mut a), Status::RESERVATION_CONFLICT);
    assert_eq!(write(&mut b), Status::SUCCESS);
    assert_eq!(resv(&mut b, 0x0D, 1, &[0xB, 0]), Status::SUCCESS);
    assert_eq!(write(&mut a), Status::SUCCESS);
}

#[test]
fn host_identifier_round_trips_and_is_fixed_while_registered() {
    let (mut a, _) = pair();
    let get = Sqe {
        cdw10: 0x81,
        cdw11: 1,
        ..sqe(
            0x0A,
            DataPtr::Prp {
                prp1: a.mem.iova(layout::ADMIN_DATA),
                prp2: 0,
            },
        )
    };
    a.mem.write(layout::ADMIN_DATA, &[0; 16]);
    assert_eq!(a.admin(get).status(), Status::SUCCESS);
    assert_eq!(a.mem.read_vec(layout::ADMIN_DATA, 16), vec![0xA1; 16]);
    assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
    assert_eq!(
        set_host_id(&mut a, [0x77; 16]),
        Status::COMMAND_SEQUENCE_ERROR
    );
    // The short report cannot carry 128-bit host identifiers.
    assert_eq!(
        report(&mut a, false),
        Err(Status::HOST_ID_INCONSISTENT_FORMAT)
    );
}

#[test]
fn hosts_sharing_an_identifier_share_the_registration() {
    let (mut a, mut b) = pair();
    assert_eq!(set_host_id(&mut b, [0xA1; 16]), Status::SUCCESS);
    assert_eq!(register(&mut a, 0, 0xA), Status::SUCCESS);
    assert_eq!(
        acquire(&mut a, 0, EXCLUSIVE_ACCESS, 0xA, 0),
        Status::SUCCESS
    );
    // Controller 2 speaks for the same host: it holds the reservation as well.
    assert_eq!(write(&mut b), Status::SUCCESS);
    assert_eq!(register(&mut b, 0, 0xA), Status::SUCCESS);
}
