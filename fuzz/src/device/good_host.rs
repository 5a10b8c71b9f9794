// SPDX-License-Identifier: Apache-2.0
//! A well-behaved client: VERSION, one DMA region, admin queue setup, enable, one I/O queue
//! pair, and a verified write + read. The fuzz input may call its steps in the middle of a
//! hostile sequence (to reach deep states); after the sequence, a fresh connection must get
//! through all of them.

use nvmemu_spec::Cqe;
use nvmemu_spec::regs;
use nvmemu_vfio_user::wire::{DmaMapWire, DmaUnmapWire, RegionAccessWire, VersionWire, msg_flags};
use nvmemu_vfio_user::{Command, RawReply};
use zerocopy::{FromBytes, IntoBytes};

use super::harness::{BLOCKS, Harness};
use super::memory::ClientMem;

/// Where the well-behaved client maps its memory (clear of the fuzzed IOVAs).
pub const IOVA: u64 = 0x40_0000_0000;
/// Its layout: admin SQ, admin CQ, I/O SQ, I/O CQ, write buffer, read buffer.
const ASQ: u64 = 0x0000;
const ACQ: u64 = 0x1000;
const IOSQ: u64 = 0x2000;
const IOCQ: u64 = 0x3000;
/// Data buffers: the fuzz input may point PRPs anywhere in here.
pub const WBUF: u64 = 0x4000;
const RBUF: u64 = 0x5000;
/// Bytes of its memory.
pub const SIZE: u64 = 0x6000;
/// Entries of each of its queues.
const QSIZE: u16 = 16;
/// BAR0 region index.
const BAR0: u32 = 0;

/// A ring position with its phase.
#[derive(Debug, Clone, Copy)]
struct Ring {
    sq_tail: u16,
    cq_head: u16,
    phase: bool,
}

impl Ring {
    const NEW: Ring = Ring {
        sq_tail: 0,
        cq_head: 0,
        phase: true,
    };
}

/// The well-behaved client's state on the current connection.
pub struct GoodHost {
    /// Its memory, mapped at [`IOVA`].
    pub mem: ClientMem,
    rings: [Ring; 2],
    next_cid: u16,
}

impl Default for GoodHost {
    fn default() -> Self {
        GoodHost {
            mem: ClientMem::new(SIZE),
            rings: [Ring::NEW; 2],
            next_cid: 0,
        }
    }
}

