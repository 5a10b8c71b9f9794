// SPDX-License-Identifier: Apache-2.0
//! Regression tests for bugs found by the hostile suites, each named for the behaviour and
//! the spec section it restores.
#![allow(clippy::unwrap_used)]

mod common;

use common::{RawHost, read32};
use nvmemu_spec::regs::{self, csts};

/// The poller serves mailbox calls (which is what a REGION_READ of a register is) between
/// polls, so two of them in a row guarantee that at least one full poll ran in between.
fn settle(h: &mut RawHost) {
    let _ = read32(&mut h.client, regs::CSTS);
    let _ = read32(&mut h.client, regs::CSTS);
}

/// Bug: CC.EN 1 -> 0 deleted the queues but left the doorbell page as it was, so after
/// re-enabling, the stale admin SQ tail made the controller execute the zeroed entries of
/// the new admin queue (opcode 0, CID 0) before the host had submitted anything.
#[test]
fn cc_en_reset_clears_doorbells_nvme_base_7_3_2() {
    let t = common::start_default();
    let mut h = RawHost::connect(&t);
    for _ in 0..5 {
        h.identify_controller();
    }
    let mut b = [0u8; 4];
    h.client.region_read(0, 0x1000, &mut b).unwrap();
    assert_eq!(u32::from_le_bytes(b), 5, "admin SQ tail before the reset");
    h.client
        .region_write(0, regs::CC, &0u32.to_le_bytes())
        .unwrap();
    common::wait_csts(&mut h.client, "CSTS.RDY = 0", |v| v & csts::RDY == 0);
    for offset in [0x1000u64, 0x1004] {
        h.client.region_read(0, offset, &mut b).unwrap();
        assert_eq!(
            u32::from_le_bytes(b),
            0,
            "doorbell at {offset:#x} after CC.EN = 0"
        );
    }
    // Re-enable with a fresh, zeroed admin queue: nothing may be executed until the host
    // rings the doorbell, so the CQ stays untouched.
    h.enable();
    settle(&mut h);
    assert!(
        h.mem.map.is_zero(0x1000, 0x1000).unwrap(),
        "a completion was posted for a command the host never submitted"
    );
    // And the first real command gets the first completion slot.
    assert_eq!(&h.identify_controller()[4..16], b"TESTSERIAL01");
    drop(h);
    common::assert_serves_next_client(&t);
}
