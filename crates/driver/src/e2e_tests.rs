// SPDX-License-Identifier: Apache-2.0
//! The whole driver against the fake device: attach, identify, I/O, faults, shutdown.
#![allow(clippy::cast_possible_truncation)]

use nvmemu_spec::{Lba, Nsid, Sqe, Status};

use crate::test_utils::{FakeConfig, FakeHandle, FakeTransport, Fault};
use crate::{
    AttachOptions, AttachedController, DriverError, IoQpair, NvmeError, PCI_COMMAND_MASTER,
};

fn attach_with(config: FakeConfig, opts: AttachOptions) -> (AttachedController, FakeHandle) {
    let (t, h) = FakeTransport::new(config);
    let ctrl = AttachedController::attach_with(Box::new(t), opts).unwrap();
    (ctrl, h)
}

fn attach() -> (AttachedController, FakeHandle) {
    attach_with(
        FakeConfig::default(),
        AttachOptions {
            io_queues: 2,
            queue_depth: 16,
            dma_pool_bytes: 4 << 20,
            ..AttachOptions::default()
        },
    )
}

/// Poll until `n` completions arrived; returns (token, result) pairs.
fn reap(qp: &mut IoQpair, n: usize) -> Vec<(u64, Result<u32, Status>)> {
    let mut out = vec![];
    while out.len() < n {
        qp.poll_completions(64, |t, r| {
            out.push((
                t,
                r.map_err(|e| match e {
                    NvmeError::Status(s) => s,
                    other => panic!("unexpected {other}"),
                }),
            ))
        })
        .unwrap();
        std::thread::yield_now();
    }
    out
}

