// SPDX-License-Identifier: Apache-2.0
//! Dataset Management (NVM Command Set, 6.6): the range list is copied out of client memory
//! once into a stack array and every range is checked before any is deallocated (the work
//! itself is `zeroing.rs`'s).

use nvmemu_mem::GuestMemory;
use nvmemu_spec::command::DSM_MAX_RANGES;
use nvmemu_spec::{DataPtr, DsmAttributes, DsmRange, Lba, Status};
use zerocopy::{FromZeros, IntoBytes};

use super::byte_range;
use super::zeroing::ByteRanges;
use crate::dptr::copy_from_host;
use crate::namespace::Namespace;

/// The byte ranges a Dataset Management with `ranges` (1..=256) entries at `dptr`
/// deallocates, merged; `None` when it deallocates nothing (integral dataset hints need no
/// action).
pub(super) fn deallocate_ranges(
    ns: &Namespace,
    mem: &GuestMemory,
    ranges: u16,
    attrs: DsmAttributes,
    dptr: &DataPtr,
) -> Result<Option<ByteRanges>, Status> {
    if !attrs.deallocate {
        return Ok(None);
    }
    let mut list = [DsmRange::new_zeroed(); DSM_MAX_RANGES];
    let list = list
        .get_mut(..usize::from(ranges))
        .ok_or(Status::INVALID_FIELD)?;
    copy_from_host(mem, dptr, list.as_mut_bytes())?;
    let mut checked = [(0u64, 0u64); DSM_MAX_RANGES];
    for (r, out) in list.iter().zip(checked.iter_mut()) {
        *out = byte_range(ns, Lba(r.slba), r.blocks)?;
    }
    Ok(Some(ByteRanges::merged(checked.into_iter())))
}
