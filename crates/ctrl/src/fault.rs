// SPDX-License-Identifier: Apache-2.0
//! Injected faults (`nvmemu_bdev_inject_fault`, SPDK's error bdev): before a command on
//! a bdev with live rules executes, the poller asks the bdev's `FaultSlot` for an action
//! and applies it. What the host sees:
//!
//! - `status`: the command is not executed and completes with the rule's status (SPDK's
//!   `failure`: Internal Error, generic 06h, DNR clear);
//! - `drop` (SPDK's `pending`): the command is not executed and its completion is held
//!   with no due time (`hold.rs`): only an Abort (Command Abort Requested), a Delete I/O SQ
//!   (Command Aborted due to SQ Deletion) or a controller reset ends it;
//! - `delay`: the command runs and its completion is held for the rule's time;
//! - `reorder`: as `delay`, for a time that shrinks with each firing of the rule, so the
//!   commands it fires on complete in reverse order;
//! - `nomem`: the command is left in its SQ and taken again in a later pass (each retry
//!   spends one firing, as each resubmission does in SPDK);
//! - `corrupt`: the command runs, with the byte at `offset` of its data XORed with
//!   `value`: a Read's in the host's buffer after the read (the stored data is intact: a
//!   second read is right), a Write's in the bdev after the write (the host's buffer is
//!   never touched, so it may be read-only to the device). An offset past the command's
//!   data changes nothing; other commands just run.

use nvmemu_bdev::fault::{FaultAction, FaultCmd, FaultIo};
use nvmemu_bdev::model::OpClass;
use nvmemu_mem::{Access, global_clock};
use nvmemu_spec::{IoOpcode, Qid, ReadWrite, Sqe, Status};

use crate::Namespace;
use crate::dptr::{Chunk, walk};
use crate::hold::NEVER;
use crate::latency::Stage;

/// The action for `sqe`, from `sqid`, taken with `outstanding` other commands outstanding
/// (`FaultCmd::outstanding`), from its namespace's bdev: None when no rule fires (or the
/// command names no attached namespace).
pub(crate) fn take(
    namespaces: &[Option<Namespace>],
    sqid: Qid,
    sqe: &Sqe,
    outstanding: u64,
) -> Option<FaultAction> {
    let slot = usize::try_from(sqe.nsid).ok()?.checked_sub(1)?;
    let ns = namespaces.get(slot)?.as_ref()?;
    let io = crate::model::op_class(sqe).map(|op| match op {
        OpClass::Read => FaultIo::Read,
        OpClass::Write => FaultIo::Write,
        OpClass::Flush => FaultIo::Flush,
        OpClass::Trim => FaultIo::Unmap,
    });
    let names_blocks = matches!(
        IoOpcode::from(sqe.opcode()),
        IoOpcode::Read | IoOpcode::Write | IoOpcode::Compare | IoOpcode::WriteZeroes
    );
    // SLBA in CDW10-11, NLB (0's based) in CDW12 bits 15:0.
    let lba = names_blocks.then(|| {
        let slba = u64::from(sqe.cdw10) | (u64::from(sqe.cdw11) << 32);
        (slba, u64::from(sqe.cdw12 & 0xFFFF) + 1)
    });
    let cmd = FaultCmd {
        io,
        opcode: sqe.opcode(),
        lba,
        qid: sqid.0,
        outstanding,
    };
    ns.bdev().faults().take(&cmd)
}

/// The NVMe status of a `status` action (SCT 4-6 are refused when the rule is added).
pub(crate) fn status(sct: u8, sc: u8, dnr: bool) -> Status {
    Status::from_field((u16::from(sct & 0x7) << 8) | u16::from(sc) | (u16::from(dnr) << 14))
}

impl crate::Controller {
    /// Apply `action` to `sqe`, already consumed from `sqid`: the result to complete it
    /// with, or None when it is held or set aside. (`nomem` never gets here: the poller
    /// leaves the command in its SQ; were it to, it fails with Internal Error.)
    #[inline(never)]
    pub(crate) fn inject(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        action: FaultAction,
    ) -> Option<Result<u32, Status>> {
        tracing::debug!(
            sqid = sqid.0,
            cid = sqe.cid().0,
            action = action.name(),
            "fault injected"
        );
        match action {
            FaultAction::Drop => {
                self.hold_unaccounted(sqid, sqe, (Status::ABORTED_SQ_DELETION, 0), NEVER);
                None
            }
            FaultAction::Status { sct, sc, dnr } => Some(Err(status(sct, sc, dnr))),
            FaultAction::Nomem => Some(Err(Status::INTERNAL_ERROR)),
            FaultAction::Corrupt { offset, value } => self.exec_corrupted(sqid, sqe, offset, value),
            // `take` turns a Reorder into the Delay of this command.
            FaultAction::Delay { us } | FaultAction::Reorder { us } => {
                let delay_ns = us.saturating_mul(1000);
                let Some(result) = self.exec_io_outlined(sqid, sqe) else {
                    // A file namespace's command completes in a later pass: its wait
                    // starts there (`io/file_io`).
                    self.file_io.delay(sqid, sqe.cid(), delay_ns);
                    return None;
                };
                self.instruments.trace_now((sqid, sqe.cid()), Stage::Done);
                let due = global_clock().now_ns().saturating_add(delay_ns);
                self.hold(sqid, sqe, result, due);
                None
            }
        }
    }

    /// Execute `sqe` with its data corrupted as `hit` says (see the module's doc).
    fn exec_corrupted(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        offset: u64,
        value: u8,
    ) -> Option<Result<u32, Status>> {
        let hit = (offset, value);
        let Some(Ok(rw)) = ReadWrite::decode(sqe) else {
            return self.exec_io_outlined(sqid, sqe);
        };
        // A file namespace's transfer applies it when queued (a Write) or completed (a
        // Read): `io/file_io/`.
        self.file_io.corrupt = Some(hit);
        let result = self.exec_io_outlined(sqid, sqe);
        self.file_io.corrupt = None;
        if matches!(result, Some(Ok(_))) {
            if rw.write {
                self.xor_stored(&rw, hit);
            } else {
                self.xor_data(&rw, hit);
            }
        }
        result
    }

    /// XOR the stored byte at `offset` of the blocks `rw` wrote with
    /// `value`; nothing if it is past them.
    fn xor_stored(&self, rw: &ReadWrite, (offset, value): (u64, u8)) {
        let Ok(ns) = crate::io::active_ns(&self.namespaces, rw.nsid) else {
            return;
        };
        let shift = ns.block_shift();
        let len = u64::from(rw.blocks) << shift;
        if offset >= len {
            return;
        }
        // The write succeeded, so its blocks lie inside the namespace (the bdev checks again).
        let Some(at) =
            (rw.slba.0.checked_mul(1 << shift)).and_then(|start| start.checked_add(offset))
        else {
            return;
        };
        let _ = ns.bdev().corrupt_byte(at, value);
    }

    /// XOR the byte at `offset` of `rw`'s data in host memory with `value`; nothing if it
    /// is past the data or cannot be reached.
    pub(crate) fn xor_data(&self, rw: &ReadWrite, (offset, value): (u64, u8)) {
        let Ok(ns) = crate::io::active_ns(&self.namespaces, rw.nsid) else {
            return;
        };
        let len = u64::from(rw.blocks) << ns.block_shift();
        let target = offset;
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
                    byte[0] ^= value;
                    let _ = region.copy_from(at, &byte);
                }
            }
            pos += n;
            Ok(())
        });
    }
}
