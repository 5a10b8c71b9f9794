// SPDX-License-Identifier: Apache-2.0
//! How the host side batches its socket work: capsules wait for one flush, PDUs packed many
//! to a read or split anywhere across reads (headers, data, digests) all arrive whole and
//! checked (large C2HData too, read header by header), and parsing what was received makes
//! no read of its own. Against fake targets, so the byte stream is exactly what each test
//! says.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{pattern, rw};
use nvmemu_tcp::initiator::{CommandBuffers, HostError, HostOptions, HostQueue, Received};

/// Read buffers by CID.
#[derive(Default)]
struct Bufs(BTreeMap<u16, Vec<u8>>);

impl CommandBuffers for Bufs {
    fn buffer(&mut self, cid: u16) -> Option<&mut [u8]> {
        self.0.get_mut(&cid).map(Vec::as_mut_slice)
    }
}

/// A fake target on loopback: ICResp granting `digests` (bit 0 header, bit 1 data) and
/// MAXH2CDATA 128 KiB, then `script` runs on the connection.
fn fake(digests: u8, script: impl FnOnce(TcpStream) + Send + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut req = [0u8; 128];
        s.read_exact(&mut req).unwrap();
        let mut r = [0u8; 128];
        r[0] = 0x01;
        r[2] = 128;
        r[4] = 128;
        r[11] = digests;
        r[12..16].copy_from_slice(&(128u32 * 1024).to_le_bytes());
        s.write_all(&r).unwrap();
        script(s);
    });
    addr
}

fn connect(addr: SocketAddr, digests: bool) -> HostQueue {
    let opts = HostOptions {
        hdgst: digests,
        ddgst: digests,
        ..HostOptions::default()
    };
    HostQueue::connect(addr, &opts).unwrap()
}

/// A PDU of `kind` with header `specific` after the common header, and `data`, with the
/// digests `digests` turns on (bit 0 header, bit 1 data).
fn pdu(kind: u8, pdu_flags: u8, specific: &[u8], data: &[u8], digests: u8) -> Vec<u8> {
    let hlen = 8 + specific.len();
    let hd = if digests & 1 != 0 { 4 } else { 0 };
    let dd = if digests & 2 != 0 && !data.is_empty() {
        4
    } else {
        0
    };
    let pdo = if data.is_empty() { 0 } else { hlen + hd };
    let f = pdu_flags | if hd > 0 { 1 } else { 0 } | if dd > 0 { 2 } else { 0 };
    let mut p = vec![kind, f, hlen as u8, pdo as u8];
    p.extend_from_slice(&((hlen + hd + data.len() + dd) as u32).to_le_bytes());
    p.extend_from_slice(specific);
    if hd > 0 {
        let c = crc32c::crc32c(&p);
        p.extend_from_slice(&c.to_le_bytes());
    }
    p.extend_from_slice(data);
    if dd > 0 {
        p.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
    }
    p
}

/// A CapsuleResp for `cid` with status 0 and SQHD `sqhd`.
fn resp(cid: u16, sqhd: u16, digests: u8) -> Vec<u8> {
    let mut cqe = [0u8; 16];
    cqe[8..10].copy_from_slice(&sqhd.to_le_bytes());
    cqe[12..14].copy_from_slice(&cid.to_le_bytes());
    pdu(0x05, 0, &cqe, &[], digests)
}

