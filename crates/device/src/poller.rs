// SPDX-License-Identifier: Apache-2.0
//! Pinned poller threads: each owns its controllers and busy-polls their queues.
//!
//! A poller never makes a syscall on the I/O path except the MSI-X eventfd write. When it
//! finds no work it backs off (spin, then short parked sleeps) so an idle daemon does not burn
//! a core; benchmarks turn the back-off off. A poller without controllers parks whatever its
//! back-off. Completions a latency model holds are not work: a poller waiting only for them
//! parks until shortly before the soonest is due.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_utils::CachePadded;

use nvmemu_ctrl::Controller;
use nvmemu_mem::{TscClock, global_clock};

use crate::ControllerId;
pub use crate::backoff::Backoff;
use crate::backoff::{IdleAction, TIMER_SLACK_NS};
use crate::idle::IdleTimer;
use crate::irq::MsixSink;
use crate::mailbox::Mailbox;

/// One controller as its poller holds it.
#[derive(Debug)]
pub struct PolledController {
    /// Which controller.
    pub id: ControllerId,
    /// The NVMe controller state, owned by this poller.
    pub ctrl: Controller,
    /// Where its completions raise interrupts.
    pub irq: MsixSink,
}

/// Everything a poller owns; control calls reach it through the mailbox.
#[derive(Debug, Default)]
pub struct PollerState {
    /// The controllers this poller serves.
    pub controllers: Vec<PolledController>,
}

impl PollerState {
    /// The controller with `id`, if this poller serves it.
    pub fn get_mut(&mut self, id: ControllerId) -> Option<&mut PolledController> {
        self.controllers.iter_mut().find(|c| c.id == id)
    }
}

/// Counters written only by the poller thread (Relaxed), read as snapshots.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct PollerStats {
    passes: AtomicU64,
    commands: AtomicU64,
    idle_ns: AtomicU64,
    started_ns: AtomicU64,
}

/// A snapshot of a poller's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PollerStatsSnapshot {
    /// Polling passes over all controllers.
    pub passes: u64,
    /// Commands completed.
    pub commands: u64,
    /// Nanoseconds spent in idle stretches (passes that found no work).
    pub idle_ns: u64,
    /// Nanoseconds since the poller started.
    pub elapsed_ns: u64,
}

impl PollerStatsSnapshot {
    /// Busy time in nanoseconds.
    pub fn busy_ns(&self) -> u64 {
        self.elapsed_ns.saturating_sub(self.idle_ns)
    }

    /// Counters accumulated between `earlier` and `self`.
    pub fn since(&self, earlier: &PollerStatsSnapshot) -> PollerStatsSnapshot {
        PollerStatsSnapshot {
            passes: self.passes.saturating_sub(earlier.passes),
            commands: self.commands.saturating_sub(earlier.commands),
            idle_ns: self.idle_ns.saturating_sub(earlier.idle_ns),
            elapsed_ns: self.elapsed_ns.saturating_sub(earlier.elapsed_ns),
        }
    }
}

/// A running poller.
#[derive(Debug)]
pub struct Poller {
    /// Control calls into this poller.
    pub mailbox: Arc<Mailbox<PollerState>>,
    stats: Arc<PollerStats>,
    /// Read by the poller on every pass: on a line of its own, so no neighbour's writes
    /// turn that read into a miss.
    stop: Arc<CachePadded<AtomicBool>>,
    epoch: Instant,
    thread: Option<JoinHandle<()>>,
    /// The CPU it is pinned to, if any.
    pub cpu: Option<usize>,
    tid: Option<u32>,
}

impl Poller {
    /// Start a poller thread, pinned to `cpu` when given.
    pub fn spawn(index: usize, cpu: Option<usize>, backoff: Backoff) -> std::io::Result<Poller> {
        let mailbox: Arc<Mailbox<PollerState>> = Arc::default();
        let stats: Arc<PollerStats> = Arc::default();
        let stop = Arc::new(CachePadded::new(AtomicBool::new(false)));
        let epoch = Instant::now();
        let (tid_tx, tid_rx) = std::sync::mpsc::sync_channel(1);
        let thread = {
            let (mailbox, stats, stop) = (mailbox.clone(), stats.clone(), stop.clone());
            std::thread::Builder::new()
                .name(format!("nvmemu-poller{index}"))
                .spawn(move || {
                    let tid = rustix::thread::gettid().as_raw_nonzero().get();
                    let _ = tid_tx.send(u32::try_from(tid).ok());
                    if let Some(cpu) = cpu
                        && let Err(e) = crate::affinity::pin_current_thread(cpu)
                    {
                        tracing::warn!("poller {index}: cannot pin to CPU {cpu}: {e}");
                    }
                    // Without it a park ends up to 50 us late; a held completion's due time
                    // is then missed (a poller that cannot set it only wakes later).
                    let _ =
                        rustix::thread::set_current_timer_slack(NonZeroU64::new(TIMER_SLACK_NS));
                    run(&mailbox, &stats, &stop, backoff, epoch);
                })?
        };
        mailbox.set_poller(thread.thread().clone());
        let tid = tid_rx.recv().ok().flatten();
        Ok(Poller {
            mailbox,
            stats,
            stop,
            epoch,
            thread: Some(thread),
            cpu,
            tid,
        })
    }

