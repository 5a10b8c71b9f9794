// SPDX-License-Identifier: Apache-2.0
//! The driver's error types: one for per-command results and queue operations (`NvmeError`),
//! one for controller-level operations (`DriverError`), one for the device link
//! (`TransportError`, in `transport`).

use nvmemu_mem::MemError;
use nvmemu_spec::{Cid, Nsid, Qid, Status};

use crate::dma::DmaAllocError;
use crate::transport::TransportError;

/// Why a command, or an attempt to submit or reap one, failed.
///
/// `Status` is the device's answer; every other variant is found by the driver before a
/// command reaches the device, or is a protocol violation in what the device wrote back.
#[derive(Debug, thiserror::Error)]
pub enum NvmeError {
    /// The controller completed the command with a non-success status.
    #[error("command failed with status {0}")]
    Status(Status),
    /// Every command slot of the queue is in flight.
    #[error("queue {qid:?} is full ({slots} commands in flight)")]
    QueueFull {
        /// The queue.
        qid: Qid,
        /// Number of command slots.
        slots: u16,
    },
    /// The buffer is shorter than the transfer.
    #[error("buffer of {len} bytes is too small for a transfer of {needed} bytes")]
    BufferTooSmall {
        /// Bytes the command transfers.
        needed: u64,
        /// Bytes in the buffer.
        len: u64,
    },
    /// The transfer is larger than MDTS or the PRP list space of a command slot allows.
    #[error("transfer of {bytes} bytes exceeds the maximum of {max} bytes")]
    TransferTooLarge {
        /// Bytes requested.
        bytes: u64,
        /// Largest transfer this queue pair can describe.
        max: u64,
    },
    /// A PRP entry must be dword aligned (NVMe Base 4.3, PRP "Offset" bits 1:0 cleared).
    #[error("buffer IOVA {iova:#x} is not dword aligned")]
    BufferMisaligned {
        /// The offending IOVA.
        iova: u64,
    },
    /// A zero-length transfer or block count.
    #[error("block count {0} is outside 1..=65536")]
    InvalidBlockCount(u32),
    /// The range lies (partly) beyond the namespace.
    #[error("LBA range {slba:#x} + {nblocks} exceeds namespace size {nsze:#x}")]
    LbaOutOfRange {
        /// First LBA.
        slba: u64,
        /// Number of blocks.
        nblocks: u32,
        /// Namespace size in blocks.
        nsze: u64,
    },
    /// A fixed-buffer command named a buffer that is not registered.
    #[error("fixed buffer {index} is not registered ({registered} are)")]
    NoFixedBuffer {
        /// The index given.
        index: usize,
        /// How many buffers are registered.
        registered: usize,
    },
    /// The namespace was not reported active at attach time.
    #[error("namespace {0:?} is not active")]
    UnknownNamespace(Nsid),
    /// Dataset Management takes 1 to 256 ranges.
    #[error("{0} ranges given, Dataset Management takes 1 to 256")]
    BadRangeCount(usize),
    /// A blocking helper was called while asynchronous commands are in flight.
    #[error("{0} commands are in flight; blocking helpers need an idle queue pair")]
    Busy(u16),
    /// A completion named a CID that is not in flight (never issued, or completed twice).
    #[error("completion on queue {qid:?} for CID {cid:?} that is not in flight")]
    UnknownCid {
        /// The queue.
        qid: Qid,
        /// The CID the device reported.
        cid: Cid,
    },
    /// A completion named another submission queue.
    #[error("completion on queue {qid:?} names SQ {sqid}")]
    WrongSqid {
        /// The queue.
        qid: Qid,
        /// The SQID the device reported.
        sqid: u16,
    },
    /// A completion reported an SQ head outside the queue.
    #[error("completion on queue {qid:?} reports SQ head {sqhd} of a {depth}-entry queue")]
    BadSqHead {
        /// The queue.
        qid: Qid,
        /// The reported SQHD.
        sqhd: u16,
        /// Queue depth.
        depth: u16,
    },
    /// A blocking command got no completion in time.
    #[error("no completion on queue {qid:?} within {millis} ms")]
    Timeout {
        /// The queue.
        qid: Qid,
        /// How long the driver waited.
        millis: u64,
    },
    /// Access to queue or buffer memory failed (a driver bug, reported rather than panicking).
    #[error("queue or buffer memory access failed")]
    Mem(#[from] MemError),
}

/// Why attaching to, configuring or shutting down a controller failed.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The device link failed.
    #[error("transport failed")]
    Transport(#[from] TransportError),
    /// A command failed or could not be issued.
    #[error("command failed")]
    Nvme(#[from] NvmeError),
    /// The DMA pool could not satisfy a request.
    #[error("DMA allocation failed")]
    Dma(#[from] DmaAllocError),
    /// Mapping or accessing memory failed.
    #[error("memory operation failed")]
    Mem(#[from] MemError),
    /// CSTS did not reach the expected state in time.
    #[error("timed out after {millis} ms waiting for {what}")]
    Timeout {
        /// What was awaited (e.g. "CSTS.RDY=1").
        what: &'static str,
        /// How long the driver waited.
        millis: u64,
    },
    /// CSTS.CFS is set.
    #[error("controller reports fatal status (CSTS {csts:#x})")]
    ControllerFatal {
        /// The CSTS value read.
        csts: u32,
    },
    /// The controller lacks something this driver needs.
    #[error("controller unsupported: {0}")]
    Unsupported(String),
    /// The caller asked for something impossible (zero queues, depth < 2, ...).
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// The controller granted fewer I/O queues than requested.
    #[error("controller granted {granted} I/O queues, {requested} requested")]
    TooFewQueues {
        /// Queues asked for.
        requested: u16,
        /// Queues granted (min of NSQA and NCQA, one-based).
        granted: u32,
    },
    /// The controller was already shut down.
    #[error("controller is shut down")]
    ShutDown,
}
