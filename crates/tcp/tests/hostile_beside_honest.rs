// SPDX-License-Identifier: Apache-2.0
//! Hostile hosts beside an honest one, at the same time: while the honest host writes and
//! verifies reads, other connections send each bad input of the list. Every bad
//! PDU ends its own connection with a C2HTermReq (stalls end with a close, bad Fabrics
//! commands with an error status), no one reaches the honest host's controller, and the
//! honest host's I/O goes on, every read verified.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

/// The slowest honest write+read pair allowed: far above what a served host sees (tens of
/// ms), far below the initiator's 10 s timeout; loose because CI machines are shared.
const STALL: std::time::Duration = std::time::Duration::from_secs(5);

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use nvmemu_spec::{Sqe, Status};
use nvmemu_tcp::TcpOptions;
use zerocopy::IntoBytes;

/// Connect Invalid Parameters (command specific 82h, DNR).
const INVALID_PARAMETERS: u16 = (1 << 14) | (1 << 8) | 0x82;
/// Connect Invalid Host (command specific 84h, DNR).
const INVALID_HOST: u16 = (1 << 14) | (1 << 8) | 0x84;

/// The next PDU is a C2HTermReq with `fes`, then the connection closes.
fn expect_term(i: &mut Initiator, fes: u16, what: &str) {
    let p = i.recv();
    assert_eq!(p.ty, 0x03, "{what}: C2HTermReq, got {p:?}");
    let got = u16::from_le_bytes([p.header[0], p.header[1]]);
    assert_eq!(got, fes, "{what}: FES");
    assert!(i.try_recv().is_none(), "{what}: closed after it");
}

/// A raw connection that closes (EOF, no reply) within `within`.
fn expect_closed(sock: &mut TcpStream, within: Duration, what: &str) {
    sock.set_read_timeout(Some(within)).unwrap();
    let mut sink = vec![0u8; 1 << 20];
    loop {
        match sock.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => panic!("{what}: not closed: {e}"),
        }
    }
}

/// The status field of a completion (SCT, SC, DNR; phase bit dropped).
fn status(c: &nvmemu_spec::Cqe) -> u16 {
    c.status_phase >> 1
}

/// Connect with any host identifier; returns the completion.
fn connect_as(
    addr: SocketAddr,
    qid: u16,
    cntlid: u16,
    hostnqn: &str,
    hostid: u8,
) -> (Initiator, nvmemu_spec::Cqe) {
    let mut i = Initiator::new(addr, false, false);
    let mut data = vec![0u8; 1024];
    data[0..16].copy_from_slice(&[hostid; 16]);
    data[16..18].copy_from_slice(&cntlid.to_le_bytes());
    data[256..256 + NQN.len()].copy_from_slice(NQN.as_bytes());
    data[512..512 + hostnqn.len()].copy_from_slice(hostnqn.as_bytes());
    let sqe = Sqe {
        cdw0: 0x7F | (1 << 14),
        nsid: 0x01,
        cdw10: u32::from(qid) << 16,
        cdw11: 15,
        dptr2: sgl(0x01, 1024).1,
        ..Sqe::default()
    };
    let (c, _) = i.exec(sqe, &data, &[], 0);
    (i, c)
}

/// Bad PDUs, each on its own connection: a termination request with the right FES.
fn bad_pdus(addr: SocketAddr) {
    // A capsule whose HLEN is wrong; then a PLEN of 4 GiB.
    let mut i = Initiator::new(addr, false, false);
    let mut pdu = vec![0x04, 0, 24, 0];
    pdu.extend_from_slice(&24u32.to_le_bytes());
    pdu.resize(24, 0);
    i.sock.write_all(&pdu).unwrap();
    expect_term(&mut i, 0x01, "bad HLEN");
    let mut i = Initiator::new(addr, false, false);
    let mut pdu = vec![0x04, 0, 72, 0];
    pdu.extend_from_slice(&u32::MAX.to_le_bytes());
    i.sock.write_all(&pdu).unwrap();
    expect_term(&mut i, 0x01, "huge PLEN");
    // A PDU type only a controller sends (C2HData), and a second ICReq.
    let mut i = Initiator::new(addr, false, false);
    i.send(0x07, 0, &[0u8; 16], &[]);
    expect_term(&mut i, 0x01, "C2HData from a host");
    let mut i = Initiator::new(addr, false, false);
    i.sock.write_all(&icreq()).unwrap();
    expect_term(&mut i, 0x02, "second ICReq");
    let head = capsule_before_icreq(addr);
    assert_eq!((head[0], head[8]), (0x03, 0x02), "capsule before ICReq");
    // Bad header and data digests.
    let mut i = Initiator::new(addr, true, true);
    enable(&mut i);
    let mut pdu = vec![0x04, 0x01, 72, 0];
    pdu.extend_from_slice(&76u32.to_le_bytes());
    pdu.extend_from_slice(rw(0x02, 0, 1, sgl(0x5A, 512)).as_bytes());
    pdu.extend_from_slice(&[1, 2, 3, 4]);
    i.sock.write_all(&pdu).unwrap();
    expect_term(&mut i, 0x03, "bad header digest");
    let (_admin, mut io) = connect_pair(addr, NQN, HOSTNQN, true, 16);
    let sqe = rw(0x01, 4096, 1, sgl(0x01, 512));
    let mut pdu = vec![0x04, 0x03, 72, 76];
    pdu.extend_from_slice(&(76u32 + 512 + 4).to_le_bytes());
    pdu.extend_from_slice(sqe.as_bytes());
    let hd = crc32c::crc32c(&pdu);
    pdu.extend_from_slice(&hd.to_le_bytes());
    pdu.extend_from_slice(&[0x5A; 512]);
    pdu.extend_from_slice(&[0, 0, 0, 0]);
    io.sock.write_all(&pdu).unwrap();
    expect_term(&mut io, 0x01, "bad data digest");
}

