// SPDX-License-Identifier: Apache-2.0
//! Injected controller-level faults, beside the bdev's (`fault.rs`):
//!
//! - **Controller Fatal Status** (NVMe Base 1.4, 10.5): now, or once a number of further
//!   I/O commands have been taken. CSTS.CFS becomes 1 and the controller processes nothing
//!   (the command that found it fatal stays in its SQ) until the host resets it: CC.EN
//!   1 -> 0, a Function Level Reset or a vfio-user DEVICE_RESET, as for any fatal state.
//! - **Namespace Not Ready** (generic status 82h): every I/O command to the namespace
//!   completes with it, DNR set or clear as asked, without running, until the namespace
//!   is made ready again. The state is the namespace's, shared by every controller it is
//!   attached to; admin commands (Identify, log pages) are unaffected.
//!
//! Both are checked in the poller's per-command fault step, which runs only while some
//! injection is armed in the process: each holds a [`FaultGate`] open while armed, so a
//! target with none pays nothing more per command than before. Each keeps a record of
//! what it did ([`FatalRecord`], [`Namespace::not_ready_commands`]) for
//! `nvmemu_controller_get_faults` and `nvmemu stat`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use nvmemu_bdev::fault::{FaultAction, FaultGate};
use nvmemu_spec::{Qid, Sqe, Status};

use crate::queue::RingIdx;
use crate::state::CtrlEvent;
use crate::{Controller, CtrlState, Namespace};

/// `Readiness::state` values.
const READY: u8 = 0;
const NOT_READY: u8 = 1;
const NOT_READY_DNR: u8 = 2;

/// Whether a namespace takes I/O; one per namespace, shared by its clones.
#[derive(Debug, Default)]
pub(crate) struct Readiness {
    /// `READY`, `NOT_READY` or `NOT_READY_DNR`. Relaxed: a lone flag, nothing else is
    /// published with it; the control plane sets it, pollers read it.
    state: AtomicU8,
    /// Open while not ready. The mutex is taken only by the control plane.
    gate: Mutex<Option<FaultGate>>,
    /// I/O commands answered Namespace Not Ready, by every controller, ever. Relaxed: a
    /// counter read on its own; touched only while the namespace is not ready.
    refused: AtomicU64,
}

impl Namespace {
    /// Make every I/O command to this namespace, on every controller it is attached to,
    /// complete with Namespace Not Ready (DNR as `dnr` says) until [`Namespace::set_ready`].
    pub fn set_not_ready(&self, dnr: bool) {
        let r = self.readiness();
        let mut gate = r.gate.lock().unwrap_or_else(|e| e.into_inner());
        let state = if dnr { NOT_READY_DNR } else { NOT_READY };
        r.state.store(state, Ordering::Relaxed);
        gate.get_or_insert_with(FaultGate::open);
    }

    /// Take I/O again.
    pub fn set_ready(&self) {
        let r = self.readiness();
        let mut gate = r.gate.lock().unwrap_or_else(|e| e.into_inner());
        r.state.store(READY, Ordering::Relaxed);
        *gate = None;
    }

    /// The status I/O to this namespace completes with while it is not ready.
    pub fn not_ready(&self) -> Option<Status> {
        match self.readiness().state.load(Ordering::Relaxed) {
            READY => None,
            s => Some(Status::NAMESPACE_NOT_READY.with_dnr(s == NOT_READY_DNR)),
        }
    }

    /// I/O commands this namespace has answered with Namespace Not Ready, on every
    /// controller it is attached to, since it was made.
    pub fn not_ready_commands(&self) -> u64 {
        self.readiness().refused.load(Ordering::Relaxed)
    }
}

/// What injected fatal statuses did to one controller (`nvmemu_controller_get_faults`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FatalRecord {
    /// I/O commands still taken before an armed fatal status fires (None: none armed).
    pub armed_after: Option<u32>,
    /// Times an injection set CSTS.CFS.
    pub injected: u32,
    /// When it last did, in milliseconds since the UNIX epoch.
    pub last_injected_ms: Option<u64>,
    /// Times a reset (CC.EN 1 -> 0, FLR, DEVICE_RESET) cleared an injected CSTS.CFS.
    pub cleared: u32,
    /// Whether the injected CSTS.CFS is still set (no reset since).
    pub in_effect: bool,
}

/// The part of [`FatalRecord`] the controller keeps (the countdown is kept apart).
#[derive(Debug, Default)]
pub(crate) struct FatalLog {
    injected: u32,
    last_injected_ms: Option<u64>,
    cleared: u32,
    in_effect: bool,
}

impl FatalLog {
    fn fired(&mut self) {
        self.injected = self.injected.saturating_add(1);
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.last_injected_ms = Some(ms);
        self.in_effect = true;
    }

    /// The controller goes from `from` to `to`: leaving Fatal clears an injected CFS.
    pub(crate) fn on_transition(&mut self, from: CtrlState, to: CtrlState) {
        let leaves_fatal =
            matches!(from, CtrlState::Fatal { .. }) && !matches!(to, CtrlState::Fatal { .. });
        if leaves_fatal && self.in_effect {
            self.in_effect = false;
            self.cleared = self.cleared.saturating_add(1);
        }
    }
}

/// Why an injected fatal status was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FatalRefused {
    /// Only an enabled controller can fail now: a disabled one would stay fatal with
    /// CC.EN already 0, which no host can reset by clearing it.
    #[error("the controller is not enabled (no host is using it): nothing to fail now")]
    NotEnabled,
}

