// SPDX-License-Identifier: Apache-2.0
//! Tests of the block device's geometry, operations and accounting.

use std::os::fd::{AsFd, OwnedFd};

use nvmemu_mem::{Protection, create_memfd};

use std::sync::Arc;

use super::*;
use crate::{BdevChannel, BdevErrorKind, BdevStatsSnapshot, Started};

/// A client-memory buffer: a memfd mapped twice, like the target and the driver see it.
struct Buf {
    _fd: OwnedFd,
    target: MmapRegion,
    host: MmapRegion,
}

fn buf(size: u64) -> Buf {
    let fd = create_memfd("bdev-test", size, false).unwrap();
    let target = MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite).unwrap();
    let host = MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite).unwrap();
    Buf {
        _fd: fd,
        target,
        host,
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| u8::try_from(i % 251).unwrap() ^ seed)
        .collect()
}

/// An I/O channel on a new malloc bdev.
fn malloc(block_size: u32, num_blocks: u64) -> BdevChannel {
    Arc::new(Bdev::malloc("m", block_size, num_blocks).unwrap()).channel()
}

fn read_back(b: &BdevChannel, offset: u64, len: usize) -> Vec<u8> {
    let out = buf(len as u64);
    b.read(offset, &out.target, 0, len as u64).unwrap();
    let mut v = vec![0u8; len];
    out.host.copy_to(0, &mut v).unwrap();
    v
}

#[test]
fn bdev_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Bdev>();
}

#[test]
fn geometry_is_validated() {
    for bs in [512u32, 1024, 4096, 65536] {
        let b = Bdev::malloc("m", bs, 8).unwrap();
        assert_eq!(b.size_bytes(), u64::from(bs) * 8);
    }
    for (bs, n) in [
        (0u32, 8u64),
        (256, 8),
        (520, 8),
        (131_072, 8),
        (4096, 0),
        (65536, u64::MAX),
    ] {
        for r in [Bdev::malloc("m", bs, n), Bdev::null("n", bs, n)] {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), BdevErrorKind::InvalidGeometry, "{bs} x {n}");
            assert!(matches!(
                e,
                BdevError::InvalidGeometry { block_size, num_blocks } if block_size == bs && num_blocks == n
            ));
        }
    }
}

#[test]
fn accessors_report_creation_parameters() {
    let b = Bdev::malloc("Malloc0", 512, 100).unwrap();
    assert_eq!(
        (b.name(), b.kind(), b.block_size(), b.num_blocks()),
        ("Malloc0", BdevKind::Malloc, 512, 100)
    );
    assert_eq!(b.kind().product_name(), "Malloc disk");
    let n = Bdev::null("Null0", 4096, 1 << 40).unwrap();
    assert_eq!((n.kind(), n.size_bytes()), (BdevKind::Null, 1 << 52));
}

#[test]
fn malloc_write_then_read_back() {
    let b = malloc(512, 64);
    let src = buf(8192);
    let data = pattern(4096, 0x11);
    src.host.copy_from(100, &data).unwrap();
    b.write(1024, &src.target, 100, 4096).unwrap();
    assert_eq!(read_back(&b, 1024, 4096), data);
    // Unaligned sub-range of what was written.
    assert_eq!(read_back(&b, 1025, 10), data[1..11]);
    // Unwritten blocks around it read zero.
    assert_eq!(read_back(&b, 0, 1024), vec![0u8; 1024]);
    assert_eq!(
        read_back(&b, 5120, 64 * 512 - 5120),
        vec![0u8; 64 * 512 - 5120]
    );
    let s = b.bdev().stats().snapshot();
    assert_eq!((s.bytes_written, s.num_write_ops), (4096, 1));
    assert_eq!(s.num_read_ops, 4);
}

/// An I/O channel on a new malloc bdev backed as asked.
fn malloc_backed(block_size: u32, num_blocks: u64, backing: MallocBacking) -> BdevChannel {
    let b = Bdev::malloc_with("m", block_size, num_blocks, backing, &|_| {});
    Arc::new(b.unwrap()).channel()
}

const BACKINGS: [MallocBacking; 2] = [MallocBacking::Populated, MallocBacking::Lazy];

#[test]
fn write_zeroes_small_and_large_read_zero_in_both_modes() {
    for backing in BACKINGS {
        let b = malloc_backed(512, 512, backing);
        let size = b.bdev().size_bytes();
        let src = buf(size);
        src.host.fill(0, size, 0xee).unwrap();
        b.write(0, &src.target, 0, size).unwrap();
        // Small: fill.
        b.write_zeroes(512, 1024).unwrap();
        // Large, unaligned: lazy discards with partial pages zero-filled, backed fills.
        b.write_zeroes(10_240 + 100, WRITE_ZEROES_DISCARD_THRESHOLD + 4000)
            .unwrap();
        let all = read_back(&b, 0, usize::try_from(size).unwrap());
        for (i, &byte) in all.iter().enumerate() {
            let i = i as u64;
            let zero = (512..1536).contains(&i)
                || (10_340..10_340 + WRITE_ZEROES_DISCARD_THRESHOLD + 4000).contains(&i);
            assert_eq!(byte, if zero { 0 } else { 0xee }, "{backing:?}: byte {i}");
        }
        assert_eq!(b.bdev().stats().snapshot().num_write_zeroes_ops, 2);
    }
}

