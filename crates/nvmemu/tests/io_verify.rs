// SPDX-License-Identifier: Apache-2.0
//! Data integrity through the real protocol: our driver against our target on a socket.

mod common;

use nvmemu_driver::{AttachOptions, Controller};
use nvmemu_spec::{Lba, Nsid};

fn attach(t: &common::TestTarget, io_queues: u16) -> Controller {
    Controller::attach(
        t.dir(),
        AttachOptions {
            io_queues,
            queue_depth: 64,
            dma_pool_bytes: 32 << 20,
        },
    )
    .expect("driver attaches")
}

#[test]
fn identify_reports_what_was_configured() {
    let t = common::start(&[("malloc", 512, 2048), ("null", 4096, 1024)]);
    let mut c = attach(&t, 1);
    let id = c.identify_controller().unwrap();
    assert_eq!(id.sn.trim(), "TESTSERIAL01");
    assert_eq!(id.mn.trim(), "nvmemu test controller");
    assert_eq!(c.active_namespaces().unwrap(), vec![Nsid(1), Nsid(2)]);
    let ns: Vec<_> = c
        .namespaces()
        .iter()
        .map(|n| (n.nsid, n.nsze, n.lba_size))
        .collect();
    assert_eq!(ns, vec![(Nsid(1), 2048, 512), (Nsid(2), 1024, 4096)]);
    c.shutdown().unwrap();
}

#[test]
fn write_then_read_back_through_prp_lists() {
    let t = common::start(&[("malloc", 512, 1 << 16)]);
    let mut c = attach(&t, 1);
    let mut q = c.take_qpair().unwrap();
    // 128 KiB: PRP1 + a PRP list.
    let len = 128 * 1024;
    let wbuf = c.alloc_dma(len).unwrap();
    let pattern: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    wbuf.copy_from(0, &pattern).unwrap();
    q.write_blocking(Nsid(1), Lba(100), 256, &wbuf).unwrap();
    let rbuf = c.alloc_dma(len).unwrap();
    q.read_blocking(Nsid(1), Lba(100), 256, &rbuf).unwrap();
    let mut back = vec![0u8; len as usize];
    rbuf.copy_to(0, &mut back).unwrap();
    assert_eq!(back, pattern);
    // Unwritten blocks read as zeroes.
    q.read_blocking(Nsid(1), Lba(5000), 8, &rbuf).unwrap();
    let mut z = vec![1u8; 4096];
    rbuf.copy_to(0, &mut z).unwrap();
    assert!(z.iter().all(|&b| b == 0));
    drop(q);
    c.shutdown().unwrap();
}
