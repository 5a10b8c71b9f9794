// SPDX-License-Identifier: Apache-2.0
//! Error injection on a bdev (SPDK's error bdev, `bdev_error_inject_error`).
//!
//! A [`FaultSlot`] holds, per I/O type (read, write, flush, unmap), one armed injection:
//! what to do and how many more commands it hits. The control plane arms it; every poller
//! serving the bdev takes hits from it with one atomic update per command of that type, so
//! the count is shared across controllers (`num` 3 fails three commands in all). Nothing is
//! allocated or locked per command.

use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Armed injections, process-wide. A poller reads it once per pass and skips every fault
/// step while it is zero.
static ARMED: AtomicUsize = AtomicUsize::new(0);

/// Whether any bdev in the process has an armed injection.
pub fn any_fault() -> bool {
    ARMED.load(Ordering::Relaxed) != 0
}

/// The I/O types an injection is armed for (SPDK's `io_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultIo {
    /// Read (and Compare).
    Read = 0,
    /// Write.
    Write = 1,
    /// Flush.
    Flush = 2,
    /// Deallocate and Write Zeroes (SPDK's unmap).
    Unmap = 3,
}

impl FaultIo {
    /// Every type, in slot order.
    pub const ALL: [FaultIo; 4] = [
        FaultIo::Read,
        FaultIo::Write,
        FaultIo::Flush,
        FaultIo::Unmap,
    ];

    /// SPDK's name.
    pub fn name(self) -> &'static str {
        match self {
            FaultIo::Read => "read",
            FaultIo::Write => "write",
            FaultIo::Flush => "flush",
            FaultIo::Unmap => "unmap",
        }
    }
}

/// What an injection does to the commands it hits (SPDK's `error_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The command fails (the controller decides the status).
    Failure = 1,
    /// The command is never completed until aborted or the controller is reset.
    Pending = 2,
    /// The command is refused for now and taken again later (SPDK's ENOMEM retry).
    Nomem = 3,
    /// The command runs, but one byte of its data is changed: a write's before it is
    /// stored, a read's after it is read ([`Hit::corrupt_offset`], [`Hit::corrupt_value`]).
    CorruptData = 4,
}

/// One command's injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// What to do.
    pub kind: FaultKind,
    /// `CorruptData`: the byte of the command's data to change (none if past its end).
    pub corrupt_offset: u64,
    /// `CorruptData`: what that byte is XORed with (1-255).
    pub corrupt_value: u8,
}

impl FaultKind {
    /// SPDK's name.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Failure => "failure",
            FaultKind::Pending => "pending",
            FaultKind::Nomem => "nomem",
            FaultKind::CorruptData => "corrupt_data",
        }
    }

    /// The kind SPDK calls `name`.
    pub fn from_name(name: &str) -> Option<FaultKind> {
        [
            FaultKind::Failure,
            FaultKind::Pending,
            FaultKind::Nomem,
            FaultKind::CorruptData,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }

    fn from_u32(v: u32) -> Option<FaultKind> {
        match v {
            1 => Some(FaultKind::Failure),
            2 => Some(FaultKind::Pending),
            3 => Some(FaultKind::Nomem),
            4 => Some(FaultKind::CorruptData),
            _ => None,
        }
    }
}

impl Hit {
    /// A hit of `kind` that corrupts nothing.
    pub fn new(kind: FaultKind) -> Hit {
        Hit {
            kind,
            corrupt_offset: 0,
            corrupt_value: 0,
        }
    }
}

/// One I/O type's injection: kind 0 is none; `remaining` counts down to 0.
#[derive(Debug, Default)]
struct Armed {
    kind: AtomicU32,
    remaining: AtomicU32,
    corrupt_offset: AtomicU64,
    corrupt_value: AtomicU8,
}

/// A bdev's injections, one per [`FaultIo`].
#[derive(Debug, Default)]
pub struct FaultSlot {
    by_io: [Armed; 4],
}

impl FaultSlot {
    /// Arm `hit` for the next `num` commands of type `io` (`num` 0 disarms it), replacing
    /// what was armed for that type.
    pub fn arm(&self, io: FaultIo, hit: Hit, num: u32) {
        let a = &self.by_io[io as usize];
        a.kind.store(hit.kind as u32, Ordering::Relaxed);
        a.corrupt_offset
            .store(hit.corrupt_offset, Ordering::Relaxed);
        a.corrupt_value.store(hit.corrupt_value, Ordering::Relaxed);
        let before = a.remaining.swap(num, Ordering::AcqRel);
        Self::count(before, num);
    }

    /// Disarm every type (SPDK's `io_type` `clear`).
    pub fn clear(&self) {
        for a in &self.by_io {
            let before = a.remaining.swap(0, Ordering::AcqRel);
            Self::count(before, 0);
        }
    }

    /// Keep [`ARMED`] equal to the number of types with hits left.
    fn count(before: u32, after: u32) {
        match (before > 0, after > 0) {
            (false, true) => {
                ARMED.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                ARMED.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Take one hit for a command of type `io`: what to apply, or None (nothing armed, or
    /// its count is spent).
    pub fn take(&self, io: FaultIo) -> Option<Hit> {
        let a = &self.by_io[io as usize];
        let before = a
            .remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .ok()?;
        Self::count(before, before - 1);
        Some(Hit {
            kind: FaultKind::from_u32(a.kind.load(Ordering::Relaxed))?,
            corrupt_offset: a.corrupt_offset.load(Ordering::Relaxed),
            corrupt_value: a.corrupt_value.load(Ordering::Relaxed),
        })
    }

    /// What is armed for `io` and how many hits are left (shown by `bdev_get_bdevs`).
    pub fn armed(&self, io: FaultIo) -> Option<(FaultKind, u32)> {
        let a = &self.by_io[io as usize];
        let n = a.remaining.load(Ordering::Acquire);
        let kind = FaultKind::from_u32(a.kind.load(Ordering::Relaxed))?;
        (n > 0).then_some((kind, n))
    }
}

impl Drop for FaultSlot {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Keeps the pollers' per-command fault step on while it lives, for an injection kept
/// outside a bdev (the controller's: a fatal countdown, a namespace that is not ready).
/// The step then asks its owner; nothing else changes.
#[derive(Debug)]
pub struct FaultGate(());

impl FaultGate {
    /// Turn the step on until the gate is dropped.
    pub fn open() -> FaultGate {
        ARMED.fetch_add(1, Ordering::Relaxed);
        FaultGate(())
    }
}

impl Drop for FaultGate {
    fn drop(&mut self) {
        ARMED.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_injection_hits_exactly_num_commands_of_its_type() {
        let slot = FaultSlot::default();
        slot.arm(FaultIo::Write, Hit::new(FaultKind::Failure), 2);
        assert!(any_fault());
        assert_eq!(slot.take(FaultIo::Read), None, "reads are not armed");
        let hit = slot.take(FaultIo::Write).map(|h| h.kind);
        assert_eq!(hit, Some(FaultKind::Failure));
        assert_eq!(slot.armed(FaultIo::Write), Some((FaultKind::Failure, 1)));
        let hit = slot.take(FaultIo::Write).map(|h| h.kind);
        assert_eq!(hit, Some(FaultKind::Failure));
        assert_eq!(slot.take(FaultIo::Write), None, "the count is spent");
        assert_eq!(slot.armed(FaultIo::Write), None);
        slot.arm(FaultIo::Flush, Hit::new(FaultKind::Pending), 5);
        slot.clear();
        assert_eq!(slot.take(FaultIo::Flush), None);
    }
}