    /// A snapshot of the poller's counters.
    pub fn stats(&self) -> PollerStatsSnapshot {
        PollerStatsSnapshot {
            passes: self.stats.passes.load(Ordering::Relaxed),
            commands: self.stats.commands.load(Ordering::Relaxed),
            idle_ns: self.stats.idle_ns.load(Ordering::Relaxed),
            elapsed_ns: u64::try_from(self.epoch.elapsed().as_nanos())
                .unwrap_or(u64::MAX)
                .saturating_sub(self.stats.started_ns.load(Ordering::Relaxed)),
        }
    }

    /// The poller thread's kernel thread id (`gettid`); `None` if the thread died before
    /// telling it.
    pub fn tid(&self) -> Option<u32> {
        self.tid
    }

    /// Stop the thread and wait for it.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.stop();
    }
}

fn nanos_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// What a pass does with one controller (a trait so tests can watch the order).
trait PassTarget {
    /// Copy its queued commands and prefetch their Reads' data (`Controller::prefetch_reads`).
    fn prefetch(&mut self);
    /// Poll it: the commands completed.
    fn poll(&mut self) -> usize;
    /// Whether it has work across passes.
    fn has_deferred_work(&self) -> bool;
}

impl PassTarget for PolledController {
    #[inline(always)]
    fn prefetch(&mut self) {
        self.ctrl.prefetch_reads();
    }

    #[inline(always)]
    fn poll(&mut self) -> usize {
        self.ctrl.poll(&mut self.irq)
    }

    #[inline(always)]
    fn has_deferred_work(&self) -> bool {
        self.ctrl.has_deferred_work()
    }
}

/// One pass over `controllers`, each polled once, in order. With several, each one's queued
/// Reads are prefetched (`Controller::prefetch_reads`) just before the controller ahead of
/// it is polled, so their data arrives while that one runs, and the last one's poll is
/// preceded by the first one's prefetch for the next pass. Prefetching all of them first
/// would make every completion of the pass wait for all of its misses and run the commands
/// rung meanwhile without prefetch; one ahead, each controller's completions go out early
/// and the window for an unprefetched command is one controller's poll. Each poll still reads
/// its doorbells itself, so what a pass takes does not change. `stale`: the first one's
/// prefetch may be old (the controller set changed, or the poller found no work and may
/// have slept since), so it is made again here. Returns the commands completed and whether
/// any controller has work across passes.
fn poll_pass<C: PassTarget>(controllers: &mut [C], stale: bool) -> (usize, bool) {
    let n = controllers.len();
    if n > 1
        && stale
        && let Some(c) = controllers.first_mut()
    {
        c.prefetch();
    }
    let mut work = 0usize;
    // A command done across passes (a large Deallocate) keeps the poller from backing off.
    let mut deferred = false;
    for k in 0..n {
        if n > 1
            && let Some(c) = controllers.get_mut((k + 1) % n)
        {
            c.prefetch();
        }
        if let Some(c) = controllers.get_mut(k) {
            work += c.poll();
            deferred |= c.has_deferred_work();
        }
    }
    (work, deferred)
}

