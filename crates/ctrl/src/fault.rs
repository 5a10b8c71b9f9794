// SPDX-License-Identifier: Apache-2.0
//! Injected errors (SPDK's error bdev): before a command on an armed bdev executes, the
//! poller takes one hit from the bdev's `FaultSlot` and applies it. What the host sees:
//!
//! - `failure`: the command is not executed and completes with Internal Error (generic
//!   status 06h, DNR clear), the status SPDK's NVMe-oF target gives a failed bdev I/O;
//! - `pending`: the command is not executed and its completion is held with no due time
//!   (`hold.rs`): only an Abort (Command Abort Requested), a Delete I/O SQ (Command
//!   Aborted due to SQ Deletion) or a controller reset ends it;
//! - `nomem`: the command is left in its SQ and taken again in a later pass (each retry
//!   spends one hit, as each resubmission does in SPDK);
//! - `corrupt_data`: the command runs, with the byte at `corrupt_offset` of its data XORed
//!   with `corrupt_value`: a Read's in the host's buffer after the read (the stored data is
//!   intact: a second read is right), a Write's in the bdev after the write (the host's
//!   buffer is never touched, so it may be read-only to the device). An offset past the
//!   command's data changes nothing; other commands just run.

use nvmemu_bdev::fault::{FaultIo, FaultKind, Hit};
use nvmemu_bdev::model::OpClass;
use nvmemu_mem::Access;
use nvmemu_spec::{Qid, ReadWrite, Sqe, Status};

use crate::Namespace;
use crate::dptr::{Chunk, walk};
use crate::hold::NEVER;

/// The status a `failure` injection completes with.
pub(crate) const FAILURE_STATUS: Status = Status::INTERNAL_ERROR;

/// Take one hit for `sqe` from its namespace's bdev: the kind to apply, or None (nothing
/// armed for its type, an opcode no injection covers, or no such namespace).
pub(crate) fn take(namespaces: &[Option<Namespace>], sqe: &Sqe) -> Option<Hit> {
    let io = match crate::model::op_class(sqe)? {
        OpClass::Read => FaultIo::Read,
        OpClass::Write => FaultIo::Write,
        OpClass::Flush => FaultIo::Flush,
        OpClass::Trim => FaultIo::Unmap,
    };
    let slot = usize::try_from(sqe.nsid).ok()?.checked_sub(1)?;
    let ns = namespaces.get(slot)?.as_ref()?;
    ns.bdev().faults().take(io)
}

impl crate::Controller {
    /// Apply `hit` to `sqe`, already consumed from `sqid`: the result to complete it with,
    /// or None when it is held or set aside. (`nomem` never gets here: the poller leaves
    /// the command in its SQ; were it to, it fails like `failure`.)
    #[inline(never)]
    pub(crate) fn inject(&mut self, sqid: Qid, sqe: &Sqe, hit: Hit) -> Option<Result<u32, Status>> {
        let kind = hit.kind;
        tracing::debug!(
            sqid = sqid.0,
            cid = sqe.cid().0,
            kind = kind.name(),
            "error injected"
        );
        match kind {
            FaultKind::Pending => {
                self.hold_unaccounted(sqid, sqe, (Status::ABORTED_SQ_DELETION, 0), NEVER);
                None
            }
            FaultKind::Failure | FaultKind::Nomem => Some(Err(FAILURE_STATUS)),
            FaultKind::CorruptData => self.exec_corrupted(sqid, sqe, hit),
        }
    }

    /// Execute `sqe` with its data corrupted as `hit` says (see the module's doc).
    fn exec_corrupted(&mut self, sqid: Qid, sqe: &Sqe, hit: Hit) -> Option<Result<u32, Status>> {
        let Some(Ok(rw)) = ReadWrite::decode(sqe) else {
            return self.exec_io(sqid, sqe);
        };
        let result = self.exec_io(sqid, sqe);
        if matches!(result, Some(Ok(_))) {
            if rw.write {
                self.xor_stored(&rw, hit);
            } else {
                self.xor_data(&rw, hit);
            }
        }
        result
    }

    /// XOR the stored byte at `hit.corrupt_offset` of the blocks `rw` wrote with
    /// `hit.corrupt_value`; nothing if it is past them.
    fn xor_stored(&self, rw: &ReadWrite, hit: Hit) {
        let Ok(ns) = crate::io::active_ns(&self.namespaces, rw.nsid) else {
            return;
        };
        let shift = ns.block_shift();
        let len = u64::from(rw.blocks) << shift;
        if hit.corrupt_offset >= len {
            return;
        }
        // The write succeeded, so its blocks lie inside the namespace (the bdev checks again).
        let Some(at) = (rw.slba.0.checked_mul(1 << shift))
            .and_then(|start| start.checked_add(hit.corrupt_offset))
        else {
            return;
        };
        let _ = ns.bdev().corrupt_byte(at, hit.corrupt_value);
    }

    /// XOR the byte at `hit.corrupt_offset` of the data `rw` read into host memory with
    /// `hit.corrupt_value`; nothing if it is past the data or cannot be reached.
    fn xor_data(&self, rw: &ReadWrite, hit: Hit) {
        let Ok(ns) = crate::io::active_ns(&self.namespaces, rw.nsid) else {
            return;
        };
        let len = u64::from(rw.blocks) << ns.block_shift();
        let target = hit.corrupt_offset;
        if target >= len {
            return;
        }
        let mut pos = 0u64;
        let _ = walk(&self.mem, &rw.dptr, len, Access::Write, |chunk| {
            let n = chunk.len();
            if let Chunk::Mem { region, offset, .. } = chunk
                && (pos..pos + n).contains(&target)
            {
                let at = offset + (target - pos);
                let mut byte = [0u8];
                if region.copy_to(at, &mut byte).is_ok() {
                    byte[0] ^= hit.corrupt_value;
                    let _ = region.copy_from(at, &byte);
                }
            }
            pos += n;
            Ok(())
        });
    }
}
