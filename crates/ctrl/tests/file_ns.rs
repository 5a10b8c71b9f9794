// SPDX-License-Identifier: Apache-2.0
//! File-backed namespaces: data moves between the file and client memory through the
//! controller's io_uring; Flush reaches the file, Write Zeroes and Deallocate punch holes, and a failing
//! file gives the command QEMU's status.

#![allow(clippy::cast_possible_truncation)] // test data and SQE fields built from small values
#![allow(clippy::unwrap_used)]

mod file_common;

use std::os::fd::AsFd;
use std::path::Path;

use file_common::{FILE_BYTES, host_on, new_file, run};
use nvmemu_ctrl::test_utils::{TestHost, layout, pattern, rw, sqe};
use nvmemu_spec::{DataPtr, Sqe, Status};

fn write(h: &mut TestHost, slba: u64, data: &[u8], host_off: u64) -> Status {
    h.mem.write(host_off, data);
    let dptr = h.prps(host_off, data.len() as u64);
    run(h, rw(0x01, 1, slba, (data.len() / 512) as u32, dptr)).status()
}

fn read(h: &mut TestHost, slba: u64, len: usize, host_off: u64) -> (Status, Vec<u8>) {
    h.mem.write(host_off, &vec![0xEEu8; len]);
    let dptr = h.prps(host_off, len as u64);
    let s = run(h, rw(0x02, 1, slba, (len / 512) as u32, dptr)).status();
    (s, h.mem.read_vec(host_off, len))
}

fn write_zeroes(slba: u64, blocks: u32) -> Sqe {
    Sqe {
        nsid: 1,
        cdw10: slba as u32,
        cdw12: blocks - 1,
        ..sqe(0x08, DataPtr::Prp { prp1: 0, prp2: 0 })
    }
}

/// Bytes the file system has allocated to the file.
fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn data_goes_to_the_file_and_comes_back_aligned_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    data_round_trip(host_on(&path, false), &path);
}

/// The same on the worker threads that stand in where io_uring is not allowed.
#[test]
fn worker_threads_move_the_same_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    let mut h = host_on(&path, false);
    h.force_file_worker_threads();
    data_round_trip(h, &path);
}

fn data_round_trip(mut h: TestHost, path: &Path) {
    let data = pattern(16384, 3);
    // Page aligned (O_DIRECT where the file system allows), then at an odd dword offset
    // in client memory (never O_DIRECT): both reach the file.
    assert_eq!(write(&mut h, 8, &data, layout::DATA), Status::SUCCESS);
    let odd = pattern(4096, 9);
    assert_eq!(
        write(&mut h, 100, &odd, layout::DATA + 0x10004),
        Status::SUCCESS
    );
    let file = std::fs::read(path).unwrap();
    assert_eq!(&file[8 * 512..8 * 512 + 16384], &data[..]);
    assert_eq!(&file[100 * 512..100 * 512 + 4096], &odd[..]);
    // Written behind the controller's back, read through it.
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(512 * 1000)).unwrap();
    std::io::Write::write_all(&mut f, &pattern(1024, 5)).unwrap();
    drop(f);
    assert_eq!(
        read(&mut h, 1000, 1024, layout::DATA + 0x20000),
        (Status::SUCCESS, pattern(1024, 5))
    );
    assert_eq!(read(&mut h, 8, 16384, layout::DATA + 0x30004).1, data);
    let ns = h.ctrl.namespaces().next().unwrap();
    let s = ns.bdev().stats().snapshot();
    assert_eq!((s.num_write_ops, s.bytes_written), (2, 16384 + 4096));
    assert_eq!((s.num_read_ops, s.bytes_read), (2, 1024 + 16384));
    let flush = Sqe {
        nsid: 1,
        ..sqe(0x00, DataPtr::Prp { prp1: 0, prp2: 0 })
    };
    assert_eq!(run(&mut h, flush).status(), Status::SUCCESS);
    assert_eq!(ns_flushes(&h), 1);
}

fn ns_flushes(h: &TestHost) -> u64 {
    let ns = h.ctrl.namespaces().next().unwrap();
    ns.bdev().stats().snapshot().num_flush_ops
}

#[test]
fn write_zeroes_and_deallocate_punch_holes_that_read_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    let mut h = host_on(&path, false);
    assert_eq!(
        write(&mut h, 0, &pattern(256 << 10, 1), layout::DATA),
        Status::SUCCESS
    );
    let full = allocated(&path);
    assert!(full >= 256 << 10, "{full}");
    assert_eq!(run(&mut h, write_zeroes(0, 256)).status(), Status::SUCCESS);
    assert_eq!(allocated(&path), full - (128 << 10));
    assert_eq!(
        read(&mut h, 0, 128 << 10, layout::DATA).1,
        vec![0u8; 128 << 10]
    );
    // Dataset Management, Deallocate, of blocks 256..512.
    h.mem.write(
        layout::LISTS,
        &[0u32, 256, 256, 0].map(u32::to_le_bytes).concat(),
    );
    let dsm = Sqe {
        nsid: 1,
        cdw10: 0,
        cdw11: 1 << 2,
        ..sqe(
            0x09,
            DataPtr::Prp {
                prp1: h.mem.iova(layout::LISTS),
                prp2: 0,
            },
        )
    };
    assert_eq!(run(&mut h, dsm).status(), Status::SUCCESS);
    assert_eq!(allocated(&path), full - (256 << 10));
    let hole = rustix::fs::seek(
        std::fs::File::open(&path).unwrap().as_fd(),
        rustix::fs::SeekFrom::Hole(0),
    )
    .unwrap();
    assert_eq!(hole, 0);
    assert_eq!(read(&mut h, 256, 4096, layout::DATA).1, vec![0u8; 4096]);
}

#[test]
fn a_read_only_file_refuses_writes_and_serves_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = new_file(dir.path());
    std::fs::write(&path, pattern(FILE_BYTES as usize, 4)).unwrap();
    let mut h = host_on(&path, true);
    assert_eq!(
        write(&mut h, 0, &[1u8; 512], layout::DATA),
        Status::NAMESPACE_WRITE_PROTECTED
    );
    assert_eq!(
        run(&mut h, write_zeroes(0, 1)).status(),
        Status::NAMESPACE_WRITE_PROTECTED
    );
    assert_eq!(
        read(&mut h, 0, 512, layout::DATA).1,
        pattern(FILE_BYTES as usize, 4)[..512]
    );
}

/// A file on a 64 KiB tmpfs: a write past what the file system has gives ENOSPC, which
/// the host sees as Write Fault; what fits still succeeds. Needs root to mount.
#[test]
fn a_full_file_system_is_a_write_fault() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("cannot mount a tmpfs here (not root?); skipped");
        return;
    }
    let outcome = std::panic::catch_unwind(|| {
        let path = new_file(&mnt);
        let mut h = host_on(&path, false);
        assert_eq!(
            write(&mut h, 0, &pattern(32 << 10, 2), layout::DATA),
            Status::SUCCESS
        );
        assert_eq!(
            write(&mut h, 512, &pattern(128 << 10, 2), layout::DATA),
            Status::WRITE_FAULT
        );
        assert_eq!(
            read(&mut h, 0, 32 << 10, layout::DATA).1,
            pattern(32 << 10, 2)
        );
    });
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    outcome.unwrap();
}
