// SPDX-License-Identifier: Apache-2.0
//! QoS enforcement (SPDK's `bdev_set_qos_limit`): the limits hold for a bdev's total I/O,
//! however many controllers serve it. The bdev keeps a pool of tokens per 1 ms timeslice
//! (`nvmemu_bdev::QosPool`, SPDK's timeslice); each controller takes them in batches, one
//! atomic per batch, into its own bucket per namespace and spends them there without
//! touching shared memory. A command that finds no tokens stays in its SQ (the head does
//! not move), so it runs, in order, once tokens come back; nothing is failed.

use nvmemu_bdev::{QosPool, QosValues};
use nvmemu_mem::global_clock;
use nvmemu_spec::{IoOpcode, Sqe};

use crate::Namespace;

/// SPDK's QoS timeslice.
const TIMESLICE_US: u64 = 1000;
const TIMESLICE_NS: u64 = TIMESLICE_US * 1000;
const MIB: u64 = 1 << 20;
/// A batch is this fraction of a slice's tokens (at least one token, at least the
/// command's cost): few atomics per slice, little left unspent when a slice ends.
const BATCH_DIVISOR: i64 = 16;

/// What this controller took from the pool and has not spent, per limit (0 in `per_slice`
/// = unlimited).
#[derive(Debug, Clone, Default)]
pub(crate) struct QosBucket {
    /// I/Os, read+write bytes, read bytes, write bytes.
    left: [i64; 4],
    per_slice: [i64; 4],
    batch: [i64; 4],
    /// The timeslice `left` was taken in (0: none yet).
    slice: u64,
}

impl QosBucket {
    /// Take the bdev's current limits and, in a new timeslice, let the pool refill and
    /// drop what this bucket took in the last one (the pool already counted it as spent).
    /// Returns whether any limit is set.
    pub(crate) fn refill(&mut self, limits: QosValues, pool: &QosPool, now: u64) -> bool {
        let per_slice = slice_allowance(limits);
        if per_slice == [0; 4] {
            self.per_slice = per_slice;
            return false;
        }
        if per_slice != self.per_slice {
            *self = QosBucket {
                per_slice,
                batch: per_slice.map(|p| (p / BATCH_DIVISOR).max(1)),
                ..QosBucket::default()
            };
        }
        let slice = now / TIMESLICE_NS + 1;
        if slice != self.slice {
            self.slice = slice;
            self.left = [0; 4];
            pool.refill(per_slice, slice);
        }
        true
    }

    /// Admit `sqe` if this bucket has, or the pool gives it, the tokens it costs, and
    /// charge it. A pool with any tokens left gives a whole batch (or the whole cost), so a
    /// large command may overdraw it; later slices pay the debt, as SPDK does.
    fn admit(&mut self, sqe: &Sqe, block_shift: u32, pool: &QosPool) -> bool {
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
        for (i, c) in cost.into_iter().enumerate() {
            let (Some(&per), Some(&batch)) = (self.per_slice.get(i), self.batch.get(i)) else {
                continue;
            };
            let Some(left) = self.left.get_mut(i) else {
                continue;
            };
            if per == 0 || c == 0 || *left >= c {
                continue;
            }
            // Tokens taken for a limit before another one refused stay for the next try.
            let want = (c - *left).max(batch);
            if !pool.take(i, want) {
                return false;
            }
            *left += want;
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
        let (limits, bucket) = ns.qos_parts();
        any |= bucket.refill(limits.get(), limits.pool(), now);
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
            let (limits, bucket) = ns.qos_parts();
            bucket.admit(sqe, shift, limits.pool())
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
        let pool = QosPool::default();
        let mut b = QosBucket::default();
        let lim = QosValues {
            rw_ios_per_sec: 1000,
            ..QosValues::default()
        };
        assert!(b.refill(lim, &pool, 1000));
        assert!(b.admit(&sqe(OPC_READ, 1), 9, &pool));
        assert!(!b.admit(&sqe(OPC_READ, 1), 9, &pool));
        assert!(b.refill(lim, &pool, TIMESLICE_NS - 1), "same slice");
        assert!(!b.admit(&sqe(OPC_WRITE, 1), 9, &pool));
        // Three slices later: still one token (the pool holds at most one slice).
        assert!(b.refill(lim, &pool, 1000 + 3 * TIMESLICE_NS));
        assert!(b.admit(&sqe(OPC_WRITE, 1), 9, &pool));
        assert!(!b.admit(&sqe(OPC_WRITE, 1), 9, &pool));
    }

    #[test]
    fn bytes_overdraw_is_paid_by_later_slices_and_reads_skip_write_limit() {
        let pool = QosPool::default();
        let mut b = QosBucket::default();
        let lim = QosValues {
            w_mbytes_per_sec: 1,
            ..QosValues::default()
        };
        assert!(b.refill(lim, &pool, 1));
        // 1 MiB/s = 1048 bytes per slice: a 128 KiB write overdraws by ~125 slices.
        assert!(b.admit(&sqe(OPC_WRITE, 256), 9, &pool));
        assert!(!b.admit(&sqe(OPC_WRITE, 1), 9, &pool));
        assert!(b.admit(&sqe(OPC_READ, 256), 9, &pool));
        assert!(b.refill(lim, &pool, 1 + 100 * TIMESLICE_NS));
        assert!(!b.admit(&sqe(OPC_WRITE, 1), 9, &pool));
        assert!(b.refill(lim, &pool, 1 + 126 * TIMESLICE_NS));
        assert!(b.admit(&sqe(OPC_WRITE, 1), 9, &pool));
    }

    #[test]
    fn two_buckets_on_one_pool_share_one_slice_of_tokens() {
        let pool = QosPool::default();
        let (mut a, mut b) = (QosBucket::default(), QosBucket::default());
        // 160 I/Os per slice, taken 10 at a time.
        let lim = QosValues {
            rw_ios_per_sec: 160_000,
            ..QosValues::default()
        };
        let mut admitted = 0;
        for round in 0..3u64 {
            let now = 5 + round * TIMESLICE_NS;
            assert!(a.refill(lim, &pool, now) && b.refill(lim, &pool, now));
            let mut in_slice = 0;
            for _ in 0..200 {
                in_slice += u32::from(a.admit(&sqe(OPC_READ, 1), 9, &pool));
                in_slice += u32::from(b.admit(&sqe(OPC_READ, 1), 9, &pool));
            }
            assert_eq!(
                in_slice, 160,
                "slice {round}: the two together get one slice"
            );
            admitted += in_slice;
        }
        assert_eq!(admitted, 480);
        // One bucket alone still gets the whole slice.
        assert!(a.refill(lim, &pool, 5 + 3 * TIMESLICE_NS));
        let alone = (0..400)
            .filter(|_| a.admit(&sqe(OPC_READ, 1), 9, &pool))
            .count();
        assert_eq!(alone, 160);
    }

    #[test]
    fn no_limit_admits_everything() {
        let pool = QosPool::default();
        let mut b = QosBucket::default();
        assert!(!b.refill(QosValues::default(), &pool, 5));
    }
}
