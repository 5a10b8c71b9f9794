// SPDX-License-Identifier: Apache-2.0
//! A minimal NVMe/TCP initiator for tests: blocking socket, one command at a time, every
//! PDU built and checked by hand (not with the crate's own encoder, so a mistake shared by
//! both sides cannot hide). Built for `cfg(test)` and the `test-utils` feature.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_possible_truncation
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use nvmemu_spec::{Cqe, Sqe, Status};
use zerocopy::{FromBytes, IntoBytes};

/// One received PDU.
#[derive(Debug)]
pub struct Pdu {
    pub ty: u8,
    pub flags: u8,
    /// The header after the common header.
    pub header: Vec<u8>,
    pub data: Vec<u8>,
}

impl Pdu {
    /// The completion a response capsule carries.
    pub fn cqe(&self) -> Cqe {
        assert_eq!(self.ty, 0x05, "a response capsule: {self:?}");
        Cqe::read_from_bytes(&self.header).unwrap()
    }

    /// The CID of the command this PDU completes: a response capsule's, or a C2HData's
    /// that carries SUCCESS (no response capsule follows it).
    pub fn completes(&self) -> Option<u16> {
        use crate::pdu::{flags, pdu_type};
        match self.ty {
            pdu_type::CAPSULE_RESP => Some(self.cqe().cid),
            pdu_type::C2H_DATA if self.flags & flags::SUCCESS != 0 => {
                Some(u16::from_le_bytes([self.header[0], self.header[1]]))
            }
            _ => None,
        }
    }
}

#[derive(Debug)]
pub struct Initiator {
    pub sock: TcpStream,
    pub hdgst: bool,
    pub ddgst: bool,
    pub maxh2cdata: u32,
    next_cid: u16,
}

impl Initiator {
    /// Connect and exchange ICReq/ICResp.
    pub fn new(addr: SocketAddr, hdgst: bool, ddgst: bool) -> Initiator {
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut i = Initiator {
            sock,
            hdgst: false,
            ddgst: false,
            maxh2cdata: 0,
            next_cid: 1,
        };
        let mut req = [0u8; 128];
        req[0] = 0x00;
        req[2] = 128;
        req[4..8].copy_from_slice(&128u32.to_le_bytes());
        req[11] = u8::from(hdgst) | (u8::from(ddgst) << 1);
        i.sock.write_all(&req).unwrap();
        let resp = i.recv();
        assert_eq!(resp.ty, 0x01, "ICResp");
        assert_eq!(resp.header[2], 0, "CPDA");
        assert_eq!(resp.header[3], req[11], "digests granted");
        i.maxh2cdata = u32::from_le_bytes(resp.header[4..8].try_into().unwrap());
        i.hdgst = hdgst;
        i.ddgst = ddgst;
        i
    }

    /// Send a PDU of type `ty` with header `specific` (after the common header) and data.
    pub fn send(&mut self, ty: u8, flags: u8, specific: &[u8], data: &[u8]) {
        let pdu = self.encode(ty, flags, specific, data);
        self.sock.write_all(&pdu).unwrap();
    }

    /// The bytes [`Initiator::send`] sends.
    pub fn encode(&self, ty: u8, flags: u8, specific: &[u8], data: &[u8]) -> Vec<u8> {
        let hlen = 8 + specific.len();
        let hd = if self.hdgst { 4 } else { 0 };
        let dd = if self.ddgst && !data.is_empty() { 4 } else { 0 };
        let pdo = if data.is_empty() { 0 } else { hlen + hd };
        let plen = hlen + hd + data.len() + dd;
        let mut f = flags;
        if self.hdgst {
            f |= 1;
        }
        if dd > 0 {
            f |= 2;
        }
        let mut pdu = vec![ty, f, hlen as u8, pdo as u8];
        pdu.extend_from_slice(&(plen as u32).to_le_bytes());
        pdu.extend_from_slice(specific);
        if self.hdgst {
            let c = crc32c::crc32c(&pdu);
            pdu.extend_from_slice(&c.to_le_bytes());
        }
        pdu.extend_from_slice(data);
        if dd > 0 {
            pdu.extend_from_slice(&crc32c::crc32c(data).to_le_bytes());
        }
        pdu
    }

    /// The bytes of a command capsule: `sqe` with CID `cid` and in-capsule `icd`.
    pub fn capsule(&self, mut sqe: Sqe, cid: u16, icd: &[u8]) -> Vec<u8> {
        sqe.cdw0 = (sqe.cdw0 & 0xFFFF) | (u32::from(cid) << 16);
        self.encode(0x04, 0, sqe.as_bytes(), icd)
    }

    /// Receive one PDU, checking its digests.
    pub fn recv(&mut self) -> Pdu {
        self.try_recv().expect("a PDU")
    }

