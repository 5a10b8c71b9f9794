// SPDX-License-Identifier: Apache-2.0
//! The NVM command set I/O commands: routing, namespace lookup and counters only; each
//! command family has its own file.

mod dsm;
pub(crate) mod file_io;
mod flush;
mod in_place;
mod reservation;
mod rw;
mod write_zeroes;
pub(crate) mod zeroing;

use nvmemu_bdev::{BdevError, BdevErrorKind, BdevOp};
use nvmemu_spec::{IoCommand, IoOpcode, Lba, Nsid, Qid, ReadWrite, Sqe, Status};

use crate::Controller;
use crate::namespace::Namespace;

pub use in_place::InPlaceRead;
pub(crate) use in_place::InPlaceTable;

impl Controller {
    /// Execute one I/O command taken from `sqid`. `None`: the command was set aside and
    /// completes in a later pass (a large Deallocate or Write Zeroes, see `zeroing.rs`; a
    /// file namespace's I/O, see `file_io/`). Always inlined into the poll loop: called,
    /// its frame and its `Option<Result>` passed back through memory cost about 20
    /// instructions per command; the injection paths call [`Self::exec_io_outlined`].
    #[inline(always)]
    pub(crate) fn exec_io(&mut self, sqid: Qid, sqe: &Sqe) -> Option<Result<u32, Status>> {
        // The hot path skips `IoCommand` (see `ReadWrite::decode`).
        match ReadWrite::decode(sqe) {
            // One predictable branch when no namespace is a file and no queue takes Reads
            // in place.
            Some(Ok(c)) if self.rw_detour => self.detour_read_write(sqid, sqe, &c),
            Some(Ok(c)) => Some(self.read_write(sqid, &c)),
            Some(Err(s)) => Some(Err(s)),
            None => self.exec_other_io(sqid, sqe),
        }
    }

    /// [`Self::exec_io`] out of line, for the paths that are not the poll loop's.
    #[inline(never)]
    pub(crate) fn exec_io_outlined(&mut self, sqid: Qid, sqe: &Sqe) -> Option<Result<u32, Status>> {
        self.exec_io(sqid, sqe)
    }

    /// A Read or Write when some namespace is a file (`file_io/`) or some queue takes
    /// Reads in place (`in_place.rs`); what neither takes is copied as usual.
    fn detour_read_write(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        c: &ReadWrite,
    ) -> Option<Result<u32, Status>> {
        if self.file_on {
            match self.file_read_write(sqid, sqe, c) {
                file_io::Started::NotHere => {}
                file_io::Started::Queued => return None,
                file_io::Started::Failed(s) => return Some(Err(s)),
            }
        }
        if !c.write
            && self.in_place_on
            && let Some(result) = self.read_in_place(sqid, sqe.cid(), c)
        {
            return Some(result);
        }
        Some(self.read_write(sqid, c))
    }

