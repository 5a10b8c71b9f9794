// SPDX-License-Identifier: Apache-2.0
//! Write Zeroes (NVM Command Set, 6.16). No data moves, so MDTS does not apply; with DEAC
//! the blocks are deallocated, which reads back as zeroes too (DLFEAT). The work itself is
//! `zeroing.rs`'s.

use nvmemu_bdev::BdevOp;
use nvmemu_spec::{Lba, Status};

use super::byte_range;
use super::zeroing::ByteRanges;
use crate::namespace::Namespace;

/// The operation and byte range of a Write Zeroes of `blocks` blocks at `slba`.
pub(super) fn write_zeroes_range(
    ns: &Namespace,
    slba: Lba,
    blocks: u32,
    deallocate: bool,
) -> Result<(BdevOp, ByteRanges), Status> {
    let range = byte_range(ns, slba, blocks)?;
    let op = if deallocate {
        BdevOp::Deallocate
    } else {
        BdevOp::WriteZeroes
    };
    Ok((op, ByteRanges::merged(std::iter::once(range))))
}
