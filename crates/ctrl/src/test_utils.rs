// SPDX-License-Identifier: Apache-2.0
//! A fake NVMe host for tests: memfd-backed client memory, SQE builders, doorbell rings and
//! CQE reaping against a real [`Controller`]. Built for `cfg(test)` and the `test-utils`
//! feature, so other crates' tests can drive a controller without a transport.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

use std::os::fd::AsFd;
use std::sync::Arc;

use nvmemu_bdev::{Bdev, MallocBacking};
use nvmemu_mem::{DmaBacking, DmaRegion, GuestMemory, Iova, MmapRegion, Protection, create_memfd};
use nvmemu_spec::regs;
use nvmemu_spec::{Cid, Cqe, DataPtr, Nsid, Psdt, Qid, SglDescriptor, Sqe, Status};
use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::{Controller, ControllerConfig, InterruptSink, Namespace};

mod file_io;
pub use file_io::HeldFileIo;

/// Client memory: one memfd mapped at IOVA [`HostMemory::BASE`].
#[derive(Debug, Clone)]
pub struct HostMemory {
    region: Arc<MmapRegion>,
    guest: Arc<GuestMemory>,
}

impl HostMemory {
    /// IOVA of offset 0 (high, so an offset is never mistaken for an address).
    pub const BASE: u64 = 0x7_0000_0000;

    /// `size` bytes of zeroed client memory.
    pub fn new(size: u64) -> HostMemory {
        let fd = create_memfd("nvmemu-test-host", size, false).expect("memfd");
        let region = Arc::new(
            MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite).expect("map"),
        );
        let guest = GuestMemory::new()
            .with_region(DmaRegion {
                iova: Iova(Self::BASE),
                size,
                writable: true,
                backing: DmaBacking::Mapped(Arc::clone(&region)),
            })
            .expect("region");
        HostMemory {
            region,
            guest: Arc::new(guest),
        }
    }

    /// The IOVA of byte `offset`.
    pub fn iova(&self, offset: u64) -> u64 {
        Self::BASE + offset
    }

    /// The DMA table to give the controller.
    pub fn guest(&self) -> Arc<GuestMemory> {
        Arc::clone(&self.guest)
    }

    /// The mapping itself.
    pub fn region(&self) -> &Arc<MmapRegion> {
        &self.region
    }

    pub fn write(&self, offset: u64, bytes: &[u8]) {
        self.region.copy_from(offset, bytes).expect("host write");
    }

    pub fn read(&self, offset: u64, bytes: &mut [u8]) {
        self.region.copy_to(offset, bytes).expect("host read");
    }

    pub fn read_vec(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        self.read(offset, &mut v);
        v
    }

    pub fn read_obj<T: FromBytes>(&self, offset: u64) -> T {
        self.region.read_obj(offset).expect("host read_obj")
    }

    pub fn write_obj<T: IntoBytes + Immutable>(&self, offset: u64, value: &T) {
        self.region
            .write_obj(offset, value)
            .expect("host write_obj")
    }
}

/// Records raised interrupt vectors.
#[derive(Debug, Default)]
pub struct IrqLog(pub Vec<u16>);

impl InterruptSink for IrqLog {
    fn raise(&mut self, vector: u16) {
        self.0.push(vector);
    }
}

/// The host's view of one queue pair.
#[derive(Debug, Clone)]
pub struct HostQueue {
    pub qid: Qid,
    pub size: u32,
    pub sq_off: u64,
    pub cq_off: u64,
    pub sq_tail: u32,
    pub cq_head: u32,
    pub phase: bool,
}

