// SPDX-License-Identifier: Apache-2.0
//! One fault rule: what it does ([`FaultAction`]), which commands it matches
//! ([`FaultTarget`]), when it fires on them ([`FaultWhen`]), and its counters.
//!
//! A rule is shared by every poller serving its bdev: its counters are atomics, so
//! `every`, `count` and the seeded draws run over the commands of all of them in the order
//! they reach the rule. Nothing is allocated or locked per command.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use nvmemu_mem::global_clock;
use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};

use super::{ARMED, FaultIo, FaultKind};

/// What a rule does to a command it fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    /// Not executed; completes with this status (SCT, SC, Do Not Retry).
    Status {
        /// Status Code Type.
        sct: u8,
        /// Status Code.
        sc: u8,
        /// Do Not Retry.
        dnr: bool,
    },
    /// Runs, with the byte at `offset` of its data XORed with `value`: a write's before it
    /// is stored, a read's after it is read.
    Corrupt {
        /// The byte of the command's data (none if past its end).
        offset: u64,
        /// What it is XORed with (1-255).
        value: u8,
    },
    /// Not executed and never completed, until aborted or the controller is reset.
    Drop,
    /// Runs; its completion is posted this many microseconds later.
    Delay {
        /// The delay, microseconds.
        us: u64,
    },
    /// Runs; its completion is held as `Delay` for `us` times the firings its rule has
    /// left after it plus one, so the commands a rule fires on close together (within
    /// `us` of each other) complete in reverse order.
    Reorder {
        /// The step between two completions, microseconds.
        us: u64,
    },
    /// Left in its queue and taken again later (SPDK's `nomem`).
    Nomem,
}

impl FaultAction {
    /// The `action` name of `nvmemu_bdev_inject_fault` (`nomem` is SPDK's alone).
    pub fn name(&self) -> &'static str {
        match self {
            FaultAction::Status { .. } => "status",
            FaultAction::Corrupt { .. } => "corrupt",
            FaultAction::Drop => "drop",
            FaultAction::Delay { .. } => "delay",
            FaultAction::Reorder { .. } => "reorder",
            FaultAction::Nomem => "nomem",
        }
    }
}

/// Which commands a rule matches (every part left `None` matches all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultTarget {
    /// The command's I/O type.
    pub io: Option<FaultIo>,
    /// The command's opcode.
    pub opcode: Option<u8>,
    /// First block and block count: commands whose blocks overlap them.
    pub lba: Option<(u64, u64)>,
    /// The I/O submission queue.
    pub qid: Option<u16>,
}

/// When a rule fires on the commands it matches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultWhen {
    /// Every Nth matched command (1: each).
    pub every: u32,
    /// The chance each one fires (0 < p <= 1).
    pub probability: f64,
    /// Seed of the draws: the draw of the Nth matched command is the Nth output of
    /// SplitMix64 seeded with it.
    pub seed: u64,
    /// The most commands it fires on; 0: no limit.
    pub count: u32,
    /// Matches from this long after it was added (ms).
    pub from_ms: u64,
    /// ... until this long after (ms); None: for ever.
    pub until_ms: Option<u64>,
    /// Only while at least this many other commands are outstanding beside the command
    /// ([`FaultCmd::outstanding`]); 0: at any depth. SPDK's `queue_depth`.
    pub queue_depth: u64,
}

impl Default for FaultWhen {
    fn default() -> Self {
        FaultWhen {
            every: 1,
            probability: 1.0,
            seed: 0,
            count: 1,
            from_ms: 0,
            until_ms: None,
            queue_depth: 0,
        }
    }
}

/// A rule as asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultRule {
    /// What it does.
    pub action: FaultAction,
    /// Which commands.
    pub target: FaultTarget,
    /// When.
    pub when: FaultWhen,
}

/// The command a poller asks about, decoded from its SQE copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultCmd {
    /// Its I/O type, if it has one.
    pub io: Option<FaultIo>,
    /// Its opcode.
    pub opcode: u8,
    /// First block and block count, for commands that name blocks.
    pub lba: Option<(u64, u64)>,
    /// The submission queue it came from.
    pub qid: u16,
    /// The host's other commands outstanding on its controller when it is taken: those
    /// behind it in its submission queue and those taken earlier and not completed yet.
    pub outstanding: u64,
}

/// `remaining` of a rule without a count.
const UNLIMITED: u32 = u32::MAX;

/// A rule in a bdev's list, with its counters.
#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) id: u32,
    pub(crate) spec: FaultRule,
    /// Armed by `bdev_error_inject_error` for this type, with this `error_type`.
    pub(crate) spdk: Option<(FaultIo, FaultKind)>,
    armed_at_ns: u64,
    /// `probability` as a fraction of 2^64; `u64::MAX`: always.
    threshold: u64,
    matched: AtomicU64,
    injected: AtomicU64,
    /// Firings left; [`UNLIMITED`]; 0 once spent or removed.
    remaining: AtomicU32,
}

