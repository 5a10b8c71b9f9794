// SPDX-License-Identifier: Apache-2.0
//! A target of two poll groups: new connections spread over the groups, each controller
//! stays on its admin queue's group, and an I/O queue whose connection another group
//! accepted moves to its controller's group with everything it sent (the Connect, the
//! commands behind it, their in-capsule data), with or without digests; a host that sends a
//! bad PDU right behind such a Connect loses that connection only.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::*;
use nvmemu_spec::Status;
use nvmemu_tcp::{TcpOptions, TcpStats, TcpTarget};

/// Each group's counters once `done` holds for them (they are published once per pass),
/// or as they are after 5 s.
fn groups_when(t: &TcpTarget, done: impl Fn(&[TcpStats]) -> bool) -> Vec<TcpStats> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let g = t.group_stats();
        if done(&g) || Instant::now() > deadline {
            return g;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// (admin, I/O) queues connected now, per group.
fn queues(g: &[TcpStats]) -> Vec<(u64, u64)> {
    g.iter()
        .map(|s| (s.current_admin_qpairs, s.current_io_qpairs))
        .collect()
}

/// Write `data` at `slba` (R2T, 4 KiB H2CData PDUs), read it back and compare.
fn write_read(io: &mut Initiator, slba: u64, data: &[u8]) {
    let (blocks, len) = ((data.len() as u64 / BLOCK) as u32, data.len() as u32);
    let (c, _) = io.exec(rw(0x01, slba, blocks, sgl(0x5A, len)), &[], data, 4096);
    assert_eq!(c.status(), Status::SUCCESS, "write at {slba}");
    let (c, back) = io.exec(rw(0x02, slba, blocks, sgl(0x5A, len)), &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS, "read at {slba}");
    assert!(back == data, "read at {slba} differs from what was written");
}

#[test]
fn two_hosts_land_on_different_groups_and_both_verify_their_data() {
    let (t, addr, _) = target_groups(TcpOptions::default(), 2);
    let hosts: Vec<_> = (0..2).map(|_| pair(addr, false, 32)).collect();
    let g = groups_when(&t, |g| queues(g) == [(1, 1), (1, 1)]);
    assert_eq!(
        queues(&g),
        [(1, 1), (1, 1)],
        "one controller with its I/O queue on each group"
    );
    std::thread::scope(|s| {
        for (h, (admin, mut io)) in hosts.into_iter().enumerate() {
            s.spawn(move || {
                // The controller lives as long as its admin queue.
                let _admin = admin;
                for round in 0..16u8 {
                    let slba = h as u64 * 4096 + u64::from(round) * 16;
                    write_read(&mut io, slba, &pattern(8192, round ^ (h as u8 * 0x40)));
                }
            });
        }
    });
    let g = groups_when(&t, |g| g.iter().all(|s| s.commands >= 32));
    assert!(
        g.iter().all(|s| s.commands >= 32),
        "each group ran its host's commands: {g:?}"
    );
}

/// An I/O queue Connect and two in-capsule Writes behind it, sent in one write on a
/// connection the other group accepted; the controller's group answers all three, and the
/// data reads back.
fn moved_with_what_followed(digests: bool) {
    let (t, addr, _) = target_groups(TcpOptions::default(), 2);
    // The admin queue goes to group 0, the next connection to the emptier group 1.
    let (mut admin, cntlid) = admin_queue(addr, NQN, HOSTNQN, digests);
    let mut io = Initiator::new(addr, digests, digests);
    let (a, b) = (pattern(4096, 0x33), pattern(4096, 0x34));
    let (connect, connect_data) = connect_command(NQN, 1, 31, cntlid, HOSTNQN, 0);
    let mut bytes = io.capsule(connect, 1, &connect_data);
    bytes.extend(io.capsule(rw(0x01, 100, 8, sgl(0x01, 4096)), 2, &a));
    bytes.extend(io.capsule(rw(0x01, 108, 8, sgl(0x01, 4096)), 3, &b));
    io.sock.write_all(&bytes).unwrap();

    let c = io.recv().cqe();
    assert_eq!((c.cid, c.status()), (1, Status::SUCCESS), "Connect first");
    assert_eq!(c.dw0 as u16, cntlid);
    let mut writes: Vec<_> = (0..2).map(|_| io.recv().cqe()).collect();
    writes.sort_by_key(|c| c.cid);
    let answers: Vec<_> = writes.iter().map(|c| (c.cid, c.status())).collect();
    assert_eq!(
        answers,
        [(2, Status::SUCCESS), (3, Status::SUCCESS)],
        "the in-capsule Writes sent behind the Connect"
    );
    for (slba, data) in [(100, &a), (108, &b)] {
        let (c, back) = io.exec(rw(0x02, slba, 8, sgl(0x5A, 4096)), &[], &[], 0);
        assert_eq!(c.status(), Status::SUCCESS);
        assert!(
            &back == data,
            "read at {slba} differs from what was written"
        );
    }
    write_read(&mut io, 200, &pattern(16384, 0x44));
    let (s, _) = admin.prop_get(0x1C, false);
    assert_eq!(s, Status::SUCCESS, "the admin queue goes on");

    let g = groups_when(&t, |g| queues(g) == [(1, 1), (0, 0)]);
    assert_eq!(queues(&g), [(1, 1), (0, 0)], "both queues on group 0");
    assert_eq!(
        (g[0].handed_over, g[1].handed_over),
        (0, 1),
        "group 1 accepted the I/O queue's connection and handed it over"
    );
}

#[test]
fn an_io_queue_accepted_by_the_other_group_moves_with_the_bytes_behind_its_connect() {
    moved_with_what_followed(false);
}

#[test]
fn a_moved_connection_keeps_its_negotiated_digests() {
    moved_with_what_followed(true);
}

#[test]
fn a_bad_pdu_right_after_a_moved_connect_ends_that_connection_only() {
    let (t, addr, _) = target_groups(TcpOptions::default(), 2);
    let (mut admin, cntlid) = admin_queue(addr, NQN, HOSTNQN, false);
    let mut io = Initiator::new(addr, false, false);
    assert_eq!(
        io.connect(NQN, 1, 31, cntlid, HOSTNQN, 0).status(),
        Status::SUCCESS
    );
    // Group 0 holds both queues now: the next connection is group 1's, and moves.
    let mut bad = Initiator::new(addr, false, false);
    let (connect, connect_data) = connect_command(NQN, 2, 31, cntlid, HOSTNQN, 0);
    let mut bytes = bad.capsule(connect, 1, &connect_data);
    bytes.extend_from_slice(&[0x7E, 0, 8, 0, 8, 0, 0, 0]); // no such PDU type
    bad.sock.write_all(&bytes).unwrap();
    let c = bad.recv().cqe();
    assert_eq!((c.cid, c.status()), (1, Status::SUCCESS), "Connect");
    let term = bad.recv();
    assert_eq!(term.ty, 0x03, "C2HTermReq: {term:?}");
    assert!(bad.try_recv().is_none(), "the connection is closed");

    write_read(&mut io, 0, &pattern(8192, 0x5C));
    let (s, csts) = admin.prop_get(0x1C, false);
    assert_eq!(
        (s, csts & 1),
        (Status::SUCCESS, 1),
        "the controller is ready"
    );
    let g = groups_when(&t, |g| queues(g) == [(1, 1), (0, 0)]);
    assert_eq!(queues(&g), [(1, 1), (0, 0)], "{g:?}");
    assert_eq!(g[1].handed_over, 2);
}

#[test]
fn a_connect_naming_another_hosts_or_no_controller_is_refused() {
    /// Connect Invalid Parameters (command specific 82h, DNR).
    const INVALID_PARAMETERS: u16 = (1 << 14) | (1 << 8) | 0x82;
    let (t, addr, _) = target_groups(TcpOptions::default(), 2);
    let (mut admin, cntlid) = admin_queue(addr, NQN, HOSTNQN, false);
    // Accepted by group 1, moved to the controller's group 0, refused there: the host
    // identifier is not the association's.
    let mut other = Initiator::new(addr, false, false);
    let (sqe, mut data) = connect_command(NQN, 1, 31, cntlid, HOSTNQN, 0);
    data[0..16].copy_from_slice(&[9; 16]);
    let (c, _) = other.exec(sqe, &data, &[], 0);
    assert_eq!(
        c.status_phase >> 1,
        INVALID_PARAMETERS,
        "another host's CNTLID"
    );
    // Nobody's controller: refused by the group it landed on.
    let mut unknown = Initiator::new(addr, false, false);
    let c = connect(&mut unknown, 1, 31, 0x7777, 0);
    assert_eq!(c.status_phase >> 1, INVALID_PARAMETERS, "unknown CNTLID");

    let (s, csts) = admin.prop_get(0x1C, false);
    assert_eq!(
        (s, csts & 1),
        (Status::SUCCESS, 1),
        "the controller is ready"
    );
    let g = groups_when(&t, |g| g[1].handed_over == 1);
    assert_eq!(queues(&g), [(1, 0), (0, 0)], "no I/O queue was made");
    assert_eq!((g[0].handed_over, g[1].handed_over), (0, 1));
}
