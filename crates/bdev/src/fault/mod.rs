// SPDX-License-Identifier: Apache-2.0
//! Fault injection on a bdev: nvmemu's rules (`nvmemu_bdev_inject_fault`) and SPDK's error
//! bdev (`bdev_error_inject_error`), one mechanism.
//!
//! A [`FaultSlot`] holds a bdev's list of at most [`MAX_RULES`] rules ([`rule`]), each
//! saying what to do to which commands and when. SPDK's injections are rules too: one per
//! I/O type, replaced when that type is armed again. The control plane edits the list
//! (copy, change, publish); every poller serving the bdev reads it without a lock and
//! takes firings from the rules' shared atomic counters, so a count spans controllers
//! (`num` 3 fails three commands in all). Nothing is allocated or locked per command.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

pub mod rule;

use rule::Rule;
pub use rule::{FaultAction, FaultCmd, FaultRule, FaultTarget, FaultWhen, RuleView};

/// Most rules one bdev holds.
pub const MAX_RULES: usize = 16;

/// Live rules and open [`FaultGate`]s, process-wide. A poller reads it once per command
/// and skips every fault step while it is zero.
static ARMED: AtomicUsize = AtomicUsize::new(0);

/// Whether any bdev in the process has a rule that may still fire (or a gate is open).
#[inline]
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

    /// The type SPDK calls `name`.
    pub fn from_name(name: &str) -> Option<FaultIo> {
        FaultIo::ALL.into_iter().find(|io| io.name() == name)
    }

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

/// What an SPDK injection does to the commands it hits (SPDK's `error_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The command fails with Internal Error.
    Failure,
    /// The command is never completed until aborted or the controller is reset.
    Pending,
    /// The command is refused for now and taken again later (SPDK's ENOMEM retry).
    Nomem,
    /// The command runs, but one byte of its data is changed.
    CorruptData,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 4] = [
        FaultKind::Failure,
        FaultKind::Pending,
        FaultKind::Nomem,
        FaultKind::CorruptData,
    ];

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
        FaultKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The action of this kind (`CorruptData`: XOR the byte at `offset` with `value`).
    pub fn action(self, offset: u64, value: u8) -> FaultAction {
        match self {
            FaultKind::Failure => FAILURE,
            FaultKind::Pending => FaultAction::Drop,
            FaultKind::Nomem => FaultAction::Nomem,
            FaultKind::CorruptData => FaultAction::Corrupt { offset, value },
        }
    }
}

/// SPDK's `failure`: Internal Error (generic 06h, DNR clear), what its NVMe-oF target
/// returns for a failed bdev I/O.
pub const FAILURE: FaultAction = FaultAction::Status {
    sct: 0,
    sc: 6,
    dnr: false,
};

/// Why a rule was not added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the bdev has {MAX_RULES} fault rules already: clear some first")]
pub struct RulesFull;

/// The bdev I/O statuses a failed command is counted under in `bdev_get_iostat`'s
/// `io_error`, as SPDK v25.05's bdev layer counts them: `bdev_io_update_io_stat`
/// (`lib/bdev/bdev.c`) adds each I/O completed with a status from FAILED (-1) down to the
/// lowest to the bdev's own error counts, named by `bdev_io_status_strings` (here in that
/// order: -1 `failed`, -2 `nvme_error`, -5 `miscompare`, -7 `aborted`). A NOMEM completion
/// is retried there, not counted. nvmemu's bdevs fail a command only by an injection or a
/// Compare that differs, so the other statuses (`scsi_error`, `first_fused_failed`,
/// `aio_error`) never occur.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoError {
    /// SPDK's `FAILED`: the error bdev's `failure`.
    Failed = 0,
    /// SPDK's `NVME_ERROR`: any NVMe status but Command Abort Requested.
    NvmeError = 1,
    /// SPDK's `MISCOMPARE`: a Compare whose data differs (the bdev compares in software).
    Miscompare = 2,
    /// SPDK's `ABORTED`: Command Abort Requested (SCT 0, SC 07h).
    Aborted = 3,
}