    pub fn try_recv(&mut self) -> Option<Pdu> {
        let mut ch = [0u8; 8];
        self.sock.read_exact(&mut ch).ok()?;
        let plen = u32::from_le_bytes(ch[4..8].try_into().unwrap()) as usize;
        let mut rest = vec![0u8; plen - 8];
        self.sock.read_exact(&mut rest).ok()?;
        let (ty, flags, hlen, pdo) = (ch[0], ch[1], ch[2] as usize, ch[3] as usize);
        let mut whole = ch.to_vec();
        whole.extend_from_slice(&rest);
        if flags & 1 != 0 {
            let c = crc32c::crc32c(&whole[..hlen]);
            assert_eq!(&whole[hlen..hlen + 4], &c.to_le_bytes(), "header digest");
        }
        let data = if pdo == 0 {
            Vec::new()
        } else {
            let end = if flags & 2 != 0 { plen - 4 } else { plen };
            let d = whole[pdo..end].to_vec();
            if flags & 2 != 0 {
                assert_eq!(
                    &whole[end..],
                    &crc32c::crc32c(&d).to_le_bytes(),
                    "data digest"
                );
            }
            d
        };
        Some(Pdu {
            ty,
            flags,
            header: whole[8..hlen].to_vec(),
            data,
        })
    }

    fn cid(&mut self) -> u16 {
        self.next_cid = self.next_cid.wrapping_add(1);
        self.next_cid
    }

    /// Send `sqe` (its CID set here) with in-capsule `icd`; answer R2Ts from `out`
    /// in H2CData PDUs of at most `chunk` bytes; collect C2HData; return the completion.
    pub fn exec(&mut self, mut sqe: Sqe, icd: &[u8], out: &[u8], chunk: usize) -> (Cqe, Vec<u8>) {
        let cid = self.cid();
        sqe.cdw0 = (sqe.cdw0 & 0xFFFF) | (u32::from(cid) << 16);
        self.send(0x04, 0, sqe.as_bytes(), icd);
        let mut data = Vec::new();
        loop {
            let p = self.recv();
            match p.ty {
                0x05 => {
                    let cqe = Cqe::read_from_bytes(&p.header).unwrap();
                    assert_eq!(cqe.cid, cid);
                    return (cqe, data);
                }
                0x07 => {
                    assert_eq!(u16::from_le_bytes([p.header[0], p.header[1]]), cid);
                    data.extend_from_slice(&p.data);
                    if p.flags & 0x08 != 0 {
                        let cqe = Cqe {
                            cid,
                            ..Cqe::default()
                        };
                        return (cqe, data);
                    }
                }
                0x09 => {
                    let h = &p.header;
                    let ttag = u16::from_le_bytes([h[2], h[3]]);
                    let off = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
                    let len = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
                    let mut at = off;
                    while at < off + len {
                        let n = chunk.min(off + len - at);
                        let last = at + n == off + len;
                        self.h2c_data(cid, ttag, at as u32, &out[at..at + n], last);
                        at += n;
                    }
                }
                t => panic!("unexpected PDU type {t:#x}: {p:?}"),
            }
        }
    }

