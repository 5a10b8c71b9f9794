// SPDX-License-Identifier: Apache-2.0
//! Host memory and hand-driven queues: a memfd the test maps, an SQ/CQ pair driven by hand,
//! BAR0 bring-up over any client, and a minimal host for sequences the driver cannot express.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nvmemu_mem::{MmapRegion, Protection};
use nvmemu_spec::opcode::{AdminOpcode, IoOpcode};
use nvmemu_spec::regs::{self, cc, csts};
use nvmemu_spec::{Cqe, Sqe, Status};
use nvmemu_vfio_user::{Client, ClientError, DmaMap};

use super::{TestTarget, wait_for};

/// A memfd the test owns, mapped here; the device sees it at `iova` once DMA-mapped. Not
/// sealed (like QEMU's and SPDK's memory), so a test can shrink it under the server.
pub struct HostMem {
    pub fd: OwnedFd,
    pub map: MmapRegion,
    pub iova: u64,
}

impl HostMem {
    pub fn new(size: u64, iova: u64) -> HostMem {
        let fd =
            rustix::fs::memfd_create("nvmemu-test-host", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, size).unwrap();
        let map = MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite).unwrap();
        HostMem { fd, map, iova }
    }

    /// A hugetlbfs memfd of `size` bytes (a multiple of 2 MiB), or why there is none: no
    /// hugetlbfs, or too few free huge pages (the mapping reserves them).
    pub fn hugetlb(size: u64, iova: u64) -> Result<HostMem, String> {
        let flags = rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::HUGETLB;
        let fd = rustix::fs::memfd_create("nvmemu-test-huge", flags)
            .map_err(|e| format!("memfd_create(MFD_HUGETLB): {e}"))?;
        rustix::fs::ftruncate(&fd, size).map_err(|e| format!("ftruncate: {e}"))?;
        let map = MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite)
            .map_err(|e| format!("{e} (free huge pages in /proc/meminfo: HugePages_Free)"))?;
        Ok(HostMem { fd, map, iova })
    }

    pub fn size(&self) -> u64 {
        self.map.len()
    }

    /// DMA_MAP the whole memfd through `client`.
    pub fn dma_map(&self, client: &mut Client) -> Result<(), ClientError> {
        let map = DmaMap {
            flags: DmaMap::FLAG_READ | DmaMap::FLAG_WRITE,
            offset: 0,
            iova: self.iova,
            size: self.size(),
        };
        client.dma_map(&map, Some(self.fd.as_fd()))
    }

    pub fn iova_of(&self, offset: u64) -> u64 {
        self.iova + offset
    }
}

/// Map the BAR0 doorbell page (sparse area at 0x1000) from a region fd.
pub fn map_doorbells(fd: BorrowedFd<'_>, region_file_offset: u64) -> MmapRegion {
    MmapRegion::map_shared(
        fd,
        region_file_offset + 0x1000,
        0x1000,
        Protection::ReadWrite,
    )
    .unwrap()
}

/// An SQ/CQ pair driven by hand in a [`HostMem`] (CAP.DSTRD = 0).
#[derive(Debug)]
pub struct RawQueue {
    pub qid: u16,
    pub depth: u16,
    pub sq_off: u64,
    pub cq_off: u64,
    tail: u16,
    head: u16,
    phase: bool,
    next_cid: u16,
}

impl RawQueue {
    pub fn new(qid: u16, depth: u16, sq_off: u64, cq_off: u64) -> RawQueue {
        RawQueue {
            qid,
            depth,
            sq_off,
            cq_off,
            tail: 0,
            head: 0,
            phase: true,
            next_cid: 1,
        }
    }

    /// Write `sqe` (with a fresh CID) at the tail and ring the SQ tail doorbell.
    pub fn submit(&mut self, mem: &MmapRegion, db: &MmapRegion, mut sqe: Sqe) -> u16 {
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1);
        sqe.cdw0 = (sqe.cdw0 & 0xFFFF) | (u32::from(cid) << 16);
        mem.write_obj(self.sq_off + u64::from(self.tail) * 64, &sqe)
            .unwrap();
        self.tail = (self.tail + 1) % self.depth;
        // Release: the SQE is visible before the new tail.
        db.store_release_u32(u64::from(self.qid) * 8, u32::from(self.tail))
            .unwrap();
        cid
    }

    /// Take the next completion if its phase tag says it is new; acknowledges it.
    pub fn try_reap(&mut self, mem: &MmapRegion, db: &MmapRegion) -> Option<Cqe> {
        let at = self.cq_off + u64::from(self.head) * 16;
        let sp = mem.load_acquire_u16(at + 14).unwrap();
        if (sp & 1 != 0) != self.phase {
            return None;
        }
        let cqe: Cqe = mem.read_obj(at).unwrap();
        self.head += 1;
        if self.head == self.depth {
            self.head = 0;
            self.phase = !self.phase;
        }
        db.store_release_u32(u64::from(self.qid) * 8 + 4, u32::from(self.head))
            .unwrap();
        Some(cqe)
    }

    /// Submit one command and wait for its completion.
    pub fn exec(&mut self, mem: &MmapRegion, db: &MmapRegion, sqe: Sqe) -> Cqe {
        let cid = self.submit(mem, db, sqe);
        let cqe = wait_for("a completion", || self.try_reap(mem, db));
        assert_eq!(cqe.cid, cid, "completion for another command");
        assert_eq!(cqe.sq_id, self.qid);
        cqe
    }
}

