// SPDX-License-Identifier: Apache-2.0
//! [`BenchError`]: why a run could not start or finish.

use thiserror::Error;

/// Why a run could not start or finish.
#[derive(Debug, Error)]
pub enum BenchError {
    /// `numjobs` and the number of queues given differ.
    #[error("Got {queues} queues for {numjobs} jobs")]
    QueueCount {
        /// Queues passed.
        queues: usize,
        /// `--numjobs`.
        numjobs: u32,
    },
    /// `bs` is not a non-zero multiple of the LBA size, or exceeds the transfer limit.
    #[error("Block size {bs} does not fit LBA size {block_size} and max transfer {max_transfer}")]
    BlockSize {
        /// `--bs`.
        bs: u64,
        /// LBA size.
        block_size: u32,
        /// Transfer limit.
        max_transfer: u32,
    },
    /// `offset`/`size` fall outside the namespace or hold less than one block.
    #[error("Range offset {offset} size {size} does not fit a namespace of {capacity} bytes")]
    Range {
        /// Start, bytes.
        offset: u64,
        /// Length, bytes.
        size: u64,
        /// Namespace bytes.
        capacity: u64,
    },
    /// `size` is below the smallest block size: not one I/O fits (fio's wording).
    #[error(
        "Size too small, must not be less than minimum block size: {size} < {min_bs} \
         (raise --size or lower --bs)"
    )]
    SizeTooSmall {
        /// The range's length, bytes.
        size: u64,
        /// The smallest block size of the job, bytes.
        min_bs: u64,
    },
    /// Options that cannot go together; `reason` says which and what to change.
    #[error("{reason}")]
    Conflict {
        /// What is wrong and what to do.
        reason: &'static str,
    },
    /// `time_based` without `runtime` would never end.
    #[error("time_based needs a runtime")]
    TimeBasedWithoutRuntime,
    /// Verify needs LBAs of at least 64 bytes and a bounded generation table.
    #[error("Verify unsupported here: {reason}")]
    Verify {
        /// Why.
        reason: &'static str,
    },
    /// A job thread could not be started.
    #[error("Could not start job thread")]
    Spawn(#[source] std::io::Error),
    /// A job thread could not be pinned.
    #[error("Could not pin job {job} to cpu {cpu}")]
    Pin {
        /// Job number.
        job: u32,
        /// CPU.
        cpu: usize,
        /// Cause.
        #[source]
        source: rustix::io::Errno,
    },
    /// A job thread panicked (a bug).
    #[error("Job {job} panicked")]
    JobPanicked {
        /// Job number.
        job: u32,
    },
}
