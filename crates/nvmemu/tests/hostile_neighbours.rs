// SPDX-License-Identifier: Apache-2.0
//! One client against its neighbours: whatever a hostile client does to its own controller,
//! an honest client of another controller keeps working and is never failed.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nvmemu_driver::{Controller, VfioUserTransport};
use nvmemu_spec::regs::{self, csts};
use nvmemu_spec::{DsmRange, Lba, Nsid};

/// Blocks of the attacker's namespace: 64 MiB of 512-byte blocks.
const ATTACK_BLOCKS: u64 = 1 << 17;
/// Deallocates the attacker queues at once, each naming its whole namespace 256 times.
const ATTACK_COMMANDS: usize = 32;
/// The longest an honest operation may take meanwhile: generous for a shared machine, far
/// below one attack command done in one go (16 GiB of memset).
const HONEST_BOUND: Duration = Duration::from_secs(1);

#[test]
fn deallocates_naming_the_namespace_256_times_do_not_stall_a_neighbour_on_the_same_poller() {
    // One poller: the attacker's controller and the honest one share it.
    let t = common::start(&[("malloc", 512, ATTACK_BLOCKS)]);
    let honest_dir = common::add_controller(&t);
    let transport = Arc::new(Mutex::new(
        VfioUserTransport::connect(&honest_dir.path().join("cntrl")).unwrap(),
    ));
    let mut honest = Controller::attach_with(Box::new(transport.clone()), common::opts(1)).unwrap();
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