/// Client memory layout used by [`TestHost`].
pub mod layout {
    /// Admin SQ.
    pub const ASQ: u64 = 0x0000;
    /// Admin CQ.
    pub const ACQ: u64 = 0x1000;
    /// Shadow doorbell page (Doorbell Buffer Config).
    pub const SHADOW: u64 = 0x2000;
    /// Event index page.
    pub const EVENT_IDX: u64 = 0x3000;
    /// Identify / log page buffer.
    pub const ADMIN_DATA: u64 = 0x4000;
    /// I/O SQ of qid q at `IO_SQ + (q - 1) * IO_STRIDE`.
    pub const IO_SQ: u64 = 0x10_0000;
    /// I/O CQ of qid q at `IO_CQ + (q - 1) * IO_STRIDE`.
    pub const IO_CQ: u64 = 0x20_0000;
    /// Room per I/O queue.
    pub const IO_STRIDE: u64 = 0x1_0000;
    /// PRP lists / SGL segments.
    pub const LISTS: u64 = 0x30_0000;
    /// Data buffers (up to the end of memory).
    pub const DATA: u64 = 0x40_0000;
    /// Total client memory.
    pub const SIZE: u64 = 0x100_0000;
}

/// A controller plus a fake host driving it.
#[derive(Debug)]
pub struct TestHost {
    pub ctrl: Controller,
    pub mem: HostMemory,
    pub doorbells: Arc<MmapRegion>,
    pub irqs: IrqLog,
    pub queues: Vec<Option<HostQueue>>,
    /// Ring I/O doorbells in the shadow page instead of the doorbell page.
    pub shadow: bool,
    next_cid: u16,
}

/// Namespace 1 of [`TestHost::new`]: 512-byte blocks.
pub const BLOCK: u64 = 512;
/// Blocks of namespace 1.
pub const BLOCKS: u64 = 1 << 17;

impl TestHost {
    /// A disabled controller with namespace 1 (64 MiB malloc, 512-byte blocks).
    pub fn new() -> TestHost {
        TestHost::with_config(ControllerConfig::default())
    }

    pub fn with_config(config: ControllerConfig) -> TestHost {
        TestHost::with_backing(config, MallocBacking::Populated)
    }

    /// Like [`TestHost::new`], but namespace 1 is sparse (`lazy=on`): nothing is populated
    /// up front, so a fuzzer can build one host per input cheaply.
    pub fn lazy() -> TestHost {
        TestHost::with_backing(ControllerConfig::default(), MallocBacking::Lazy)
    }

    fn with_backing(config: ControllerConfig, backing: MallocBacking) -> TestHost {
        let doorbells = Arc::new(MmapRegion::anonymous(4096).expect("doorbells"));
        let mut ctrl = Controller::new(config, Arc::clone(&doorbells));
        let mem = HostMemory::new(layout::SIZE);
        ctrl.set_guest_memory(mem.guest());
        let bdev = Bdev::malloc_with("malloc0", BLOCK as u32, BLOCKS, backing, &|_| {});
        let bdev = Arc::new(bdev.expect("bdev"));
        ctrl.attach_namespace(Namespace::new(Nsid(1), bdev))
            .expect("attach");
        TestHost {
            ctrl,
            mem,
            doorbells,
            irqs: IrqLog::default(),
            queues: vec![None; 512],
            shadow: false,
            next_cid: 0,
        }
    }

    pub fn write_reg32(&mut self, offset: u64, v: u32) {
        self.ctrl
            .mmio_write(offset, &v.to_le_bytes())
            .expect("mmio write");
    }

    pub fn write_reg64(&mut self, offset: u64, v: u64) {
        self.ctrl
            .mmio_write(offset, &v.to_le_bytes())
            .expect("mmio write");
    }

    pub fn read_reg32(&mut self, offset: u64) -> u32 {
        let mut b = [0u8; 4];
        self.ctrl.mmio_read(offset, &mut b).expect("mmio read");
        u32::from_le_bytes(b)
    }

    pub fn read_reg64(&mut self, offset: u64) -> u64 {
        let mut b = [0u8; 8];
        self.ctrl.mmio_read(offset, &mut b).expect("mmio read");
        u64::from_le_bytes(b)
    }

    /// The CC value Linux writes to enable: EN, IOSQES 6, IOCQES 4.
    pub const CC_ENABLE: u32 = 1 | (6 << 16) | (4 << 20);

