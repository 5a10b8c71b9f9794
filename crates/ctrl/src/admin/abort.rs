// SPDX-License-Identifier: Apache-2.0
//! Abort (NVMe Base 1.4, 5.1). A command whose completion a model holds (`hold.rs`) is
//! aborted there; every other command completes within the poll that takes it, so there
//! is nothing left to abort: the answer is "not aborted" (DW0 bit 0).

use nvmemu_spec::{Cid, Qid, Status};

/// Complete an Abort: success with DW0 bit 0 set (command not aborted).
pub(crate) fn abort(sqid: Qid, cid: Cid) -> Result<u32, Status> {
    tracing::debug!(target: "guest", sqid = sqid.0, cid = cid.0, "abort: command not outstanding");
    Ok(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abort_reports_not_aborted() {
        assert_eq!(abort(Qid(1), Cid(3)), Ok(1));
    }
}
