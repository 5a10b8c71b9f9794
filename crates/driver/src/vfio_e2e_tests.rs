// SPDX-License-Identifier: Apache-2.0
//! The driver over a real vfio-user socket (nvmemu-vfio-user's server) to the fake device:
//! connect, VERSION, region info with the doorbell fd, DMA_MAP of the pool memfd, bring-up,
//! I/O through the mmapped doorbells, shutdown and DMA_UNMAP.

use nvmemu_spec::{Lba, Nsid};
use nvmemu_vfio_user::StopHandle;

use crate::test_utils::{FakeConfig, serve_fake};
use crate::{AttachOptions, AttachedController, PCI_COMMAND_MASTER, Transport, VfioUserTransport};

#[test]
fn attach_io_and_shutdown_over_vfio_user() {
    let dir = tempfile::tempdir().unwrap();
    let stop = StopHandle::new().unwrap();
    let (h, server) = serve_fake(dir.path(), FakeConfig::default(), stop.clone()).unwrap();
    let opts = AttachOptions {
        io_queues: 2,
        queue_depth: 32,
        dma_pool_bytes: 4 << 20,
        ..AttachOptions::default()
    };
    let mut ctrl = AttachedController::attach(dir.path(), opts).unwrap();
    assert_ne!(h.pci_command() & PCI_COMMAND_MASTER, 0);
    assert_eq!(h.dma_maps().len(), 1, "pool DMA-mapped with its fd");
    assert_eq!(ctrl.info().sn, "FAKE-SN");
    let mut qp = ctrl.take_qpair().unwrap();
    let buf = ctrl.alloc_dma(64 * 1024).unwrap();
    let pattern: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 253) as u8).collect();
    buf.copy_from(0, &pattern).unwrap();
    qp.write_blocking(Nsid(1), Lba(7), 128, &buf).unwrap();
    buf.fill(0, 64 * 1024, 0).unwrap();
    qp.read_blocking(Nsid(1), Lba(7), 128, &buf).unwrap();
    let mut back = vec![0u8; 64 * 1024];
    buf.copy_to(0, &mut back).unwrap();
    assert!(back == pattern, "data read back over vfio-user differs");
    drop(qp);
    ctrl.shutdown().unwrap();
    assert!(h.dma_maps().is_empty(), "DMA_UNMAP sent on shutdown");
    assert_eq!(h.cc_csts().1 & 0xC, 0x8, "CSTS.SHST complete");
    drop(ctrl);
    stop.stop();
    server.join().unwrap();
}

#[test]
fn transport_rejects_register_accesses_outside_the_register_page() {
    let dir = tempfile::tempdir().unwrap();
    let stop = StopHandle::new().unwrap();
    let (_h, server) = serve_fake(dir.path(), FakeConfig::default(), stop.clone()).unwrap();
    let mut t = VfioUserTransport::connect(&dir.path().join("cntrl")).unwrap();
    assert_eq!(t.bar0_info().sparse.len(), 1);
    assert!(
        t.read_reg32(0x1000).is_err(),
        "doorbells go through the mapping"
    );
    assert!(t.read_reg64(0x4).is_err(), "misaligned 8-byte access");
    let cap = t.read_reg64(0).unwrap();
    assert_eq!(cap & 0xFFFF, 255);
    let db = t.map_doorbells().unwrap();
    assert_eq!(db.len(), 0x1000);
    drop(t);
    stop.stop();
    server.join().unwrap();
}