    /// Program a 32-entry admin queue pair and enable; returns CSTS.
    pub fn enable(&mut self) -> u32 {
        self.write_reg32(regs::AQA, 31 | (31 << 16));
        self.write_reg64(regs::ASQ, self.mem.iova(layout::ASQ));
        self.write_reg64(regs::ACQ, self.mem.iova(layout::ACQ));
        self.write_reg32(regs::CC, Self::CC_ENABLE);
        self.queues[0] = Some(HostQueue {
            qid: Qid::ADMIN,
            size: 32,
            sq_off: layout::ASQ,
            cq_off: layout::ACQ,
            sq_tail: 0,
            cq_head: 0,
            phase: true,
        });
        self.read_reg32(regs::CSTS)
    }

    /// A TestHost that is enabled, with I/O queue pair 1 (`size` entries).
    pub fn ready(size: u32) -> TestHost {
        let mut h = TestHost::new();
        assert_eq!(h.enable() & 1, 1);
        h.create_io_pair(1, size);
        h
    }

    fn ring_sq(&mut self, qid: Qid, tail: u32) {
        let off = u64::from(qid.0) * 8;
        if self.shadow && qid != Qid::ADMIN {
            self.mem
                .region()
                .store_release_u32(layout::SHADOW + off, tail)
                .unwrap();
        } else {
            self.doorbells.store_release_u32(off, tail).unwrap();
        }
    }

    fn ring_cq(&mut self, qid: Qid, head: u32) {
        let off = u64::from(qid.0) * 8 + 4;
        if self.shadow && qid != Qid::ADMIN {
            self.mem
                .region()
                .store_release_u32(layout::SHADOW + off, head)
                .unwrap();
        } else {
            self.doorbells.store_release_u32(off, head).unwrap();
        }
    }

    /// Write `sqe` (with a fresh CID) at the SQ tail and ring the doorbell.
    pub fn submit(&mut self, qid: u16, mut sqe: Sqe) -> Cid {
        let cid = Cid(self.next_cid);
        self.next_cid = self.next_cid.wrapping_add(1);
        sqe.cdw0 = (sqe.cdw0 & 0xFFFF) | (u32::from(cid.0) << 16);
        let q = self.queues[usize::from(qid)].as_mut().expect("queue");
        self.mem
            .write_obj(q.sq_off + u64::from(q.sq_tail) * 64, &sqe);
        q.sq_tail = (q.sq_tail + 1) % q.size;
        let tail = q.sq_tail;
        self.ring_sq(Qid(qid), tail);
        cid
    }

    /// Poll the controller once.
    pub fn poll(&mut self) -> usize {
        self.ctrl.poll(&mut self.irqs)
    }

    /// Take the next CQE if its phase says it is new, and ring the CQ head doorbell.
    pub fn reap(&mut self, qid: u16) -> Option<Cqe> {
        let q = self.queues[usize::from(qid)].as_mut().expect("queue");
        let cqe: Cqe = self.mem.read_obj(q.cq_off + u64::from(q.cq_head) * 16);
        if cqe.phase() != q.phase {
            return None;
        }
        q.cq_head += 1;
        if q.cq_head == q.size {
            q.cq_head = 0;
            q.phase = !q.phase;
        }
        let head = q.cq_head;
        self.ring_cq(Qid(qid), head);
        Some(cqe)
    }

    /// Submit, poll once, reap the completion.
    pub fn cmd(&mut self, qid: u16, sqe: Sqe) -> Cqe {
        let cid = self.submit(qid, sqe);
        self.poll();
        let cqe = self.reap(qid).expect("a completion");
        assert_eq!(cqe.cid, cid.0);
        cqe
    }

    pub fn admin(&mut self, sqe: Sqe) -> Cqe {
        self.cmd(0, sqe)
    }

