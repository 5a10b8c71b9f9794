// SPDX-License-Identifier: Apache-2.0
//! A file command that needs more room than the controller has free waits for it, taken
//! from its SQ: a transfer of more pieces than the free ring slots hold, a Compare while
//! every Compare buffer is taken. No command behind it is taken meanwhile (so it cannot
//! starve, and the order is kept); it runs once room frees up, or completes with Command
//! Aborted due to SQ Deletion when its SQ is deleted. On io_uring and on the worker
//! threads, the room filled with file I/O a gate holds back.

#![allow(clippy::cast_possible_truncation)] // test data and SQE fields built from small values
#![allow(clippy::unwrap_used)]

mod file_common;

use std::collections::HashMap;
use std::sync::Arc;

use file_common::{
    Engine, SCATTER, compare, held_host, next_cqe, release_later, scatter, scattered, segment,
    stamped,
};
use nvmemu_bdev::Bdev;
use nvmemu_ctrl::test_utils::{HeldFileIo, TestHost, delete_sq, layout, rw};
use nvmemu_ctrl::{COMPARE_BUFS, FILE_SLOTS, Namespace};
use nvmemu_spec::{Cid, Nsid, Status};

/// Entries of the I/O queue pair: room for a ring's worth of commands and two more.
const ENTRIES: u32 = 512;
/// The held reads' buffers, 512 bytes each.
const FILLERS: u64 = layout::DATA;
/// The held Compares' buffers, 4 KiB each.
const COMPARES: u64 = layout::DATA + 0x2_0000;
/// The buffer of the write behind the waiting command.
const BEHIND: u64 = layout::DATA + 0x3_0000;
/// Where data is read back to.
const READBACK: u64 = layout::DATA + 0x10_0000;
/// The split write: its first block and its pieces (two ring slots' worth).
const SPLIT_LBA: u64 = 1200;
const PIECES: usize = 300;
/// The waiting Compare's first block (8 blocks).
const COMPARE_LBA: u64 = 512;

/// What fills the room and what waits for it.
#[derive(Debug, Clone, Copy)]
enum Case {
    /// `FILE_SLOTS - 1` one-slot reads held; a write of [`PIECES`] pieces needs two slots.
    Slots,
    /// [`COMPARE_BUFS`] Compares held; one more needs a buffer.
    CompareBuf,
}

/// A host whose room is full of held file I/O, with a command waiting for room and a
/// write to namespace 2 (memory: it completes in the pass that takes it) behind it.
struct Waiting {
    /// First, so it is dropped (and opens) before the host waits for its I/O.
    held: HeldFileIo,
    dir: tempfile::TempDir,
    file: Vec<u8>,
    h: TestHost,
    /// The commands that fill the room, with the block each reads or compares.
    fillers: Vec<(Cid, u64)>,
    /// The command that waits.
    waits: Cid,
    /// The write behind it and its data.
    behind: (Cid, Vec<u8>),
    /// The split write's data ([`Case::Slots`]).
    split: Vec<u8>,
}

impl Waiting {
    fn new(engine: Engine, case: Case, seed: u8) -> Waiting {
        let (dir, file, mut h, held) = held_host(engine, seed, ENTRIES);
        let memory = Bdev::malloc("malloc2", 512, 2048).unwrap();
        h.ctrl
            .attach_namespace(Namespace::new(Nsid(2), Arc::new(memory)))
            .unwrap();
        let fillers = match case {
            Case::Slots => held_reads(&mut h),
            Case::CompareBuf => held_compares(&mut h, &file),
        };
        let split = stamped(PIECES * 512, seed ^ 0x5A);
        let waits = match case {
            Case::Slots => {
                scatter(&h, SCATTER, &split);
                let descs = scattered(&h, SCATTER, PIECES);
                let dptr = segment(&h, &descs);
                h.submit(1, rw(0x01, 1, SPLIT_LBA, PIECES as u32, dptr))
            }
            Case::CompareBuf => {
                let at = COMPARES + u64::from(COMPARE_BUFS) * 4096;
                h.mem.write(at, &file[COMPARE_LBA as usize * 512..][..4096]);
                h.submit(1, compare(COMPARE_LBA, 8, h.prps(at, 4096)))
            }
        };
        let data = stamped(4096, seed ^ 0x33);
        h.mem.write(BEHIND, &data);
        let behind = h.submit(1, rw(0x01, 2, 0, 8, h.prps(BEHIND, 4096)));
        let mut w = Waiting {
            held,
            dir,
            file,
            h,
            fillers,
            waits,
            behind: (behind, data),
            split,
        };
        w.check_nothing_completes(engine, case);
        w
    }

    /// Enough passes to take every filler (32 commands per pass) go by with no CQE: the
    /// write behind the waiting command, which would complete in the pass that took it,
    /// is not taken.
    fn check_nothing_completes(&mut self, engine: Engine, case: Case) {
        for _ in 0..ENTRIES / 16 {
            self.h.poll();
            if let Some(c) = self.h.reap(1) {
                let what = if c.cid == self.behind.0.0 {
                    "the write behind the waiting command"
                } else {
                    "a command"
                };
                panic!("{engine:?} {case:?}: {what} completed while the room was held");
            }
        }
    }

    /// Poll until every command has its CQE; the statuses by command.
    fn statuses(&mut self) -> HashMap<u16, Status> {
        let n = self.fillers.len() + 2;
        let cqes: HashMap<u16, Status> = (0..n)
            .map(|_| next_cqe(&mut self.h))
            .map(|c| (c.cid, c.status()))
            .collect();
        assert_eq!(cqes.len(), n, "one CQE per command");
        cqes
    }

