// SPDX-License-Identifier: Apache-2.0
//! Read data goes out straight from the command slots: a slot stays taken until the socket
//! has taken its last byte, so later commands never overwrite data still being sent, and a
//! host that reads slowly gets every byte in order.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::thread;
use std::time::Duration;

use common::*;
use nvmemu_spec::Status;
use nvmemu_tcp::TcpOptions;
use zerocopy::IntoBytes;

const BIG: u32 = 128 * 1024;
/// Blocks of one read.
const BLOCKS: u32 = BIG / 512;

/// A Read capsule of `BIG` bytes at `lba`, CID `cid`.
fn read_capsule(cid: u16, lba: u64) -> Vec<u8> {
    let mut r = rw(0x02, lba, BLOCKS, sgl(0x5A, BIG));
    r.cdw0 |= u32::from(cid) << 16;
    let mut pdu = vec![0x04, 0, 72, 0];
    pdu.extend_from_slice(&72u32.to_le_bytes());
    pdu.extend_from_slice(r.as_bytes());
    pdu
}

#[test]
fn data_still_unsent_keeps_its_slot_while_later_reads_run() {
    let (_t, addr, _) = target(TcpOptions::default());
    let (_admin, mut io) = pair(addr, false, 128);
    assert_eq!(BLOCK, 512);
    let (a, b) = (pattern(BIG as usize, 1), pattern(BIG as usize, 2));
    let b_lba = u64::from(BLOCKS);
    for (lba, data) in [(0, &a), (b_lba, &b)] {
        let (c, _) = io.exec(rw(0x01, lba, BLOCKS, sgl(0x5A, BIG)), &[], data, 32 * 1024);
        assert_eq!(c.status(), Status::SUCCESS);
    }
    // 8 MiB of reads of A while the host reads nothing: more than the kernel's socket
    // buffers hold, so most of it waits in the slots. Then reads of B, which would land in
    // those slots if they were free again.
    let a_reads: Vec<u8> = (0..64u16).flat_map(|cid| read_capsule(cid, 0)).collect();
    io.sock.write_all(&a_reads).unwrap();
    thread::sleep(Duration::from_millis(300));
    let b_reads: Vec<u8> = (64..127u16)
        .flat_map(|cid| read_capsule(cid, b_lba))
        .collect();
    io.sock.write_all(&b_reads).unwrap();
    let mut answered = 0;
    let mut data_seen = 0;
    while answered < 127 {
        let p = io.recv();
        let cid = u16::from_le_bytes([p.header[0], p.header[1]]);
        match p.ty {
            0x07 => {
                let want = if cid < 64 { &a } else { &b };
                assert!(p.data == *want, "read {cid}: wrong data");
                data_seen += 1;
            }
            0x05 => {}
            ty => panic!("unexpected PDU type {ty:#x}"),
        }
        if let Some(cid) = p.completes() {
            assert!(cid < 127);
            answered += 1;
        }
    }
    assert_eq!(data_seen, 127);
}

/// Reads are sent from the namespace's memory; what a short send leaves unsent is copied
/// into the command's slot before the next command runs, so a Write behind the reads
/// cannot change data the host is still receiving.
#[test]
fn a_write_behind_unsent_reads_leaves_their_data_whole() {
    let (_t, addr, _) = target(TcpOptions::default());
    let (_admin, mut io) = pair(addr, false, 128);
    let (old, new) = (pattern(BIG as usize, 3), pattern(4096, 4));
    let (c, _) = io.exec(rw(0x01, 0, BLOCKS, sgl(0x5A, BIG)), &[], &old, 32 * 1024);
    assert_eq!(c.status(), Status::SUCCESS);
    // 8 MiB of reads while the host reads nothing: the sends stop short early on.
    let reads: Vec<u8> = (0..64u16).flat_map(|cid| read_capsule(cid, 0)).collect();
    io.sock.write_all(&reads).unwrap();
    thread::sleep(Duration::from_millis(300));
    // A Write over the first 4 KiB of every read's blocks, its data in the capsule; it
    // runs after the reads (one queue, in order) while most of their data is unsent.
    let write = io.capsule(rw(0x01, 0, 8, sgl(0x01, 4096)), 100, &new);
    io.sock.write_all(&write).unwrap();
    let (mut answered, mut data_seen) = (0, 0);
    while answered < 65 {
        let p = io.recv();
        let cid = u16::from_le_bytes([p.header[0], p.header[1]]);
        match p.ty {
            0x07 => {
                assert!(
                    p.data == old,
                    "read {cid} carries data the later write wrote"
                );
                data_seen += 1;
            }
            0x05 => assert_eq!(p.cqe().status(), Status::SUCCESS, "command {cid}"),
            ty => panic!("unexpected PDU type {ty:#x}"),
        }
        answered += usize::from(p.completes().is_some());
    }
    assert_eq!(data_seen, 64);
    // The write took effect.
    let (c, back) = io.exec(rw(0x02, 0, 8, sgl(0x5A, 4096)), &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
    assert!(back == new, "the write is not in the namespace");
}
