// SPDX-License-Identifier: Apache-2.0
//! Read, Write and Compare (NVM Command Set, 6.7 / 6.15 / 6.2): one bdev copy per contiguous
//! piece of client memory.

use nvmemu_mem::{Access, GuestMemory};
use nvmemu_spec::{DataPtr, Lba, Status};

use super::{bdev_status, byte_range};
use crate::dptr::{Chunk, walk};
use crate::namespace::Namespace;

/// The byte range of a data-moving command, with the MDTS check.
fn transfer(ns: &Namespace, slba: Lba, blocks: u32, max: u64) -> Result<(u64, u64), Status> {
    let (offset, len) = byte_range(ns, slba, blocks)?;
    if len > max {
        return Err(Status::INVALID_FIELD);
    }
    Ok((offset, len))
}

/// Read: namespace -> client memory. Returns the bytes moved.
pub(super) fn read(
    ns: &Namespace,
    mem: &GuestMemory,
    slba: Lba,
    blocks: u32,
    dptr: &DataPtr,
    max: u64,
) -> Result<u64, Status> {
    let (mut pos, len) = transfer(ns, slba, blocks, max)?;
    let bdev = ns.bdev();
    walk(mem, dptr, len, Access::Write, |chunk| {
        if let Chunk::Mem {
            region,
            offset,
            len,
        } = chunk
        {
            bdev.read(pos, region, offset, len)
                .map_err(|e| bdev_status(&e))?;
        }
        pos += chunk.len();
        Ok(())
    })?;
    Ok(len)
}

/// Write: client memory -> namespace. Returns the bytes moved.
pub(super) fn write(
    ns: &Namespace,
    mem: &GuestMemory,
    slba: Lba,
    blocks: u32,
    dptr: &DataPtr,
    max: u64,
) -> Result<u64, Status> {
    let (mut pos, len) = transfer(ns, slba, blocks, max)?;
    let bdev = ns.bdev();
    walk(mem, dptr, len, Access::Read, |chunk| {
        if let Chunk::Mem {
            region,
            offset,
            len,
        } = chunk
        {
            bdev.write(pos, region, offset, len)
                .map_err(|e| bdev_status(&e))?;
        }
        pos += chunk.len();
        Ok(())
    })?;
    Ok(len)
}

/// Compare: Compare Failure at the first piece that differs.
pub(super) fn compare(
    ns: &Namespace,
    mem: &GuestMemory,
    slba: Lba,
    blocks: u32,
    dptr: &DataPtr,
    max: u64,
) -> Result<(), Status> {
    let (mut pos, len) = transfer(ns, slba, blocks, max)?;
    let bdev = ns.bdev();
    walk(mem, dptr, len, Access::Read, |chunk| {
        if let Chunk::Mem {
            region,
            offset,
            len,
        } = chunk
            && !bdev
                .compare(pos, region, offset, len)
                .map_err(|e| bdev_status(&e))?
        {
            return Err(Status::COMPARE_FAILURE);
        }
        pos += chunk.len();
        Ok(())
    })
}
