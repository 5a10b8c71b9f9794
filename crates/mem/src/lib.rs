// SPDX-License-Identifier: Apache-2.0
//! Shared memory for nvmemu: the only crate with `unsafe`.
//!
//! Owns: mappings of file descriptors shared with another process (client RAM, the doorbell
//! page, DMA buffers), anonymous mappings (the malloc namespace: lazy, or populated up front after a check against
//! `/proc/meminfo`, with its residency read from `/proc/self/smaps`, bound to a NUMA node
//! with `mbind` where asked), bounds-checked raw-pointer access
//! to them (copies and atomics), and the table that turns a client's IOVA into a place in one of those mappings.
//! Also the Linux VFIO ioctls a userspace driver on a PCI function needs (`vfio`), since an
//! ioctl that passes a pointer is `unsafe`, the TSC clock (`clock`), since `rdtsc` is an
//! `unsafe` intrinsic, and file I/O through io_uring (`uring`), since queuing an operation
//! that points at client memory is `unsafe`. The `/proc/meminfo` and smaps parsing (`meminfo`) has no `unsafe` but
//! stays: the anonymous mappings' population check and residency report read it, and this
//! crate may depend on no other.
//! May depend on: no internal crate. Must never: hand out a Rust reference (`&[u8]`, `&T`) into
//! memory another process can write, or let a mapping be unmapped while a `MmapRegion` handle
//! to it exists.
//!
//! Memory another party writes can change under us at any moment, so every access is a copy
//! (`read_obj`, `copy_to`, ...) or an atomic (`load_acquire_u32`, `store_release_u32`); a value
//! read once is validated on the copy, never re-read.

#![deny(missing_docs)]

#[cfg(not(all(target_pointer_width = "64", target_endian = "little")))]
compile_error!("nvmemu-mem builds only for little-endian 64-bit targets (u64 offsets are usize)");

mod backing;
mod clock;
mod dma_error;
mod fault;
mod guest;
mod memfd;
mod meminfo;
mod mmap;
mod numa;
mod region_table;
pub mod uring;
pub mod vfio;

pub use backing::{MEMORY_HEADROOM, PROGRESS_INTERVAL, PageKind, Progress};
pub use clock::{TscClock, global_clock};
pub use dma_error::DmaError;
pub use fault::{faults_recovered, thread_faults};
pub use guest::{Access, DmaBacking, DmaRegion, GuestMemory, Iova};
pub use memfd::{create_memfd, page_size_of};
pub use meminfo::{ByteSize, MemInfo, Residency};
pub use mmap::{MAX_SEND_PIECES, MemError, MmapRegion, Protection, SendPiece, SendPieces};
pub use numa::{MAX_NUMA_NODES, NumaMaps};
