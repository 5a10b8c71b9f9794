// SPDX-License-Identifier: Apache-2.0
//! Block backends for nvmemu namespaces (SPDK's "bdev" layer).
//!
//! Owns: the storage behind a namespace and its I/O counters. A [`Bdev`] is a byte-addressed
//! device of `num_blocks` blocks of `block_size` bytes:
//! - **Malloc**: private anonymous memory, zero until written. By default every page is
//!   faulted in at creation ([`MallocBacking::Populated`], or from the hugetlbfs pool with
//!   `HugePages`), after a check that the machine has the memory, so reads never come from
//!   the kernel's zero page and a namespace too large is refused up front; Deallocate and
//!   Write Zeroes fill with zeroes and keep the pages. [`MallocBacking::Lazy`] keeps the
//!   sparse mapping (MAP_NORESERVE) whose pages are committed when first written and given
//!   back by Deallocate and large Write Zeroes.
//! - **Null**: no storage; reads return zeroes, writes are dropped (SPDK's null bdev).
//! - **File** (SPDK's aio and uring bdevs): a regular file or block device, `O_DIRECT` where
//!   the file system allows it; Write Zeroes and Deallocate punch holes, Flush is
//!   `fdatasync`. The controller runs every command on it through an io_uring of its own
//!   (or worker threads); the blocking calls here serve where it could make neither (see
//!   [`FileBacking`]).
//! - **Delay**: another bdev's storage under a new name, with a latency model (SPDK's
//!   delay bdev). Any bdev may carry a [`model::ModelConfig`]; the pollers apply it by
//!   posting each completion when the model says it is due.
//!
//! I/O goes through a [`BdevChannel`], one per user (each namespace has its own), which
//! counts it without a locked add (see [`BdevStats`]). Data moves between the bdev and a
//! caller's [`MmapRegion`] (client memory the controller has already translated) with one
//! bounds-checked copy; no allocation, lock or syscall on the read/write/compare path. Every method re-checks its byte range and returns
//! [`BdevError`] instead of panicking.
//!
//! May depend on: `nvmemu-mem` (for the buffers and the storage mapping), `crossbeam-utils`
//! (cache-line padding), `rustix` (the file bdev's system calls), `tracing`, `rand`, `rand_distr` and `rand_xoshiro` (the models' seeded draws). Must never: parse
//! NVMe commands (the controller turns LBAs into byte ranges), hold a lock on the I/O path,
//! or use `unsafe`.
//!
//! [`MmapRegion`]: nvmemu_mem::MmapRegion
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod bdev;
mod channel;
mod error;
pub mod fault;
mod file;
mod latency;
mod malloc;
pub mod model;
mod qos;
mod stats;

pub use bdev::{Bdev, BdevKind};
pub use channel::{BdevChannel, Started};
pub use error::{BdevError, BdevErrorKind, BdevOp};
pub use file::{FileBacking, FileEngine};
pub use latency::Latency;
pub use malloc::{MallocBacking, MemoryHold, MemoryReport, WRITE_ZEROES_DISCARD_THRESHOLD};
pub use qos::{QosLimits, QosPool, QosValues, any_qos_limit};
pub use stats::{BdevStats, BdevStatsSnapshot};
