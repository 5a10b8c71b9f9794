// SPDX-License-Identifier: Apache-2.0
//! One client against its neighbours: whatever a hostile client does to its own controller,
//! an honest client of another controller keeps working and is never failed.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nvmemu_driver::{AttachedController, VfioUserTransport};
use nvmemu_spec::regs::{self, csts};
use nvmemu_spec::{DsmRange, Lba, Nsid};
use nvmemu_vfio_user::{Client, DmaUnmap, Errno};
use rustix::fs::MemfdFlags;

/// Blocks of the attacker's namespace: 64 MiB of 512-byte blocks.
const ATTACK_BLOCKS: u64 = 1 << 17;
/// Deallocates the attacker queues at once, each naming its whole namespace 256 times.
const ATTACK_COMMANDS: usize = 32;
/// The longest an honest operation may take meanwhile: generous for a shared machine, far
/// below one attack command done in one go (16 GiB of memset).
const HONEST_BOUND: Duration = Duration::from_secs(1);
/// Where the attacker's DMA regions go: far above the driver's pool.
const ATTACK_IOVA: u64 = 0x1000_0000_0000;

#[test]
fn deallocates_naming_the_namespace_256_times_do_not_stall_a_neighbour_on_the_same_poller() {
    // One poller: the attacker's controller and the honest one share it.
    let t = common::start(&[("malloc", 512, ATTACK_BLOCKS)]);
    let honest_dir = common::add_controller(&t);
    let transport = Arc::new(Mutex::new(
        VfioUserTransport::connect(&honest_dir.path().join("cntrl")).unwrap(),
    ));
    let mut honest =
        AttachedController::attach_with(Box::new(transport.clone()), common::opts(1)).unwrap();
    let mut hq = honest.take_qpair().unwrap();
    let hbuf = honest.alloc_dma(4096).unwrap();

    let mut attacker = common::attach(&t, 1);
    let mut aq = attacker.take_qpair().unwrap();
    let list = attacker.alloc_dma(4096).unwrap();
    // Raw: our driver refuses ranges of more than 65,536 blocks; the spec allows 2^32 - 1.
    let whole = DsmRange {
        attributes: 0,
        blocks: ATTACK_BLOCKS as u32,
        slba: 0,
    };
    for i in 0..256 {
        list.write_obj(16 * i, &whole).unwrap();
    }
    for token in 0..ATTACK_COMMANDS {
        let sqe = nvmemu_driver::sqe::deallocate(Nsid(1), 256);
        aq.submit_raw(sqe, Some((&list, 4096)), token as u64)
            .unwrap();
    }
    aq.ring().unwrap();

    // While the attack runs: verified I/O and a register read (a call through the honest
    // controller's poller mailbox), each within the bound.
    let mut done = 0usize;
    let mut rounds = 0u32;
    let start = Instant::now();
    while done < ATTACK_COMMANDS {
        assert!(
            start.elapsed() < common::DEADLINE,
            "the attack did not complete"
        );
        rounds += 1;
        let t0 = Instant::now();
        let data = common::pattern(4096, rounds as u8);
        hbuf.copy_from(0, &data).unwrap();
        hq.write_blocking(Nsid(1), Lba(64), 8, &hbuf).unwrap();
        hbuf.copy_from(0, &[0u8; 4096]).unwrap();
        hq.read_blocking(Nsid(1), Lba(64), 8, &hbuf).unwrap();
        let mut back = vec![0u8; 4096];
        hbuf.copy_to(0, &mut back).unwrap();
        assert!(back == data, "round {rounds}: data differs");
        let csts = common::read32(transport.lock().unwrap().client_mut(), regs::CSTS);
        assert_eq!(
            csts & csts::RDY,
            csts::RDY,
            "round {rounds}: CSTS {csts:#x}"
        );
        let took = t0.elapsed();
        assert!(took < HONEST_BOUND, "round {rounds} took {took:?}");
        aq.poll_completions(64, |token, r| {
            assert!(r.is_ok(), "attack command {token}: {r:?}");
            done += 1;
        })
        .unwrap();
    }
    // The attacker's controller was never failed: its next client works too.
    drop(aq);
    attacker.shutdown().unwrap();
    drop(attacker);
    common::assert_serves_next_client(&t);
    drop(hq);
    honest.shutdown().unwrap();
}

/// A client that maps all it can: one sparse 64 TiB memfd (which, mapped twice, would take
/// the process's whole address space), then small regions until refused. Its budget stops
/// it with the exact errno, and an honest client of another controller in the same process
/// still maps its memory and does verified I/O.
#[test]
fn a_client_mapping_all_it_can_is_stopped_by_its_own_budget_and_a_neighbour_still_maps() {
    let t = common::start_default();
    let honest_dir = common::add_controller(&t);
    let budget = nvmemu_device::ClientBudget::default();
    let mut attacker = Client::connect(&t.socket()).unwrap();

    let huge = rustix::fs::memfd_create("nvmemu-test-sparse", MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&huge, 64 << 40).unwrap();
    let map = |c: &mut Client, k: u64, size: u64, fd| {
        c.dma_map(&common::map_req(ATTACK_IOVA + (k << 41), size, 0), Some(fd))
            .map_err(|e| common::errno_of::<()>(Err(e)))
    };
    // Past the byte budget: ENOMEM, as the kernel's VFIO past the locked memory limit.
    assert_eq!(
        map(&mut attacker, 0, 64 << 40, huge.as_fd()),
        Err(Errno::NOMEM)
    );
    // Up to it is fine.
    map(&mut attacker, 1, budget.max_map_bytes, huge.as_fd()).unwrap();
    assert_eq!(map(&mut attacker, 2, 4096, huge.as_fd()), Err(Errno::NOMEM));
    attacker
        .dma_unmap(&DmaUnmap {
            flags: DmaUnmap::FLAG_ALL,
            iova: 0,
            size: 0,
        })
        .unwrap();

    // Small maps: exactly the budget's count, then ENOSPC.
    let small = rustix::fs::memfd_create("nvmemu-test-small", MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&small, 4096).unwrap();
    let mut mapped = 0u64;
    let err = loop {
        let req = common::map_req(ATTACK_IOVA + mapped * 0x2000, 4096, 0);
        match attacker.dma_map(&req, Some(small.as_fd())) {
            Ok(()) => mapped += 1,
            Err(e) => break common::errno_of::<()>(Err(e)),
        }
        assert!(mapped <= 65535, "no limit after {mapped} maps");
    };
    assert_eq!((mapped, err), (budget.max_maps as u64, Errno::NOSPC));

    // The attacker keeps its maps; the honest client maps its pool and does verified I/O.
    let mut honest = AttachedController::attach(honest_dir.path(), common::opts(1)).unwrap();
    common::verified_io_on(&mut honest);
    drop(attacker);
    common::assert_serves_next_client(&t);
}
