// SPDX-License-Identifier: Apache-2.0
//! The fabrics admin details hosts rely on, over the wire: the Keep Alive Timer (Connect's
//! KATO read back by Get Features, changed by Set Features, restarted by Keep Alive and,
//! with TBKAS, by any command) and a Commands Supported and Effects log that matches what
//! the target accepts.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use nvmemu_spec::{Sqe, Status};
use nvmemu_tcp::TcpOptions;

/// Get (0Ah) or Set (09h) Features Keep Alive Timer; returns DW0.
fn kato_feature(admin: &mut Initiator, opcode: u8, cdw11: u32) -> u32 {
    let sqe = Sqe {
        cdw10: 0x0F,
        cdw11,
        ..sqe(opcode, sgl(0x5A, 0))
    };
    let (c, _) = admin.exec(sqe, &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS, "{opcode:#x} Features KATO");
    c.dw0
}

fn get_kato(admin: &mut Initiator) -> u32 {
    kato_feature(admin, 0x0A, 0)
}

fn set_kato(admin: &mut Initiator, ms: u32) {
    kato_feature(admin, 0x09, ms);
}

fn keep_alive(admin: &mut Initiator) {
    let (c, _) = admin.exec(sqe(0x18, sgl(0x5A, 0)), &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS, "Keep Alive");
}

/// An enabled admin queue with Connect's KATO `kato`.
fn admin_with_kato(addr: std::net::SocketAddr, kato: u32) -> Initiator {
    let mut i = Initiator::new(addr, false, false);
    assert_eq!(
        connect(&mut i, 0, 31, 0xFFFF, kato).status(),
        Status::SUCCESS
    );
    assert_eq!(i.prop_set(0x14, 1 | (6 << 16) | (4 << 20)), Status::SUCCESS);
    i
}

/// How long until the target closes `i` (which sends nothing meanwhile).
fn time_to_close(i: &mut Initiator) -> Duration {
    i.sock
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let t0 = Instant::now();
    assert!(i.try_recv().is_none(), "the connection closes");
    t0.elapsed()
}

#[test]
fn get_features_reads_connects_kato_rounded_to_the_granularity() {
    let (_t, addr, _) = target(TcpOptions::default());
    let mut admin = admin_with_kato(addr, 12_345);
    // KAS is 10 (1 s): rounded up, as SPDK's target does.
    assert_eq!(get_kato(&mut admin), 13_000);
    set_kato(&mut admin, 30_000);
    assert_eq!(get_kato(&mut admin), 30_000);
}

#[test]
fn keep_alive_restarts_the_timer_and_silence_ends_the_association() {
    let (_t, addr, _) = target(TcpOptions::default());
    // KATO 300 ms becomes 1 s; the target allows one more second.
    let mut admin = admin_with_kato(addr, 300);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        keep_alive(&mut admin);
        std::thread::sleep(Duration::from_millis(400));
    }
    let took = time_to_close(&mut admin);
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(4),
        "closed after {took:?} of silence"
    );
}

#[test]
fn any_command_restarts_the_timer_with_tbkas() {
    let (_t, addr, _) = target(TcpOptions::default());
    let mut admin = admin_with_kato(addr, 300);
    let t0 = Instant::now();
    // Identify instead of Keep Alive: traffic counts.
    while t0.elapsed() < Duration::from_secs(3) {
        let (c, _) = admin.exec(
            Sqe {
                cdw10: 1,
                ..sqe(0x06, sgl(0x5A, 4096))
            },
            &[],
            &[],
            0,
        );
        assert_eq!(c.status(), Status::SUCCESS);
        std::thread::sleep(Duration::from_millis(400));
    }
    assert_eq!(admin.prop_get(0x1C, false).0, Status::SUCCESS);
}

#[test]
fn set_features_starts_a_timer_connect_left_off() {
    let (_t, addr, _) = target(TcpOptions::default());
    let mut admin = admin_with_kato(addr, 0);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(get_kato(&mut admin), 0, "no timer: still connected");
    set_kato(&mut admin, 100);
    assert_eq!(get_kato(&mut admin), 1000);
    let took = time_to_close(&mut admin);
    assert!(took < Duration::from_secs(4), "{took:?}");
}

#[test]
fn command_effects_match_what_the_target_accepts() {
    let (_t, addr, _) = target(TcpOptions::default());
    let (mut admin, _io) = pair(addr, false, 16);
    let mut log = sqe(0x02, sgl(0x5A, 4096));
    log.cdw10 = 0x05 | (1023 << 16);
    let (c, page) = admin.exec(log, &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
    let entry = |op: usize| u32::from_le_bytes(page[op * 4..op * 4 + 4].try_into().unwrap());
    for op in [0x06, 0x09, 0x0A, 0x18, 0x7F] {
        assert_eq!(entry(op) & 1, 1, "admin {op:#x} listed");
    }
    // What the log leaves out, the target refuses.
    for op in [0x00u8, 0x01, 0x04, 0x05, 0x7C] {
        assert_eq!(entry(usize::from(op)), 0, "admin {op:#x} not listed");
        let (c, _) = admin.exec(sqe(op, sgl(0x5A, 0)), &[], &[], 0);
        assert_eq!(c.status(), Status::INVALID_OPCODE, "admin {op:#x}");
    }
}