#[test]
fn deallocate_reads_zero_and_the_range_can_be_rewritten_in_both_modes() {
    for backing in BACKINGS {
        let b = malloc_backed(4096, 64, backing);
        let src = buf(64 * 4096);
        src.host.fill(0, 64 * 4096, 0x77).unwrap();
        b.write(0, &src.target, 0, 64 * 4096).unwrap();
        b.deallocate(4096, 16 * 4096).unwrap();
        assert_eq!(read_back(&b, 4096, 16 * 4096), vec![0u8; 16 * 4096]);
        assert_eq!(read_back(&b, 0, 4096), vec![0x77u8; 4096]);
        assert_eq!(read_back(&b, 17 * 4096, 4096), vec![0x77u8; 4096]);
        b.write(4096, &src.target, 0, 4096).unwrap();
        assert_eq!(read_back(&b, 4096, 4096), vec![0x77u8; 4096]);
        let s = b.bdev().stats().snapshot();
        assert_eq!((s.bytes_unmapped, s.num_unmap_ops), (16 * 4096, 1));
    }
}

#[test]
fn a_backed_bdev_keeps_its_memory_through_deallocate_and_a_lazy_one_gives_it_back() {
    let size = 16u64 << 20;
    for backing in BACKINGS {
        let b = malloc_backed(4096, size / 4096, backing);
        let src = buf(size);
        src.host.fill(0, size, 0x33).unwrap();
        b.write(0, &src.target, 0, size).unwrap();
        b.deallocate(0, size).unwrap();
        b.write_zeroes(0, size).unwrap();
        assert_eq!(read_back(&b, 0, 4096), vec![0u8; 4096]);
        let m = b.bdev().memory().unwrap();
        assert_eq!(m.backing, backing);
        let resident = m.residency.unwrap().resident_bytes;
        match backing {
            MallocBacking::Lazy => assert!(resident < size / 4, "{m:?}"),
            _ => assert!(resident >= size, "{m:?}"),
        }
    }
    assert!(Bdev::null("n", 512, 8).unwrap().memory().is_none());
}

#[test]
fn compare_true_and_false() {
    let b = malloc(512, 8);
    let src = buf(4096);
    let data = pattern(1024, 3);
    src.host.copy_from(0, &data).unwrap();
    b.write(512, &src.target, 0, 1024).unwrap();
    assert!(b.compare(512, &src.target, 0, 1024).unwrap());
    src.host.write_obj(1023, &(data[1023] ^ 1)).unwrap();
    assert!(!b.compare(512, &src.target, 0, 1024).unwrap());
    assert!(b.compare(512, &src.target, 0, 1023).unwrap());
    // Unwritten blocks compare equal to zeroes only.
    assert!(b.compare(2048, &src.target, 2048, 1024).unwrap());
    assert!(!b.compare(2048, &src.target, 0, 1024).unwrap());
    assert_eq!(b.bdev().stats().snapshot().num_compare_ops, 5);
}

#[test]
fn an_untimed_bdev_counts_operations_but_not_their_latency() {
    let b = Arc::new(Bdev::null("n", 512, 1 << 20).unwrap()).channel();
    let io = buf(4096);
    let ops = |b: &BdevChannel| {
        b.read(0, &io.target, 0, 4096).unwrap();
        b.write(0, &io.target, 0, 4096).unwrap();
        b.deallocate(0, 4096).unwrap();
    };
    let lat = |b: &BdevChannel| {
        let s = b.bdev().stats().snapshot();
        [s.read_latency, s.write_latency, s.unmap_latency]
    };
    ops(&b);
    let s = b.bdev().stats().snapshot();
    assert_eq!(
        (s.num_read_ops, s.num_write_ops, s.num_unmap_ops),
        (1, 1, 1)
    );
    assert_eq!(lat(&b), [Default::default(); 3], "off by default");
    b.bdev().set_timed(true);
    ops(&b);
    let timed = lat(&b);
    if nvmemu_mem::global_clock().is_tsc() {
        assert!(timed.iter().all(|l| l.sum_ns > 0), "{timed:?}");
    }
    b.bdev().set_timed(false);
    ops(&b);
    assert_eq!(lat(&b), timed, "off again: nothing more recorded");
    assert_eq!(b.bdev().stats().snapshot().num_read_ops, 3);
}

