// SPDX-License-Identifier: Apache-2.0
//! A hostile vfio-user client against the real server and the real NVMe PCI function
//! (controller, malloc namespace, mailbox; this thread is the poller): whole message
//! sequences decoded with `arbitrary` (VERSION, DMA_MAP of memfds it later shrinks or grows,
//! fd-less maps, DMA_UNMAP, region info/reads/writes on config space, BAR0 registers,
//! doorbells and the MSI-X BARs, SET_IRQS with eventfds and with fds that are not, resets,
//! garbage headers, short and oversized messages), NVMe I/O pointing anywhere, and
//! reconnects that keep the doorbell page of the session left, written through afterwards.
//!
//! Invariants, beyond "no panic": every request wanting a reply gets exactly one, with its
//! msg_id and command, and the connection stays open (every message is complete); a
//! DMA_MAP past the end of its fd is refused; a REGION_READ reply has the bytes asked for;
//! the server writes no byte of client memory outside a writable DMA window; and afterwards
//! a well-behaved client on a new connection brings the controller up and reads back what
//! it wrote, while every doorbell page of an earlier session is scribbled.
#![no_main]

use nvmemu_fuzz::device::good_host::GoodHost;
use nvmemu_fuzz::device::harness::Harness;
use nvmemu_fuzz::device::ops::{Client, Op};

/// Most steps per input: longer sequences find little more and cost exec speed.
const MAX_STEPS: usize = 64;

libfuzzer_sys::fuzz_target!(|ops: Vec<Op>| {
    let mut h = Harness::start();
    h.connect();
    let mut client = Client::default();
    for op in ops.iter().take(MAX_STEPS) {
        client.apply(&mut h, op);
    }
    client.check_memory();

    client.reconnect(&mut h);
    let mut good = GoodHost::default();
    good.negotiate(&mut h)
        .expect("a new client negotiates VERSION");
    good.bring_up(&mut h)
        .expect("a new client brings the controller up");
    // Every earlier session's doorbell page moves all tails and heads: nothing may run.
    client.scribble_stale(&mut h, 5);
    good.verified_write_read(&mut h, ops.len() as u64)
        .expect("a new client reads back what it wrote");
    good.mem.check_untouched();
    h.finish();
});
