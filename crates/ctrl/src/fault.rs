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
//!   spends one hit, as each resubmission does in SPDK).

use nvmemu_bdev::fault::{FaultIo, FaultKind};
use nvmemu_spec::{IoOpcode, Qid, Sqe, Status};

use crate::Namespace;
use crate::hold::NEVER;

/// The status a `failure` injection completes with.
pub(crate) const FAILURE_STATUS: Status = Status::INTERNAL_ERROR;

/// Take one hit for `sqe` from its namespace's bdev: the kind to apply, or None (nothing
/// armed for its type, an opcode no injection covers, or no such namespace).
pub(crate) fn take(namespaces: &[Option<Namespace>], sqe: &Sqe) -> Option<FaultKind> {
    let io = match IoOpcode::from(sqe.opcode()) {
        IoOpcode::Read | IoOpcode::Compare => FaultIo::Read,
        IoOpcode::Write => FaultIo::Write,
        IoOpcode::Flush => FaultIo::Flush,
        IoOpcode::WriteZeroes | IoOpcode::DatasetManagement => FaultIo::Unmap,
        _ => return None,
    };
    let slot = usize::try_from(sqe.nsid).ok()?.checked_sub(1)?;
    let ns = namespaces.get(slot)?.as_ref()?;
    ns.bdev().faults().take(io)
}

impl crate::Controller {
    /// Apply a `failure` or `pending` hit to `sqe`, already consumed from `sqid`: the result
    /// to complete it with, or None when it is held. (`nomem` never gets here: the poller
    /// leaves the command in its SQ; were it to, it fails like `failure`.)
    #[inline(never)]
    pub(crate) fn inject(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        kind: FaultKind,
    ) -> Option<Result<u32, Status>> {
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
        }
    }
}
