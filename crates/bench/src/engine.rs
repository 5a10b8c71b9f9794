// SPDX-License-Identifier: Apache-2.0
//! The I/O engine seam: what a job thread needs from one NVMe I/O queue pair.
//!
//! A job owns exactly one [`IoQueue`] for its whole life and drives it from one
//! pinned thread, so implementations need `Send` but never `Sync`.
//!
//! # Buffers
//! The engine owns one data buffer per in-flight *slot* (`0..slots`), allocated
//! once in [`IoQueue::setup`] (for the userspace driver: DMA memory shared with
//! the device, reached only through `nvmemu-mem` copies). A slot is busy from
//! [`IoQueue::submit`] until its completion is handed to the `reap` callback;
//! the job never reuses a busy slot. The bench never holds a reference into a
//! slot buffer: it copies whole payloads in ([`IoQueue::write_payload`]) before
//! a verify write and out ([`IoQueue::read_payload`]) after a verify read. Without
//! `--verify` no payload is copied per I/O: write buffers keep the pattern
//! written once at setup, read data is not looked at.
//!
//! # Batching
//! `submit` only queues a command (builds the SQE); nothing reaches the device
//! until [`IoQueue::ring`] publishes the batch (one SQ tail doorbell write).
//! `reap` polls for completions without blocking and reports each one once.

use thiserror::Error;

/// Direction of one I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// NVM Read.
    Read,
    /// NVM Write.
    Write,
    /// Dataset Management with Deallocate over the range (fio's trim); no data moves.
    Trim,
}

impl Op {
    /// Index used for per-direction arrays (`0` read, `1` write), as fio's `ddir`.
    pub fn index(self) -> usize {
        match self {
            Op::Read => 0,
            Op::Write => 1,
            Op::Trim => 2,
        }
    }
}

/// Shape of the namespace behind a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Logical block (LBA) size in bytes.
    pub block_size: u32,
    /// Namespace size in logical blocks (NSZE).
    pub num_blocks: u64,
    /// Largest transfer one command may carry, in bytes (MDTS-derived).
    pub max_transfer: u32,
}

/// Failure of one engine operation or of one I/O.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EngineError {
    /// The submission queue has no free entry; reap and retry.
    #[error("Submission queue full")]
    QueueFull,
    /// A slot index outside `0..slots` or a slot that is not set up.
    #[error("Invalid buffer slot {slot}")]
    InvalidSlot {
        /// The slot given.
        slot: usize,
    },
    /// The range does not fit the namespace or the slot buffer.
    #[error("Range lba {lba} + {blocks} blocks is out of range")]
    OutOfRange {
        /// First LBA.
        lba: u64,
        /// Block count.
        blocks: u32,
    },
    /// The device completed the command with a non-success NVMe status.
    #[error("Command failed with status sct={sct:#x} sc={sc:#x}")]
    Status {
        /// Status Code Type.
        sct: u8,
        /// Status Code.
        sc: u8,
    },
    /// Commands were in flight and none completed for `waited_ms`: the device (its
    /// server) is stopped or hung. The queue is given up.
    #[error(
        "No completion on queue {qid} for {waited_ms} ms with {in_flight} commands in flight \
         (is the server stopped or hung? --reply-timeout sets the wait)"
    )]
    Stalled {
        /// The queue's id.
        qid: u16,
        /// How long nothing completed.
        waited_ms: u64,
        /// Commands given up.
        in_flight: usize,
    },
    /// The transport or driver below failed.
    #[error("Transport failed: {reason}")]
    Transport {
        /// What failed, for the report.
        reason: String,
    },
}

/// One NVMe I/O queue pair as seen by a bench job. See the module docs.
pub trait IoQueue: Send {
    /// The namespace geometry.
    fn geometry(&self) -> Geometry;

    /// Allocates `slots` buffers of `slot_bytes` each, once, before any I/O.
    /// Called again only with the same arguments.
    fn setup(&mut self, slots: usize, slot_bytes: usize) -> Result<(), EngineError>;

    /// Copies `src` into the start of `slot`'s buffer (`src.len() <= slot_bytes`).
    fn write_payload(&mut self, slot: usize, src: &[u8]) -> Result<(), EngineError>;

    /// Copies the start of `slot`'s buffer into `dst` (`dst.len() <= slot_bytes`).
    fn read_payload(&mut self, slot: usize, dst: &mut [u8]) -> Result<(), EngineError>;

    /// Queues one command on `slot`'s buffer. Not visible to the device until
    /// [`IoQueue::ring`].
    fn submit(&mut self, slot: usize, op: Op, lba: u64, blocks: u32) -> Result<(), EngineError>;

    /// Publishes every command queued since the last ring (one doorbell write).
    fn ring(&mut self) -> Result<(), EngineError>;

    /// Polls for up to `max` completions, calling `done(slot, result)` once per
    /// completed command, and returns how many were reported. Never blocks.
    fn reap(&mut self, max: usize, done: &mut dyn FnMut(usize, Result<(), EngineError>)) -> usize;
}