/// A rule's state, read for the RPC and `nvmemu stat`.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleView {
    /// Its id (unique per bdev).
    pub id: u32,
    /// What was asked.
    pub spec: FaultRule,
    /// Armed by `bdev_error_inject_error`.
    pub spdk: bool,
    /// Commands it matched.
    pub matched: u64,
    /// Commands it fired on.
    pub injected: u64,
    /// Firings left (None: no limit).
    pub remaining: Option<u32>,
}

impl Rule {
    /// A live rule; the caller counts it in [`ARMED`].
    pub(crate) fn new(id: u32, spec: FaultRule, spdk: Option<(FaultIo, FaultKind)>) -> Rule {
        let p = spec.when.probability;
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "0 < p < 1 was checked: the product lies in (0, 2^64)"
        )]
        let threshold = if p >= 1.0 {
            u64::MAX
        } else {
            (p * (u64::MAX as f64)) as u64
        };
        let remaining = match spec.when.count {
            0 => UNLIMITED,
            n => n,
        };
        Rule {
            id,
            spec,
            spdk,
            armed_at_ns: global_clock().now_ns(),
            threshold,
            matched: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            remaining: AtomicU32::new(remaining),
        }
    }

    /// Whether it may still fire.
    pub(crate) fn is_live(&self) -> bool {
        self.remaining.load(Ordering::Relaxed) != 0
    }

    /// Whether `cmd` is one of its commands; `now` is read from the clock once, and only
    /// for a rule with a time window.
    pub(crate) fn matches(&self, cmd: &FaultCmd, now: &mut Option<u64>) -> bool {
        let t = &self.spec.target;
        if t.io.is_some_and(|io| cmd.io != Some(io))
            || t.opcode.is_some_and(|op| cmd.opcode != op)
            || t.qid.is_some_and(|q| cmd.qid != q)
        {
            return false;
        }
        if let Some((start, count)) = t.lba {
            let Some((slba, nlb)) = cmd.lba else {
                return false;
            };
            if slba >= start.saturating_add(count) || start >= slba.saturating_add(nlb) {
                return false;
            }
        }
        let w = &self.spec.when;
        if cmd.outstanding < w.queue_depth {
            return false;
        }
        if w.from_ms == 0 && w.until_ms.is_none() {
            return true;
        }
        let now = *now.get_or_insert_with(|| global_clock().now_ns());
        let since_ms = now.saturating_sub(self.armed_at_ns) / 1_000_000;
        since_ms >= w.from_ms && w.until_ms.is_none_or(|until| since_ms < until)
    }

    /// Count a matched command and decide whether the rule fires on it: if it does, the
    /// firings it has left after this one (`u32::MAX`: no limit).
    pub(crate) fn fire(&self) -> Option<u32> {
        let index = self.matched.fetch_add(1, Ordering::Relaxed);
        let w = &self.spec.when;
        if !(index + 1).is_multiple_of(u64::from(w.every.max(1))) {
            return None;
        }
        if self.threshold != u64::MAX && draw(w.seed, index) >= self.threshold {
            return None;
        }
        let taken = self
            .remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| match n {
                0 => None,
                UNLIMITED => Some(n),
                n => Some(n - 1),
            });
        let before = taken.ok()?;
        if before == 1 {
            ARMED.fetch_sub(1, Ordering::Relaxed);
        }
        self.injected.fetch_add(1, Ordering::Relaxed);
        Some(if before == UNLIMITED {
            UNLIMITED
        } else {
            before - 1
        })
    }

    /// Stop it firing (it is removed or replaced).
    pub(crate) fn disarm(&self) {
        if self.remaining.swap(0, Ordering::AcqRel) != 0 {
            ARMED.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Firings left: None without a limit.
    pub(crate) fn remaining(&self) -> Option<u32> {
        match self.remaining.load(Ordering::Acquire) {
            UNLIMITED => None,
            n => Some(n),
        }
    }

    pub(crate) fn view(&self) -> RuleView {
        RuleView {
            id: self.id,
            spec: self.spec,
            spdk: self.spdk.is_some(),
            matched: self.matched.load(Ordering::Relaxed),
            injected: self.injected.load(Ordering::Relaxed),
            remaining: self.remaining(),
        }
    }
}

/// The `index`th output (from 0) of SplitMix64 seeded with `seed`: a draw that depends on
/// the seed and the command's place among those the rule matched, nothing else.
fn draw(seed: u64, index: u64) -> u64 {
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
    SplitMix64::seed_from_u64(seed.wrapping_add(index.wrapping_mul(GAMMA))).next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(target: FaultTarget, when: FaultWhen) -> Rule {
        let action = FaultAction::Drop;
        ARMED.fetch_add(1, Ordering::Relaxed);
        Rule::new(
            1,
            FaultRule {
                action,
                target,
                when,
            },
            None,
        )
    }

    fn read(slba: u64, nlb: u64, qid: u16) -> FaultCmd {
        FaultCmd {
            io: Some(FaultIo::Read),
            opcode: 2,
            lba: Some((slba, nlb)),
            qid,
            outstanding: 0,
        }
    }

    #[test]
    fn a_rule_matches_its_type_opcode_queue_and_overlapping_blocks() {
        let r = rule(
            FaultTarget {
                io: Some(FaultIo::Read),
                lba: Some((100, 10)),
                qid: Some(2),
                ..FaultTarget::default()
            },
            FaultWhen::default(),
        );
        let mut now = None;
        assert!(r.matches(&read(95, 6, 2), &mut now), "ends in the range");
        assert!(r.matches(&read(109, 100, 2), &mut now), "starts in it");
        assert!(!r.matches(&read(95, 5, 2), &mut now), "ends just before");
        assert!(!r.matches(&read(110, 1, 2), &mut now), "starts just after");
        assert!(!r.matches(&read(100, 1, 1), &mut now), "another queue");
        let write = FaultCmd {
            io: Some(FaultIo::Write),
            opcode: 1,
            ..read(100, 1, 2)
        };
        assert!(!r.matches(&write, &mut now));
        let flush = FaultCmd {
            io: Some(FaultIo::Flush),
            lba: None,
            ..read(0, 0, 2)
        };
        let any_type = rule(
            FaultTarget {
                lba: Some((0, 1)),
                ..FaultTarget::default()
            },
            FaultWhen::default(),
        );
        assert!(!any_type.matches(&flush, &mut now), "no blocks, no match");
        let by_opcode = rule(
            FaultTarget {
                opcode: Some(2),
                ..FaultTarget::default()
            },
            FaultWhen::default(),
        );
        assert!(by_opcode.matches(&read(0, 1, 1), &mut now));
        assert!(!by_opcode.matches(&write, &mut now));
        assert_eq!(now, None, "no window, no clock read");
        for r in [r, any_type, by_opcode] {
            r.disarm();
        }
    }

    #[test]
    fn every_nth_and_count_decide_the_firings() {
        let when = FaultWhen {
            every: 3,
            count: 2,
            ..FaultWhen::default()
        };
        let r = rule(FaultTarget::default(), when);
        let fired: Vec<Option<u32>> = (0..9).map(|_| r.fire()).collect();
        let (no, left) = (None, Some);
        let expect = [no, no, left(1), no, no, left(0), no, no, no];
        assert_eq!(fired, expect, "the 3rd and 6th, then spent");
        let v = r.view();
        assert_eq!((v.matched, v.injected, v.remaining), (9, 2, Some(0)));
        assert!(!r.is_live());
    }

    #[test]
    fn the_same_seed_fires_on_the_same_commands() {
        let when = |seed| FaultWhen {
            probability: 0.25,
            seed,
            count: 0,
            ..FaultWhen::default()
        };
        let run = |seed| {
            let r = rule(FaultTarget::default(), when(seed));
            let fired: Vec<bool> = (0..400).map(|_| r.fire().is_some()).collect();
            r.disarm();
            fired
        };
        let a = run(7);
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
        let n = a.iter().filter(|f| **f).count();
        assert!((60..140).contains(&n), "{n} of 400 at p=0.25");
    }

    #[test]
    fn a_queue_depth_matches_only_with_that_many_others_outstanding() {
        let when = FaultWhen {
            queue_depth: 4,
            ..FaultWhen::default()
        };
        let r = rule(FaultTarget::default(), when);
        let at = |outstanding| FaultCmd {
            outstanding,
            ..read(0, 1, 1)
        };
        let mut now = None;
        assert!(!r.matches(&at(0), &mut now));
        assert!(
            !r.matches(&at(3), &mut now),
            "SPDK: in flight below queue_depth"
        );
        assert!(r.matches(&at(4), &mut now));
        assert!(r.matches(&at(31), &mut now));
        r.disarm();
    }

    #[test]
    fn a_window_matches_only_inside_it() {
        let when = FaultWhen {
            from_ms: 60_000,
            ..FaultWhen::default()
        };
        let r = rule(FaultTarget::default(), when);
        let mut now = None;
        assert!(!r.matches(&read(0, 1, 1), &mut now), "not yet");
        assert!(now.is_some());
        let mut later = Some(r.armed_at_ns + 61_000_000_000);
        assert!(r.matches(&read(0, 1, 1), &mut later));
        r.disarm();
        let until = FaultWhen {
            until_ms: Some(10),
            ..FaultWhen::default()
        };
        let r = rule(FaultTarget::default(), until);
        assert!(r.matches(&read(0, 1, 1), &mut Some(r.armed_at_ns)));
        assert!(!r.matches(&read(0, 1, 1), &mut Some(r.armed_at_ns + 10_000_000)));
        r.disarm();
    }
}