fn run(
    mailbox: &Mailbox<PollerState>,
    stats: &PollerStats,
    stop: &AtomicBool,
    backoff: Backoff,
    epoch: Instant,
) {
    let mut state = PollerState::default();
    stats
        .started_ns
        .store(nanos_since(epoch), Ordering::Relaxed);
    // Idle stretches are timed with the TSC (see `IdleTimer`), no clock_gettime.
    let clock = TscClock::new();
    let mut idle = IdleTimer::default();
    let mut idle_passes: u64 = 0;
    let (mut passes, mut commands) = (0u64, 0u64);
    // Whether the first controller's prefetch for this pass may be old (`poll_pass`).
    let mut stale = true;
    loop {
        stale |= mailbox.run_pending(&mut state);
        if stop.load(Ordering::Relaxed) {
            break;
        }
        idle.pass_begins(|| clock.now_ns());
        let (work, deferred) = poll_pass(&mut state.controllers, stale);
        passes += 1;
        stale = work == 0 && !deferred;
        if work > 0 || deferred {
            commands += work as u64;
            if idle.found_work() {
                // Single writer: a plain store, not a locked add, which would wait for this
                // pass's CQE stores to reach the host's lines.
                stats.idle_ns.store(idle.idle_ns(), Ordering::Relaxed);
            }
            idle_passes = 0;
            // Publish counters once per busy pass: plain stores to this poller's own line.
            stats.passes.store(passes, Ordering::Relaxed);
            stats.commands.store(commands, Ordering::Relaxed);
            continue;
        }
        if idle.found_nothing(|| clock.now_ns()) {
            stats.passes.store(passes, Ordering::Relaxed);
        } else {
            // Inside a stretch: its idle time so far (to this pass's start, read for the
            // stretch anyway), so a poller that stays idle does not read as busy. Closing
            // the stretch stores at least as much.
            stats
                .idle_ns
                .store(idle.idle_ns() + idle.open_ns(), Ordering::Relaxed);
        }
        idle_passes += 1;
        let mut action = if state.controllers.is_empty() {
            backoff.empty_action(idle_passes)
        } else {
            backoff.action(idle_passes)
        };
        if !backoff.sleep.is_zero()
            && let Some(due) = state
                .controllers
                .iter()
                .filter_map(|c| c.ctrl.next_due_ns())
                .min()
        {
            let wait_ns = due.saturating_sub(global_clock().now_ns());
            action = backoff.held_action(action, wait_ns, idle.open_ns());
        }
        match action {
            // A dedicated core (no back-off) re-polls at once: PAUSE costs ~140 cycles on
            // recent cores, all of it added to the next command's latency.
            IdleAction::Spin if backoff != Backoff::NONE => std::hint::spin_loop(),
            IdleAction::Spin => {}
            IdleAction::Yield => std::thread::yield_now(),
            IdleAction::Park(sleep) => std::thread::park_timeout(sleep),
        }
    }
    stats
        .idle_ns
        .store(idle.finish(clock.now_ns()), Ordering::Relaxed);
    stats.passes.store(passes, Ordering::Relaxed);
    stats.commands.store(commands, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::EMPTY_PARK;
    use std::time::Duration;

    /// A controller that logs what the pass does with it.
    struct Logged<'a> {
        id: usize,
        log: &'a std::cell::RefCell<Vec<String>>,
    }

    impl PassTarget for Logged<'_> {
        fn prefetch(&mut self) {
            self.log.borrow_mut().push(format!("prefetch {}", self.id));
        }
        fn poll(&mut self) -> usize {
            self.log.borrow_mut().push(format!("poll {}", self.id));
            1
        }
        fn has_deferred_work(&self) -> bool {
            false
        }
    }

    fn pass_log(n: usize, stale: bool) -> Vec<String> {
        let log = std::cell::RefCell::new(Vec::new());
        let mut cs: Vec<Logged> = (0..n).map(|id| Logged { id, log: &log }).collect();
        assert_eq!(poll_pass(&mut cs, stale), (n, false));
        log.into_inner()
    }

    #[test]
    fn a_pass_prefetches_each_controller_while_the_one_before_it_is_polled() {
        // Each prefetch comes just before the previous controller's poll, the first one's
        // for the next pass at the end; a stale pass makes the first one's at its start.
        let (p, q) = ("prefetch", "poll");
        assert_eq!(
            pass_log(3, false),
            [p, q, p, q, p, q]
                .iter()
                .zip([1, 0, 2, 1, 0, 2])
                .map(|(w, i)| format!("{w} {i}"))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            pass_log(3, true),
            [p, p, q, p, q, p, q]
                .iter()
                .zip([0, 1, 0, 2, 1, 0, 2])
                .map(|(w, i)| format!("{w} {i}"))
                .collect::<Vec<_>>()
        );
        // One controller polls alone: its poll's own batch prefetch serves it.
        assert_eq!(pass_log(1, true), ["poll 0"]);
        assert_eq!(pass_log(0, true), Vec::<String>::new());
    }

    #[test]
    fn the_default_back_off_spins_then_parks_200_us_and_never_yields() {
        let b = Backoff::default();
        let spin = u64::from(b.spin_passes);
        for idle_passes in [1, spin - 1] {
            assert_eq!(b.action(idle_passes), IdleAction::Spin);
        }
        // Every pass from the end of the spin on, for ever: a park bounded by 200 us.
        for idle_passes in (spin..spin + 5_000).chain([u64::MAX / 2, u64::MAX]) {
            assert_eq!(
                b.action(idle_passes),
                IdleAction::Park(Duration::from_micros(200)),
                "idle pass {idle_passes}"
            );
        }
    }

    #[test]
    fn with_completions_held_a_poller_spins_briefly_then_parks_until_just_before_the_due() {
        use IdleAction::*;
        let b = Backoff::default();
        let us = |n: u64| n * 1000;
        // Just after its last work: spin (the host's next command may be on its way).
        assert_eq!(b.held_action(Spin, us(5_000), us(1)), Spin);
        // Then park until 20 us before the due time, at most one sleep (200 us) at a time.
        let park = |n| Park(Duration::from_micros(n));
        assert_eq!(b.held_action(Spin, us(100), us(30)), park(80));
        assert_eq!(b.held_action(Spin, us(5_000), us(30)), park(200));
        assert_eq!(b.held_action(park(200), us(150), us(1)), park(130));
        // Within 20 us of the due time: spin, even where an idle poller would park.
        assert_eq!(b.held_action(park(200), us(15), us(10_000)), Spin);
        assert_eq!(b.held_action(park(200), 0, us(10_000)), Spin);
        // A busy-polling poller never parks.
        assert_eq!(Backoff::NONE.held_action(Spin, us(5_000), us(1_000)), Spin);
    }

    /// Voluntary context switches of thread `tid` of this process so far.
    fn voluntary_switches(tid: u32) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status"))
            .expect("the poller thread's status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("a voluntary_ctxt_switches line")
    }

    /// Ticks of CPU time (user and system) thread `tid` of this process has used so far.
    fn cpu_ticks(tid: u32) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
            .expect("the poller thread's stat");
        // Fields 14 and 15 (utime, stime), counted after the parenthesised name.
        let after_name = stat.rsplit_once(')').expect("a (comm) field").1;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let field = |n: usize| fields[n - 3].parse::<u64>().expect("a tick count");
        field(14) + field(15)
    }

    /// A poller started with `backoff` and given no controller: over 500 ms past its spin
    /// phase it parks (voluntary switches, about 50 of 10 ms) and uses next to no CPU
    /// (spinning, it would use the whole window or, on a loaded machine, its share of it),
    /// and a control call still reaches it.
    fn an_empty_poller_parks(backoff: Backoff) {
        let mut poller = Poller::spawn(0, None, backoff).expect("spawn");
        let tid = poller.tid().expect("tid");
        // Past the spin phase (20,000 passes).
        std::thread::sleep(Duration::from_millis(100));
        let (switches, ticks) = (voluntary_switches(tid), cpu_ticks(tid));
        std::thread::sleep(Duration::from_millis(500));
        let parks = voluntary_switches(tid) - switches;
        let cpu_ms = (cpu_ticks(tid) - ticks) * 1000 / rustix::param::clock_ticks_per_second();
        // 10 ms parks: about 50 (200 us parks made about 2,500; spinning makes none).
        assert!((1..=150).contains(&parks), "{parks} parks in 500 ms");
        assert!(cpu_ms <= 50, "{cpu_ms} ms of CPU in 500 ms");
        assert_eq!(poller.mailbox.call(|s| s.controllers.len()), Ok(0));
        poller.stop();
    }

    #[test]
    fn a_poller_without_controllers_parks_long_and_still_answers_calls() {
        an_empty_poller_parks(Backoff::default());
    }

    #[test]
    fn a_busy_polling_poller_without_controllers_parks_too() {
        an_empty_poller_parks(Backoff::NONE);
    }

    #[test]
    fn an_empty_poller_spins_at_most_the_default_spin_then_parks_10_ms() {
        let spin = u64::from(Backoff::default().spin_passes);
        for b in [Backoff::default(), Backoff::NONE] {
            assert_eq!(b.empty_action(spin - 1), IdleAction::Spin);
            for idle_passes in [spin, spin + 1, u64::from(u32::MAX), u64::MAX] {
                assert_eq!(b.empty_action(idle_passes), IdleAction::Park(EMPTY_PARK));
            }
        }
        // A back-off with a yield phase keeps it; a shorter spin parks sooner.
        let b = Backoff {
            spin_passes: 2,
            yield_passes: 3,
            sleep: Duration::from_micros(50),
        };
        let got: Vec<_> = (1..=6).map(|i| b.empty_action(i)).collect();
        use IdleAction::*;
        let park = Park(EMPTY_PARK);
        assert_eq!(got, [Spin, Yield, Yield, Yield, park, park]);
    }

    #[test]
    fn busy_poll_spins_and_a_yield_phase_sits_between_spin_and_park() {
        for idle_passes in [1, 1 << 20, u64::from(u32::MAX) - 1] {
            assert_eq!(Backoff::NONE.action(idle_passes), IdleAction::Spin);
        }
        // Past u32::MAX passes a busy poller yields: it never sleeps.
        assert_eq!(Backoff::NONE.action(u64::MAX), IdleAction::Yield);
        let b = Backoff {
            spin_passes: 2,
            yield_passes: 3,
            sleep: Duration::from_micros(50),
        };
        let got: Vec<_> = (1..=6).map(|i| b.action(i)).collect();
        use IdleAction::*;
        let park = Park(Duration::from_micros(50));
        assert_eq!(got, [Spin, Yield, Yield, Yield, park, park]);
    }
}