#[test]
fn a_caller_that_times_the_channel_takes_its_latency_counting_over() {
    let b = Arc::new(Bdev::null("n", 512, 1 << 20).unwrap()).channel();
    let io = buf(4096);
    let read_latency = |b: &BdevChannel| b.bdev().stats().snapshot().read_latency;
    b.bdev().set_timed(true);
    b.set_timed_by_caller(true);
    b.read(0, &io.target, 0, 4096).unwrap();
    assert_eq!(
        read_latency(&b),
        Default::default(),
        "no reading of its own"
    );
    let clock = nvmemu_mem::global_clock();
    b.record_latency(BdevOp::Read, 3000);
    b.record_latency(BdevOp::Flush, 1_000_000);
    let l = read_latency(&b);
    if clock.is_tsc() {
        let ns = clock.ticks_to_ns(3000).max(1);
        assert_eq!((l.sum_ns, l.min_ns, l.max_ns), (ns, ns, ns));
    }
    // The bdev's switch still rules: off, what the caller hands over is not counted.
    b.bdev().set_timed(false);
    b.record_latency(BdevOp::Read, 9000);
    assert_eq!(read_latency(&b), l);
    // Given back: the channel times its own operations again.
    b.bdev().set_timed(true);
    b.set_timed_by_caller(false);
    b.read(0, &io.target, 0, 4096).unwrap();
    if clock.is_tsc() {
        assert!(read_latency(&b).sum_ns > l.sum_ns);
    }
}

#[test]
fn an_operation_run_outside_the_channel_is_timed_by_it_only_when_it_would_time_its_own() {
    let b = Arc::new(Bdev::null("n", 512, 1 << 20).unwrap()).channel();
    let latency = |b: &BdevChannel| {
        let s = b.bdev().stats().snapshot();
        [s.read_latency, s.write_latency, s.unmap_latency]
    };
    // Untimed: no reading, counted without latency.
    assert!(!b.begin(BdevOp::Read).is_timed());
    b.count(BdevOp::Read, 4096, Started::UNTIMED);
    assert_eq!(b.bdev().stats().snapshot().num_read_ops, 1);
    b.bdev().set_timed(true);
    // Only the operations with latency counters are clocked.
    assert!(!b.begin(BdevOp::Flush).is_timed());
    assert!(!b.begin(BdevOp::Compare).is_timed());
    for op in [BdevOp::Read, BdevOp::Write, BdevOp::Deallocate] {
        let t0 = b.begin(op);
        assert!(t0.is_timed(), "{op:?}");
        b.count(op, 512, t0);
    }
    let timed = latency(&b);
    if nvmemu_mem::global_clock().is_tsc() {
        assert!(timed.iter().all(|l| l.sum_ns > 0), "{timed:?}");
    }
    // A caller that times the channel records the latency itself: none here.
    b.set_timed_by_caller(true);
    assert!(!b.begin(BdevOp::Read).is_timed());
    b.count(BdevOp::Read, 512, Started::UNTIMED);
    assert_eq!(latency(&b), timed);
    let s = b.bdev().stats().snapshot();
    assert_eq!(
        (s.num_read_ops, s.num_write_ops, s.num_unmap_ops),
        (3, 1, 1)
    );
}

#[test]
fn null_reads_zeroes_drops_writes_and_compares_against_zero() {
    let b = Arc::new(Bdev::null("n", 512, 1 << 30).unwrap()).channel();
    b.bdev().set_timed(true);
    let io = buf(8192);
    io.host.fill(0, 8192, 0x5a).unwrap();
    b.write(0, &io.target, 0, 4096).unwrap();
    assert!(!b.compare(0, &io.target, 0, 4096).unwrap());
    b.read(0, &io.target, 0, 4096).unwrap();
    let mut v = vec![0xffu8; 8192];
    io.host.copy_to(0, &mut v).unwrap();
    assert_eq!(&v[..4096], &[0u8; 4096][..]);
    assert_eq!(
        &v[4096..],
        &[0x5au8; 4096][..],
        "only the read range is zeroed"
    );
    assert!(b.compare(0, &io.target, 0, 4096).unwrap());
    b.write_zeroes(0, 1 << 20).unwrap();
    b.deallocate(0, 1 << 20).unwrap();
    b.flush().unwrap();
    // The buffer range is still checked when the data is dropped.
    assert_eq!(
        b.write(0, &io.target, 4096, 8192).unwrap_err().kind(),
        BdevErrorKind::Buffer
    );
    let s = b.bdev().stats().snapshot();
    // Each timed operation took some time, and one of each kind was counted.
    for l in [s.read_latency, s.write_latency, s.unmap_latency] {
        if nvmemu_mem::global_clock().is_tsc() {
            assert!(
                l.min_ns > 0 && l.min_ns == l.max_ns && l.sum_ns == l.min_ns,
                "{l:?}"
            );
        }
    }
    assert_eq!(
        s,
        BdevStatsSnapshot {
            bytes_read: 4096,
            num_read_ops: 1,
            bytes_written: 4096,
            num_write_ops: 1,
            bytes_unmapped: 1 << 20,
            num_unmap_ops: 1,
            bytes_zeroed: 1 << 20,
            num_write_zeroes_ops: 1,
            bytes_compared: 8192,
            num_compare_ops: 2,
            num_flush_ops: 1,
            read_latency: s.read_latency,
            write_latency: s.write_latency,
            unmap_latency: s.unmap_latency,
        }
    );
}