/// BAR0 register access, so hand-driven bring-up works over any client.
pub trait Bar0 {
    fn read32(&mut self, offset: u64) -> u32;
    fn write32(&mut self, offset: u64, value: u32);
    fn write64(&mut self, offset: u64, value: u64);
}

pub fn read32(c: &mut Client, offset: u64) -> u32 {
    let mut b = [0u8; 4];
    c.region_read(0, offset, &mut b).unwrap();
    u32::from_le_bytes(b)
}

impl Bar0 for Client {
    fn read32(&mut self, offset: u64) -> u32 {
        read32(self, offset)
    }
    fn write32(&mut self, offset: u64, value: u32) {
        self.region_write(0, offset, &value.to_le_bytes()).unwrap();
    }
    fn write64(&mut self, offset: u64, value: u64) {
        self.region_write(0, offset, &value.to_le_bytes()).unwrap();
    }
}

/// CC for enabling: NVM command set, 4 KiB pages, 64/16-byte I/O queue entries.
pub const CC_ENABLE: u32 = cc::EN | (6 << cc::IOSQES_SHIFT) | (4 << cc::IOCQES_SHIFT);

/// Wait for CSTS to satisfy `f`, returning it.
pub fn wait_csts(b: &mut impl Bar0, what: &str, f: impl Fn(u32) -> bool) -> u32 {
    wait_for(what, || {
        let v = b.read32(regs::CSTS);
        f(v).then_some(v)
    })
}

/// NVMe Base 7.6.1: disable, program AQA/ASQ/ACQ, enable, wait for CSTS.RDY.
pub fn enable_controller(b: &mut impl Bar0, depth: u16, asq: u64, acq: u64) {
    b.write32(regs::CC, 0);
    wait_csts(b, "CSTS.RDY = 0", |v| v & csts::RDY == 0);
    let z = u32::from(depth - 1);
    b.write32(regs::AQA, z | (z << 16));
    b.write64(regs::ASQ, asq);
    b.write64(regs::ACQ, acq);
    b.write32(regs::CC, CC_ENABLE);
    let v = wait_csts(b, "CSTS.RDY = 1", |v| v & (csts::RDY | csts::CFS) != 0);
    assert_eq!(v & csts::CFS, 0, "controller fatal on enable");
}

/// A hand-driven host on our vfio-user client: 4 MiB of memfd memory at [`RawHost::IOVA`]
/// holding the admin queue (offset 0 / 0x1000), I/O queue `n` (offset 0x2000 * n and
/// 0x2000 * n + 0x1000, n < 8) and data from [`RawHost::DATA`].
pub struct RawHost {
    pub client: Client,
    pub mem: HostMem,
    pub db: MmapRegion,
    pub admin: RawQueue,
}

impl RawHost {
    pub const IOVA: u64 = 0x10_0000_0000;
    pub const SIZE: u64 = 4 << 20;
    pub const DATA: u64 = 0x10_0000;
    pub const ADMIN_DEPTH: u16 = 16;
    pub const IO_DEPTH: u16 = 32;

    /// Connect, map the doorbells and memory, turn on bus mastering and enable.
    pub fn connect(t: &TestTarget) -> RawHost {
        let mut client = Client::connect(&t.socket()).unwrap();
        let (info, fd) = client.region_info(0).unwrap();
        let db = map_doorbells(fd.as_ref().unwrap().as_fd(), info.file_offset);
        let mem = HostMem::new(Self::SIZE, Self::IOVA);
        mem.dma_map(&mut client).unwrap();
        client.region_write(7, 4, &0x0406u16.to_le_bytes()).unwrap();
        let mut h = RawHost {
            client,
            mem,
            db,
            admin: RawQueue::new(0, Self::ADMIN_DEPTH, 0, 0x1000),
        };
        h.enable();
        h
    }

    /// Fresh admin queue (memory zeroed) and CC.EN 0 -> 1.
    pub fn enable(&mut self) {
        self.mem.map.fill(0, 0x2000, 0).unwrap();
        self.admin = RawQueue::new(0, Self::ADMIN_DEPTH, 0, 0x1000);
        let (asq, acq) = (self.mem.iova_of(0), self.mem.iova_of(0x1000));
        enable_controller(&mut self.client, Self::ADMIN_DEPTH, asq, acq);
    }

    pub fn csts(&mut self) -> u32 {
        read32(&mut self.client, regs::CSTS)
    }

    pub fn admin(&mut self, sqe: Sqe) -> Cqe {
        self.admin.exec(&self.mem.map, &self.db, sqe)
    }

