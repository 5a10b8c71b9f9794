// SPDX-License-Identifier: Apache-2.0
//! Injected controller-level faults through real queues: a fatal status (now or after a
//! number of I/O commands) that stops all processing until CC.EN 1 -> 0, and a namespace
//! that is not ready (status 82h, DNR as asked) until it is made ready again.

use nvmemu_ctrl::test_utils::{TestHost, bare, identify, layout, pattern, rw};
use nvmemu_ctrl::{CtrlState, FatalRefused};
use nvmemu_spec::regs::{self, csts};
use nvmemu_spec::{Sqe, Status};

fn read(h: &TestHost, slba: u64) -> Sqe {
    rw(0x02, 1, slba, 1, h.prps(layout::DATA, 512))
}

/// CC.EN 1 -> 0, then enable again with a fresh I/O queue pair 1.
fn reset_and_enable(h: &mut TestHost) {
    h.write_reg32(regs::CC, 0);
    assert_eq!(
        h.read_reg32(regs::CSTS),
        0,
        "CC.EN 1 -> 0 clears CFS and RDY"
    );
    assert_eq!(h.ctrl.state(), CtrlState::Disabled);
    assert_eq!(h.enable(), csts::RDY);
    h.create_io_pair(1, 64);
}

#[test]
fn an_injected_fatal_status_stops_every_queue_until_the_host_resets() {
    let mut h = TestHost::ready(64);
    assert_eq!(h.write_blocks(1, 3, &pattern(512, 7)), Status::SUCCESS);
    h.ctrl.inject_fatal(0).unwrap();
    assert_eq!(h.read_reg32(regs::CSTS), csts::CFS | csts::RDY);
    // Neither an I/O nor an admin command is taken.
    h.submit(1, read(&h, 3));
    h.submit(0, identify(&h, 1, 0));
    for _ in 0..3 {
        assert_eq!(h.poll(), 0);
    }
    assert_eq!((h.reap(1), h.reap(0)), (None, None));
    // Injecting again while fatal changes nothing.
    assert_eq!(h.ctrl.inject_fatal(0), Ok(()));
    assert_eq!(h.read_reg32(regs::CSTS), csts::CFS | csts::RDY);
    reset_and_enable(&mut h);
    let (status, data) = h.read_blocks(1, 3, 1);
    assert_eq!((status, data), (Status::SUCCESS, pattern(512, 7)));
}

#[test]
fn a_disabled_controller_refuses_a_fatal_status_now() {
    let mut h = TestHost::new();
    assert_eq!(h.ctrl.inject_fatal(0), Err(FatalRefused::NotEnabled));
    assert_eq!(h.read_reg32(regs::CSTS), 0);
    assert_eq!(h.enable(), csts::RDY, "the host can still enable it");
}

#[test]
fn a_fatal_countdown_lets_exactly_n_io_commands_run() {
    let mut h = TestHost::ready(64);
    h.ctrl.inject_fatal(3).unwrap();
    assert_eq!(h.ctrl.fatal_countdown(), Some(3));
    // Admin commands do not count.
    assert_eq!(h.admin(identify(&h, 1, 0)).status(), Status::SUCCESS);
    let cids: Vec<_> = (0..5).map(|i| h.submit(1, read(&h, i))).collect();
    assert_eq!(
        h.poll(),
        3,
        "three run; the fourth finds the controller fatal"
    );
    let done: Vec<_> = std::iter::from_fn(|| h.reap(1)).collect();
    assert_eq!(done.len(), 3);
    for (c, cid) in done.iter().zip(&cids) {
        assert_eq!((c.cid, c.status()), (cid.0, Status::SUCCESS));
    }
    assert_eq!(h.read_reg32(regs::CSTS), csts::CFS | csts::RDY);
    assert_eq!(h.ctrl.fatal_countdown(), None, "it fires once");
    assert_eq!(h.poll(), 0);
    assert_eq!(h.reap(1), None, "the rest are never completed");
    reset_and_enable(&mut h);
    let got: Vec<_> = (0..8).map(|i| h.cmd(1, read(&h, i)).status()).collect();
    assert_eq!(got, [Status::SUCCESS; 8], "not armed again after the reset");
}

#[test]
fn a_not_ready_namespace_refuses_io_with_82h_until_it_is_ready_again() {
    let mut h = TestHost::ready(64);
    assert_eq!(h.write_blocks(1, 9, &pattern(512, 3)), Status::SUCCESS);
    let ns = h.ctrl.namespaces().next().unwrap().clone();
    for dnr in [false, true] {
        ns.set_not_ready(dnr);
        let want = Status::NAMESPACE_NOT_READY.with_dnr(dnr);
        assert_eq!(ns.not_ready(), Some(want));
        h.mem.write(layout::DATA, &pattern(512, 4));
        let c = h.cmd(1, rw(0x01, 1, 9, 1, h.prps(layout::DATA, 512)));
        assert_eq!(c.status(), want);
        assert_eq!(c.status().to_field() >> 14 & 1, u16::from(dnr), "DNR bit");
        assert_eq!(h.cmd(1, read(&h, 9)).status(), want);
        // Flush too; the admin queue is unaffected (Identify Namespace answers).
        let flush = Sqe {
            nsid: 1,
            ..bare(0x00)
        };
        assert_eq!(h.cmd(1, flush).status(), want);
        assert_eq!(h.admin(identify(&h, 0, 1)).status(), Status::SUCCESS);
    }
    ns.set_ready();
    assert_eq!(ns.not_ready(), None);
    // The refused write never ran: the data is the first one.
    let (status, data) = h.read_blocks(1, 9, 1);
    assert_eq!((status, data), (Status::SUCCESS, pattern(512, 3)));
}

#[test]
fn readiness_is_shared_by_every_controller_the_namespace_is_attached_to() {
    let mut a = TestHost::ready(64);
    let mut b = TestHost::new();
    let ns = a.ctrl.namespaces().next().unwrap().clone();
    b.ctrl
        .detach_namespace(nvmemu_spec::Nsid(1))
        .expect("b's own namespace 1");
    b.ctrl.attach_namespace(ns.clone()).unwrap();
    assert_eq!(b.enable(), csts::RDY);
    b.create_io_pair(1, 64);
    ns.set_not_ready(false);
    let want = Some(Status::NAMESPACE_NOT_READY);
    for h in [&mut a, &mut b] {
        assert_eq!(h.ctrl.namespaces().next().unwrap().not_ready(), want);
        assert_eq!(h.cmd(1, read(h, 0)).status(), Status::NAMESPACE_NOT_READY);
    }
    ns.set_ready();
    for h in [&mut a, &mut b] {
        assert_eq!(h.cmd(1, read(h, 0)).status(), Status::SUCCESS);
    }
}