#[test]
fn out_of_range_is_an_error_for_every_operation() {
    for b in [
        malloc(512, 8),
        Arc::new(Bdev::null("n", 512, 8).unwrap()).channel(),
    ] {
        let io = buf(8192);
        // Exactly to the end is fine.
        b.read(3584, &io.target, 0, 512).unwrap();
        b.write(3584, &io.target, 0, 512).unwrap();
        let cases: [(u64, u64); 3] = [(3585, 512), (4096, 1), (u64::MAX, 2)];
        for (offset, len) in cases {
            let errs = [
                b.read(offset, &io.target, 0, len).unwrap_err(),
                b.write(offset, &io.target, 0, len).unwrap_err(),
                b.compare(offset, &io.target, 0, len).unwrap_err(),
                b.write_zeroes(offset, len).unwrap_err(),
                b.deallocate(offset, len).unwrap_err(),
            ];
            for e in errs {
                assert!(
                    matches!(e, BdevError::OutOfRange { offset: o, len: l, size: 4096, .. } if o == offset && l == len),
                    "{e:?}"
                );
            }
        }
        // Nothing failed was counted.
        let s = b.bdev().stats().snapshot();
        assert_eq!(
            (s.num_read_ops, s.num_write_ops, s.num_unmap_ops),
            (1, 1, 0)
        );
    }
}

#[test]
fn bad_buffers_are_buffer_errors() {
    let b = malloc(512, 8);
    let io = buf(4096);
    let e = b.read(0, &io.target, 4000, 512).unwrap_err();
    assert_eq!((e.kind(), e.op()), (BdevErrorKind::Buffer, BdevOp::Read));
    let fd = create_memfd("ro", 4096, false).unwrap();
    let ro = MmapRegion::map_shared(fd.as_fd(), 0, 4096, Protection::Read).unwrap();
    let e = b.read(0, &ro, 0, 512).unwrap_err();
    assert!(matches!(
        e,
        BdevError::Buffer {
            source: MemError::ReadOnly,
            ..
        }
    ));
    // Writing from a read-only buffer is fine.
    b.write(0, &ro, 0, 512).unwrap();
    assert!(b.compare(0, &ro, 0, 512).unwrap());
}

#[test]
fn pollers_on_several_threads_share_one_bdev() {
    let b = Arc::new(Bdev::malloc("shared", 512, 64).unwrap());
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            // One channel per thread, as each poller's namespace has its own.
            let b = b.channel();
            std::thread::spawn(move || {
                let io = buf(4096);
                io.host.fill(0, 4096, t + 1).unwrap();
                for _ in 0..50 {
                    b.write(u64::from(t) * 4096, &io.target, 0, 4096).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // The writers' channels are gone; their counts are not.
    let reader = b.channel();
    for t in 0..4u8 {
        assert_eq!(
            read_back(&reader, u64::from(t) * 4096, 4096),
            vec![t + 1; 4096]
        );
    }
    let s = b.stats().snapshot();
    assert_eq!((s.num_write_ops, s.bytes_written), (200, 200 * 4096));
    assert_eq!(s.num_read_ops, 4);
}

#[test]
fn four_gib_lazy_malloc_costs_nothing_until_written() {
    let b = Bdev::malloc_with("big", 4096, 1 << 20, MallocBacking::Lazy, &|_| {});
    let b = Arc::new(b.unwrap()).channel();
    assert_eq!(b.bdev().size_bytes(), 4 << 30);
    let io = buf(4096);
    io.host.fill(0, 4096, 0x42).unwrap();
    let last = (4 << 30) - 4096;
    b.write(last, &io.target, 0, 4096).unwrap();
    assert_eq!(read_back(&b, last, 4096), vec![0x42u8; 4096]);
    assert_eq!(read_back(&b, 2 << 30, 4096), vec![0u8; 4096]);
    b.deallocate(0, 4 << 30).unwrap();
    assert_eq!(read_back(&b, last, 4096), vec![0u8; 4096]);
}