/// VERSION 0.0 with the capabilities QEMU sends.
pub fn version_payload() -> Vec<u8> {
    let mut p = VersionWire { major: 0, minor: 0 }.as_bytes().to_vec();
    p.extend_from_slice(br#"{"capabilities":{"max_msg_fds":16,"max_data_xfer_size":1048576}}"#);
    p.push(0);
    p
}

/// `Ok` for a success reply, the errno otherwise.
fn ok(reply: Option<RawReply>) -> Result<RawReply, String> {
    let r = reply.ok_or("no reply")?;
    if r.header.flags & msg_flags::ERROR != 0 {
        return Err(format!(
            "{:?} failed: errno {}",
            r.header.command, r.header.error
        ));
    }
    Ok(r)
}

/// Write a BAR0 register.
pub fn write_reg(h: &mut Harness, offset: u64, value: &[u8]) -> Result<(), String> {
    let access = RegionAccessWire {
        offset,
        region: BAR0,
        count: value.len() as u32,
    };
    let mut p = access.as_bytes().to_vec();
    p.extend_from_slice(value);
    ok(h.request(Command::RegionWrite, 0, &p, &[])).map(drop)
}

/// Read a 32-bit BAR0 register.
pub fn read_reg32(h: &mut Harness, offset: u64) -> Result<u32, String> {
    let access = RegionAccessWire {
        offset,
        region: BAR0,
        count: 4,
    };
    let r = ok(h.request(Command::RegionRead, 0, access.as_bytes(), &[]))?;
    let data = r.payload.get(16..20).ok_or("short REGION_READ reply")?;
    Ok(u32::from_le_bytes(data.try_into().expect("4 bytes")))
}

impl GoodHost {
    /// VERSION (the connection must be new).
    pub fn negotiate(&mut self, h: &mut Harness) -> Result<(), String> {
        ok(h.request(Command::Version, 0, &version_payload(), &[])).map(drop)
    }

    /// Map its memory, enable the controller with a fresh admin queue and create I/O queue
    /// pair 1.
    pub fn bring_up(&mut self, h: &mut Harness) -> Result<(), String> {
        // Mapped already on this connection (an earlier bring-up)? Start over.
        let unmap = DmaUnmapWire {
            argsz: 24,
            flags: 0,
            addr: IOVA,
            size: SIZE,
        };
        let _ = h.request(Command::DmaUnmap, 0, unmap.as_bytes(), &[]);
        let map = DmaMapWire {
            argsz: 32,
            flags: 3,
            offset: 0,
            addr: IOVA,
            size: SIZE,
        };
        ok(h.request(Command::DmaMap, 0, map.as_bytes(), &[self.mem.fd()]))?;
        self.mem.allow_server_writes(0, SIZE);
        write_reg(h, regs::CC, &0u32.to_le_bytes())?;
        self.rings = [Ring::NEW; 2];
        let q = u32::from(QSIZE - 1);
        write_reg(h, regs::AQA, &(q | q << 16).to_le_bytes())?;
        write_reg(h, regs::ASQ, &(IOVA + ASQ).to_le_bytes())?;
        write_reg(h, regs::ACQ, &(IOVA + ACQ).to_le_bytes())?;
        // IOSQES 6 (64 bytes), IOCQES 4 (16 bytes), EN.
        write_reg(h, regs::CC, &(1u32 | 6 << 16 | 4 << 20).to_le_bytes())?;
        h.poll();
        let csts = read_reg32(h, regs::CSTS)?;
        if csts & 1 != 1 {
            return Err(format!("not ready after enable: CSTS {csts:#x}"));
        }
        // Create I/O CQ 1 (physically contiguous, no interrupts), then SQ 1 on it.
        let q = u64::from(q);
        let cq = [0x05, 0, IOVA + IOCQ, q << 16 | 1, 1];
        self.admin(h, cq)?;
        let sq = [0x01, 0, IOVA + IOSQ, q << 16 | 1, 1 << 16 | 1];
        self.admin(h, sq)?;
        Ok(())
    }

    /// One admin command `[opcode, nsid, prp1, cdw10, cdw11]`; must succeed.
    fn admin(&mut self, h: &mut Harness, c: [u64; 5]) -> Result<(), String> {
        let mut sqe = [0u32; 16];
        sqe[1] = c[1] as u32;
        sqe[6] = c[2] as u32;
        sqe[7] = (c[2] >> 32) as u32;
        sqe[10] = c[3] as u32;
        sqe[11] = c[4] as u32;
        let status = self.submit(h, 0, c[0] as u8, sqe)?;
        match status {
            0 => Ok(()),
            s => Err(format!("admin opcode {:#x}: status {s:#x}", c[0])),
        }
    }

    /// Submit on queue `qid` (0 or 1) and wait for the completion; returns its status
    /// (without the phase bit).
    pub fn submit(
        &mut self,
        h: &mut Harness,
        qid: u16,
        opcode: u8,
        mut sqe: [u32; 16],
    ) -> Result<u16, String> {
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1);
        sqe[0] = u32::from(opcode) | u32::from(cid) << 16;
        let (sq, cq) = if qid == 0 { (ASQ, ACQ) } else { (IOSQ, IOCQ) };
        let ring = &mut self.rings[usize::from(qid)];
        self.mem
            .write(sq + u64::from(ring.sq_tail) * 64, sqe.as_bytes());
        ring.sq_tail = (ring.sq_tail + 1) % QSIZE;
        let tail = ring.sq_tail;
        write_reg(
            h,
            0x1000 + u64::from(qid) * 8,
            &u32::from(tail).to_le_bytes(),
        )?;
        h.poll();
        let ring = &mut self.rings[usize::from(qid)];
        let at = cq + u64::from(ring.cq_head) * 16;
        let (cqe, _) = Cqe::read_from_prefix(&self.mem.read(at, 16)).expect("16 bytes");
        if (cqe.status_phase & 1 == 1) != ring.phase {
            return Err(format!("no completion on queue {qid} for cid {cid}"));
        }
        if cqe.cid != cid || cqe.sq_id != qid {
            return Err(format!(
                "completion {cqe:?} is not for cid {cid} on SQ {qid}"
            ));
        }
        ring.cq_head = (ring.cq_head + 1) % QSIZE;
        if ring.cq_head == 0 {
            ring.phase = !ring.phase;
        }
        let head = ring.cq_head;
        write_reg(
            h,
            0x1004 + u64::from(qid) * 8,
            &u32::from(head).to_le_bytes(),
        )?;
        Ok(cqe.status_phase >> 1)
    }

    /// Read or write (opcode 2 or 1) one block at `lba` with the given PRPs.
    pub fn io(
        &mut self,
        h: &mut Harness,
        opcode: u8,
        lba: u64,
        prp1: u64,
        prp2: u64,
    ) -> Result<u16, String> {
        let mut sqe = [0u32; 16];
        sqe[1] = 1;
        sqe[6] = prp1 as u32;
        sqe[7] = (prp1 >> 32) as u32;
        sqe[8] = prp2 as u32;
        sqe[9] = (prp2 >> 32) as u32;
        sqe[10] = lba as u32;
        sqe[11] = (lba >> 32) as u32;
        self.submit(h, 1, opcode, sqe)
    }

    /// Write a pattern to one block and read it back through the other buffer.
    pub fn verified_write_read(&mut self, h: &mut Harness, lba: u64) -> Result<(), String> {
        let lba = lba % BLOCKS;
        let pattern: Vec<u8> = (0..512u64).map(|i| (i * 7 + lba * 13 + 5) as u8).collect();
        self.mem.write(WBUF, &pattern);
        self.mem.write(RBUF, &[0u8; 512]);
        let w = self.io(h, 0x01, lba, IOVA + WBUF, 0)?;
        if w != 0 {
            return Err(format!("write: status {w:#x}"));
        }
        let r = self.io(h, 0x02, lba, IOVA + RBUF, 0)?;
        if r != 0 {
            return Err(format!("read: status {r:#x}"));
        }
        if self.mem.read(RBUF, 512) != pattern {
            return Err(format!(
                "block {lba} read back differs from what was written"
            ));
        }
        Ok(())
    }
}
