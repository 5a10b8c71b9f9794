// SPDX-License-Identifier: Apache-2.0
//! How many DMA maps one client may make with no per-client budget (`serve
//! --max-client-maps`; that one is in `hostile_neighbours.rs`): VERSION's `max_dma_maps`
//! (65535) for any map, and fewer for fd-backed maps when the process's mapping budget
//! (`vm.max_map_count` less a reserve for threads and allocations) runs out first. Past
//! either, DMA_MAP fails with its exact errno, and the same connection then brings the
//! controller up with our driver and does verified I/O.
//!
//! Alone in its test binary: the mapping budget is process-wide, so tests running beside
//! this one would see it exhausted.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::fd::AsFd;

use nvmemu_device::{ClientBudget, Deadlines};
use nvmemu_driver::{AttachedController, VfioUserTransport};
use nvmemu_vfio_user::{Client, DmaMap, DmaUnmap, Errno};

/// VERSION's `max_dma_maps`.
const MAX_DMA_MAPS: u64 = 65535;
/// The mapping reserve nvmemu-mem keeps below `vm.max_map_count` (fault.rs).
const RESERVED_MAPS: u64 = 8192;
/// Where the test's regions go: far above the driver's pool, 8 KiB apart.
const BASE: u64 = 0x100_0000_0000;
const STEP: u64 = 0x2000;
const SIZE: u64 = 0x1000;

fn map(client: &mut Client, k: u64, fd: Option<std::os::fd::BorrowedFd<'_>>) -> Result<(), Errno> {
    let m = DmaMap {
        flags: DmaMap::FLAG_READ | DmaMap::FLAG_WRITE,
        offset: 0,
        iova: BASE + k * STEP,
        size: SIZE,
    };
    client
        .dma_map(&m, fd)
        .map_err(|e| common::errno_of::<()>(Err(e)))
}

fn unmap(client: &mut Client, k: u64) {
    let u = DmaUnmap {
        flags: 0,
        iova: BASE + k * STEP,
        size: SIZE,
    };
    client.dma_unmap(&u).unwrap();
}

fn unmap_all(client: &mut Client) {
    let all = DmaUnmap {
        flags: DmaUnmap::FLAG_ALL,
        iova: 0,
        size: 0,
    };
    client.dma_unmap(&all).unwrap();
}

/// Map regions `from..` until one fails; returns how many succeeded and the failure.
fn map_until_refused(
    client: &mut Client,
    from: u64,
    fd: Option<std::os::fd::BorrowedFd<'_>>,
) -> (u64, Errno) {
    let mut k = from;
    loop {
        match map(client, k, fd) {
            Ok(()) => k += 1,
            Err(e) => return (k - from, e),
        }
        assert!(k - from <= MAX_DMA_MAPS, "no limit after {} maps", k - from);
    }
}

#[test]
fn dma_maps_stop_at_the_advertised_limit_and_at_the_mapping_budget_with_exact_errors() {
    // No per-client budget: this test is about the limits beyond it.
    let unlimited = ClientBudget {
        max_maps: usize::MAX,
        max_map_bytes: u64::MAX,
    };
    let t = common::start_with_budget(&[("malloc", 512, 1 << 15)], Deadlines::default(), unlimited);
    let mut client = Client::connect(&t.socket()).unwrap();

    // fd-backed: the process's budget of shared mappings ends first (ENOMEM), unless
    // vm.max_map_count is so high that VERSION's limit does (ENOSPC).
    let max_map_count: u64 = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let budget = max_map_count
        .saturating_sub(RESERVED_MAPS)
        .min(MAX_DMA_MAPS + 1);
    let memfd =
        rustix::fs::memfd_create("nvmemu-test-map", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&memfd, SIZE).unwrap();
    let (mapped, err) = map_until_refused(&mut client, 0, Some(memfd.as_fd()));
    if budget <= MAX_DMA_MAPS {
        assert_eq!(err, Errno::NOMEM, "after {mapped} fd-backed maps");
        // The rest of the budget holds this process's other shared mappings (the
        // doorbell page): a handful.
        assert!(
            mapped < budget && mapped + 16 >= budget,
            "{mapped} fd-backed maps for a budget of {budget}"
        );
    } else {
        assert_eq!((mapped, err), (MAX_DMA_MAPS, Errno::NOSPC));
    }
    eprintln!("{mapped} fd-backed maps, then {err:?} (vm.max_map_count {max_map_count})");
    // Unmapping gives the budget back: one more fd-backed map fits, at a freed IOVA.
    unmap(&mut client, 3);
    map(&mut client, 3, Some(memfd.as_fd())).unwrap();
    unmap_all(&mut client);

    // Without fds: exactly max_dma_maps regions, then ENOSPC.
    let (mapped, err) = map_until_refused(&mut client, 0, None);
    assert_eq!((mapped, err), (MAX_DMA_MAPS, Errno::NOSPC));
    // The limit counts what is mapped now: one unmap makes room for one map.
    unmap(&mut client, 7);
    map(&mut client, 7, None).unwrap();
    assert_eq!(map(&mut client, mapped, None), Err(Errno::NOSPC));
    unmap_all(&mut client);

    // The same connection brings the controller up with our driver (its pool is now the
    // only map) and does verified I/O.
    let transport = VfioUserTransport::from_client(client).unwrap();
    let mut c = AttachedController::attach_with(Box::new(transport), common::opts(1)).unwrap();
    common::verified_io_on(&mut c);
    drop(c);
    common::assert_serves_next_client(&t);
}
