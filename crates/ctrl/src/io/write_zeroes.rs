// SPDX-License-Identifier: Apache-2.0
//! Write Zeroes (NVM Command Set, 6.16). No data moves, so MDTS does not apply; with DEAC
//! the blocks are deallocated, which reads back as zeroes too (DLFEAT).

use nvmemu_spec::{Lba, Status};

use super::{bdev_status, byte_range};
use crate::namespace::Namespace;

/// Zero `blocks` blocks at `slba`.
pub(super) fn write_zeroes(
    ns: &Namespace,
    slba: Lba,
    blocks: u32,
    deallocate: bool,
) -> Result<(), Status> {
    let (offset, len) = byte_range(ns, slba, blocks)?;
    let bdev = ns.io();
    let res = if deallocate {
        bdev.deallocate(offset, len)
    } else {
        bdev.write_zeroes(offset, len)
    };
    res.map_err(|e| bdev_status(&e))
}