impl IoError {
    /// Every one, in SPDK's order.
    pub const ALL: [IoError; 4] = [
        IoError::Failed,
        IoError::NvmeError,
        IoError::Miscompare,
        IoError::Aborted,
    ];

    /// Its `io_error` key.
    pub fn name(self) -> &'static str {
        match self {
            IoError::Failed => "failed",
            IoError::NvmeError => "nvme_error",
            IoError::Miscompare => "miscompare",
            IoError::Aborted => "aborted",
        }
    }

    /// What a command completed with NVMe status `sct`/`sc` counts as: SPDK's
    /// `spdk_bdev_io_complete_nvme_status` takes Command Abort Requested for ABORTED and
    /// any other failure (Compare Failure included) for NVME_ERROR.
    pub fn of_nvme(sct: u8, sc: u8) -> IoError {
        match (sct, sc) {
            (0, 0x07) => IoError::Aborted,
            _ => IoError::NvmeError,
        }
    }
}

/// Failed commands by [`IoError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoErrors(pub [u64; 4]);

impl IoErrors {
    /// The count under `kind`.
    pub fn get(&self, kind: IoError) -> u64 {
        self.0.get(kind as usize).copied().unwrap_or(0)
    }
}

/// A bdev's fault rules.
#[derive(Debug)]
pub struct FaultSlot {
    rules: ArcSwap<Vec<Arc<Rule>>>,
    /// The next rule id; held while the list is edited, so edits do not race.
    next_id: Mutex<u32>,
    /// Failed commands, by [`IoError`] (Relaxed: counters read on their own).
    errors: [AtomicU64; 4],
}

impl Default for FaultSlot {
    fn default() -> Self {
        FaultSlot {
            rules: ArcSwap::from_pointee(Vec::new()),
            next_id: Mutex::new(1),
            errors: Default::default(),
        }
    }
}

impl FaultSlot {
    /// Replace the list with `edit` applied to a copy of it (control plane only).
    fn edit<T>(&self, edit: impl FnOnce(&mut Vec<Arc<Rule>>, &mut u32) -> T) -> T {
        let mut next_id = self.next_id.lock().unwrap_or_else(PoisonError::into_inner);
        let mut rules = Vec::clone(&self.rules.load());
        let out = edit(&mut rules, &mut next_id);
        self.rules.store(Arc::new(rules));
        out
    }

    /// Add a rule at the end of the list: its id.
    pub fn add(&self, spec: FaultRule) -> Result<u32, RulesFull> {
        self.edit(|rules, next_id| {
            if rules.len() >= MAX_RULES {
                return Err(RulesFull);
            }
            Ok(push(rules, next_id, spec, None))
        })
    }

    /// Remove rule `id` (None: every rule); whether any was removed.
    pub fn remove(&self, id: Option<u32>) -> bool {
        self.edit(|rules, _| {
            let before = rules.len();
            rules.retain(|r| {
                let gone = id.is_none_or(|id| r.id == id);
                if gone {
                    r.disarm();
                }
                !gone
            });
            rules.len() != before
        })
    }

    /// SPDK's `bdev_error_inject_error`: `kind` for the next `num` commands of type `io`
    /// (`num` 0 disarms it) taken while at least `queue_depth` others are outstanding,
    /// replacing what was armed for that type.
    pub fn arm(
        &self,
        io: FaultIo,
        kind: FaultKind,
        action: FaultAction,
        (num, queue_depth): (u32, u64),
    ) -> Result<(), RulesFull> {
        self.edit(|rules, next_id| {
            drop_spdk(rules, Some(io));
            if num == 0 {
                return Ok(());
            }
            if rules.len() >= MAX_RULES {
                return Err(RulesFull);
            }
            let spec = FaultRule {
                action,
                target: FaultTarget {
                    io: Some(io),
                    ..FaultTarget::default()
                },
                when: FaultWhen {
                    count: num,
                    queue_depth,
                    ..FaultWhen::default()
                },
            };
            push(rules, next_id, spec, Some((io, kind)));
            Ok(())
        })
    }

