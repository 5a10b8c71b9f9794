// SPDX-License-Identifier: Apache-2.0
//! The timing of file commands, which complete in a later pass than the one that took them.
//! A command of a timed namespace (`timing`) keeps its *seen* and *fetch* readings from the
//! batch that took it (waiting for ring room included) and gets its *done* reading when its
//! last operation is reaped, so its backend layer is what the file's I/O cost, submission
//! to reaping; its CQE is then held with the readings (`hold.rs`), which record the
//! complete and interrupt layers and the bdev's latency when it is posted, as for a
//! modelled command. A command of a bdev that is timed while the controller does not time
//! its namespace (no histogram on this controller) keeps one reading from its start
//! instead, for its bdev channel's latency (`BdevChannel::begin`, taken back by `count`).
//!
//! Off, taking a command costs a test of the controller's timing and of its bdev's switch:
//! no clock read, nothing stored but the enum's tag.

use nvmemu_bdev::BdevOp;
use nvmemu_mem::TscClock;
use nvmemu_spec::{Nsid, Sqe};

use super::Started;
use crate::Controller;
use crate::io::active_ns;
use crate::timing::HeldStamps;

/// How a file command in flight is timed.
#[derive(Debug, Clone, Copy)]
pub(super) enum Clocked {
    Off,
    /// Its namespace is timed: its readings so far.
    Layers(HeldStamps),
    /// Only its bdev's latency: the channel's reading at its start (always timed).
    Bdev(nvmemu_bdev::Started),
}

impl Clocked {
    /// Its readings with *done* now, for its held CQE (Layers only: no clock read
    /// otherwise).
    pub(super) fn finished(self, ok: bool) -> Option<HeldStamps> {
        match self {
            Clocked::Layers(h) => Some(h.finished(ok, TscClock::ticks())),
            Clocked::Off | Clocked::Bdev(_) => None,
        }
    }

    /// The reading its bdev channel's latency starts at (untimed unless the channel times
    /// it).
    pub(super) fn bdev_start(self) -> nvmemu_bdev::Started {
        match self {
            Clocked::Bdev(started) => started,
            Clocked::Off | Clocked::Layers(_) => nvmemu_bdev::Started::UNTIMED,
        }
    }
}

impl Controller {
    /// How file command `sqe` (bdev operation `op`), being taken in the open batch, is
    /// timed, as its namespace and bdev say.
    pub(super) fn clock_taken(&self, sqe: &Sqe, op: BdevOp) -> Clocked {
        match self.instruments.file_taken(sqe.nsid, sqe.opcode()) {
            Some(h) => Clocked::Layers(h),
            None => active_ns(&self.namespaces, Nsid(sqe.nsid))
                .ok()
                .map(|ns| ns.io().begin(op))
                .filter(|started| started.is_timed())
                .map_or(Clocked::Off, Clocked::Bdev),
        }
    }

    /// A command timed as `clocked` was started in the open batch: once queued, the next
    /// command of the batch is fetched after its submission work (which belongs to that
    /// one's queued layer, not to its backend layer).
    pub(super) fn clock_queued(&mut self, clocked: Clocked, started: &Started) {
        if let (Clocked::Layers(_), Started::Queued) = (clocked, started) {
            self.instruments.file_queued();
        }
    }
}
