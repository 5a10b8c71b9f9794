// SPDX-License-Identifier: Apache-2.0
//! How an idle poller backs off: spin, optionally yield, then park; a poller without
//! controllers parks long whatever its back-off, and one waiting only for held completions
//! parks until shortly before the soonest is due.

use std::time::Duration;

/// What an idle poller does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Idle passes spent spinning before yielding.
    pub spin_passes: u32,
    /// Idle passes spent yielding (`sched_yield`) before sleeping; the default has none.
    pub yield_passes: u32,
    /// Sleep per idle pass after that (woken early by control calls); zero = never sleep.
    pub sleep: Duration,
}

/// What the poller does after a pass that found no work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdleAction {
    /// Poll again at once (a PAUSE first unless the back-off is off).
    Spin,
    /// `sched_yield`, then poll again.
    Yield,
    /// Park for at most this long (a control call unparks it sooner).
    Park(Duration),
}

/// How much sooner than a held completion is due a parked poller asks to wake: the kernel
/// wakes it late by its timer slack (set to 1 us for pollers) plus its scheduling delay, so
/// it wakes early and spins to the due time.
const WAKE_EARLY_NS: u64 = 20_000;
/// How long a poller with held completions spins after its last work before parking: a
/// host that has just reaped a completion usually submits its next command within it.
const HELD_SPIN_NS: u64 = 20_000;
/// The pollers' timer slack: how late the kernel may end a park (its default is 50 us).
pub(crate) const TIMER_SLACK_NS: u64 = 1_000;
/// How long a poller without controllers parks per idle pass, busy polling or not. Nothing
/// but a control call can give it work, and that unparks it at once; it wakes only to keep
/// its idle time current. With the idle sleep instead it would wake 5,000 times a second,
/// and busy polling it would spin, on a core it may share with an NVMe/TCP poll group.
pub(crate) const EMPTY_PARK: Duration = Duration::from_millis(10);

impl Backoff {
    /// Never back off: the poller spins at full speed (benchmarks).
    pub const NONE: Backoff = Backoff {
        spin_passes: u32::MAX,
        yield_passes: 0,
        sleep: Duration::ZERO,
    };

    /// The action after the `idle_passes`-th consecutive pass that found no work (1-based).
    #[inline(always)]
    pub(crate) fn action(&self, idle_passes: u64) -> IdleAction {
        let spin = u64::from(self.spin_passes);
        if idle_passes < spin {
            IdleAction::Spin
        } else if idle_passes < spin.saturating_add(u64::from(self.yield_passes))
            || self.sleep.is_zero()
        {
            IdleAction::Yield
        } else {
            IdleAction::Park(self.sleep)
        }
    }

    /// The action after the `idle_passes`-th idle pass of a poller without controllers.
    /// Nothing but a control call can give it work, and that unparks it at once, so past
    /// the spin phase (at most the default's) it parks [`EMPTY_PARK`] at a time, busy
    /// polling or not: busy polling is for controllers, and an empty poller that spins
    /// takes the time of whatever shares its core (an NVMe/TCP poll group).
    pub(crate) fn empty_action(&self, idle_passes: u64) -> IdleAction {
        let spin = self.spin_passes.min(Backoff::default().spin_passes);
        match self.action(idle_passes) {
            IdleAction::Spin if idle_passes < u64::from(spin) => IdleAction::Spin,
            IdleAction::Yield if !self.sleep.is_zero() => IdleAction::Yield,
            _ => IdleAction::Park(EMPTY_PARK),
        }
    }

    /// The action after an idle pass while completions are held, the soonest due in
    /// `wait_ns`, the poller idle for `idle_ns`; `normal` is what it would do without them.
    /// It parks, after [`HELD_SPIN_NS`] of spinning, until [`WAKE_EARLY_NS`] before the due
    /// time, at most one `sleep` at a time (so a doorbell is seen as soon as by an idle
    /// poller), and spins from there. A busy-polling poller (no sleep) never parks.
    pub(crate) fn held_action(&self, normal: IdleAction, wait_ns: u64, idle_ns: u64) -> IdleAction {
        if self.sleep.is_zero() {
            return normal;
        }
        if wait_ns <= WAKE_EARLY_NS {
            return IdleAction::Spin;
        }
        if idle_ns < HELD_SPIN_NS && !matches!(normal, IdleAction::Park(_)) {
            return normal;
        }
        let until_due = Duration::from_nanos(wait_ns - WAKE_EARLY_NS);
        IdleAction::Park(self.sleep.min(until_due))
    }
}

/// Spin, then park 200 us per idle pass: a command that arrives while the poller sleeps waits
/// at most one sleep plus the kernel's wake-up of the poller.
///
/// No `sched_yield` phase: on a CPU shared with other runnable threads, each yield of Linux's
/// EEVDF scheduler pushes the yielder's virtual deadline one slice later, so a poller that
/// yields a thousand times in a row is then passed
/// over for other threads' slices long after its work has arrived (measured:
/// docs/architecture.md, "Idle pollers"). A parked poller is placed afresh when it wakes.
impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            spin_passes: 20_000,
            yield_passes: 0,
            sleep: Duration::from_micros(200),
        }
    }
}