    /// Disarm every SPDK injection (SPDK's `io_type` `clear`); nvmemu's rules stay.
    pub fn clear(&self) {
        self.edit(|rules, _| drop_spdk(rules, None));
    }

    /// What SPDK injection is armed for `io` and how many hits are left.
    pub fn armed(&self, io: FaultIo) -> Option<(FaultKind, u32)> {
        self.rules.load().iter().find_map(|r| match r.spdk {
            Some((i, kind)) if i == io => r.remaining().filter(|n| *n > 0).map(|n| (kind, n)),
            _ => None,
        })
    }

    /// The rules, in order, with their counters.
    pub fn rules(&self) -> Vec<RuleView> {
        self.rules.load().iter().map(|r| r.view()).collect()
    }

    /// Failed commands of the bdev, by SPDK's names: those a `status` firing failed and
    /// those counted by [`FaultSlot::count_error`].
    pub fn io_errors(&self) -> IoErrors {
        IoErrors(self.errors.each_ref().map(|n| n.load(Ordering::Relaxed)))
    }

    /// Count a command the bdev failed with `kind` (a Compare that differs).
    pub fn count_error(&self, kind: IoError) {
        if let Some(n) = self.errors.get(kind as usize) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The action for `cmd`: that of the first rule, in list order, that matches it and
    /// fires (a `Reorder` as the `Delay` it makes of this command); None if none does.
    pub fn take(&self, cmd: &FaultCmd) -> Option<FaultAction> {
        let rules = self.rules.load();
        let mut now = None;
        let (rule, left) = rules.iter().find_map(|r| {
            let fires = r.is_live() && r.matches(cmd, &mut now);
            fires.then(|| r.fire().map(|left| (r, left))).flatten()
        })?;
        let action = match rule.spec.action {
            FaultAction::Reorder { us } => FaultAction::Delay {
                us: us.saturating_mul(u64::from(left) + 1),
            },
            action => action,
        };
        if let FaultAction::Status { sct, sc, .. } = action {
            // The error bdev's `failure` is SPDK's FAILED; a status of nvmemu's own rules
            // is an NVMe status, as SPDK's NVMe bdev completes one.
            let kind = match rule.spdk {
                Some((_, FaultKind::Failure)) => IoError::Failed,
                _ => IoError::of_nvme(sct, sc),
            };
            self.count_error(kind);
        }
        Some(action)
    }
}

/// Append a live rule made from `spec`; its id.
fn push(
    rules: &mut Vec<Arc<Rule>>,
    next_id: &mut u32,
    spec: FaultRule,
    spdk: Option<(FaultIo, FaultKind)>,
) -> u32 {
    let id = *next_id;
    *next_id = next_id.wrapping_add(1);
    ARMED.fetch_add(1, Ordering::Relaxed);
    rules.push(Arc::new(Rule::new(id, spec, spdk)));
    id
}

/// Remove SPDK's injections for `io` (None: for every type).
fn drop_spdk(rules: &mut Vec<Arc<Rule>>, io: Option<FaultIo>) {
    rules.retain(|r| {
        let gone = r.spdk.is_some_and(|(i, _)| io.is_none_or(|io| io == i));
        if gone {
            r.disarm();
        }
        !gone
    });
}

impl Drop for FaultSlot {
    fn drop(&mut self) {
        self.remove(None);
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

    fn cmd(io: FaultIo) -> FaultCmd {
        FaultCmd {
            io: Some(io),
            opcode: 0,
            lba: None,
            qid: 1,
            outstanding: 0,
        }
    }

    fn arm(slot: &FaultSlot, io: FaultIo, kind: FaultKind, num: u32) {
        slot.arm(io, kind, kind.action(0, 0), (num, 0)).unwrap();
    }

    #[test]
    fn an_injection_hits_exactly_num_commands_of_its_type() {
        let slot = FaultSlot::default();
        arm(&slot, FaultIo::Write, FaultKind::Failure, 2);
        assert!(any_fault());
        assert_eq!(slot.take(&cmd(FaultIo::Read)), None, "reads are not armed");
        assert_eq!(slot.take(&cmd(FaultIo::Write)), Some(FAILURE));
        assert_eq!(slot.armed(FaultIo::Write), Some((FaultKind::Failure, 1)));
        assert_eq!(slot.take(&cmd(FaultIo::Write)), Some(FAILURE));
        assert_eq!(slot.take(&cmd(FaultIo::Write)), None, "the count is spent");
        assert_eq!(slot.armed(FaultIo::Write), None);
        assert_eq!(slot.io_errors().get(IoError::Failed), 2);
        arm(&slot, FaultIo::Flush, FaultKind::Pending, 5);
        slot.clear();
        assert_eq!(slot.take(&cmd(FaultIo::Flush)), None);
    }

    #[test]
    fn rules_apply_in_order_are_bounded_and_removed_by_id() {
        let slot = FaultSlot::default();
        let status = FaultAction::Status {
            sct: 2,
            sc: 0x81,
            dnr: false,
        };
        let rule = |action| FaultRule {
            action,
            target: FaultTarget::default(),
            when: FaultWhen {
                count: 0,
                ..FaultWhen::default()
            },
        };
        let first = slot.add(rule(status)).unwrap();
        let second = slot.add(rule(FaultAction::Drop)).unwrap();
        assert_ne!(first, second);
        assert_eq!(
            slot.take(&cmd(FaultIo::Read)),
            Some(status),
            "the first wins"
        );
        assert!(slot.remove(Some(first)));
        assert!(!slot.remove(Some(first)), "already gone");
        assert_eq!(slot.take(&cmd(FaultIo::Read)), Some(FaultAction::Drop));
        for _ in 1..MAX_RULES {
            slot.add(rule(FaultAction::Drop)).unwrap();
        }
        assert_eq!(slot.add(rule(FaultAction::Drop)), Err(RulesFull));
        let views = slot.rules();
        assert_eq!(views.len(), MAX_RULES);
        assert_eq!(
            (views[0].id, views[0].matched, views[0].injected),
            (second, 1, 1)
        );
        assert_eq!(slot.io_errors().get(IoError::NvmeError), 1);
        assert!(slot.remove(None));
        assert!(slot.rules().is_empty());
    }

    #[test]
    fn failed_commands_count_under_spdks_bdev_io_status_names() {
        let slot = FaultSlot::default();
        let status = |sct, sc| FaultRule {
            action: FaultAction::Status {
                sct,
                sc,
                dnr: false,
            },
            target: FaultTarget::default(),
            when: FaultWhen::default(),
        };
        // nvmemu's own rules are NVMe statuses, Internal Error included.
        for (sct, sc) in [(0, 6), (2, 0x81), (2, 0x85), (0, 7)] {
            slot.add(status(sct, sc)).unwrap();
            slot.take(&cmd(FaultIo::Read)).unwrap();
        }
        arm(&slot, FaultIo::Read, FaultKind::Failure, 1);
        slot.take(&cmd(FaultIo::Read)).unwrap();
        slot.count_error(IoError::Miscompare);
        let named: Vec<_> = IoError::ALL
            .iter()
            .map(|&k| (k.name(), slot.io_errors().get(k)))
            .collect();
        assert_eq!(
            named,
            [
                ("failed", 1),
                ("nvme_error", 3),
                ("miscompare", 1),
                ("aborted", 1)
            ]
        );
    }

    #[test]
    fn reorder_delays_each_firing_less_than_the_one_before() {
        let slot = FaultSlot::default();
        let when = FaultWhen {
            count: 3,
            ..FaultWhen::default()
        };
        let rule = FaultRule {
            action: FaultAction::Reorder { us: 10 },
            target: FaultTarget::default(),
            when,
        };
        slot.add(rule).unwrap();
        let delays: Vec<_> = (0..4).map(|_| slot.take(&cmd(FaultIo::Read))).collect();
        let delay = |us| Some(FaultAction::Delay { us });
        assert_eq!(delays, [delay(30), delay(20), delay(10), None]);
    }
}