    pub fn h2c_data(&mut self, cid: u16, ttag: u16, offset: u32, data: &[u8], last: bool) {
        let mut h = [0u8; 16];
        h[0..2].copy_from_slice(&cid.to_le_bytes());
        h[2..4].copy_from_slice(&ttag.to_le_bytes());
        h[4..8].copy_from_slice(&offset.to_le_bytes());
        h[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
        self.send(0x06, if last { 0x04 } else { 0 }, &h, data);
    }

    /// Fabrics Connect; returns the completion.
    pub fn connect(
        &mut self,
        subnqn: &str,
        qid: u16,
        sqsize: u16,
        cntlid: u16,
        hostnqn: &str,
        kato: u32,
    ) -> Cqe {
        let (sqe, data) = connect_command(subnqn, qid, sqsize, cntlid, hostnqn, kato);
        self.exec(sqe, &data, &[], 0).0
    }

    pub fn prop_set(&mut self, offset: u32, value: u32) -> Status {
        let sqe = Sqe {
            nsid: 0x00,
            cdw11: offset,
            cdw12: value,
            ..fabrics_sqe(sgl(0x5A, 0))
        };
        self.exec(sqe, &[], &[], 0).0.status()
    }

    pub fn prop_get(&mut self, offset: u32, wide: bool) -> (Status, u64) {
        let sqe = Sqe {
            nsid: 0x04,
            cdw10: u32::from(wide),
            cdw11: offset,
            ..fabrics_sqe(sgl(0x5A, 0))
        };
        let c = self.exec(sqe, &[], &[], 0).0;
        (c.status(), u64::from(c.dw0) | (u64::from(c.dw1) << 32))
    }

    /// Admin Connect to `subnqn` as `hostnqn`, CC.EN = 1, CSTS.RDY; returns CNTLID.
    pub fn enable(&mut self, subnqn: &str, hostnqn: &str) -> u16 {
        let c = self.connect(subnqn, 0, 31, 0xFFFF, hostnqn, 0);
        assert_eq!(c.status(), Status::SUCCESS, "admin Connect");
        let cntlid = c.dw0 as u16;
        assert_eq!(
            self.prop_set(0x14, 1 | (6 << 16) | (4 << 20)),
            Status::SUCCESS
        );
        let (s, csts) = self.prop_get(0x1C, false);
        assert_eq!(s, Status::SUCCESS);
        assert_eq!(csts & 1, 1, "CSTS.RDY");
        cntlid
    }
}

/// An admin queue (enabled, with `pairs` I/O queue pairs allowed by Set Features Number
/// of Queues) and I/O queue 1 of `io_entries` entries, both with or without digests.
pub fn connect_pair(
    addr: SocketAddr,
    subnqn: &str,
    hostnqn: &str,
    digests: bool,
    io_entries: u16,
) -> (Initiator, Initiator) {
    let (admin, cntlid) = admin_queue(addr, subnqn, hostnqn, digests);
    let mut io = Initiator::new(addr, digests, digests);
    let c = io.connect(subnqn, 1, io_entries - 1, cntlid, hostnqn, 0);
    assert_eq!(c.status(), Status::SUCCESS, "I/O Connect");
    assert_eq!(c.dw0 as u16, cntlid);
    (admin, io)
}

/// A Fabrics Connect SQE and its 1 KiB of data (host ID 07h bytes).
pub fn connect_command(
    subnqn: &str,
    qid: u16,
    sqsize: u16,
    cntlid: u16,
    hostnqn: &str,
    kato: u32,
) -> (Sqe, Vec<u8>) {
    let mut data = vec![0u8; 1024];
    data[0..16].copy_from_slice(&[7u8; 16]);
    data[16..18].copy_from_slice(&cntlid.to_le_bytes());
    data[256..256 + subnqn.len()].copy_from_slice(subnqn.as_bytes());
    data[512..512 + hostnqn.len()].copy_from_slice(hostnqn.as_bytes());
    let sqe = Sqe {
        nsid: 0x01,
        cdw10: u32::from(qid) << 16,
        cdw11: u32::from(sqsize),
        cdw12: kato,
        ..fabrics_sqe(sgl(0x01, 1024))
    };
    (sqe, data)
}

/// An admin queue, enabled, with 4 I/O queue pairs allowed by Set Features Number of
/// Queues; returns it and the CNTLID.
pub fn admin_queue(
    addr: SocketAddr,
    subnqn: &str,
    hostnqn: &str,
    digests: bool,
) -> (Initiator, u16) {
    let mut admin = Initiator::new(addr, digests, digests);
    let cntlid = admin.enable(subnqn, hostnqn);
    let pairs = 4u32;
    let nq = Sqe {
        cdw10: 0x07,
        cdw11: (pairs - 1) | ((pairs - 1) << 16),
        ..sqe(0x09, sgl(0x5A, 0))
    };
    let (c, _) = admin.exec(nq, &[], &[], 0);
    assert_eq!(c.status(), Status::SUCCESS, "Set Features Number of Queues");
    (admin, cntlid)
}

/// An SGL descriptor (id byte `id`: 01h in-capsule offset, 5Ah transport) of `len` bytes.
pub fn sgl(id: u8, len: u32) -> (u64, u64) {
    (0, u64::from(len) | (u64::from(id) << 56))
}

fn fabrics_sqe(dptr: (u64, u64)) -> Sqe {
    Sqe {
        cdw0: 0x7F | (1 << 14),
        dptr1: dptr.0,
        dptr2: dptr.1,
        ..Sqe::default()
    }
}

/// An SQE with `opcode` and an SGL `dptr`.
pub fn sqe(opcode: u8, dptr: (u64, u64)) -> Sqe {
    Sqe {
        cdw0: u32::from(opcode) | (1 << 14),
        dptr1: dptr.0,
        dptr2: dptr.1,
        ..Sqe::default()
    }
}

/// Write (01h) or Read (02h) of `blocks` at `slba` on namespace 1.
pub fn rw(opcode: u8, slba: u64, blocks: u32, dptr: (u64, u64)) -> Sqe {
    Sqe {
        nsid: 1,
        cdw10: slba as u32,
        cdw11: (slba >> 32) as u32,
        cdw12: blocks - 1,
        ..sqe(opcode, dptr)
    }
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed))
        .collect()
}