    /// Identify Controller into the data area; returns the 4 KiB page.
    pub fn identify_controller(&mut self) -> Vec<u8> {
        self.mem.map.fill(Self::DATA, 4096, 0).unwrap();
        let cqe = self.admin(Sqe {
            cdw0: u32::from(u8::from(AdminOpcode::Identify)),
            dptr1: self.mem.iova_of(Self::DATA),
            cdw10: 1,
            ..Sqe::default()
        });
        assert_eq!(cqe.status(), Status::SUCCESS);
        let mut page = vec![0u8; 4096];
        self.mem.map.copy_to(Self::DATA, &mut page).unwrap();
        page
    }

    /// Set Features Number of Queues, then create I/O CQ and SQ `qid` (IEN and IV as given).
    pub fn create_io_pair(&mut self, qid: u16, ien: bool, iv: u16) -> RawQueue {
        assert!((1..8).contains(&qid));
        let cqe = self.admin(Sqe {
            cdw0: u32::from(u8::from(AdminOpcode::SetFeatures)),
            cdw10: 0x07,
            cdw11: 7 | (7 << 16),
            ..Sqe::default()
        });
        // Only the first Set Features before queue creation succeeds; later ones are a
        // Command Sequence Error (queues exist), which is fine here.
        assert!(
            cqe.status() == Status::SUCCESS || cqe.status() == Status::COMMAND_SEQUENCE_ERROR,
            "{:?}",
            cqe.status()
        );
        let (sq_off, cq_off) = (0x2000 * u64::from(qid), 0x2000 * u64::from(qid) + 0x1000);
        self.mem.map.fill(sq_off, 0x2000, 0).unwrap();
        let cqe = self.admin(create_cq_sqe(
            qid,
            Self::IO_DEPTH,
            self.mem.iova_of(cq_off),
            ien,
            iv,
        ));
        assert_eq!(cqe.status(), Status::SUCCESS, "Create I/O CQ {qid}");
        let cqe = self.admin(create_sq_sqe(
            qid,
            Self::IO_DEPTH,
            self.mem.iova_of(sq_off),
            qid,
        ));
        assert_eq!(cqe.status(), Status::SUCCESS, "Create I/O SQ {qid}");
        RawQueue::new(qid, Self::IO_DEPTH, sq_off, cq_off)
    }

    pub fn io(&mut self, q: &mut RawQueue, sqe: Sqe) -> Cqe {
        q.exec(&self.mem.map, &self.db, sqe)
    }

    /// Write `data` (a multiple of 512 bytes, at most 4 KiB) at `lba` of NSID 1 from the data
    /// area, read it back into a second buffer, and compare.
    pub fn verified_io(&mut self, q: &mut RawQueue, lba: u64, data: &[u8]) {
        assert!(data.len() <= 4096 && data.len().is_multiple_of(512));
        let (wr, rd) = (Self::DATA, Self::DATA + 0x1000);
        self.mem.map.copy_from(wr, data).unwrap();
        self.mem.map.fill(rd, 4096, 0xEE).unwrap();
        let n = (data.len() / 512) as u32;
        let w = rw_sqe(IoOpcode::Write, lba, n, self.mem.iova_of(wr));
        assert_eq!(self.io(q, w).status(), Status::SUCCESS, "write");
        let r = rw_sqe(IoOpcode::Read, lba, n, self.mem.iova_of(rd));
        assert_eq!(self.io(q, r).status(), Status::SUCCESS, "read");
        let mut back = vec![0u8; data.len()];
        self.mem.map.copy_to(rd, &mut back).unwrap();
        assert!(back == data, "read back differs");
    }
}

/// Create I/O Completion Queue, PC = 1.
pub fn create_cq_sqe(qid: u16, entries: u16, iova: u64, ien: bool, iv: u16) -> Sqe {
    Sqe {
        cdw0: u32::from(u8::from(AdminOpcode::CreateIoCq)),
        dptr1: iova,
        cdw10: u32::from(qid) | (u32::from(entries.wrapping_sub(1)) << 16),
        cdw11: 1 | (u32::from(ien) << 1) | (u32::from(iv) << 16),
        ..Sqe::default()
    }
}

/// Create I/O Submission Queue, PC = 1.
pub fn create_sq_sqe(qid: u16, entries: u16, iova: u64, cqid: u16) -> Sqe {
    Sqe {
        cdw0: u32::from(u8::from(AdminOpcode::CreateIoSq)),
        dptr1: iova,
        cdw10: u32::from(qid) | (u32::from(entries.wrapping_sub(1)) << 16),
        cdw11: 1 | (u32::from(cqid) << 16),
        ..Sqe::default()
    }
}

/// Read or Write of `nblocks` at `slba` of NSID 1 with PRP1 = `prp1` (PRP2 left 0: the
/// transfer must fit in PRP1's page).
pub fn rw_sqe(op: IoOpcode, slba: u64, nblocks: u32, prp1: u64) -> Sqe {
    Sqe {
        cdw0: u32::from(u8::from(op)),
        nsid: 1,
        dptr1: prp1,
        cdw10: slba as u32,
        cdw11: (slba >> 32) as u32,
        cdw12: nblocks - 1,
        ..Sqe::default()
    }
}
