// SPDX-License-Identifier: Apache-2.0
//! How the poll group batches socket work: only connections with something to do are read,
//! PDUs split across reads or packed many to a read are all handled, and a pass's answers
//! for many commands go out together. The counts come from the target's own counters.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::net::TcpStream;

use common::*;
use nvmemu_spec::Status;
use nvmemu_tcp::TcpOptions;
use zerocopy::IntoBytes;

/// Read command `cid` of one 512 B block at `lba`, as a capsule's bytes.
fn read_capsule(cid: u16, lba: u64) -> Vec<u8> {
    let mut r = rw(0x02, lba, 1, sgl(0x5A, 512));
    r.cdw0 |= u32::from(cid) << 16;
    let mut pdu = vec![0x04, 0, 72, 0];
    pdu.extend_from_slice(&72u32.to_le_bytes());
    pdu.extend_from_slice(r.as_bytes());
    pdu
}

#[test]
fn idle_connections_are_not_read_while_others_work() {
    let (t, addr, _) = target(TcpOptions::default());
    // Connected and silent: before ICReq, as a slow or idle host leaves them.
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    let (_admin, mut io) = pair(addr, false, 32);
    let before = t.stats();
    let commands = 200u64;
    for lba in 0..commands {
        let (c, data) = io.exec(rw(0x02, lba, 1, sgl(0x5A, 512)), &[], &[], 0);
        assert_eq!(c.status(), Status::SUCCESS);
        assert_eq!(data.len(), 512);
    }
    let reads = t.stats().socket_reads - before.socket_reads;
    // A command needs a read or two of its own connection; polling every socket each pass
    // would read each idle one too, hundreds of times per command.
    assert!(
        reads < 4 * commands,
        "{reads} socket reads for {commands} commands with {} idle connections",
        idle.len()
    );
}

#[test]
fn many_pdus_in_one_write_and_pdus_split_across_writes_are_all_answered() {
    let (t, addr, _) = target(TcpOptions::default());
    let (_admin, mut io) = pair(addr, false, 64);
    let before = t.stats().commands;
    // 32 capsules in one write: one read takes them all.
    let burst: Vec<u8> = (0..32u16)
        .flat_map(|cid| read_capsule(cid, u64::from(cid)))
        .collect();
    io.sock.write_all(&burst).unwrap();
    let mut answered = [false; 32];
    while !answered.iter().all(|a| *a) {
        let p = io.recv();
        match p.ty {
            0x07 => assert_eq!(p.data.len(), 512, "C2HData"),
            0x05 => {}
            ty => panic!("unexpected PDU type {ty:#x}"),
        }
        if let Some(cid) = p.completes() {
            answered[usize::from(cid)] = true;
        }
    }
    // One capsule written a few bytes at a time: it is parsed once whole.
    let one = read_capsule(40, 3);
    for piece in one.chunks(5) {
        io.sock.write_all(piece).unwrap();
        io.sock.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let mut p = io.recv();
    assert_eq!((p.ty, p.data.len()), (0x07, 512));
    if p.completes().is_none() {
        p = io.recv();
    }
    assert_eq!(p.completes(), Some(40));
    // The counters are published at the end of the pass that sent the answers.
    let t0 = std::time::Instant::now();
    while t.stats().commands < before + 33 && t0.elapsed().as_secs() < 2 {
        std::thread::yield_now();
    }
    assert_eq!(t.stats().commands - before, 33, "each capsule taken once");
}