/// H2CData that does not match what the R2T asked for: beyond its length, at the wrong
/// offset, for a transfer tag never given.
fn bad_data(addr: SocketAddr) {
    let solicit = |io: &mut Initiator, cid: u32| -> u16 {
        let mut w = rw(0x01, 8192, 8, sgl(0x5A, 4096));
        w.cdw0 |= cid << 16;
        io.send(0x04, 0, w.as_bytes(), &[]);
        let r2t = io.recv();
        assert_eq!(r2t.ty, 0x09, "R2T");
        u16::from_le_bytes([r2t.header[2], r2t.header[3]])
    };
    let (_admin, mut io) = pair(addr, false, 16);
    let ttag = solicit(&mut io, 9);
    io.h2c_data(9, ttag, 0, &[0xAB; 8192], true);
    expect_term(&mut io, 0x04, "H2CData beyond the transfer");
    let (_admin, mut io) = pair(addr, false, 16);
    let ttag = solicit(&mut io, 9);
    io.h2c_data(9, ttag, 512, &[0xAB; 512], false);
    expect_term(&mut io, 0x04, "H2CData out of order");
    let (_admin, mut io) = pair(addr, false, 16);
    io.h2c_data(3, 7, 0, &[0xAB; 512], true);
    expect_term(&mut io, 0x01, "H2CData for no R2T");
}

/// Connects that must not reach a controller: unknown subsystem, a host not allowed, the
/// honest controller's CNTLID from another host, an admin Connect naming a CNTLID.
fn bad_connects(addr: SocketAddr, honest_cntlid: u16) {
    let mut i = Initiator::new(addr, false, false);
    let c = i.connect("nqn.2019-07.io.nvmemu:nobody", 0, 15, 0xFFFF, HOSTNQN, 0);
    assert_eq!(status(&c), INVALID_PARAMETERS, "unknown NQN");
    assert_eq!(c.dw0, 1 | (256 << 16), "IATTR data, IPO SUBNQN");
    let (_, c) = connect_as(
        addr,
        0,
        0xFFFF,
        "nqn.2014-08.org.nvmexpress:uuid:intruder",
        7,
    );
    assert_eq!(status(&c), INVALID_HOST, "host not on the allow list");
    // The allowed host NQN but another host identifier: the honest association is not
    // joined, so it cannot be disabled either.
    let (mut i, c) = connect_as(addr, 1, honest_cntlid, HOSTNQN, 9);
    assert_eq!(status(&c), INVALID_PARAMETERS, "another host's CNTLID");
    assert_eq!(c.dw0, 1 | (16 << 16), "IPO CNTLID");
    assert_eq!(
        i.prop_set(0x14, 0),
        Status::COMMAND_SEQUENCE_ERROR,
        "CC.EN = 0"
    );
    let (_, c) = connect_as(addr, 1, 0x7777, HOSTNQN, 7);
    assert_eq!(status(&c), INVALID_PARAMETERS, "unknown CNTLID");
    let (_, c) = connect_as(addr, 0, honest_cntlid, HOSTNQN, 7);
    assert_eq!(
        status(&c),
        INVALID_PARAMETERS,
        "admin Connect naming a CNTLID"
    );
    // An I/O queue of one's own controller takes no Property Set.
    let (mut admin, mut io) = pair(addr, false, 16);
    assert_eq!(
        io.prop_set(0x14, 0),
        Status::INVALID_FIELD,
        "Property Set on an I/O queue"
    );
    assert_eq!(admin.prop_get(0x1C, false).1 & 1, 1, "still ready");
}

/// Hosts that stall: a half ICReq, and one that stops reading its data.
fn stalls(addr: SocketAddr) {
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.write_all(&icreq()[..64]).unwrap();
    let (_admin, mut deaf) = pair(addr, false, 128);
    for cid in 0..127u32 {
        let mut r = rw(0x02, 0, 256, sgl(0x5A, 128 * 1024));
        r.cdw0 |= cid << 16;
        deaf.send(0x04, 0, r.as_bytes(), &[]);
    }
    expect_closed(&mut slow, Duration::from_secs(5), "slowloris ICReq");
    thread::sleep(Duration::from_millis(1500));
    expect_closed(
        &mut deaf.sock,
        Duration::from_secs(5),
        "host that stops reading",
    );
}

#[test]
fn hostile_hosts_end_their_own_connections_and_the_honest_host_goes_on() {
    let (t, addr, _) = target(TcpOptions {
        stall_timeout: Duration::from_millis(300),
        ..TcpOptions::default()
    });
    let (stop, honest) = spawn_honest(addr);
    let t0 = Instant::now();
    while t.stats().current_io_qpairs == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "honest host connected"
        );
        thread::sleep(Duration::from_millis(10));
    }
    // The honest host's controller is the first made.
    let honest_cntlid = 1;
    let hostile = [
        thread::spawn(move || bad_pdus(addr)),
        thread::spawn(move || bad_data(addr)),
        thread::spawn(move || bad_connects(addr, honest_cntlid)),
        thread::spawn(move || stalls(addr)),
    ];
    for h in hostile {
        h.join().unwrap();
    }
    let before = t.stats().commands;
    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (ios, slowest) = honest.join().unwrap();
    eprintln!(
        "honest host: {ios} verified write+read pairs beside the hostile ones, slowest {slowest:?}"
    );
    assert!(
        t.stats().commands > before,
        "the honest host kept going after the attacks"
    );
    assert!(slowest < STALL, "honest I/O stalled: {slowest:?}");
}
