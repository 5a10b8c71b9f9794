// SPDX-License-Identifier: Apache-2.0
//! A client that takes its DMA-mapped memory away and then points many commands at it:
//! the server recovers one fault per mapping (never page by page), refuses later transfers
//! to that region with Data Transfer Error, keeps its own map count bounded, and serves on.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use common::{DATA_IOVA, HostMem, RawHost, RawQueue, rw_sqe};
use nvmemu_spec::Status;
use nvmemu_spec::opcode::IoOpcode;
use nvmemu_spec::regs::csts;

/// Lines of /proc/self/maps: the server's VMAs (the target runs in this process).
fn map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count()
}

const PAGE: u64 = 4096;
/// 1 MiB Writes: MDTS is 1 MiB.
const PAGES_PER_WRITE: u64 = 256;
/// Where the PRP list goes in the host's own (intact) memory.
const PRP_LIST: u64 = RawHost::DATA + 0x2_0000;

/// A 1 MiB Write whose data pages are every other page of `data`, starting at page `first`:
/// PRP1 is the first page, PRP2 a list naming the other 255.
fn write_every_other_page(h: &RawHost, data: &HostMem, first: u64) -> nvmemu_spec::Sqe {
    let page = |i: u64| data.iova_of(((first + 2 * i) * PAGE) % data.size());
    let list: Vec<u8> = (1..PAGES_PER_WRITE)
        .flat_map(|i| page(i).to_le_bytes())
        .collect();
    h.mem.map.copy_from(PRP_LIST, &list).unwrap();
    let mut sqe = rw_sqe(IoOpcode::Write, 0, (PAGES_PER_WRITE * 8) as u32, page(0));
    sqe.dptr2 = h.mem.iova_of(PRP_LIST);
    sqe
}

/// Reset, enable and create I/O queue pair 1 again (the controller went fatal).
fn recover_controller(h: &mut RawHost) -> RawQueue {
    h.client.reset().unwrap();
    h.enable();
    h.create_io_pair(1, false, 0)
}

#[test]
fn faults_on_every_other_page_of_a_truncated_memfd_fail_the_region_once() {
    let t = common::start_default();
    let dir2 = common::add_controller(&t);
    let mut h = RawHost::connect(&t);
    let mut q = h.create_io_pair(1, false, 0);
    // 512 MiB, never touched (a sparse memfd costs nothing), mapped, then taken away.
    let data = HostMem::new(512 << 20, DATA_IOVA);
    data.dma_map(&mut h.client).unwrap();
    rustix::fs::ftruncate(&data.fd, 0).unwrap();
    let before = map_count();

    // The first command finds the memory gone: Data Transfer Error, controller fatal.
    let first = write_every_other_page(&h, &data, 0);
    assert_eq!(h.io(&mut q, first).status(), Status::DATA_TRANSFER_ERROR);
    common::wait_csts(&mut h.client, "CSTS.CFS", |v| v & csts::CFS != 0);
    // Page by page, that command alone would have added 256 VMAs (512 with the splits);
    // other tests in this binary may map a little meanwhile.
    let bounded = |what: &str| {
        let after = map_count();
        assert!(after < before + 64, "{what}: map count {before} -> {after}");
    };
    bounded("after the first command");
    // Every later command is refused up front (the region is lost), without another fault
    // and without taking the controller down again.
    let mut q = recover_controller(&mut h);
    for n in 1..64u64 {
        let sqe = write_every_other_page(&h, &data, n * 2 * PAGES_PER_WRITE + 1);
        assert_eq!(
            h.io(&mut q, sqe).status(),
            Status::DATA_TRANSFER_ERROR,
            "command {n}"
        );
    }
    assert_eq!(h.csts() & csts::CFS, 0, "no new fault after the first");
    let faults = t
        .target
        .on_controller(t.id, |pc| pc.ctrl.stats().memory_faults)
        .unwrap();
    assert_eq!(faults, 1, "one recovery for the whole region");
    bounded("after 64 commands");

    // The same client's intact memory still works, and so do other clients.
    h.verified_io(&mut q, 8, &common::pattern(4096, 9));
    common::verified_io_on(
        &mut nvmemu_driver::AttachedController::attach(dir2.path(), common::opts(1)).unwrap(),
    );
    drop(h);
    common::assert_serves_next_client(&t);
}
