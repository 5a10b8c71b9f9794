// SPDX-License-Identifier: Apache-2.0
//! QoS enforcement (SPDK's `bdev_set_qos_limit`): a token bucket per namespace per
//! controller, refilled once per poll pass in 1 ms timeslices as SPDK's are. A command that
//! finds its namespace's bucket empty stays in its SQ (the head does not move), so it runs,
//! in order, once tokens come back; nothing is failed. Each controller a namespace is
//! attached to enforces the whole limit on its own I/O.

use nvmemu_bdev::QosValues;
use nvmemu_mem::global_clock;
use nvmemu_spec::{IoOpcode, Sqe};

use crate::Namespace;

/// SPDK's QoS timeslice.
const TIMESLICE_US: u64 = 1000;
const TIMESLICE_NS: u64 = TIMESLICE_US * 1000;
const MIB: u64 = 1 << 20;

/// What may still pass in this timeslice, per limit (0 in `per_slice` = unlimited). A
/// command is admitted while its buckets are positive and may overdraw them; the debt is
/// paid from the next slices, as SPDK does.
#[derive(Debug, Clone, Default)]
pub(crate) struct QosBucket {
    /// I/Os, read+write bytes, read bytes, write bytes.
    left: [i64; 4],
    per_slice: [i64; 4],
    /// Start of the current timeslice, in the global clock's nanoseconds (0: not started).
    slice_start: u64,
}

impl QosBucket {
    /// Take the bdev's current limits and add the tokens of the slices gone by since the
    /// last call. Returns whether any limit is set.
    pub(crate) fn refill(&mut self, limits: QosValues, now: u64) -> bool {
        let per_slice = slice_allowance(limits);
        if per_slice == [0; 4] {
            self.per_slice = per_slice;
            return false;
        }
        if per_slice != self.per_slice || self.slice_start == 0 {
            *self = QosBucket {
                left: per_slice,
                per_slice,
                slice_start: now,
            };
            return true;
        }
        let slices = now.saturating_sub(self.slice_start) / TIMESLICE_NS;
        if slices == 0 {
            return true;
        }
        self.slice_start += slices * TIMESLICE_NS;
        let n = i64::try_from(slices).unwrap_or(i64::MAX);
        for (left, per) in self.left.iter_mut().zip(per_slice) {
            *left = left.saturating_add(per.saturating_mul(n)).min(per);
        }
        true
    }

    /// Admit `sqe` if its buckets have tokens left, and charge it.
    fn admit(&mut self, sqe: &Sqe, block_shift: u32) -> bool {
        // Bytes count for Read and Write (NLB is 0's based), as SPDK counts them.
        let op = IoOpcode::from(sqe.opcode());
        let write = op == IoOpcode::Write;
        let bytes = match op {
            IoOpcode::Read | IoOpcode::Write => i64::from((sqe.cdw12 & 0xFFFF) + 1) << block_shift,
            _ => 0,
        };
        let cost = [
            1,
            bytes,
            if write { 0 } else { bytes },
            if write { bytes } else { 0 },
        ];
        let empty = self.left.iter().zip(self.per_slice).zip(cost);
        if empty
            .into_iter()
            .any(|((left, per), c)| per != 0 && c != 0 && *left <= 0)
        {
            return false;
        }
        for ((left, per), c) in self.left.iter_mut().zip(self.per_slice).zip(cost) {
            if per != 0 {
                *left -= c;
            }
        }
        true
    }
}

/// Tokens per timeslice for each limit, as SPDK computes them (at least one per slice).
fn slice_allowance(v: QosValues) -> [i64; 4] {
    let per = |per_sec: u64, unit: u64| -> i64 {
        if per_sec == 0 {
            return 0;
        }
        let n = per_sec.saturating_mul(unit).saturating_mul(TIMESLICE_US) / 1_000_000;
        i64::try_from(n.max(1)).unwrap_or(i64::MAX)
    };
    [
        per(v.rw_ios_per_sec, 1),
        per(v.rw_mbytes_per_sec, MIB),
        per(v.r_mbytes_per_sec, MIB),
        per(v.w_mbytes_per_sec, MIB),
    ]
}

/// Refill every attached namespace's bucket; whether any of them is limited. Called once
/// per pass while some bdev in the process has a limit.
pub(crate) fn refill_all(namespaces: &mut [Option<Namespace>]) -> bool {
    let now = global_clock().now_ns();
    let mut any = false;
    for ns in namespaces.iter_mut().flatten() {
        let limits = ns.bdev().qos().get();
        any |= ns.qos.refill(limits, now);
    }
    any
}

/// Whether `sqe` may run now (commands for a namespace not attached always may: they fail
/// on their own).
pub(crate) fn admit(namespaces: &mut [Option<Namespace>], sqe: &Sqe) -> bool {
    let slot = usize::try_from(sqe.nsid)
        .ok()
        .and_then(|n| n.checked_sub(1));
    match slot
        .and_then(|i| namespaces.get_mut(i))
        .and_then(Option::as_mut)
    {
        Some(ns) => {
            let shift = ns.block_shift();
            ns.qos.admit(sqe, shift)
        }
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPC_WRITE: u8 = 0x01;
    const OPC_READ: u8 = 0x02;

    fn sqe(opc: u8, blocks: u16) -> Sqe {
        Sqe {
            cdw0: u32::from(opc),
            cdw12: u32::from(blocks - 1),
            ..Sqe::default()
        }
    }

    #[test]
    fn one_io_per_slice_at_1000_iops_and_refilled_per_slice() {
        let mut b = QosBucket::default();
        let lim = QosValues {
            rw_ios_per_sec: 1000,
            ..QosValues::default()
        };
        assert!(b.refill(lim, 1000));
        assert!(b.admit(&sqe(OPC_READ, 1), 9));
        assert!(!b.admit(&sqe(OPC_READ, 1), 9));
        assert!(b.refill(lim, 1000 + TIMESLICE_NS - 1));
        assert!(!b.admit(&sqe(OPC_WRITE, 1), 9));
        // Three slices later: still one token (the bucket holds at most one slice).
        assert!(b.refill(lim, 1000 + 3 * TIMESLICE_NS));
        assert!(b.admit(&sqe(OPC_WRITE, 1), 9));
        assert!(!b.admit(&sqe(OPC_WRITE, 1), 9));
    }

    #[test]
    fn bytes_overdraw_is_paid_by_later_slices_and_reads_skip_write_limit() {
        let mut b = QosBucket::default();
        let lim = QosValues {
            w_mbytes_per_sec: 1,
            ..QosValues::default()
        };
        assert!(b.refill(lim, 1));
        // 1 MiB/s = 1048 bytes per slice: a 128 KiB write overdraws by ~125 slices.
        assert!(b.admit(&sqe(OPC_WRITE, 256), 9));
        assert!(!b.admit(&sqe(OPC_WRITE, 1), 9));
        assert!(b.admit(&sqe(OPC_READ, 256), 9));
        assert!(b.refill(lim, 1 + 100 * TIMESLICE_NS));
        assert!(!b.admit(&sqe(OPC_WRITE, 1), 9));
        assert!(b.refill(lim, 1 + 126 * TIMESLICE_NS));
        assert!(b.admit(&sqe(OPC_WRITE, 1), 9));
    }

    #[test]
    fn no_limit_admits_everything() {
        let mut b = QosBucket::default();
        assert!(!b.refill(QosValues::default(), 5));
    }
}