    /// Create I/O CQ and SQ `qid` with `size` entries (IEN on, vector `qid`).
    pub fn create_io_pair(&mut self, qid: u16, size: u32) {
        let q = u64::from(qid - 1);
        let sq_off = layout::IO_SQ + q * layout::IO_STRIDE;
        let cq_off = layout::IO_CQ + q * layout::IO_STRIDE;
        let c = self.admin(create_cq(qid, size, self.mem.iova(cq_off), qid));
        assert_eq!(c.status(), Status::SUCCESS, "create CQ");
        let c = self.admin(create_sq(qid, size, self.mem.iova(sq_off), qid));
        assert_eq!(c.status(), Status::SUCCESS, "create SQ");
        self.queues[usize::from(qid)] = Some(HostQueue {
            qid: Qid(qid),
            size,
            sq_off,
            cq_off,
            sq_tail: 0,
            cq_head: 0,
            phase: true,
        });
    }

    /// Doorbell Buffer Config with the layout's shadow and event index pages.
    pub fn enable_shadow_doorbells(&mut self) {
        let dbbc = Sqe {
            dptr1: self.mem.iova(layout::SHADOW),
            dptr2: self.mem.iova(layout::EVENT_IDX),
            ..bare(0x7C)
        };
        assert_eq!(
            self.admin(dbbc).status(),
            Status::SUCCESS,
            "Doorbell Buffer Config"
        );
    }

    /// Read `blocks` blocks at `slba` into the data area through PRP1 (+PRP2 / list as
    /// needed, written to the list area); returns the status and the data.
    pub fn read_blocks(&mut self, qid: u16, slba: u64, blocks: u32) -> (Status, Vec<u8>) {
        let len = u64::from(blocks) * BLOCK;
        let dptr = self.prps(layout::DATA, len);
        let c = self.cmd(qid, rw(0x02, 1, slba, blocks, dptr));
        (c.status(), self.mem.read_vec(layout::DATA, len as usize))
    }

    /// Write `data` (whole blocks) at `slba` from the data area through PRPs.
    pub fn write_blocks(&mut self, qid: u16, slba: u64, data: &[u8]) -> Status {
        self.mem.write(layout::DATA, data);
        let blocks = (data.len() as u64 / BLOCK) as u32;
        let dptr = self.prps(layout::DATA, data.len() as u64);
        self.cmd(qid, rw(0x01, 1, slba, blocks, dptr)).status()
    }

    /// PRPs for a contiguous buffer at host offset `off` (page aligned or not), with one
    /// PRP list in the list area when more than two pages are touched.
    pub fn prps(&self, off: u64, len: u64) -> DataPtr {
        let prp1 = self.mem.iova(off);
        let first = (4096 - (off % 4096)).min(len);
        let rest = len - first;
        let next = off + first;
        if rest == 0 {
            return DataPtr::Prp { prp1, prp2: 0 };
        }
        if rest <= 4096 {
            return DataPtr::Prp {
                prp1,
                prp2: self.mem.iova(next),
            };
        }
        let entries: Vec<u64> = (0..rest.div_ceil(4096))
            .map(|i| self.mem.iova(next + i * 4096))
            .collect();
        assert!(entries.len() <= 512, "use a chained list");
        self.mem.write(layout::LISTS, entries.as_bytes());
        DataPtr::Prp {
            prp1,
            prp2: self.mem.iova(layout::LISTS),
        }
    }
}

impl Default for TestHost {
    fn default() -> Self {
        TestHost::new()
    }
}

/// An SQE with `opcode` and `dptr`.
pub fn sqe(opcode: u8, dptr: DataPtr) -> Sqe {
    let (psdt, d1, d2) = match dptr {
        DataPtr::Prp { prp1, prp2 } => (Psdt::Prp, prp1, prp2),
        DataPtr::Sgl(d) => {
            let (a, b) = d.to_dptr();
            (Psdt::SglMptrContiguous, a, b)
        }
    };
    Sqe {
        cdw0: Sqe::make_cdw0(opcode, psdt, Cid(0)),
        dptr1: d1,
        dptr2: d2,
        ..Sqe::default()
    }
}

