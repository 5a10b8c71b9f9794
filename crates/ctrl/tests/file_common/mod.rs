// SPDX-License-Identifier: Apache-2.0
//! A test host whose namespace 1 is a file, for the file namespace test files: files of
//! known data, hosts whose file I/O a test holds back, and scattered SGL buffers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nvmemu_bdev::{Bdev, FileEngine};
use nvmemu_ctrl::Namespace;
use nvmemu_ctrl::test_utils::{HeldFileIo, TestHost, layout, pattern, rw, sgl};
use nvmemu_spec::{Cqe, DataPtr, Nsid, SglDescriptor, SglKind, Sqe};
use zerocopy::IntoBytes;

pub const FILE_BYTES: u64 = 1 << 20;

/// Where the scattered test buffers start in host memory.
pub const SCATTER: u64 = layout::DATA + 0x40_0000;

/// A ready host whose namespace 1 is the file at `path` (512-byte blocks).
pub fn host_on(path: &Path, readonly: bool) -> TestHost {
    host_with_queue(path, readonly, 64)
}

/// The same with an I/O queue pair of `entries` entries.
pub fn host_with_queue(path: &Path, readonly: bool, entries: u32) -> TestHost {
    let mut h = TestHost::ready(entries);
    h.ctrl.detach_namespace(Nsid(1)).unwrap();
    let bdev = Bdev::open_file("aio0", path, Some(512), readonly, FileEngine::Aio).unwrap();
    h.ctrl
        .attach_namespace(Namespace::new(Nsid(1), Arc::new(bdev)))
        .unwrap();
    h
}

/// A file of [`FILE_BYTES`] zeroes in `dir`.
pub fn new_file(dir: &Path) -> PathBuf {
    let path = dir.join("ns.img");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(FILE_BYTES)
        .unwrap();
    path
}

/// `len` bytes of `pattern(len, seed)` with each 512-byte block's first 4 bytes its
/// index, so a block that lands in the wrong place shows.
pub fn stamped(len: usize, seed: u8) -> Vec<u8> {
    let mut data = pattern(len, seed);
    for (i, block) in data.chunks_mut(512).enumerate() {
        let n = block.len().min(4);
        block[..n].copy_from_slice(&(i as u32).to_le_bytes()[..n]);
    }
    data
}

/// The whole file filled with `stamped(.., seed)` behind the controller's back.
pub fn fill_file(path: &Path, seed: u8) -> Vec<u8> {
    let data = stamped(FILE_BYTES as usize, seed);
    std::fs::write(path, &data).unwrap();
    data
}

/// What runs a held host's file I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// io_uring (worker threads where it is not allowed), its completions held.
    Ring,
    /// The worker threads, held before each operation.
    Workers,
}

/// A host with an I/O queue pair of `entries` entries on a file filled with
/// `stamped(.., seed)`, its file I/O held by `engine` until the gate opens (the directory
/// is returned to keep it; the gate, dropped first, opens).
pub fn held_host(
    engine: Engine,
    seed: u8,
    entries: u32,
) -> (tempfile::TempDir, Vec<u8>, TestHost, HeldFileIo) {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    let file = fill_file(&path, seed);
    let mut h = host_with_queue(&path, false, entries);
    let held = match engine {
        Engine::Ring => h.hold_file_ring(),
        Engine::Workers => h.hold_file_workers(),
    };
    (dir, file, h, held)
}

/// Open `held`'s gate from another thread `ms` milliseconds from now.
pub fn release_later(held: &HeldFileIo, ms: u64) -> std::thread::JoinHandle<()> {
    let gate = held.gate();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(ms));
        gate.open();
    })
}

/// One SGL Last Segment (at `layout::LISTS`) holding `descs`.
pub fn segment(h: &TestHost, descs: &[SglDescriptor]) -> DataPtr {
    h.mem.write(layout::LISTS, descs.as_bytes());
    sgl(SglDescriptor::new(SglKind::LastSegment {
        addr: h.mem.iova(layout::LISTS),
        len: (descs.len() * 16) as u32,
    }))
}

pub fn data_block(h: &TestHost, off: u64, len: u32) -> SglDescriptor {
    SglDescriptor::new(SglKind::DataBlock {
        addr: h.mem.iova(off),
        len,
    })
}

/// `n` data blocks of 512 bytes from `base`, a 512-byte gap after each (so no two merge
/// into one piece).
pub fn scattered(h: &TestHost, base: u64, n: usize) -> Vec<SglDescriptor> {
    (0..n as u64)
        .map(|i| data_block(h, base + i * 1024, 512))
        .collect()
}

/// The `n` scattered blocks from `base`, in order.
pub fn gather(h: &TestHost, base: u64, n: usize) -> Vec<u8> {
    (0..n as u64)
        .flat_map(|i| h.mem.read_vec(base + i * 1024, 512))
        .collect()
}

/// `data` (whole blocks) written into the scattered blocks from `base`.
pub fn scatter(h: &TestHost, base: u64, data: &[u8]) {
    for (i, piece) in data.chunks(512).enumerate() {
        h.mem.write(base + i as u64 * 1024, piece);
    }
}

/// A Compare of namespace 1.
pub fn compare(slba: u64, blocks: u32, dptr: DataPtr) -> Sqe {
    rw(0x05, 1, slba, blocks, dptr)
}

/// Submit `cmd` and poll until its CQE arrives (io_uring may complete a buffered
/// transfer within the submitting call, so the pass that took it may post it).
pub fn run(h: &mut TestHost, cmd: Sqe) -> Cqe {
    let cid = h.submit(1, cmd);
    let c = next_cqe(h);
    assert_eq!(c.cid, cid.0);
    c
}

/// Poll until a CQE arrives on queue 1.
pub fn next_cqe(h: &mut TestHost) -> Cqe {
    for _ in 0..100_000 {
        h.poll();
        if let Some(c) = h.reap(1) {
            return c;
        }
        std::thread::yield_now();
    }
    panic!("no completion");
}

/// Poll until the CQE of `cid` arrives on queue 1; its status.
pub fn new_cqe_status(h: &mut TestHost, cid: nvmemu_spec::Cid) -> nvmemu_spec::Status {
    let c = next_cqe(h);
    assert_eq!(c.cid, cid.0);
    c.status()
}
