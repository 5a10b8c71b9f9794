// SPDX-License-Identifier: Apache-2.0
//! `delay` and `reorder` faults on file commands, which complete in a later pass than the
//! one the fault fired in: the command keeps the wait, and its completion is held that much
//! longer than its I/O took (`fault.rs` holds a memory namespace's from its execution).

use nvmemu_spec::{Cid, Qid, Sqe};

use super::FileIo;

impl FileIo {
    /// Hold the completion of command `cid` of `sqid`, just queued here, `delay_ns` longer
    /// than its I/O takes (a `delay` or `reorder` fault: `fault.rs`), whether it is in
    /// flight or waits for room.
    pub(crate) fn delay(&mut self, sqid: Qid, cid: Cid, delay_ns: u64) {
        // A retried command without a fault asks too: nothing to look for.
        let Some(t) = self.tables.as_mut().filter(|_| delay_ns > 0) else {
            return;
        };
        let ours = |q: Qid, sqe: &Sqe| q == sqid && sqe.cid() == cid;
        if let Some(w) = t.waiting.as_mut().filter(|w| ours(w.sqid, &w.sqe)) {
            w.delay_ns = delay_ns;
            return;
        }
        let mut pending = t.cmds.iter_mut().flatten().filter(|p| !p.orphan);
        if let Some(p) = pending.find(|p| ours(p.sqid, &p.sqe)) {
            p.delay_ns = delay_ns;
        }
    }
}

/// When a completion held `delay_ns` from now is due (0 for none: due at once).
pub(super) fn delayed(delay_ns: u64) -> u64 {
    match delay_ns {
        0 => 0,
        ns => nvmemu_mem::global_clock().now_ns().saturating_add(ns),
    }
}
