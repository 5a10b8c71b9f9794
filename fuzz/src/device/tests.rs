// SPDX-License-Identifier: Apache-2.0
//! The harness on fixed sequences: what the fuzzer explores, checked once by hand (run with
//! `cargo +nightly test --lib` in `fuzz/`).

use super::good_host::{GoodHost, WBUF};
use super::harness::Harness;
use super::ops::{Client, Fds, Flags, Iova, Op};

fn run(ops: &[Op]) -> (Harness, Client) {
    let mut h = Harness::start();
    h.connect();
    let mut client = Client::default();
    for op in ops {
        client.apply(&mut h, op);
    }
    client.check_memory();
    (h, client)
}

/// What the fuzz target checks after a sequence: a new client works while the hostile one
/// scribbles every doorbell page it kept from earlier sessions.
fn good_client_works(mut h: Harness, mut client: Client) {
    client.reconnect(&mut h);
    let mut good = GoodHost::default();
    good.negotiate(&mut h).unwrap();
    good.bring_up(&mut h).unwrap();
    client.scribble_stale(&mut h, 5);
    good.verified_write_read(&mut h, 3).unwrap();
    good.mem.check_untouched();
    h.finish();
}

fn version() -> Op {
    Op::Version {
        major: 0,
        minor: 0,
        caps: super::ops::Caps::Qemu,
        flags: Flags::Command,
    }
}

#[test]
fn io_in_the_middle_of_a_sequence_then_a_new_client_is_served() {
    let (h, client) = run(&[
        version(),
        Op::BringUp,
        Op::Io {
            write: false,
            lba: 1,
            prp1: Iova::Good(WBUF as u16),
            prp2: Iova::Raw(0),
        },
    ]);
    good_client_works(h, client);
}

#[test]
fn a_shrunk_fuzz_map_is_survived() {
    let (h, client) = run(&[
        version(),
        Op::DmaMap {
            mem: Some(0),
            iova: Iova::Page(0, 0),
            offset: 0,
            pages: 4,
            tail: 0,
            map_flags: 3,
            argsz: None,
            flags: Flags::Command,
        },
        Op::Truncate { mem: 0, bytes: 0 },
        Op::BringUp,
        Op::Io {
            write: false,
            lba: 1,
            prp1: Iova::Page(1, 0),
            prp2: Iova::Raw(0),
        },
    ]);
    assert_eq!(client.mems[0].len(), 0);
    assert!(nvmemu_mem::faults_recovered() > 0, "the read faulted");
    good_client_works(h, client);
}

#[test]
fn garbage_no_reply_and_fds_keep_one_reply_per_request() {
    let (h, client) = run(&[
        Op::Garbage {
            command: 2,
            flags: 0,
            payload: vec![1; 40],
            fds: Fds::Eventfds(3),
        },
        version(),
        Op::Reset {
            flags: Flags::NoReply,
        },
        Op::ShortSize {
            command: 4,
            flags: 0,
            msg_size: 3,
        },
        Op::Oversized {
            command: 9,
            flags: Flags::Command,
        },
        Op::SetIrqs {
            index: 2,
            irq_flags: 0x24,
            start: 0,
            count: 2,
            fds: Fds::Memfd(0),
            data: vec![],
            flags: Flags::Command,
        },
        Op::Garbage {
            command: 1,
            flags: 1,
            payload: vec![],
            fds: Fds::Socket,
        },
    ]);
    good_client_works(h, client);
}

#[test]
fn a_doorbell_page_kept_across_reconnects_reaches_nobody() {
    let info = Op::RegionInfo {
        index: 0,
        argsz: 64,
        flags: Flags::Command,
    };
    let stale = |index, value| Op::StaleDoorbell {
        page: 0,
        index,
        value,
    };
    let (h, client) = run(&[
        version(),
        info,
        Op::BringUp,
        Op::Reconnect,
        version(),
        Op::BringUp,
        // SQ 1 tail and CQ 1 head of the page left behind, then I/O on the new session.
        stale(2, 7),
        stale(3, 1),
        Op::Io {
            write: true,
            lba: 2,
            prp1: Iova::Good(WBUF as u16),
            prp2: Iova::Raw(0),
        },
    ]);
    good_client_works(h, client);
}

#[test]
#[should_panic(expected = "outside its DMA windows")]
fn a_write_outside_the_windows_is_caught() {
    let mut mem = super::memory::ClientMem::new(8192);
    mem.allow_server_writes(0, 4096);
    // Behind the shadow's back, as a stray server write would.
    rustix::io::pwrite(mem.fd(), &[0], 4096).unwrap();
    mem.check_untouched();
}
