// SPDX-License-Identifier: Apache-2.0
//! Clients that keep what the server handed them after they leave: the BAR0 doorbell fd and
//! its mapping. Each client session gets doorbell memory of its own, so a former client's
//! stores reach nobody while the next client's I/O runs and verifies.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{map_doorbells, pattern};
use nvmemu_mem::MmapRegion;
use nvmemu_spec::{Lba, Nsid};

/// Connect, take BAR0's fd from REGION_INFO, map the doorbell page, disconnect: the
/// mapping (and the fd behind it) outlive the session.
fn leave_with_doorbells(t: &common::TestTarget) -> MmapRegion {
    let mut c = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    let (info, fd) = c.region_info(0).unwrap();
    let fd = fd.expect("BAR0 comes with its fd");
    map_doorbells(fd.as_fd(), info.file_offset)
}

/// Store into every admin and I/O queue doorbell of `page` until `stop`: tails and heads
/// that look valid to small queues, moving all the time.
fn scribble(page: MmapRegion, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut stores = 0u64;
        let mut v = 1u32;
        while !stop.load(Ordering::Relaxed) {
            for qid in 0..4u64 {
                page.store_release_u32(qid * 8, v % 16).unwrap();
                page.store_release_u32(qid * 8 + 4, (v + 3) % 16).unwrap();
                stores += 2;
            }
            v = v.wrapping_add(7);
            std::thread::yield_now();
        }
        stores
    })
}

#[test]
fn a_former_client_keeping_its_doorbell_mapping_cannot_reach_the_next_client() {
    let t = common::start_default();
    let stale = leave_with_doorbells(&t);
    // Before anyone else connects: a tail the former client stores is not the next one's.
    stale.store_release_u32(8, 9).unwrap();
    let (mut c, shared) = common::attach_shared(&t, 1);
    let sq1_tail = shared.with_client(|cl| {
        let mut b = [0u8; 4];
        cl.region_read(0, 0x1008, &mut b).unwrap();
        u32::from_le_bytes(b)
    });
    assert_ne!(
        sq1_tail, 9,
        "the next client's SQ 1 tail is the former client's store"
    );

    // The former client scribbles its old page all through the next client's verified I/O.
    let stop = Arc::new(AtomicBool::new(false));
    let scribbler = scribble(stale, stop.clone());
    let mut q = c.take_qpair().unwrap();
    let (wbuf, rbuf) = (c.alloc_dma(8192).unwrap(), c.alloc_dma(8192).unwrap());
    for round in 0..200u64 {
        let data = pattern(8192, round as u8);
        let lba = Lba(round * 16);
        wbuf.copy_from(0, &data).unwrap();
        q.write_blocking(Nsid(1), lba, 16, &wbuf).unwrap();
        rbuf.fill(0, 8192, 0xEE).unwrap();
        q.read_blocking(Nsid(1), lba, 16, &rbuf).unwrap();
        let mut back = vec![0u8; 8192];
        rbuf.copy_to(0, &mut back).unwrap();
        assert!(back == data, "round {round}: data read back differs");
    }
    // Every block written keeps its own round's data.
    for round in 0..200u64 {
        q.read_blocking(Nsid(1), Lba(round * 16), 16, &rbuf)
            .unwrap();
        let mut back = vec![0u8; 8192];
        rbuf.copy_to(0, &mut back).unwrap();
        assert!(back == pattern(8192, round as u8), "block of round {round}");
    }
    stop.store(true, Ordering::Relaxed);
    assert!(scribbler.join().unwrap() > 0, "the scribbler ran");
    drop(q);
    c.shutdown().unwrap();
    let errors = t
        .target
        .on_controller(t.id, |pc| pc.ctrl.stats().errors)
        .unwrap();
    assert_eq!(errors, 0, "commands the client never submitted ran");
}

/// The doorbell fd REGION_INFO hands out differs per session: a second session's page is
/// a new file, and the first session's page (still mapped) no longer changes with it.
#[test]
fn each_session_gets_its_own_doorbell_file() {
    let t = common::start_default();
    let first = leave_with_doorbells(&t);
    let second = leave_with_doorbells(&t);
    // Through the second session's page, a store the first one cannot see, and back.
    second.store_release_u32(0x10, 0xABCD).unwrap();
    assert_eq!(first.load_acquire_u32(0x10).unwrap(), 0);
    first.store_release_u32(0x18, 0x1234).unwrap();
    assert_eq!(second.load_acquire_u32(0x18).unwrap(), 0);
    common::assert_serves_next_client(&t);
}