#[test]
fn attach_brings_the_controller_up_and_identifies_it() {
    let (mut ctrl, h) = attach();
    assert_ne!(h.pci_command() & PCI_COMMAND_MASTER, 0);
    assert_eq!(h.cc_csts(), (crate::CC_ENABLE, 1));
    assert_eq!(h.dma_maps(), vec![(crate::DMA_POOL_IOVA, 4 << 20)]);
    assert_eq!(ctrl.info().sn, "FAKE-SN");
    assert_eq!(ctrl.info().mn, "nvmemu fake");
    assert_eq!(ctrl.max_transfer_bytes(), 128 * 1024);
    assert_eq!(ctrl.namespaces().len(), 1);
    assert_eq!(ctrl.namespaces()[0].nsze, 2048);
    assert_eq!(ctrl.namespaces()[0].lba_size, 512);
    assert_eq!(ctrl.io_queue_count(), 2);
    let qps = ctrl.qpairs();
    assert_eq!(
        qps.iter().map(|q| q.qid().0).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(qps[0].capacity(), 15);
    assert!(ctrl.take_qpair().is_none());
    drop(qps);
    ctrl.shutdown().unwrap();
    let (cc, csts) = h.cc_csts();
    assert_eq!((cc >> 14) & 3, 1, "CC.SHN normal");
    assert_eq!(csts & 0xC, 0x8, "CSTS.SHST complete");
    assert!(h.dma_maps().is_empty(), "DMA unmapped on shutdown");
    // Queues were deleted SQ before CQ, highest first.
    let tail: Vec<u8> = h
        .executed()
        .iter()
        .rev()
        .take(4)
        .map(|&(_, op)| op)
        .collect();
    assert_eq!(tail, vec![0x04, 0x00, 0x04, 0x00]);
    assert!(matches!(
        ctrl.identify_controller(),
        Err(DriverError::ShutDown)
    ));
}

#[test]
fn write_then_read_back_across_prp_lists() {
    let (mut ctrl, _h) = attach();
    let mut qp = ctrl.take_qpair().unwrap();
    let len = 128 * 1024u64;
    let wbuf = ctrl.alloc_dma(len + 4096).unwrap();
    let pattern: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    // Start 512 bytes into a page so PRP1 has an offset and the list is needed.
    let w = wbuf.slice(512, len).unwrap();
    w.copy_from(0, &pattern).unwrap();
    qp.write_blocking(Nsid(1), Lba(100), 256, &w).unwrap();
    let rbuf = ctrl.alloc_dma(len).unwrap();
    qp.read_blocking(Nsid(1), Lba(100), 256, &rbuf).unwrap();
    let mut back = vec![0u8; len as usize];
    rbuf.copy_to(0, &mut back).unwrap();
    assert!(back == pattern, "data read back differs");
    qp.compare_blocking(Nsid(1), Lba(100), 256, &rbuf).unwrap();
    rbuf.fill(0, 1, 0xFF).unwrap();
    assert!(matches!(
        qp.compare_blocking(Nsid(1), Lba(100), 256, &rbuf),
        Err(NvmeError::Status(s)) if s == Status::COMPARE_FAILURE
    ));
}

#[test]
fn batched_async_io_completes_every_token() {
    let (mut ctrl, _h) = attach();
    let mut qp = ctrl.take_qpair().unwrap();
    let bufs = ctrl.dma_pool().alloc_slab(15, 4096).unwrap();
    for (i, b) in bufs.iter().enumerate() {
        b.fill(0, 4096, i as u8 + 1).unwrap();
        qp.submit_write(Nsid(1), Lba(8 * i as u64), 8, b, i as u64)
            .unwrap();
    }
    assert!(matches!(
        qp.submit_flush(Nsid(1), 99),
        Err(NvmeError::QueueFull { slots: 15, .. })
    ));
    qp.ring().unwrap();
    let mut done = reap(&mut qp, 15);
    done.sort_by_key(|&(t, _)| t);
    assert_eq!(done, (0..15).map(|t| (t, Ok(0))).collect::<Vec<_>>());
    // Read them back in reverse order, again as one batch.
    for (i, b) in bufs.iter().enumerate().rev() {
        b.fill(0, 4096, 0).unwrap();
        qp.submit_read(Nsid(1), Lba(8 * i as u64), 8, b, 100 + i as u64)
            .unwrap();
    }
    qp.ring().unwrap();
    assert_eq!(reap(&mut qp, 15).len(), 15);
    for (i, b) in bufs.iter().enumerate() {
        let mut got = [0u8; 4096];
        b.copy_to(0, &mut got).unwrap();
        assert!(got.iter().all(|&x| x == i as u8 + 1), "buffer {i}");
    }
}

#[test]
fn fixed_buffers_carry_batched_io_and_stay_held_while_registered() {
    let (mut ctrl, _h) = attach();
    let mut qp = ctrl.take_qpair().unwrap();
    let free_before = ctrl.dma_pool().free_bytes();
    let bufs = ctrl.dma_pool().alloc_slab(15, 4096).unwrap();
    for (i, b) in bufs.iter().enumerate() {
        b.fill(0, 4096, i as u8 + 1).unwrap();
    }
    qp.register_buffers(bufs).unwrap();
    // The queue pair now holds the only handles: the pages stay allocated.
    assert_eq!(ctrl.dma_pool().free_bytes(), free_before - 15 * 4096);
    assert!(matches!(
        qp.submit_write_fixed(Nsid(1), Lba(0), 8, 15, 0),
        Err(NvmeError::NoFixedBuffer {
            index: 15,
            registered: 15
        })
    ));
    for i in 0..15 {
        qp.submit_write_fixed(Nsid(1), Lba(8 * i as u64), 8, i, i as u64)
            .unwrap();
    }
    qp.ring().unwrap();
    let mut done = reap(&mut qp, 15);
    done.sort_by_key(|&(t, _)| t);
    assert_eq!(done, (0..15).map(|t| (t, Ok(0))).collect::<Vec<_>>());
    // Read back in reverse order into cleared buffers, with a batch in flight while a
    // re-registration is refused.
    for i in 0..15 {
        qp.fixed_buffer(i).unwrap().fill(0, 4096, 0).unwrap();
    }
    for i in (0..15).rev() {
        qp.submit_read_fixed(Nsid(1), Lba(8 * i as u64), 8, i, 100 + i as u64)
            .unwrap();
    }
    assert!(matches!(
        qp.register_buffers(Vec::new()),
        Err(NvmeError::Busy(15))
    ));
    qp.ring().unwrap();
    assert_eq!(reap(&mut qp, 15).len(), 15);
    for i in 0..15 {
        let mut got = [0u8; 4096];
        qp.fixed_buffer(i).unwrap().copy_to(0, &mut got).unwrap();
        assert!(got.iter().all(|&x| x == i as u8 + 1), "buffer {i}");
    }
    // Replacing the set releases the pages.
    qp.register_buffers(Vec::new()).unwrap();
    assert_eq!(ctrl.dma_pool().free_bytes(), free_before);
}

#[test]
fn write_zeroes_and_deallocate_clear_data() {
    let (mut ctrl, _h) = attach();
    let mut qp = ctrl.take_qpair().unwrap();
    let buf = ctrl.alloc_dma(8192).unwrap();
    buf.fill(0, 8192, 0xAB).unwrap();
    qp.write_blocking(Nsid(1), Lba(0), 16, &buf).unwrap();
    qp.write_zeroes_blocking(Nsid(1), Lba(0), 4).unwrap();
    let ranges = ctrl.alloc_dma(4096).unwrap();
    qp.deallocate_blocking(Nsid(1), &[(Lba(12), 4)], &ranges)
        .unwrap();
    qp.read_blocking(Nsid(1), Lba(0), 16, &buf).unwrap();
    let mut got = vec![0u8; 8192];
    buf.copy_to(0, &mut got).unwrap();
    assert!(got[..2048].iter().all(|&b| b == 0));
    assert!(got[2048..6144].iter().all(|&b| b == 0xAB));
    assert!(got[6144..].iter().all(|&b| b == 0));
    qp.flush_blocking(Nsid(1)).unwrap();
}

#[test]
fn api_errors_are_caught_before_the_device() {
    let (mut ctrl, h) = attach();
    let mut qp = ctrl.take_qpair().unwrap();
    let buf = ctrl.alloc_dma(4096).unwrap();
    let before = h.executed().len();
    assert!(matches!(
        qp.read_blocking(Nsid(1), Lba(2047), 2, &buf),
        Err(NvmeError::LbaOutOfRange {
            slba: 2047,
            nblocks: 2,
            nsze: 2048
        })
    ));
    assert!(matches!(
        qp.read_blocking(Nsid(1), Lba(0), 16, &buf),
        Err(NvmeError::BufferTooSmall {
            needed: 8192,
            len: 4096
        })
    ));
    assert!(matches!(
        qp.read_blocking(Nsid(2), Lba(0), 1, &buf),
        Err(NvmeError::UnknownNamespace(Nsid(2)))
    ));
    let big = ctrl.alloc_dma(256 * 1024).unwrap();
    assert!(matches!(
        qp.read_blocking(Nsid(1), Lba(0), 512, &big),
        Err(NvmeError::TransferTooLarge {
            bytes: 262144,
            max: 131072
        })
    ));
    assert_eq!(h.executed().len(), before, "nothing reached the device");
}

#[test]
fn raw_commands_return_device_status() {
    let (mut ctrl, _h) = attach();
    let cqe = ctrl
        .admin_raw(Sqe {
            cdw0: 0x7F,
            ..Sqe::default()
        })
        .unwrap();
    assert_eq!(cqe.status(), Status::INVALID_OPCODE);
    let cqe = ctrl
        .admin_raw(crate::sqe::delete_io_cq(nvmemu_spec::Qid(1)))
        .unwrap();
    assert_eq!(cqe.status(), Status::INVALID_QUEUE_DELETION);
    let mut qp = ctrl.take_qpair().unwrap();
    // Read past the end, built by hand so the driver's range check does not stop it.
    let buf = ctrl.alloc_dma(4096).unwrap();
    let sqe = crate::sqe::rw(nvmemu_spec::IoOpcode::Read, Nsid(1), Lba(4000), 1);
    let cqe = qp.execute_raw(sqe, Some((&buf, 512))).unwrap();
    assert_eq!(cqe.status(), Status::LBA_OUT_OF_RANGE);
    let log = ctrl.get_log_page(0x02, Nsid::BROADCAST, 512, 0).unwrap();
    assert_eq!(log, vec![0x02; 512]);
    let ns = ctrl.identify_namespace(Nsid(1)).unwrap();
    assert_eq!(ns.nsze, 2048);
    assert!(matches!(
        ctrl.identify_namespace(Nsid(9)),
        Err(DriverError::Nvme(NvmeError::Status(s))) if s == Status::INVALID_NAMESPACE
    ));
}

#[test]
fn hostile_completions_are_typed_errors() {
    let (mut ctrl, h) = attach();
    let mut qp = ctrl.take_qpair().unwrap();
    h.inject(Fault::DuplicateCompletion);
    qp.submit_flush(Nsid(1), 5).unwrap();
    qp.ring().unwrap();
    let mut tokens = vec![];
    let err = loop {
        match qp.poll_completions(8, |t, _| tokens.push(t)) {
            Ok(_) => std::thread::yield_now(),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, NvmeError::UnknownCid { .. }));
    assert_eq!(tokens, vec![5]);
    h.inject(Fault::WrongCid(14));
    qp.submit_flush(Nsid(1), 6).unwrap();
    qp.ring().unwrap();
    let err = loop {
        match qp.poll_completions(8, |t, _| tokens.push(t)) {
            Ok(_) => std::thread::yield_now(),
            Err(e) => break e,
        }
    };
    assert!(matches!(
        err,
        NvmeError::UnknownCid {
            cid: nvmemu_spec::Cid(14),
            ..
        }
    ));
    assert_eq!(qp.outstanding(), 1, "the real command is still in flight");
}

#[test]
fn fewer_queues_granted_are_clamped_and_depth_follows_mqes() {
    let cfg = FakeConfig {
        max_io_queues: 1,
        max_queue_entries: 8,
        dstrd: 1,
        ..FakeConfig::default()
    };
    let (mut ctrl, _h) = attach_with(
        cfg,
        AttachOptions {
            io_queues: 3,
            queue_depth: 64,
            dma_pool_bytes: 2 << 20,
            ..AttachOptions::default()
        },
    );
    assert_eq!(ctrl.io_queue_count(), 1);
    let mut qp = ctrl.take_qpair().unwrap();
    assert_eq!(qp.depth(), 8);
    // I/O works with a doorbell stride of 8 bytes.
    let buf = ctrl.alloc_dma(512).unwrap();
    buf.fill(0, 512, 0x5A).unwrap();
    qp.write_blocking(Nsid(1), Lba(3), 1, &buf).unwrap();
    buf.fill(0, 512, 0).unwrap();
    qp.read_blocking(Nsid(1), Lba(3), 1, &buf).unwrap();
    let mut b = [0u8; 1];
    buf.copy_to(511, &mut b).unwrap();
    assert_eq!(b, [0x5A]);
}

#[test]
fn qpair_moves_to_another_thread() {
    let (mut ctrl, _h) = attach();
    let qps = ctrl.qpairs();
    let bufs: Vec<_> = (0..qps.len())
        .map(|_| ctrl.alloc_dma(4096).unwrap())
        .collect();
    let handles: Vec<_> = qps
        .into_iter()
        .zip(bufs)
        .enumerate()
        .map(|(i, (mut qp, buf))| {
            std::thread::spawn(move || {
                buf.fill(0, 4096, i as u8 + 0x10).unwrap();
                qp.write_blocking(Nsid(1), Lba(64 * i as u64), 8, &buf)
                    .unwrap();
                buf.fill(0, 4096, 0).unwrap();
                qp.read_blocking(Nsid(1), Lba(64 * i as u64), 8, &buf)
                    .unwrap();
                let mut b = [0u8; 4096];
                buf.copy_to(0, &mut b).unwrap();
                b.iter().all(|&x| x == i as u8 + 0x10)
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap());
    }
}

#[test]
fn invalid_options_and_pool_exhaustion_are_errors() {
    let (t, _h) = FakeTransport::new(FakeConfig::default());
    let opts = AttachOptions {
        io_queues: 0,
        queue_depth: 16,
        dma_pool_bytes: 1 << 20,
        ..AttachOptions::default()
    };
    assert!(matches!(
        AttachedController::attach_with(Box::new(t), opts),
        Err(DriverError::InvalidOption(_))
    ));
    // Queues of 4096 entries need more than 2 MiB each (SQ, CQ, PRP lists): more than the
    // pool holds even if it is rounded up to a huge page.
    let big = FakeConfig {
        max_queue_entries: 4096,
        ..FakeConfig::default()
    };
    let (t, h) = FakeTransport::new(big);
    let opts = AttachOptions {
        io_queues: 4,
        queue_depth: 4096,
        dma_pool_bytes: 64 * 1024,
        ..AttachOptions::default()
    };
    assert!(matches!(
        AttachedController::attach_with(Box::new(t), opts),
        Err(DriverError::Dma(_))
    ));
    assert!(
        h.dma_maps().is_empty(),
        "a failed attach undoes its DMA map"
    );
}

#[test]
fn async_event_request_completes_around_synchronous_admin_commands() {
    let (mut ctrl, _h) = attach();
    // The fake fails an AER at once (Invalid Opcode): its completion arrives while the
    // Identify below is waiting, and must be kept for `poll_async_events`, not lost.
    ctrl.submit_async_event_request().unwrap();
    assert_eq!(ctrl.async_events_outstanding(), 1);
    assert_eq!(ctrl.identify_controller().unwrap().sn, "FAKE-SN");
    assert_eq!(ctrl.async_events_outstanding(), 0);
    let events = ctrl.poll_async_events().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].status(), Status::INVALID_OPCODE);
    assert!(ctrl.poll_async_events().unwrap().is_empty());
    // With an AER pending, polling picks it up without a synchronous command.
    ctrl.submit_async_event_request().unwrap();
    let mut events = Vec::new();
    while events.is_empty() {
        events = ctrl.poll_async_events().unwrap();
        std::thread::yield_now();
    }
    assert_eq!(events.len(), 1);
    ctrl.shutdown().unwrap();
}
