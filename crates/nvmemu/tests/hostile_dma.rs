// SPDX-License-Identifier: Apache-2.0
//! Hostile DMA mappings against the real target: overlapping and oversized maps, unmaps
//! while I/O is in flight, and memory the client shrinks under the server. Each gets its
//! exact errno or NVMe status, and afterwards the same server serves the next client.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Instant;

use common::{DATA_IOVA, HostMem, RawConn, assert_serves_next_client, errno_of, map_req, rw_sqe};
use nvmemu_spec::Status;
use nvmemu_spec::opcode::IoOpcode;
use nvmemu_spec::regs::csts;
use nvmemu_vfio_user::{DmaUnmap, Errno};

const DMA_MAP: u16 = 2;

// ---------------------------------------------------------------------------------------
// DMA maps.

#[test]
fn overlapping_dma_maps_get_eexist() {
    let t = common::start_default();
    let mut c = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    let mem = HostMem::new(2 << 20, 1 << 30);
    let fd = mem.fd.as_fd();
    c.dma_map(&map_req(1 << 30, 1 << 20, 0), Some(fd)).unwrap();
    for (iova, size) in [
        (1 << 30, 1 << 20),                   // identical
        ((1 << 30) + 4096, 4096),             // inside
        ((1 << 30) - 4096, 8192),             // straddles the start
        ((1 << 30) + (1 << 20) - 4096, 8192), // straddles the end
        ((1 << 30) - 4096, 2 << 20),          // covers it
    ] {
        let e = errno_of(c.dma_map(&map_req(iova, size, 0), Some(fd)));
        assert_eq!(e, Errno::EXIST, "{iova:#x}+{size:#x}");
    }
    // Also for a map without an fd.
    assert_eq!(
        errno_of(c.dma_map(&map_req(1 << 30, 4096, 0), None)),
        Errno::EXIST
    );
    // Adjacent is fine, and an exact unmap frees the range for a new map.
    c.dma_map(&map_req((1 << 30) + (1 << 20), 1 << 20, 1 << 20), Some(fd))
        .unwrap();
    c.dma_unmap(&DmaUnmap {
        flags: 0,
        iova: 1 << 30,
        size: 1 << 20,
    })
    .unwrap();
    c.dma_map(&map_req((1 << 30) + 4096, 4096, 0), Some(fd))
        .unwrap();
    // Unmapping part of a map is refused (the map stays: mapping over it still overlaps) ...
    let unmap = |iova, size| DmaUnmap {
        flags: 0,
        iova,
        size,
    };
    let e = errno_of(c.dma_unmap(&unmap((1 << 30) + 4096, 2048)));
    assert_eq!(e, Errno::INVAL);
    let e = errno_of(c.dma_map(&map_req((1 << 30) + 4096, 4096, 0), Some(fd)));
    assert_eq!(e, Errno::EXIST);
    // ... a range holding no map changes nothing, as with the kernel's VFIO (QEMU with a
    // virtual IOMMU sends those) ...
    c.dma_unmap(&unmap(1 << 30, 4096)).unwrap();
    let e = errno_of(c.dma_map(&map_req((1 << 30) + 4096, 4096, 0), Some(fd)));
    assert_eq!(e, Errno::EXIST);
    // ... and one holding whole maps removes them all: the range is free again.
    c.dma_unmap(&unmap(1 << 30, 4 << 20)).unwrap();
    c.dma_map(&map_req(1 << 30, 2 << 20, 0), Some(fd)).unwrap();
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn dma_maps_past_the_end_of_their_fd_are_refused() {
    let t = common::start_default();
    let mut c = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    let mem = HostMem::new(1 << 20, 1 << 30);
    let fd = mem.fd.as_fd();
    for (size, offset) in [
        (2 << 20, 0),
        (1 << 20, 4096),
        (4096, 1 << 20),
        (4096, u64::MAX - 4096),
    ] {
        let e = errno_of(c.dma_map(&map_req(1 << 30, size, offset), Some(fd)));
        assert_eq!(e, Errno::INVAL, "size {size:#x} at offset {offset:#x}");
    }
    // IOVA + size wrapping, zero size, unknown flags.
    assert_eq!(
        errno_of(c.dma_map(&map_req(u64::MAX - 4095, 8192, 0), Some(fd))),
        Errno::INVAL
    );
    assert_eq!(
        errno_of(c.dma_map(&map_req(1 << 30, 0, 0), Some(fd))),
        Errno::INVAL
    );
    let mut bad = map_req(1 << 30, 4096, 0);
    bad.flags |= 1 << 7;
    assert_eq!(errno_of(c.dma_map(&bad, Some(fd))), Errno::INVAL);
    // The fd itself is fine: the exact size maps.
    c.dma_map(&map_req(1 << 30, 1 << 20, 0), Some(fd)).unwrap();
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn a_dma_map_the_process_cannot_map_gets_enomem() {
    let t = common::start_default();
    let mut c = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    // A sparse 128 TiB memfd: the file has the size, but no process has that much address
    // space, so the server's mmap fails with ENOMEM, which is what the client is told.
    let fd = rustix::fs::memfd_create("huge", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&fd, 1 << 47).unwrap();
    assert_eq!(
        errno_of(c.dma_map(&map_req(1 << 30, 1 << 47, 0), Some(fd.as_fd()))),
        Errno::NOMEM
    );
    // The same client can still map what fits.
    let mem = HostMem::new(1 << 20, 1 << 30);
    c.dma_map(&map_req(1 << 30, 1 << 20, 0), Some(mem.fd.as_fd()))
        .unwrap();
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn dma_map_with_two_fds_is_refused() {
    let t = common::start_default();
    let mut c = RawConn::connect_negotiated(&t);
    let a = HostMem::new(4096, 0);
    let b = HostMem::new(4096, 0);
    let mut p = 32u32.to_le_bytes().to_vec();
    p.extend_from_slice(&3u32.to_le_bytes());
    p.extend_from_slice(&0u64.to_le_bytes());
    p.extend_from_slice(&(1u64 << 30).to_le_bytes());
    p.extend_from_slice(&4096u64.to_le_bytes());
    c.send(DMA_MAP, 0, &p, &[a.fd.as_fd(), b.fd.as_fd()]);
    assert_eq!(c.recv().errno(), Errno::INVAL);
    drop(c);
    assert_serves_next_client(&t);
}

/// Command `i` of a stream alternating 4 KiB Writes and Reads over the first MiB at
/// [`DATA_IOVA`] and the first 4 MiB of NSID 1.
fn mixed_io(q: &mut nvmemu_driver::IoQpair, i: u64) -> nvmemu_spec::Cqe {
    let op = if i.is_multiple_of(2) {
        IoOpcode::Write
    } else {
        IoOpcode::Read
    };
    let prp = DATA_IOVA + (i % 256) * 4096;
    q.execute_raw(rw_sqe(op, i % 1024 * 8, 8, prp), None)
        .unwrap()
}

// ---------------------------------------------------------------------------------------
// DMA_UNMAP while I/O is in flight (vfio-user DMA_UNMAP: the server drops every reference
// before it replies).

#[test]
fn unmapping_the_data_region_during_io_replies_promptly_and_fails_later_commands() {
    let t = common::start_default();
    let (mut c, shared) = common::attach_shared(&t, 1);
    let data = HostMem::new(1 << 20, DATA_IOVA);
    shared.with_client(|cl| data.dma_map(cl).unwrap());
    let mut q = c.take_qpair().unwrap();
    let ok = Arc::new(AtomicU32::new(0));
    let unmapped = Arc::new(AtomicBool::new(false));
    let io = {
        let (ok, unmapped) = (ok.clone(), unmapped.clone());
        std::thread::spawn(move || {
            // Keep writing and reading 4 KiB pieces of the data region. Once the unmap has
            // replied, every command submitted afterwards must fail with Data Transfer Error.
            let mut after = 0u32;
            let start = Instant::now();
            let mut i = 0u64;
            while after < 50 {
                assert!(start.elapsed() < common::DEADLINE, "I/O loop stuck");
                let was_unmapped = unmapped.load(Ordering::Acquire);
                let cqe = mixed_io(&mut q, i);
                if was_unmapped {
                    assert_eq!(
                        cqe.status(),
                        Status::DATA_TRANSFER_ERROR,
                        "command {i} after unmap"
                    );
                    after += 1;
                } else if cqe.status() == Status::SUCCESS {
                    ok.fetch_add(1, Ordering::Release);
                } else {
                    assert_eq!(cqe.status(), Status::DATA_TRANSFER_ERROR, "command {i}");
                }
                i += 1;
            }
            q
        })
    };
    common::wait_for("I/O in flight", || {
        (ok.load(Ordering::Acquire) >= 20).then_some(())
    });
    // The reply arrives while the I/O thread keeps submitting: the server does not wait for
    // the queues to go idle (a hang here trips the I/O thread's deadline).
    shared.with_client(|cl| {
        cl.dma_unmap(&DmaUnmap {
            flags: 0,
            iova: DATA_IOVA,
            size: 1 << 20,
        })
        .unwrap();
    });
    unmapped.store(true, Ordering::Release);
    let q = io.join().unwrap();
    // The queues live in the driver's pool, which is still mapped: not fatal.
    assert_eq!(shared.csts() & csts::CFS, 0);
    drop(q);
    c.shutdown().unwrap();
    drop(c);
    drop(shared);
    assert_serves_next_client(&t);
}

#[test]
fn unmapping_queue_memory_during_io_pauses_the_queues_until_it_is_mapped_again() {
    let t = common::start_default();
    let (mut c, shared) = common::attach_shared(&t, 1);
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    buf.fill(0, 4096, 0x5A).unwrap();
    let (iova, size) = (nvmemu_driver::DMA_POOL_IOVA, c.dma_pool().size());
    // DMA_UNMAP replies (with success) although the queues it removes are live.
    shared.with_client(|cl| {
        cl.dma_unmap(&DmaUnmap {
            flags: 0,
            iova,
            size,
        })
        .unwrap()
    });
    // Commands rung while the pool (queues + data) is unmapped are not taken.
    for k in 0..8 {
        q.submit_write(nvmemu_spec::Nsid(1), nvmemu_spec::Lba(k * 8), 8, &buf, k)
            .unwrap();
    }
    q.ring().unwrap();
    // A register round trip runs between two poller passes: several passes have seen the
    // doorbell by the time it returns, and none took a command.
    for _ in 0..3 {
        assert_eq!(shared.csts() & csts::CFS, 0, "not fatal");
    }
    let mut seen = 0;
    q.poll_completions(64, |_, _| seen += 1).unwrap();
    assert_eq!(seen, 0, "no completion while the queues are unmapped");
    // The same memory mapped again: the queued writes run and complete, none lost.
    shared.with_client(|cl| {
        cl.dma_map(
            &nvmemu_vfio_user::DmaMap {
                flags: 3,
                offset: 0,
                iova,
                size,
            },
            Some(c.dma_pool().fd()),
        )
        .unwrap()
    });
    let mut done = 0u64;
    common::wait_for("the paused writes to complete", || {
        q.poll_completions(64, |_, r| {
            r.unwrap();
            done += 1;
        })
        .unwrap();
        (done == 8).then_some(())
    });
    let rbuf = c.alloc_dma(4096).unwrap();
    q.read_blocking(nvmemu_spec::Nsid(1), nvmemu_spec::Lba(56), 8, &rbuf)
        .unwrap();
    let mut back = vec![0u8; 4096];
    rbuf.copy_to(0, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0x5A));
    drop(q);
    c.shutdown().unwrap();
    drop(c);
    drop(shared);
    assert_serves_next_client(&t);
}

#[test]
fn unaligned_dma_map_offsets_are_honoured_exactly() {
    let t = common::start_default();
    let (mut c, shared) = common::attach_shared(&t, 1);
    let mem = HostMem::new(1 << 20, 0);
    let marker = common::pattern(4096, 0x33);
    mem.map.copy_from(0x100, &marker).unwrap();
    // fd offset 0x100 (not page aligned): the server maps the page below and the device sees
    // fd byte 0x100 at DATA_IOVA, as libvfio-user does.
    shared.with_client(|cl| {
        cl.dma_map(&map_req(DATA_IOVA, 0x2000, 0x100), Some(mem.fd.as_fd()))
            .unwrap()
    });
    let mut q = c.take_qpair().unwrap();
    let cqe = q
        .execute_raw(rw_sqe(IoOpcode::Write, 0, 8, DATA_IOVA), None)
        .unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
    let back = c.alloc_dma(4096).unwrap();
    q.read_blocking(nvmemu_spec::Nsid(1), nvmemu_spec::Lba(0), 8, &back)
        .unwrap();
    let mut got = vec![0u8; 4096];
    back.copy_to(0, &mut got).unwrap();
    assert!(got == marker, "device read the wrong bytes of the fd");
    // The map ends 0x2000 bytes later, not at a page boundary of the fd.
    let cqe = q
        .execute_raw(rw_sqe(IoOpcode::Write, 0, 1, DATA_IOVA + 0x2000), None)
        .unwrap();
    assert_eq!(cqe.status(), Status::DATA_TRANSFER_ERROR);
    drop(q);
    c.shutdown().unwrap();
    drop(c);
    drop(shared);
    assert_serves_next_client(&t);
}

#[test]
fn client_vanishing_with_io_in_flight_leaves_the_server_serving() {
    let t = common::start_default();
    let (mut c, shared) = common::attach_shared(&t, 1);
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(4096).unwrap();
    for k in 0..32 {
        q.submit_write(nvmemu_spec::Nsid(1), nvmemu_spec::Lba(k * 8), 8, &buf, k)
            .unwrap();
    }
    q.ring().unwrap();
    // Hang up without any shutdown: no queue deletion, no unmap.
    shared.with_client(|cl| {
        rustix::net::shutdown(cl.stream_fd(), rustix::net::Shutdown::Both).unwrap()
    });
    std::mem::forget(q);
    std::mem::forget(c);
    drop(shared);
    assert_serves_next_client(&t);
}

// ---------------------------------------------------------------------------------------
// Memory that vanishes under the server: a client shrinks a file it DMA-mapped, or the
// doorbell memfd REGION_INFO gave it. The server never takes SIGBUS.

#[test]
fn shrinking_a_dma_mapped_memfd_under_io_fails_that_command_and_the_server_serves_on() {
    shrink_under_io(HostMem::new(1 << 20, DATA_IOVA));
}

/// The same with a hugetlbfs memfd (MFD_HUGETLB, 2 MiB pages: what SPDK's clients map): the
/// recovery replaces the whole mapping (whole huge pages) in one mmap.
#[test]
fn shrinking_a_dma_mapped_hugetlb_memfd_under_io_fails_that_command_and_the_server_serves_on() {
    match HostMem::hugetlb(2 << 20, DATA_IOVA) {
        Ok(data) => shrink_under_io(data),
        Err(why) => eprintln!("SKIPPED: no hugetlbfs memfd to test with: {why}"),
    }
}

/// Data I/O into `data` until its file is truncated to nothing under the server: the
/// command that touched the vanished pages fails with Data Transfer Error, the controller
/// goes fatal, another controller on the same poller serves on, and so does this one for
/// the next client.
fn shrink_under_io(data: HostMem) {
    let t = common::start_default();
    // A second controller on the same (only) poller, with its client attached throughout.
    let dir2 = common::add_controller(&t);
    let mut other =
        nvmemu_driver::AttachedController::attach(dir2.path(), common::opts(1)).unwrap();
    let (mut c, shared) = common::attach_shared(&t, 1);
    shared.with_client(|cl| data.dma_map(cl).unwrap());
    let mut q = c.take_qpair().unwrap();
    let ok = Arc::new(AtomicU32::new(0));
    let io = {
        let ok = ok.clone();
        std::thread::spawn(move || {
            // Write and read 4 KiB pieces of the data memfd until a command fails: the one
            // whose data vanished, with Data Transfer Error. The controller is then fatal
            // and takes nothing more, so the loop must stop there.
            let start = Instant::now();
            for i in 0u64.. {
                assert!(start.elapsed() < common::DEADLINE, "no command failed");
                let cqe = mixed_io(&mut q, i);
                if cqe.status() != Status::SUCCESS {
                    return cqe.status();
                }
                ok.fetch_add(1, Ordering::Release);
            }
            unreachable!()
        })
    };
    common::wait_for("I/O in flight", || {
        (ok.load(Ordering::Acquire) >= 20).then_some(())
    });
    rustix::fs::ftruncate(&data.fd, 0).unwrap();
    assert_eq!(io.join().unwrap(), Status::DATA_TRANSFER_ERROR);
    let st = shared.csts();
    assert_eq!(st & csts::CFS, csts::CFS, "controller fatal: {st:#x}");
    let faults = t
        .target
        .on_controller(t.id, |pc| pc.ctrl.stats().memory_faults)
        .unwrap();
    assert_eq!(faults, 1);
    // The other controller on that poller never noticed.
    common::verified_io_on(&mut other);
    drop(c);
    drop(shared);
    assert_serves_next_client(&t);
}

#[test]
fn shrinking_the_memfd_holding_a_queue_makes_the_controller_fatal() {
    let t = common::start_default();
    let mut h = common::RawHost::connect(&t);
    let mut q = h.create_io_pair(1, false, 0);
    h.verified_io(&mut q, 8, &common::pattern(4096, 3));
    // Keep the admin queue (first 8 KiB), take away I/O queue 1 and the data area.
    rustix::fs::ftruncate(&h.mem.fd, 0x2000).unwrap();
    // The SQE lands in a page this process no longer has either (recovered here too): the
    // server reads zeros where the SQE was, its access faults, and no completion can reach
    // the host; the controller reports Controller Fatal Status.
    q.submit(
        &h.mem.map,
        &h.db,
        rw_sqe(IoOpcode::Write, 0, 8, h.mem.iova_of(common::RawHost::DATA)),
    );
    common::wait_csts(&mut h.client, "CSTS.CFS", |v| v & csts::CFS != 0);
    // Admin commands stop too (the controller is fatal until reset), and a reset recovers.
    h.client.reset().unwrap();
    drop(h);
    assert_serves_next_client(&t);
}

#[test]
fn the_doorbell_memfd_cannot_be_resized_by_the_client() {
    let t = common::start_default();
    let mut client = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    let (_, fd) = client.region_info(0).unwrap();
    let fd = fd.expect("BAR0 comes with its fd");
    for size in [0, 0x1000, 1 << 30] {
        assert_eq!(
            rustix::fs::ftruncate(&fd, size),
            Err(Errno::PERM),
            "ftruncate to {size:#x}"
        );
    }
    drop(client);
    // The server's own doorbell page is intact: the next client's I/O rings through it.
    assert_serves_next_client(&t);
}