    #[inline(never)]
    fn exec_other_io(&mut self, sqid: Qid, sqe: &Sqe) -> Option<Result<u32, Status>> {
        let cmd = match IoCommand::decode(sqe) {
            Ok(cmd) => cmd,
            Err(s) => return Some(Err(s)),
        };
        let max = self.max_transfer();
        let zero = match cmd {
            // Taken by `exec_io` before it gets here.
            IoCommand::ReadWrite(c) => return Some(self.read_write(sqid, &c)),
            IoCommand::Compare {
                nsid,
                slba,
                blocks,
                dptr,
            } => {
                self.counters.host_read_commands += 1;
                if self.file_on {
                    match self.file_compare(sqid, sqe, nsid, (slba, blocks)) {
                        file_io::Started::NotHere => {}
                        file_io::Started::Queued => return None,
                        file_io::Started::Failed(s) => return Some(Err(s)),
                    }
                }
                let ns = self.accessible_ns(nsid, false);
                return Some(ns.and_then(|ns| {
                    rw::compare(ns, &self.mem, slba, blocks, &dptr, max).map(|()| 0)
                }));
            }
            IoCommand::Flush { nsid } => {
                if nsid != Nsid::BROADCAST
                    && let Err(s) = self.accessible_ns(nsid, true)
                {
                    return Some(Err(s));
                }
                if self.file_on {
                    match self.file_flush(sqid, sqe, nsid) {
                        file_io::Started::NotHere => {}
                        file_io::Started::Queued => return None,
                        file_io::Started::Failed(s) => return Some(Err(s)),
                    }
                }
                return Some(flush::flush(&self.namespaces, nsid).map(|()| 0));
            }
            IoCommand::WriteZeroes {
                nsid,
                slba,
                blocks,
                deallocate,
                fua: _,
            } => self.accessible_ns(nsid, true).and_then(|ns| {
                write_zeroes::write_zeroes_range(ns, slba, blocks, deallocate)
                    .map(|(op, r)| Some((nsid, op, r)))
            }),
            IoCommand::DatasetManagement {
                nsid,
                ranges,
                attrs,
                dptr,
            } => self.accessible_ns(nsid, true).and_then(|ns| {
                dsm::deallocate_ranges(ns, &self.mem, ranges, attrs, &dptr)
                    .map(|r| r.map(|r| (nsid, BdevOp::Deallocate, r)))
            }),
            IoCommand::Reservation(cmd) => return Some(self.reservation(cmd)),
            IoCommand::Unknown(opcode) => {
                tracing::debug!(target: "guest", opcode, "unsupported I/O opcode");
                return Some(Err(Status::INVALID_OPCODE));
            }
        };
        match zero {
            Ok(Some((nsid, op, ranges))) => self.zero_ranges((sqid, sqe), nsid, op, &ranges),
            Ok(None) => Some(Ok(0)),
            Err(s) => Some(Err(s)),
        }
    }

    /// A Read (`write` false) or Write of `blocks` blocks at `slba`: the data move, then the
    /// command and byte counters. Always inlined, so the hot path's fields stay in
    /// registers (see `ReadWrite::decode`).
    #[inline(always)]
    fn read_write(&mut self, sqid: Qid, c: &ReadWrite) -> Result<u32, Status> {
        let max = self.max_transfer();
        let ns = active_ns(&self.namespaces, c.nsid)?;
        ns.reservations().check(c.write, || self.host())?;
        let (slba, blocks, dptr) = (c.slba, c.blocks, &c.dptr);
        if c.write {
            let n = rw::write(ns, &self.mem, slba, blocks, dptr, max)?;
            self.counters.host_write_commands += 1;
            self.count_bytes(sqid, 0, n);
        } else {
            let n = rw::read(ns, &self.mem, slba, blocks, dptr, max)?;
            self.counters.host_read_commands += 1;
            self.count_bytes(sqid, n, 0);
        }
        Ok(0)
    }

    /// Add a command's bytes to the controller's and the SQ's counters.
    #[inline(always)]
    fn count_bytes(&mut self, sqid: Qid, read: u64, written: u64) {
        self.counters.bytes_read += read;
        self.counters.bytes_written += written;
        if let Some(sq) = self.queues.sq_mut(sqid) {
            sq.stats.bytes_read += read;
            sq.stats.bytes_written += written;
        }
    }
}

impl Controller {
    /// The attached namespace `nsid` if its reservation lets this controller's host read
    /// it (or write it, with `write`); Reservation Conflict if not.
    fn accessible_ns(&self, nsid: Nsid, write: bool) -> Result<&Namespace, Status> {
        let ns = active_ns(&self.namespaces, nsid)?;
        ns.reservations().check(write, || self.host())?;
        Ok(ns)
    }
}