/// A data-less SQE.
pub fn bare(opcode: u8) -> Sqe {
    sqe(opcode, DataPtr::Prp { prp1: 0, prp2: 0 })
}

/// Read (0x02), Write (0x01) or Compare (0x05).
pub fn rw(opcode: u8, nsid: u32, slba: u64, blocks: u32, dptr: DataPtr) -> Sqe {
    Sqe {
        nsid,
        cdw10: slba as u32,
        cdw11: (slba >> 32) as u32,
        cdw12: blocks - 1,
        ..sqe(opcode, dptr)
    }
}

/// An SGL data pointer with one descriptor.
pub fn sgl(d: SglDescriptor) -> DataPtr {
    DataPtr::Sgl(d)
}

/// `len` bytes of test data that differ with `seed`.
#[allow(clippy::cast_possible_truncation)] // the byte index wraps on purpose
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Delete I/O Submission Queue `qid`.
pub fn delete_sq(qid: u16) -> Sqe {
    Sqe {
        cdw10: u32::from(qid),
        ..bare(0x00)
    }
}

/// Delete I/O Completion Queue `qid`.
pub fn delete_cq(qid: u16) -> Sqe {
    Sqe {
        cdw10: u32::from(qid),
        ..bare(0x04)
    }
}

/// Create I/O Completion Queue (PC = 1, IEN = 1).
pub fn create_cq(qid: u16, size: u32, base: u64, iv: u16) -> Sqe {
    Sqe {
        cdw10: u32::from(qid) | ((size - 1) << 16),
        cdw11: 0b11 | (u32::from(iv) << 16),
        ..sqe(
            0x05,
            DataPtr::Prp {
                prp1: base,
                prp2: 0,
            },
        )
    }
}

/// Create I/O Submission Queue (PC = 1) posting to CQ `cqid`.
pub fn create_sq(qid: u16, size: u32, base: u64, cqid: u16) -> Sqe {
    Sqe {
        cdw10: u32::from(qid) | ((size - 1) << 16),
        cdw11: 1 | (u32::from(cqid) << 16),
        ..sqe(
            0x01,
            DataPtr::Prp {
                prp1: base,
                prp2: 0,
            },
        )
    }
}

/// Identify with `cns` for `nsid` into the admin data buffer.
pub fn identify(host: &TestHost, cns: u8, nsid: u32) -> Sqe {
    Sqe {
        nsid,
        cdw10: u32::from(cns),
        ..sqe(
            0x06,
            DataPtr::Prp {
                prp1: host.mem.iova(layout::ADMIN_DATA),
                prp2: 0,
            },
        )
    }
}

/// Get Log Page `lid`, `dwords` dwords at byte `offset`, into the admin data buffer.
pub fn get_log(host: &TestHost, lid: u8, dwords: u32, offset: u64, nsid: u32) -> Sqe {
    let numd = dwords - 1;
    Sqe {
        nsid,
        cdw10: u32::from(lid) | ((numd & 0xFFFF) << 16),
        cdw11: numd >> 16,
        cdw12: offset as u32,
        cdw13: (offset >> 32) as u32,
        ..sqe(
            0x02,
            DataPtr::Prp {
                prp1: host.mem.iova(layout::ADMIN_DATA),
                prp2: 0,
            },
        )
    }
}

/// Set Features `fid` = `value`.
pub fn set_feature(fid: u8, value: u32) -> Sqe {
    Sqe {
        cdw10: u32::from(fid),
        cdw11: value,
        ..bare(0x09)
    }
}

/// Get Features `fid` with select `sel` and CDW11 `arg`.
pub fn get_feature(fid: u8, sel: u8, arg: u32) -> Sqe {
    Sqe {
        cdw10: u32::from(fid) | (u32::from(sel) << 8),
        cdw11: arg,
        ..bare(0x0A)
    }
}
