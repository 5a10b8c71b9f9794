// SPDX-License-Identifier: Apache-2.0
//! Taking commands off a submission queue: each queued SQE is copied out of the ring once,
//! into a small buffer the queue owns, and everything after that (the Read prefetch, the
//! checks that may leave a command queued for a later pass, decode and execution) works on
//! that copy. CONTRIBUTING's rule: the host may rewrite a slot at any moment, so the bytes
//! validated and the bytes executed must be the same bytes.
//!
//! The host may not touch an entry between ringing the tail doorbell past it and seeing a
//! completion whose SQHD has passed it (NVMe Base 1.4, 4.1), so a copy taken early (by the
//! prefetch, one pass ahead) is the command the host submitted.

use nvmemu_spec::Sqe;
use zerocopy::IntoBytes;

use crate::queue::{RingIdx, SQE_SIZE, SubmissionQueue};

/// Entries a queue copies ahead of its head (a power of two; at least one poll batch).
pub(crate) const COPY_AHEAD: u32 = 32;
const _: () = assert!(COPY_AHEAD.is_power_of_two());
const _: () = assert!(COPY_AHEAD as usize >= crate::poll::IO_BATCH);

/// The ring could not be read (its memory is gone): the caller makes the controller fatal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RingUnreadable;

/// The copies of the `ahead` entries from the head of one submission queue, in ring order
/// from slot `first` (wrapping at [`COPY_AHEAD`], not at the ring's size). A count rather
/// than a ring index: the per-command bookkeeping is then a compare and an add, not the
/// wrap-aware distances an index needs (about 15 instructions per command).
#[derive(Debug)]
pub(crate) struct SqeCopies {
    slots: Box<[Sqe; COPY_AHEAD as usize]>,
    /// Slot of the entry at the queue's head.
    first: u32,
    /// Entries copied, from the head on (at most [`COPY_AHEAD`]).
    ahead: u32,
}

impl Default for SqeCopies {
    fn default() -> Self {
        SqeCopies {
            slots: Box::new([Sqe::default(); COPY_AHEAD as usize]),
            first: 0,
            ahead: 0,
        }
    }
}

impl SubmissionQueue {
    /// The entry at the head, copied out of the ring if no earlier call copied it; it stays
    /// at the head (and copied) until [`consume`](Self::consume). `Ok(None)`: the queue is
    /// empty up to `tail`.
    #[inline(always)]
    pub(crate) fn fetch(&mut self, tail: RingIdx) -> Result<Option<Sqe>, RingUnreadable> {
        if self.head == tail {
            return Ok(None);
        }
        if self.copied_ahead(tail) == 0 {
            self.copy_at(self.head.get())?;
        }
        let slot = (self.copies.first & (COPY_AHEAD - 1)) as usize;
        Ok(self.copies.slots.get(slot).copied())
    }

    /// Whether nothing is queued up to `tail`. Copies past the head are then stale (the
    /// host moved the tail back) and are dropped, as [`copy_ahead`](Self::copy_ahead) would.
    #[inline(always)]
    pub(crate) fn empty_at(&mut self, tail: RingIdx) -> bool {
        if self.head != tail {
            return false;
        }
        self.copies.ahead = 0;
        true
    }

    /// The head entry is taken: SQHD moves past it, and its ring line goes back toward the
    /// shared cache, where the host's next write to the slot finds it without a snoop of
    /// this core.
    #[inline(always)]
    pub(crate) fn consume(&mut self) {
        let at = self.head;
        self.ring
            .region
            .demote(self.ring.offset + u64::from(at.get()) * SQE_SIZE);
        self.copies.ahead = self.copies.ahead.saturating_sub(1);
        self.head = at.next(self.size).0;
        self.copies.first = (self.copies.first + 1) & (COPY_AHEAD - 1);
    }

    /// Copy up to `max` queued entries past the ones already copied; `each` sees every new
    /// copy (the Read prefetch). Stops early at the buffer's end or an unreadable ring.
    pub(crate) fn copy_ahead(&mut self, tail: RingIdx, max: u32, mut each: impl FnMut(&Sqe)) {
        let queued = self.drop_stale_copies(tail);
        let want = queued.min(max).min(COPY_AHEAD);
        // The first entry not copied, `ahead` past the head: queued, so ahead < size and one
        // subtraction wraps it; each further one is the next index (no wrap-aware sums or
        // re-checks per entry: the loop bound keeps every copy queued and in the buffer).
        let mut at = self.head.get() + self.copies.ahead;
        if at >= self.size {
            at -= self.size;
        }
        while self.copies.ahead < want {
            let Ok(sqe) = self.copy_at(at) else {
                return;
            };
            each(sqe);
            at += 1;
            if at == self.size {
                at = 0;
            }
        }
    }

    /// Entries copied at and after the head. Copies past the tail are stale (the host
    /// moved the tail back): copying starts again from the head.
    #[inline(always)]
    fn copied_ahead(&mut self, tail: RingIdx) -> u32 {
        self.drop_stale_copies(tail);
        self.copies.ahead
    }

    /// Forget every copy if some lie past `tail` (see `copied_ahead`); the entries queued.
    #[inline(always)]
    fn drop_stale_copies(&mut self, tail: RingIdx) -> u32 {
        let queued = self.distance(self.head, tail);
        if self.copies.ahead > queued {
            self.copies.ahead = 0;
        }
        queued
    }

    /// Copy ring entry `at`, the one after the copied ones, into its slot, which it
    /// returns. Both callers pass a queued entry; a full buffer (a broken caller) reads as
    /// an unreadable ring rather than overwrite a copy still in use.
    #[inline(always)]
    fn copy_at(&mut self, at: u32) -> Result<&Sqe, RingUnreadable> {
        let ahead = self.copies.ahead;
        if ahead >= COPY_AHEAD {
            return Err(RingUnreadable);
        }
        let off = self.ring.offset + u64::from(at) * SQE_SIZE;
        let slot = ((self.copies.first + ahead) & (COPY_AHEAD - 1)) as usize;
        let copy = self.copies.slots.get_mut(slot).ok_or(RingUnreadable)?;
        // Bytes straight into the slot: read as a value, the entry went through registers
        // (and the stack) field by field on its way there (about 15 instructions).
        self.ring
            .region
            .copy_to(off, copy.as_mut_bytes())
            .map_err(|_| RingUnreadable)?;
        self.copies.ahead = ahead + 1;
        Ok(copy)
    }
}
