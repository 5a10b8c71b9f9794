// SPDX-License-Identifier: Apache-2.0
//! Hostile NVMe/TCP hosts: each bad PDU ends its own connection with a C2HTermReq (or, for
//! stalls, a close), and the target goes on serving the next host.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;
use nvmemu_spec::Status;
use nvmemu_tcp::TcpOptions;

fn quick() -> TcpOptions {
    TcpOptions {
        stall_timeout: Duration::from_millis(300),
        ..TcpOptions::default()
    }
}

/// The next PDU is a C2HTermReq with `fes`, then the connection closes.
fn expect_term(i: &mut Initiator, fes: u16) {
    let p = i.recv();
    assert_eq!(p.ty, 0x03, "C2HTermReq, got {p:?}");
    assert_eq!(u16::from_le_bytes([p.header[0], p.header[1]]), fes, "FES");
    assert!(
        i.try_recv().is_none(),
        "closed after the termination request"
    );
}

/// A well-behaved host still gets served.
fn still_serves(addr: SocketAddr) {
    let mut i = Initiator::new(addr, false, false);
    enable(&mut i);
}

#[test]
fn capsule_before_icreq_is_a_pdu_sequence_error() {
    let (_t, addr, _) = target(quick());
    let head = capsule_before_icreq(addr);
    assert_eq!(head[0], 0x03);
    assert_eq!(
        u16::from_le_bytes([head[8], head[9]]),
        0x02,
        "PDU Sequence Error"
    );
    still_serves(addr);
}

#[test]
fn icreq_with_another_pdu_format_version_is_unsupported() {
    let (_t, addr, _) = target(quick());
    let mut sock = TcpStream::connect(addr).unwrap();
    let mut req = [0u8; 128];
    req[2] = 128;
    req[4..8].copy_from_slice(&128u32.to_le_bytes());
    req[8] = 1;
    sock.write_all(&req).unwrap();
    let mut head = [0u8; 24];
    sock.read_exact(&mut head).unwrap();
    assert_eq!(head[0], 0x03);
    assert_eq!(
        u16::from_le_bytes([head[8], head[9]]),
        0x06,
        "Unsupported Parameter"
    );
    assert_eq!(
        u32::from_le_bytes(head[10..14].try_into().unwrap()),
        8,
        "FEI: PFV"
    );
    still_serves(addr);
}

#[test]
fn wrong_header_length_and_huge_plen_end_the_connection() {
    let (_t, addr, _) = target(quick());
    let mut i = Initiator::new(addr, false, false);
    // A capsule whose HLEN says 24.
    let mut pdu = vec![0x04, 0, 24, 0];
    pdu.extend_from_slice(&24u32.to_le_bytes());
    pdu.resize(24, 0);
    i.sock.write_all(&pdu).unwrap();
    expect_term(&mut i, 0x01);
    // A PLEN of 4 GiB is refused from the common header alone.
    let mut i = Initiator::new(addr, false, false);
    let mut pdu = vec![0x04, 0, 72, 0];
    pdu.extend_from_slice(&u32::MAX.to_le_bytes());
    i.sock.write_all(&pdu).unwrap();
    expect_term(&mut i, 0x01);
    still_serves(addr);
}

#[test]
fn h2c_data_beyond_the_transfer_length_is_out_of_range() {
    let (_t, addr, _) = target(quick());
    let (mut admin, mut io) = pair(addr, false, 16);
    let mut w = rw(0x01, 0, 8, sgl(0x5A, 4096));
    w.cdw0 |= 9 << 16;
    io.send(0x04, 0, zerocopy::IntoBytes::as_bytes(&w), &[]);
    let r2t = io.recv();
    assert_eq!(r2t.ty, 0x09);
    let ttag = u16::from_le_bytes([r2t.header[2], r2t.header[3]]);
    // 4 KiB asked for; 8 KiB sent in one PDU.
    io.h2c_data(9, ttag, 0, &vec![0xAB; 8192], true);
    expect_term(&mut io, 0x04);
    // The controller goes on: the admin queue still answers.
    assert_eq!(admin.prop_get(0x1C, false).0, Status::SUCCESS);
    still_serves(addr);
}

#[test]
fn h2c_data_without_an_r2t_is_refused() {
    let (_t, addr, _) = target(quick());
    let mut i = Initiator::new(addr, false, false);
    enable(&mut i);
    i.h2c_data(1, 3, 0, &[0u8; 512], true);
    expect_term(&mut i, 0x01);
    still_serves(addr);
}

#[test]
fn bad_header_digest_is_a_header_digest_error() {
    let (_t, addr, _) = target(quick());
    let mut i = Initiator::new(addr, true, false);
    enable(&mut i);
    let sqe = rw(0x02, 0, 1, sgl(0x5A, 512));
    let mut pdu = vec![0x04, 0x01, 72, 0];
    pdu.extend_from_slice(&76u32.to_le_bytes());
    pdu.extend_from_slice(zerocopy::IntoBytes::as_bytes(&sqe));
    pdu.extend_from_slice(&[1, 2, 3, 4]);
    i.sock.write_all(&pdu).unwrap();
    expect_term(&mut i, 0x03);
    still_serves(addr);
}

#[test]
fn slowloris_icreq_is_closed_after_the_stall_timeout() {
    let (_t, addr, _) = target(quick());
    let mut sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // Half an ICReq, then nothing.
    let mut req = [0u8; 64];
    req[2] = 128;
    req[4..8].copy_from_slice(&128u32.to_le_bytes());
    sock.write_all(&req).unwrap();
    let t0 = Instant::now();
    let mut b = [0u8; 1];
    assert_eq!(sock.read(&mut b).unwrap_or(0), 0, "closed without a reply");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(4),
        "{took:?}"
    );
    still_serves(addr);
}

#[test]
fn a_host_that_stops_reading_is_dropped_and_others_are_served() {
    let (_t, addr, _) = target(quick());
    let (_admin, mut io) = pair(addr, false, 128);
    // 127 reads of 128 KiB each, never reading the answers: far more than the socket
    // buffers and the connection's send buffer hold.
    for cid in 0..127u32 {
        let mut r = rw(0x02, 0, 256, sgl(0x5A, 128 * 1024));
        r.cdw0 |= cid << 16;
        io.send(0x04, 0, zerocopy::IntoBytes::as_bytes(&r), &[]);
    }
    // Others are served meanwhile.
    let t0 = Instant::now();
    still_serves(addr);
    assert!(t0.elapsed() < Duration::from_secs(2));
    // The stalled connection is closed: draining it ends in EOF, not a hang.
    std::thread::sleep(Duration::from_millis(1500));
    io.sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut sink = vec![0u8; 1 << 20];
    let mut total = 0usize;
    loop {
        match io.sock.read(&mut sink) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) => panic!("no EOF after {total} bytes: {e}"),
        }
    }
    assert!(
        total < 127 * 128 * 1024,
        "the target did not keep sending: {total}"
    );
}

#[test]
fn keep_alive_timeout_removes_the_controller() {
    let (_t, addr, _) = target(quick());
    let mut i = Initiator::new(addr, false, false);
    let c = connect(&mut i, 0, 31, 0xFFFF, 200);
    assert_eq!(c.status(), Status::SUCCESS);
    let t0 = Instant::now();
    assert!(i.try_recv().is_none(), "connection closed");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(150) && took < Duration::from_secs(3),
        "{took:?}"
    );
    still_serves(addr);
}
