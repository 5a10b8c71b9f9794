// SPDX-License-Identifier: Apache-2.0
//! The fake device's thread: polls SQ tail doorbells, executes commands, posts CQEs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use nvmemu_mem::MmapRegion;
use nvmemu_spec::regs;
use nvmemu_spec::{Cid, Cqe, Qid, Sqe, Status};

use super::{Fault, Shared, lock};

const PAGE: u64 = 4096;
const LBA: u64 = 512;

#[derive(Debug)]
struct Sq {
    base: u64,
    size: u16,
    head: u16,
    cqid: u16,
}

#[derive(Debug)]
struct Cq {
    base: u64,
    size: u16,
    tail: u16,
    phase: bool,
}

struct Device<'a> {
    shared: &'a Shared,
    sqs: BTreeMap<u16, Sq>,
    cqs: BTreeMap<u16, Cq>,
    data: Vec<u8>,
}

pub(super) fn run(shared: &Arc<Shared>) {
    let mut dev = Device {
        shared,
        sqs: BTreeMap::new(),
        cqs: BTreeMap::new(),
        data: vec![0; usize::try_from(shared.config.ns_blocks * LBA).unwrap_or(0)],
    };
    let mut seen_gen = 0;
    while !shared.stop.load(Ordering::Relaxed) {
        let (generation, enabled, aqa, asq, acq) = {
            let r = lock(&shared.regs);
            (
                r.generation,
                r.csts & regs::csts::RDY != 0,
                r.aqa,
                r.asq,
                r.acq,
            )
        };
        if generation != seen_gen {
            seen_gen = generation;
            dev.sqs.clear();
            dev.cqs.clear();
            if enabled {
                let sqs = (aqa & 0xFFF) as u16 + 1;
                let cqs = ((aqa >> 16) & 0xFFF) as u16 + 1;
                dev.sqs.insert(
                    0,
                    Sq {
                        base: asq,
                        size: sqs,
                        head: 0,
                        cqid: 0,
                    },
                );
                dev.cqs.insert(
                    0,
                    Cq {
                        base: acq,
                        size: cqs,
                        tail: 0,
                        phase: true,
                    },
                );
            }
        }
        let busy = dev.poll_all();
        if !busy {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

impl Device<'_> {
    fn region(&self, iova: u64, len: u64) -> Option<(Arc<MmapRegion>, u64)> {
        let maps = lock(&self.shared.dma);
        maps.iter()
            .find(|m| iova >= m.iova && iova.checked_add(len).is_some_and(|e| e <= m.iova + m.size))
            .map(|m| (Arc::clone(&m.region), iova - m.iova))
    }

    fn read_mem(&self, iova: u64, dst: &mut [u8]) -> bool {
        match self.region(iova, dst.len() as u64) {
            Some((r, off)) => r.copy_to(off, dst).is_ok(),
            None => false,
        }
    }

    fn write_mem(&self, iova: u64, src: &[u8]) -> bool {
        match self.region(iova, src.len() as u64) {
            Some((r, off)) => r.copy_from(off, src).is_ok(),
            None => false,
        }
    }

    fn poll_all(&mut self) -> bool {
        let qids: Vec<u16> = self.sqs.keys().copied().collect();
        let mut busy = false;
        for qid in qids {
            let db = regs::sq_tail_doorbell(qid, self.shared.config.dstrd) - regs::DOORBELL_BASE;
            let Ok(tail) = self.shared.doorbells.load_acquire_u32(db) else {
                continue;
            };
            while let Some(sq) = self.sqs.get_mut(&qid) {
                if u32::from(sq.head) == tail || tail >= u32::from(sq.size) {
                    break;
                }
                let addr = sq.base + u64::from(sq.head) * 64;
                sq.head = if sq.head + 1 == sq.size {
                    0
                } else {
                    sq.head + 1
                };
                let (head, cqid) = (sq.head, sq.cqid);
                busy = true;
                let mut raw = [0u8; 64];
                if !self.read_mem(addr, &mut raw) {
                    continue;
                }
                let sqe: Sqe = zerocopy::transmute!(raw);
                lock(&self.shared.executed).push((qid, sqe.opcode()));
                let (status, dw0) = if qid == 0 {
                    self.admin(&sqe)
                } else {
                    self.io(&sqe)
                };
                let fault = if qid == 0 {
                    None
                } else {
                    lock(&self.shared.fault).take()
                };
                let cid = match fault {
                    Some(Fault::WrongCid(c)) => c,
                    _ => sqe.cid().0,
                };
                self.post(cqid, Cid(cid), Qid(qid), head, status, dw0);
                if fault == Some(Fault::DuplicateCompletion) {
                    self.post(cqid, Cid(cid), Qid(qid), head, status, dw0);
                }
            }
        }
        busy
    }

    fn post(&mut self, cqid: u16, cid: Cid, sqid: Qid, head: u16, status: Status, dw0: u32) {
        let Some(cq) = self.cqs.get_mut(&cqid) else {
            return;
        };
        let cqe = Cqe::new(cid, sqid, head, status, dw0, cq.phase);
        let addr = cq.base + u64::from(cq.tail) * 16;
        cq.tail += 1;
        if cq.tail == cq.size {
            cq.tail = 0;
            cq.phase = !cq.phase;
        }
        if let Some((r, off)) = self.region(addr, 16) {
            let mut body = cqe;
            body.status_phase ^= 1; // old phase until the final store
            let _ = r.write_obj(off, &body);
            let _ = r.store_release_u16(off + 14, cqe.status_phase);
        }
    }

    /// The (iova, len) segments a PRP pair describes for `len` bytes.
    fn prp_segments(&self, prp1: u64, prp2: u64, len: u64) -> Option<Vec<(u64, u64)>> {
        let first = (PAGE - prp1 % PAGE).min(len);
        let mut segs = vec![(prp1, first)];
        let mut left = len - first;
        if left == 0 {
            return Some(segs);
        }
        if left <= PAGE {
            segs.push((prp2, left));
            return Some(segs);
        }
        let mut at = prp2;
        while left > 0 {
            let mut e = [0u8; 8];
            if !self.read_mem(at, &mut e) {
                return None;
            }
            let entry = u64::from_le_bytes(e);
            if (at + 8).is_multiple_of(PAGE) && left > PAGE {
                at = entry;
                continue;
            }
            let n = left.min(PAGE);
            segs.push((entry, n));
            left -= n;
            at += 8;
        }
        Some(segs)
    }

    fn transfer(&self, sqe: &Sqe, len: u64, out: Option<&[u8]>, into: Option<&mut [u8]>) -> bool {
        let Some(segs) = self.prp_segments(sqe.dptr1, sqe.dptr2, len) else {
            return false;
        };
        let mut pos = 0usize;
        match (out, into) {
            (Some(src), None) => segs.iter().all(|&(a, n)| {
                let n = n as usize;
                let ok = self.write_mem(a, &src[pos..pos + n]);
                pos += n;
                ok
            }),
            (None, Some(dst)) => segs.iter().all(|&(a, n)| {
                let n = n as usize;
                let ok = self.read_mem(a, &mut dst[pos..pos + n]);
                pos += n;
                ok
            }),
            _ => false,
        }
    }

    fn admin(&mut self, sqe: &Sqe) -> (Status, u32) {
        let cfg = self.shared.config;
        match sqe.opcode() {
            0x06 => {
                let mut page = vec![0u8; 4096];
                match sqe.cdw10 & 0xFF {
                    1 => {
                        page[0..2].copy_from_slice(&0x1b36u16.to_le_bytes());
                        page[4..11].copy_from_slice(b"FAKE-SN");
                        page[24..35].copy_from_slice(b"nvmemu fake");
                        page[64..67].copy_from_slice(b"1.0");
                        page[77] = cfg.mdts;
                        page[516..520].copy_from_slice(&1u32.to_le_bytes());
                        page[520..522].copy_from_slice(&0x000Du16.to_le_bytes());
                    }
                    0 if sqe.nsid == 1 => {
                        page[0..8].copy_from_slice(&cfg.ns_blocks.to_le_bytes());
                        page[8..16].copy_from_slice(&cfg.ns_blocks.to_le_bytes());
                        page[128..132].copy_from_slice(&(9u32 << 16).to_le_bytes());
                    }
                    0 => return (Status::INVALID_NAMESPACE, 0),
                    2 => page[0..4].copy_from_slice(&1u32.to_le_bytes()),
                    _ => return (Status::INVALID_FIELD, 0),
                }
                self.done(self.transfer(sqe, 4096, Some(&page), None))
            }
            0x09 if sqe.cdw10 & 0xFF == 7 => {
                let want = (sqe.cdw11 & 0xFFFF).min(sqe.cdw11 >> 16) + 1;
                let n = want.min(u32::from(cfg.max_io_queues)) - 1;
                (Status::SUCCESS, n | (n << 16))
            }
            0x02 => {
                let numd = ((sqe.cdw10 >> 16) | (sqe.cdw11 << 16)) + 1;
                let page = vec![(sqe.cdw10 & 0xFF) as u8; numd as usize * 4];
                self.done(self.transfer(sqe, page.len() as u64, Some(&page), None))
            }
            0x05 => {
                let qid = (sqe.cdw10 & 0xFFFF) as u16;
                let size = (sqe.cdw10 >> 16) as u16 + 1;
                if qid == 0 || self.cqs.contains_key(&qid) {
                    return (Status::INVALID_QID, 0);
                }
                self.cqs.insert(
                    qid,
                    Cq {
                        base: sqe.dptr1,
                        size,
                        tail: 0,
                        phase: true,
                    },
                );
                (Status::SUCCESS, 0)
            }
            0x01 => {
                let qid = (sqe.cdw10 & 0xFFFF) as u16;
                let size = (sqe.cdw10 >> 16) as u16 + 1;
                let cqid = (sqe.cdw11 >> 16) as u16;
                if qid == 0 || self.sqs.contains_key(&qid) {
                    return (Status::INVALID_QID, 0);
                }
                if !self.cqs.contains_key(&cqid) {
                    return (Status::CQ_INVALID, 0);
                }
                self.sqs.insert(
                    qid,
                    Sq {
                        base: sqe.dptr1,
                        size,
                        head: 0,
                        cqid,
                    },
                );
                (Status::SUCCESS, 0)
            }
            0x00 => {
                let qid = (sqe.cdw10 & 0xFFFF) as u16;
                match self.sqs.remove(&qid) {
                    Some(_) if qid != 0 => (Status::SUCCESS, 0),
                    _ => (Status::INVALID_QID, 0),
                }
            }
            0x04 => {
                let qid = (sqe.cdw10 & 0xFFFF) as u16;
                if self.sqs.values().any(|s| s.cqid == qid) {
                    return (Status::INVALID_QUEUE_DELETION, 0);
                }
                match self.cqs.remove(&qid) {
                    Some(_) if qid != 0 => (Status::SUCCESS, 0),
                    _ => (Status::INVALID_QID, 0),
                }
            }
            _ => (Status::INVALID_OPCODE, 0),
        }
    }

    fn done(&self, ok: bool) -> (Status, u32) {
        if ok {
            (Status::SUCCESS, 0)
        } else {
            (Status::DATA_TRANSFER_ERROR, 0)
        }
    }

    fn io(&mut self, sqe: &Sqe) -> (Status, u32) {
        if sqe.nsid != 1 {
            return (Status::INVALID_NAMESPACE, 0);
        }
        let slba = u64::from(sqe.cdw10) | (u64::from(sqe.cdw11) << 32);
        let nlb = u64::from(sqe.cdw12 & 0xFFFF) + 1;
        let in_range = slba + nlb <= self.shared.config.ns_blocks;
        let (start, len) = ((slba * LBA) as usize, (nlb * LBA) as usize);
        match sqe.opcode() {
            0x00 => (Status::SUCCESS, 0),
            0x01 | 0x02 | 0x05 | 0x08 if !in_range => (Status::LBA_OUT_OF_RANGE, 0),
            0x02 => {
                let src = self.data[start..start + len].to_vec();
                self.done(self.transfer(sqe, len as u64, Some(&src), None))
            }
            0x01 => {
                let mut buf = vec![0u8; len];
                if !self.transfer(sqe, len as u64, None, Some(&mut buf)) {
                    return self.done(false);
                }
                self.data[start..start + len].copy_from_slice(&buf);
                (Status::SUCCESS, 0)
            }
            0x05 => {
                let mut buf = vec![0u8; len];
                if !self.transfer(sqe, len as u64, None, Some(&mut buf)) {
                    return self.done(false);
                }
                if self.data[start..start + len] == buf[..] {
                    (Status::SUCCESS, 0)
                } else {
                    (Status::COMPARE_FAILURE, 0)
                }
            }
            0x08 => {
                self.data[start..start + len].fill(0);
                (Status::SUCCESS, 0)
            }
            0x09 => {
                let nr = (sqe.cdw10 & 0xFF) as usize + 1;
                let mut ranges = vec![0u8; nr * 16];
                if !self.transfer(sqe, ranges.len() as u64, None, Some(&mut ranges)) {
                    return self.done(false);
                }
                for r in ranges.chunks_exact(16) {
                    let nlb = u64::from(u32::from_le_bytes([r[4], r[5], r[6], r[7]]));
                    let slba = u64::from_le_bytes(r[8..16].try_into().unwrap_or([0; 8]));
                    if slba + nlb > self.shared.config.ns_blocks {
                        return (Status::LBA_OUT_OF_RANGE, 0);
                    }
                    let s = (slba * LBA) as usize;
                    self.data[s..s + (nlb * LBA) as usize].fill(0);
                }
                (Status::SUCCESS, 0)
            }
            _ => (Status::INVALID_OPCODE, 0),
        }
    }
}
