// SPDX-License-Identifier: Apache-2.0
//! A test host whose namespace 1 is a file, for the file namespace test files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nvmemu_bdev::{Bdev, FileEngine};
use nvmemu_ctrl::Namespace;
use nvmemu_ctrl::test_utils::TestHost;
use nvmemu_spec::{Cqe, Nsid, Sqe};

pub const FILE_BYTES: u64 = 1 << 20;

/// A ready host whose namespace 1 is the file at `path` (512-byte blocks).
pub fn host_on(path: &Path, readonly: bool) -> TestHost {
    let mut h = TestHost::ready(64);
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