/// C2HData of `data` at `offset` of command `cid`'s buffer.
fn c2h(cid: u16, offset: u32, data: &[u8], pdu_flags: u8, digests: u8) -> Vec<u8> {
    let mut h = [0u8; 16];
    h[0..2].copy_from_slice(&cid.to_le_bytes());
    h[4..8].copy_from_slice(&offset.to_le_bytes());
    h[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
    pdu(0x07, pdu_flags, &h, data, digests)
}

/// An R2T for `len` bytes at `offset` of command `cid`'s data.
fn r2t(cid: u16, ttag: u16, offset: u32, len: u32, digests: u8) -> Vec<u8> {
    let mut h = [0u8; 16];
    h[0..2].copy_from_slice(&cid.to_le_bytes());
    h[2..4].copy_from_slice(&ttag.to_le_bytes());
    h[4..8].copy_from_slice(&offset.to_le_bytes());
    h[8..12].copy_from_slice(&len.to_le_bytes());
    pdu(0x09, 0, &h, &[], digests)
}

const LAST: u8 = 0x04;
const SUCCESS: u8 = 0x08;

/// Receive and parse until `count` PDUs came or `timeout` passed (non-blocking queue).
fn collect(q: &mut HostQueue, bufs: &mut Bufs, count: usize) -> Result<Vec<Received>, HostError> {
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < count {
        match q.next_pdu(bufs)? {
            Some(r) => got.push(r),
            None => {
                if !q.receive(bufs)? {
                    assert!(start.elapsed() < Duration::from_secs(10), "{got:?}");
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
    }
    Ok(got)
}

#[test]
fn capsules_wait_for_the_flush_and_go_out_together() {
    let (tx, rx) = mpsc::channel();
    let addr = fake(0, move |mut s| {
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut early = [0u8; 1];
        let before = s.read(&mut early);
        tx.send(before.map(|n| early[..n].to_vec()).map_err(|e| e.kind()))
            .unwrap();
        let mut capsules = vec![0u8; 8 * 72];
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.read_exact(&mut capsules).unwrap();
        tx.send(Ok(capsules)).unwrap();
    });
    let mut q = connect(addr, false);
    for cid in 0..8u16 {
        q.submit(cid, rw(0x02, u64::from(cid), 1, (0, 0)), 512, None)
            .unwrap();
    }
    let before = rx.recv().unwrap();
    assert!(
        matches!(before, Err(ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "a capsule went out before the flush: {before:?}"
    );
    assert!(q.flush().unwrap(), "all sent");
    let capsules = rx.recv().unwrap().unwrap();
    for (i, c) in capsules.chunks(72).enumerate() {
        assert_eq!((c[0], c[2]), (0x04, 72), "capsule {i}");
        assert_eq!(
            u16::from_le_bytes([c[10], c[11]]),
            i as u16,
            "CID of capsule {i}"
        );
    }
}

#[test]
fn parsing_what_was_received_reads_nothing_more() {
    let (tx, rx) = mpsc::channel();
    let addr = fake(0, move |mut s| {
        let all: Vec<u8> = (0..16u16).flat_map(|cid| resp(cid, cid, 0)).collect();
        s.write_all(&all).unwrap();
        tx.send(()).unwrap();
        std::thread::sleep(Duration::from_secs(1));
    });
    let mut q = connect(addr, false);
    q.set_nonblocking(true).unwrap();
    let mut bufs = Bufs::default();
    rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(q.next_pdu(&mut bufs).unwrap().is_none(), "nothing read yet");
    let got = collect(&mut q, &mut bufs, 16).unwrap();
    let cids: Vec<u16> = got
        .iter()
        .map(|r| match r {
            Received::Response(c) => c.cid,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(cids, (0..16).collect::<Vec<_>>());
}

/// `stream`, written in chunks of growing, uneven sizes with a pause
/// between them, so each chunk arrives in a read of its own.
fn dribble(s: &mut TcpStream, stream: &[u8]) {
    let sizes = [
        1usize, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597,
    ];
    let mut at = 0;
    for n in sizes.iter().cycle() {
        if at == stream.len() {
            break;
        }
        let end = (at + n).min(stream.len());
        s.write_all(&stream[at..end]).unwrap();
        at = end;
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Read data for CIDs 1 (4 KiB, SUCCESS), 2 (two PDUs, then a response) and an R2T for
/// CID 3, split across reads everywhere; `corrupt` flips one data byte on the wire.
fn split_stream(digests: u8, corrupt: bool) -> (Result<Vec<Received>, HostError>, Bufs) {
    let (a, b1, b2) = (pattern(4096, 1), pattern(2048, 2), pattern(6144, 3));
    let mut stream = c2h(1, 0, &a, LAST | SUCCESS, digests);
    stream.extend(c2h(2, 0, &b1, 0, digests));
    stream.extend(c2h(2, 2048, &b2, LAST, digests));
    stream.extend(resp(2, 7, digests));
    stream.extend(r2t(3, 5, 0, 8192, digests));
    if corrupt {
        stream[8 + 16 + 4 * usize::from(digests & 1) + 100] ^= 0xFF;
    }
    let addr = fake(digests, move |mut s| {
        dribble(&mut s, &stream);
        std::thread::sleep(Duration::from_secs(1));
    });
    let mut q = connect(addr, digests != 0);
    q.set_nonblocking(true).unwrap();
    let mut bufs = Bufs::default();
    bufs.0.insert(1, vec![0; 4096]);
    bufs.0.insert(2, vec![0; 8192]);
    let got = collect(&mut q, &mut bufs, 5);
    (got, bufs)
}

fn check_split_stream(digests: u8) {
    let (got, bufs) = split_stream(digests, false);
    let got = got.unwrap();
    assert!(
        matches!(
            got[0],
            Received::Data {
                cid: 1,
                offset: 0,
                len: 4096,
                last_success: true
            }
        ),
        "{:?}",
        got[0]
    );
    assert!(matches!(
        got[1],
        Received::Data {
            cid: 2,
            offset: 0,
            len: 2048,
            last_success: false
        }
    ));
    assert!(matches!(
        got[2],
        Received::Data {
            cid: 2,
            offset: 2048,
            len: 6144,
            last_success: false
        }
    ));
    assert!(matches!(&got[3], Received::Response(c) if c.cid == 2 && c.sq_head == 7));
    assert!(matches!(
        got[4],
        Received::R2t {
            cid: 3,
            ttag: 5,
            offset: 0,
            len: 8192
        }
    ));
    assert_eq!(bufs.0[&1], pattern(4096, 1));
    assert_eq!(bufs.0[&2][..2048], pattern(2048, 2)[..]);
    assert_eq!(bufs.0[&2][2048..], pattern(6144, 3)[..]);
}

#[test]
fn pdus_split_anywhere_across_reads_arrive_whole() {
    check_split_stream(0);
}

#[test]
fn pdus_split_anywhere_across_reads_arrive_whole_with_digests() {
    check_split_stream(3);
}

#[test]
fn a_data_digest_over_split_data_still_catches_a_flipped_byte() {
    let (got, _) = split_stream(3, true);
    let e = got.unwrap_err();
    assert!(
        matches!(e, HostError::Protocol(m) if m.contains("data digest")),
        "{e}"
    );
}

/// Each command's expected read data, by CID.
type Expected = Vec<(u16, Vec<u8>)>;

/// Large C2HData (read in header-sized steps after the first) mixed with a response, a
/// small PDU and an R2T: the stream, the places to cut it (inside and at the edges of
/// every header, data and digest), and the buffers it fills.
fn large_stream(digests: u8) -> (Vec<u8>, Vec<usize>, Expected) {
    let bufs = vec![
        (1u16, pattern(40 * 1024, 1)),
        (2, pattern(48 * 1024, 2)),
        (3, pattern(4096, 3)),
        (4, pattern(36 * 1024, 4)),
    ];
    let pdus = [
        c2h(1, 0, &bufs[0].1, LAST | SUCCESS, digests),
        c2h(2, 0, &bufs[1].1, LAST, digests),
        resp(2, 9, digests),
        c2h(3, 0, &bufs[2].1, LAST | SUCCESS, digests),
        c2h(4, 0, &bufs[3].1, LAST | SUCCESS, digests),
        r2t(5, 6, 0, 4096, digests),
    ];
    let (hd, dd) = (usize::from(digests & 1) * 4, usize::from(digests & 2) * 2);
    let (mut stream, mut cuts) = (Vec::new(), Vec::new());
    for p in &pdus {
        let (start, hend, end) = (stream.len(), stream.len() + 24 + hd, stream.len() + p.len());
        let data_end = if p[0] == 0x07 { end - dd } else { end };
        for at in [
            start + 1,
            start + 8,
            hend - 1,
            hend,
            hend + 1,
            data_end - 1,
            data_end,
        ] {
            cuts.push(at);
        }
        cuts.push(end - 1);
        stream.extend_from_slice(p);
    }
    cuts.retain(|&c| c > 0 && c < stream.len());
    cuts.sort_unstable();
    cuts.dedup();
    (stream, cuts, bufs)
}

fn check_large_split(digests: u8) {
    let (stream, cuts, want) = large_stream(digests);
    let addr = fake(digests, move |mut s| {
        let mut at = 0;
        for end in cuts.into_iter().chain([stream.len()]) {
            s.write_all(&stream[at..end]).unwrap();
            at = end;
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_secs(1));
    });
    let mut q = connect(addr, digests != 0);
    q.set_nonblocking(true).unwrap();
    let mut bufs = Bufs::default();
    for (cid, data) in &want {
        bufs.0.insert(*cid, vec![0; data.len()]);
    }
    let got = collect(&mut q, &mut bufs, 6).unwrap();
    let data: Vec<(u16, usize, bool)> = got
        .iter()
        .filter_map(|r| match r {
            Received::Data {
                cid,
                len,
                last_success,
                ..
            } => Some((*cid, *len, *last_success)),
            _ => None,
        })
        .collect();
    assert_eq!(
        data,
        [
            (1, 40 * 1024, true),
            (2, 48 * 1024, false),
            (3, 4096, true),
            (4, 36 * 1024, true)
        ]
    );
    assert!(matches!(&got[2], Received::Response(c) if c.cid == 2 && c.sq_head == 9));
    assert!(matches!(
        got[5],
        Received::R2t {
            cid: 5,
            ttag: 6,
            offset: 0,
            len: 4096
        }
    ));
    for (cid, data) in &want {
        assert!(bufs.0[cid] == *data, "CID {cid}'s data");
    }
}

#[test]
fn large_data_split_at_every_edge_arrives_whole() {
    check_large_split(0);
}

#[test]
fn large_data_split_at_every_edge_arrives_whole_with_digests() {
    check_large_split(3);
}
