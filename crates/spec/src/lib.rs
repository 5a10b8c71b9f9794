// SPDX-License-Identifier: Apache-2.0
//! NVMe (Base 1.4) and PCI wire types, shared by the emulated controller and the driver.
//!
//! Owns: the byte layout of everything that crosses shared memory or a register (SQE, CQE,
//! identify structures, log pages, register fields), status codes and the typed IDs.
//! May depend on: no internal crate. Must never: do I/O, hold state, or use `unsafe`.
//!
//! Wire structs are `#[repr(C)]` zerocopy types with a compile-time size check. Raw values
//! from a peer (opcodes, FIDs, CNS) decode to enums with an `Unknown` fallback, so decoding
//! never panics.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::indexing_slicing)]

#[cfg(not(all(target_endian = "little", target_pointer_width = "64")))]
compile_error!("nvmemu supports little-endian 64-bit targets only");

pub mod command;
pub mod features;
pub mod identify;
pub mod ids;
pub mod log_page;
pub mod opcode;
pub mod queue_entry;
pub mod regs;
pub mod reservation;
pub mod sgl;
pub mod status;

pub use command::{AdminCommand, DataPtr, DsmAttributes, DsmRange, IoCommand, ReadWrite};
pub use ids::{Cid, Lba, Nsid, Qid};
pub use opcode::{AdminOpcode, IoOpcode};
pub use queue_entry::{Cqe, Psdt, Sqe};
pub use sgl::{SglDescriptor, SglKind};
pub use status::{Sct, Status};

/// The memory page size this project uses for PRPs (CC.MPS = 0).
pub const PAGE_SIZE: u64 = 4096;
