// SPDX-License-Identifier: Apache-2.0
//! Read, Write and Compare (NVM Command Set, 6.7 / 6.15 / 6.2): one bdev copy per contiguous
//! piece of client memory.

use nvmemu_bdev::fault::IoError;
use nvmemu_bdev::{BdevChannel, BdevOp};
use nvmemu_mem::{Access, GuestMemory, MmapRegion};
use nvmemu_spec::{DataPtr, Lba, ReadWrite, Status};

use super::{bdev_status, byte_range};
use crate::dptr::{Chunk, walk};
use crate::namespace::Namespace;

/// The byte range of a data-moving command, with the MDTS check.
pub(super) fn transfer(
    ns: &Namespace,
    slba: Lba,
    blocks: u32,
    max: u64,
) -> Result<(u64, u64), Status> {
    let (offset, len) = byte_range(ns, slba, blocks)?;
    if len > max {
        return Err(Status::INVALID_FIELD);
    }
    Ok((offset, len))
}

/// Walk the data pointer of a data-moving command and hand each contiguous piece of client
/// memory to `piece(bdev_offset, region, region_offset, len)`; bit-bucket pieces only advance
/// the namespace position. Returns the bytes the command covers and those of its pieces in
/// client memory (fewer when an SGL has bit buckets).
fn for_each_piece(
    ns: &Namespace,
    mem: &GuestMemory,
    (slba, blocks, dptr, max): (Lba, u32, &DataPtr, u64),
    access: Access,
    mut piece: impl FnMut(&BdevChannel, u64, &MmapRegion, u64, u64) -> Result<(), Status>,
) -> Result<(u64, u64), Status> {
    let (mut pos, len) = transfer(ns, slba, blocks, max)?;
    let bdev = ns.io();
    // Counted on the rare bit bucket only, not on every piece.
    let mut skipped = 0;
    // This closure and the `piece` closures of Read and Write are always inlined: left to
    // the inliner, each piece went through two calls and a closure environment built on
    // the stack (about 25 instructions per one-piece Read).
    walk(
        mem,
        dptr,
        len,
        access,
        #[inline(always)]
        |chunk| {
            match chunk {
                Chunk::Mem {
                    region,
                    offset,
                    len,
                } => piece(bdev, pos, region, offset, len)?,
                Chunk::Skip(len) => skipped += len,
            }
            pos += chunk.len();
            Ok(())
        },
    )?;
    Ok((len, len.saturating_sub(skipped)))
}

/// Read: namespace -> client memory, one bdev Read however many pieces the data pointer
/// makes. Returns the bytes moved.
pub(super) fn read(
    ns: &Namespace,
    mem: &GuestMemory,
    slba: Lba,
    blocks: u32,
    dptr: &DataPtr,
    max: u64,
) -> Result<u64, Status> {
    let started = ns.io().begin(BdevOp::Read);
    // The device writes client memory.
    let (len, moved) = for_each_piece(
        ns,
        mem,
        (slba, blocks, dptr, max),
        Access::Write,
        #[inline(always)]
        |bdev, pos, r, off, len| {
            bdev.read_piece(pos, r, off, len)
                .map_err(|e| bdev_status(&e))
        },
    )?;
    ns.io().count(BdevOp::Read, moved, started);
    Ok(len)
}

/// A Read whose data stays in the namespace's memory: the data pointer is walked and
/// checked as `read` does (the host's buffers are not written) and the bdev counts the
/// read. Returns the namespace byte range the data lies in.
pub(super) fn read_in_place(
    ns: &Namespace,
    mem: &GuestMemory,
    c: &ReadWrite,
    max: u64,
) -> Result<(u64, u64), Status> {
    let command = (c.slba, c.blocks, &c.dptr, max);
    let (len, _) = for_each_piece(ns, mem, command, Access::Write, |_, _, _, _, _| Ok(()))?;
    // In range: `for_each_piece` checked the blocks against the namespace.
    let offset = c.slba.0 << ns.block_shift();
    ns.io()
        .count_read_in_place(offset, len)
        .map_err(|e| bdev_status(&e))?;
    Ok((offset, len))
}

/// Write: client memory -> namespace, one bdev Write however many pieces the data pointer
/// makes. Returns the bytes moved.
pub(super) fn write(
    ns: &Namespace,
    mem: &GuestMemory,
    slba: Lba,
    blocks: u32,
    dptr: &DataPtr,
    max: u64,
) -> Result<u64, Status> {
    let started = ns.io().begin(BdevOp::Write);
    let (len, moved) = for_each_piece(
        ns,
        mem,
        (slba, blocks, dptr, max),
        Access::Read,
        #[inline(always)]
        |bdev, pos, r, off, len| {
            bdev.write_piece(pos, r, off, len)
                .map_err(|e| bdev_status(&e))
        },
    )?;
    ns.io().count(BdevOp::Write, moved, started);
    Ok(len)
}

/// Compare: Compare Failure at the first piece that differs (counted as the bdev's
/// `miscompare` in `bdev_get_iostat`, as SPDK's bdev layer counts it). One bdev Compare
/// once the command has its verdict, equal or not (as a file namespace's is counted), with
/// the bytes compared until then.
pub(super) fn compare(
    ns: &Namespace,
    mem: &GuestMemory,
    slba: Lba,
    blocks: u32,
    dptr: &DataPtr,
    max: u64,
) -> Result<(), Status> {
    let started = ns.io().begin(BdevOp::Compare);
    let mut compared = 0;
    let verdict = for_each_piece(
        ns,
        mem,
        (slba, blocks, dptr, max),
        Access::Read,
        |bdev, pos, r, off, len| {
            let equal = bdev
                .compare_piece(pos, r, off, len)
                .map_err(|e| bdev_status(&e))?;
            compared += len;
            if equal {
                return Ok(());
            }
            ns.bdev().faults().count_error(IoError::Miscompare);
            Err(Status::COMPARE_FAILURE)
        },
    );
    if matches!(verdict, Ok(_) | Err(Status::COMPARE_FAILURE)) {
        ns.io().count(BdevOp::Compare, compared, started);
    }
    verdict.map(|_| ())
}