    /// Every filler succeeded, and each held read brought its block.
    fn check_fillers(&self, case: Case, statuses: &HashMap<u16, Status>) {
        for (i, &(cid, lba)) in self.fillers.iter().enumerate() {
            assert_eq!(statuses[&cid.0], Status::SUCCESS, "filler {i}");
            if let Case::Slots = case {
                let got = self.h.mem.read_vec(FILLERS + i as u64 * 512, 512);
                assert_eq!(got, self.file[lba as usize * 512..][..512], "filler {i}");
            }
        }
    }

    /// `blocks` blocks of namespace `nsid` from `slba`, read through the controller.
    fn read_back(&mut self, nsid: u32, slba: u64, blocks: u32) -> Vec<u8> {
        let len = u64::from(blocks) * 512;
        self.h.mem.write(READBACK, &vec![0xEE; len as usize]);
        let cid = self
            .h
            .submit(1, rw(0x02, nsid, slba, blocks, self.h.prps(READBACK, len)));
        let c = next_cqe(&mut self.h);
        assert_eq!((c.cid, c.status()), (cid.0, Status::SUCCESS), "read back");
        self.h.mem.read_vec(READBACK, len as usize)
    }
}

/// `FILE_SLOTS - 1` reads of one block each (block `i` into the `i`th buffer).
fn held_reads(h: &mut TestHost) -> Vec<(Cid, u64)> {
    (0..u64::from(FILE_SLOTS) - 1)
        .map(|i| {
            let dptr = h.prps(FILLERS + i * 512, 512);
            (h.submit(1, rw(0x02, 1, i, 1, dptr)), i)
        })
        .collect()
}

/// [`COMPARE_BUFS`] Compares of 8 blocks each with the file's data (the `i`th at block
/// `8 * i`).
fn held_compares(h: &mut TestHost, file: &[u8]) -> Vec<(Cid, u64)> {
    (0..u64::from(COMPARE_BUFS))
        .map(|i| {
            let (at, lba) = (COMPARES + i * 4096, i * 8);
            h.mem.write(at, &file[lba as usize * 512..][..4096]);
            (h.submit(1, compare(lba, 8, h.prps(at, 4096))), lba)
        })
        .collect()
}

/// Released, the waiting command runs (the split write lands whole, in order; the Compare
/// finds the file's data), and so does the write behind it.
fn waits_then_runs(case: Case) {
    for (engine, seed) in [(Engine::Ring, 21), (Engine::Workers, 22)] {
        let mut w = Waiting::new(engine, case, seed);
        w.held.release();
        let statuses = w.statuses();
        w.check_fillers(case, &statuses);
        assert_eq!(statuses[&w.waits.0], Status::SUCCESS, "{engine:?}: waiting");
        assert_eq!(
            statuses[&w.behind.0.0],
            Status::SUCCESS,
            "{engine:?}: behind"
        );
        if let Case::Slots = case {
            let back = w.read_back(1, SPLIT_LBA, PIECES as u32);
            assert!(back == w.split, "{engine:?}: the split write read back");
        }
        let back = w.read_back(2, 0, 8);
        assert_eq!(back, w.behind.1, "{engine:?}: the write behind read back");
    }
}

#[test]
fn a_transfer_short_of_ring_slots_waits_and_nothing_overtakes_it() {
    waits_then_runs(Case::Slots);
}

#[test]
fn a_compare_short_of_a_buffer_waits_and_nothing_overtakes_it() {
    waits_then_runs(Case::CompareBuf);
}

/// Delete I/O SQ waits for the held I/O (let go 200 ms into the deletion), then completes
/// the waiting command and the write behind it with Command Aborted due to SQ Deletion;
/// the split write wrote nothing.
fn waiting_is_aborted_with_its_sq(case: Case) {
    for (engine, seed) in [(Engine::Ring, 23), (Engine::Workers, 24)] {
        let mut w = Waiting::new(engine, case, seed);
        let opener = release_later(&w.held, 200);
        assert_eq!(w.h.admin(delete_sq(1)).status(), Status::SUCCESS);
        opener.join().unwrap();
        let statuses: HashMap<u16, Status> = std::iter::from_fn(|| w.h.reap(1))
            .map(|c| (c.cid, c.status()))
            .collect();
        assert_eq!(statuses.len(), w.fillers.len() + 2, "{engine:?}: CQEs");
        w.check_fillers(case, &statuses);
        let aborted = Status::ABORTED_SQ_DELETION;
        assert_eq!(statuses[&w.waits.0], aborted, "{engine:?}: waiting");
        assert_eq!(statuses[&w.behind.0.0], aborted, "{engine:?}: behind");
        if let Case::Slots = case {
            let path = w.dir.path().join("ns.img");
            let stored = std::fs::read(path).unwrap();
            let range = SPLIT_LBA as usize * 512..(SPLIT_LBA as usize + PIECES) * 512;
            assert!(
                stored[range.clone()] == w.file[range],
                "{engine:?}: wrote nothing"
            );
        }
    }
}

#[test]
fn a_transfer_waiting_for_ring_slots_is_aborted_with_its_sq() {
    waiting_is_aborted_with_its_sq(Case::Slots);
}

#[test]
fn a_compare_waiting_for_a_buffer_is_aborted_with_its_sq() {
    waiting_is_aborted_with_its_sq(Case::CompareBuf);
}