/// What the per-command fault step does with a command.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Injection {
    /// What the bdev's fault rules say (`fault.rs`).
    Bdev(FaultAction),
    /// Complete with this status without running (a namespace that is not ready).
    Refuse(Status),
    /// The fatal countdown ran out: the controller is now fatal; the command stays queued.
    Fatal,
}

impl Injection {
    /// Whether the command stays in its SQ (the poller stops taking from it this pass).
    pub(crate) fn leaves_queued(self) -> bool {
        matches!(self, Injection::Fatal) || matches!(self, Injection::Bdev(FaultAction::Nomem))
    }
}

/// The fatal countdown: I/O commands still taken before the controller fails.
#[derive(Debug)]
pub(crate) struct FatalCountdown {
    remaining: u32,
    _gate: FaultGate,
}

impl Controller {
    /// Enter Controller Fatal Status now (`after_commands` 0; the controller must be
    /// enabled) or once `after_commands` more I/O commands have been taken (they run as
    /// usual; the next one finds the controller fatal). Replaces an earlier countdown.
    pub fn inject_fatal(&mut self, after_commands: u32) -> Result<(), FatalRefused> {
        if after_commands > 0 {
            self.fatal_countdown = Some(FatalCountdown {
                remaining: after_commands,
                _gate: FaultGate::open(),
            });
            tracing::info!(
                cntlid = self.config.cntlid,
                after_commands,
                "controller fatal status armed"
            );
            return Ok(());
        }
        if !matches!(self.state, CtrlState::Ready | CtrlState::Fatal { .. }) {
            return Err(FatalRefused::NotEnabled);
        }
        self.fatal_countdown = None;
        self.go_fatal();
        Ok(())
    }

    /// I/O commands still taken before an armed fatal status (None: none is armed).
    pub fn fatal_countdown(&self) -> Option<u32> {
        self.fatal_countdown.as_ref().map(|c| c.remaining)
    }

    /// What injected fatal statuses have done to this controller.
    pub fn fatal_record(&self) -> FatalRecord {
        let log = &self.fatal_log;
        FatalRecord {
            armed_after: self.fatal_countdown(),
            injected: log.injected,
            last_injected_ms: log.last_injected_ms,
            cleared: log.cleared,
            in_effect: log.in_effect,
        }
    }

    fn go_fatal(&mut self) {
        tracing::warn!(
            cntlid = self.config.cntlid,
            "injected controller fatal status (CSTS.CFS=1) until the host resets it"
        );
        self.apply(CtrlEvent::Fault, None);
        self.fatal_log.fired();
    }

    /// The per-command fault step for I/O command `sqe`, at the head of `sqid` (whose
    /// tail is `tail`): the fatal countdown first, then the namespace's readiness, then
    /// its bdev's fault rules. Runs only while some bdev has an injection armed, so it
    /// stays out of `poll_sq`'s loop.
    #[cold]
    #[inline(never)]
    pub(crate) fn injection(&mut self, sqid: Qid, sqe: &Sqe, tail: RingIdx) -> Option<Injection> {
        if let Some(c) = &mut self.fatal_countdown {
            if c.remaining == 0 {
                self.fatal_countdown = None;
                self.go_fatal();
                return Some(Injection::Fatal);
            }
            c.remaining -= 1;
        }
        let slot = usize::try_from(sqe.nsid).ok()?.checked_sub(1);
        let ns = slot.and_then(|s| self.namespaces.get(s)?.as_ref());
        if let Some(ns) = ns
            && let Some(status) = ns.not_ready()
        {
            // The command is answered with it (a `Refuse` is never left queued).
            ns.readiness().refused.fetch_add(1, Ordering::Relaxed);
            return Some(Injection::Refuse(status));
        }
        let outstanding = self.outstanding(sqid, tail);
        crate::fault::take(&self.namespaces, sqid, sqe, outstanding).map(Injection::Bdev)
    }

    /// The host's other commands outstanding as the head of `sqid` is taken: those behind
    /// it in the SQ (up to `tail`), and those taken before and not completed (held, in
    /// file I/O, set aside). SPDK's error bdev compares `queue_depth` with its channel's
    /// I/O in flight; with the host's commands queued here rather than in a bdev, these
    /// are the ones in flight.
    fn outstanding(&self, sqid: Qid, tail: RingIdx) -> u64 {
        let behind = self
            .queues
            .sq(sqid)
            .map_or(0, |sq| sq.distance(sq.head, tail).saturating_sub(1));
        let taken = self.held.len() + self.file_io.in_flight() + usize::from(self.zeroing.busy);
        u64::from(behind).saturating_add(u64::try_from(taken).unwrap_or(u64::MAX))
    }

    /// Apply `injection` to `sqe`, consumed from `sqid`: the result to complete it with,
    /// or None when it is held or set aside.
    #[inline(never)]
    pub(crate) fn apply_injection(
        &mut self,
        sqid: Qid,
        sqe: &Sqe,
        injection: Injection,
    ) -> Option<Result<u32, Status>> {
        match injection {
            Injection::Bdev(action) => {
                // A `corrupt` changes the data in the host's buffer and a `delay` holds the
                // completion: the data must be copied when the command runs.
                self.injecting = true;
                let result = self.inject(sqid, sqe, action);
                self.injecting = false;
                result
            }
            Injection::Refuse(status) => Some(Err(status)),
            // Never consumed (`leaves_queued`); were it to be, it fails.
            Injection::Fatal => Some(Err(Status::INTERNAL_ERROR)),
        }
    }
}