/// Start fetching the namespace data of a queued Read into the cache (a hint only: the
/// command is validated when it runs). Issued for a whole batch before any of it runs, so
/// the cache misses of its commands overlap. Reads only the fields it needs (opcode, NSID,
/// SLBA, NLB) of the copy, without `ReadWrite::decode`'s fuse and data-pointer checks: a
/// hint for a command that then fails costs nothing but the lines.
#[inline]
pub(crate) fn prefetch_read(namespaces: &[Option<Namespace>], sqe: &Sqe) {
    if sqe.opcode() != u8::from(IoOpcode::Read) {
        return;
    }
    let Ok(ns) = active_ns(namespaces, Nsid(sqe.nsid)) else {
        return;
    };
    let slba = u64::from(sqe.cdw10) | (u64::from(sqe.cdw11) << 32);
    let blocks = u64::from(sqe.cdw12 & 0xFFFF) + 1;
    let shift = ns.block_shift();
    if let (Some(off), Some(len)) = (slba.checked_shl(shift), blocks.checked_shl(shift))
        && off >> shift == slba
    {
        ns.io().prefetch(off, len);
    }
}

/// The attached namespace `nsid`; 0, broadcast and inactive NSIDs are Invalid Namespace.
pub(crate) fn active_ns(
    namespaces: &[Option<Namespace>],
    nsid: Nsid,
) -> Result<&Namespace, Status> {
    let index = nsid.0.checked_sub(1).ok_or(Status::INVALID_NAMESPACE)?;
    namespaces
        .get(usize::try_from(index).map_err(|_| Status::INVALID_NAMESPACE)?)
        .and_then(Option::as_ref)
        .ok_or(Status::INVALID_NAMESPACE)
}

/// The byte range of `blocks` blocks at `slba`, or LBA Out of Range.
fn byte_range(ns: &Namespace, slba: Lba, blocks: u32) -> Result<(u64, u64), Status> {
    let end = slba
        .0
        .checked_add(u64::from(blocks))
        .ok_or(Status::LBA_OUT_OF_RANGE)?;
    if end > ns.bdev().num_blocks() {
        return Err(Status::LBA_OUT_OF_RANGE);
    }
    let shift = ns.block_shift();
    // end <= num_blocks, and num_blocks << shift is the bdev's size, so neither overflows.
    Ok((slba.0 << shift, u64::from(blocks) << shift))
}

/// The NVMe status for a backend failure.
fn bdev_status(e: &BdevError) -> Status {
    match e.kind() {
        BdevErrorKind::OutOfRange => Status::LBA_OUT_OF_RANGE,
        BdevErrorKind::Buffer => Status::DATA_TRANSFER_ERROR,
        BdevErrorKind::Io => io_failure(e.op()),
        BdevErrorKind::InvalidGeometry | BdevErrorKind::NoMemory | BdevErrorKind::Open => {
            Status::INTERNAL_ERROR
        }
    }
}

/// The NVMe status for storage that failed `op` (QEMU's choice for a failed file: reads
/// are Unrecovered Read Error, anything that writes the medium Write Fault).
fn io_failure(op: BdevOp) -> Status {
    match op {
        BdevOp::Read | BdevOp::Compare => Status::UNRECOVERED_READ_ERROR,
        BdevOp::Write | BdevOp::WriteZeroes | BdevOp::Flush => Status::WRITE_FAULT,
        BdevOp::Deallocate | BdevOp::Create => Status::INTERNAL_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn lba_range_is_checked_without_overflow() {
        let ns = Namespace::new(
            Nsid(1),
            Arc::new(nvmemu_bdev::Bdev::null("n", 512, 100).unwrap()),
        );
        assert_eq!(byte_range(&ns, Lba(99), 1), Ok((99 * 512, 512)));
        assert_eq!(byte_range(&ns, Lba(99), 2), Err(Status::LBA_OUT_OF_RANGE));
        assert_eq!(
            byte_range(&ns, Lba(u64::MAX), 1),
            Err(Status::LBA_OUT_OF_RANGE)
        );
    }

    #[test]
    fn namespace_lookup() {
        let ns = Namespace::new(
            Nsid(2),
            Arc::new(nvmemu_bdev::Bdev::null("n", 512, 1).unwrap()),
        );
        let table = [None, Some(ns)];
        assert!(active_ns(&table, Nsid(2)).is_ok());
        for bad in [0, 1, 3, u32::MAX] {
            assert_eq!(
                active_ns(&table, Nsid(bad)).err(),
                Some(Status::INVALID_NAMESPACE)
            );
        }
    }
}
