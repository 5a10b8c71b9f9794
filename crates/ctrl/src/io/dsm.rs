// SPDX-License-Identifier: Apache-2.0
//! Dataset Management (NVM Command Set, 6.6): the range list is copied out of client memory
//! once into a stack array, every range is checked, and only then are ranges deallocated.

use nvmemu_mem::GuestMemory;
use nvmemu_spec::command::DSM_MAX_RANGES;
use nvmemu_spec::{DataPtr, DsmAttributes, DsmRange, Lba, Status};
use zerocopy::{FromZeros, IntoBytes};

use super::{bdev_status, byte_range};
use crate::dptr::copy_from_host;
use crate::namespace::Namespace;

/// Dataset Management with `ranges` (1..=256) entries at `dptr`.
pub(super) fn dataset_management(
    ns: &Namespace,
    mem: &GuestMemory,
    ranges: u16,
    attrs: DsmAttributes,
    dptr: &DataPtr,
) -> Result<(), Status> {
    if !attrs.deallocate {
        // Integral dataset hints need no action.
        return Ok(());
    }
    let mut list = [DsmRange::new_zeroed(); DSM_MAX_RANGES];
    let list = list
        .get_mut(..usize::from(ranges))
        .ok_or(Status::INVALID_FIELD)?;
    copy_from_host(mem, dptr, list.as_mut_bytes())?;
    for r in list.iter() {
        byte_range(ns, Lba(r.slba), r.blocks)?;
    }
    for r in list.iter().filter(|r| r.blocks > 0) {
        let (offset, len) = byte_range(ns, Lba(r.slba), r.blocks)?;
        ns.io()
            .deallocate(offset, len)
            .map_err(|e| bdev_status(&e))?;
    }
    Ok(())
}
