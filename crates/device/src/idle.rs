// SPDX-License-Identifier: Apache-2.0
//! The idle time of a poll loop, for the poller's busy share and the bench's target ns/IO.

/// Sums a poll loop's idle stretches: runs of passes that found no work, each timed from the
/// end of its first pass to the start of the pass that finds work again. The clock is read
/// when a stretch opens and at the start of each pass inside one; a loop that always finds
/// work never reads it.
///
/// Why the start of that pass: timed to its end, a stretch would also count the pass that
/// ended it, i.e. the busy time of every pass that follows an idle one. Where work arrives
/// in bursts with empty passes in between (iodepth 1, a job spread over controllers, any
/// load the poller outpaces) that is most of the busy time: 512 B randread QD16 over two
/// controllers read 31 % busy that way and reads 98 % this way; null QD16 60 % -> 96 %;
/// iodepth 1 19 % -> 72 %. What remains counted as busy is each stretch's first empty pass
/// (timing it too needs a clock read at the start of every pass: 1-4 points lower, at a
/// cost of one TSC read per busy pass).
#[derive(Debug, Default)]
pub(crate) struct IdleTimer {
    /// When the open stretch began; None while the loop finds work.
    since: Option<u64>,
    /// Start of the current pass; read only while a stretch is open.
    pass_start: u64,
    /// Closed stretches, summed.
    idle_ns: u64,
}

impl IdleTimer {
    /// A pass begins; `now` is read only inside an idle stretch.
    #[inline(always)]
    pub(crate) fn pass_begins(&mut self, now: impl FnOnce() -> u64) {
        if self.since.is_some() {
            self.pass_start = now();
        }
    }

    /// The pass found work: the open stretch, if any, ended when the pass began. True when a
    /// stretch closed (the sum changed).
    #[inline(always)]
    pub(crate) fn found_work(&mut self) -> bool {
        match self.since.take() {
            Some(since) => {
                self.idle_ns += self.pass_start.saturating_sub(since);
                true
            }
            None => false,
        }
    }

    /// The pass found nothing: a stretch opens at `now` (the pass's end) unless one is open.
    /// True when one opened.
    pub(crate) fn found_nothing(&mut self, now: impl FnOnce() -> u64) -> bool {
        if self.since.is_some() {
            return false;
        }
        self.since = Some(now());
        true
    }

    /// How long the open stretch had lasted when this pass began (0 while none is open or
    /// on its first pass).
    pub(crate) fn open_ns(&self) -> u64 {
        self.since
            .map_or(0, |since| self.pass_start.saturating_sub(since))
    }

    /// Idle nanoseconds of the closed stretches.
    pub(crate) fn idle_ns(&self) -> u64 {
        self.idle_ns
    }

    /// The loop ends at `now`: close the open stretch there and return the total.
    pub(crate) fn finish(&mut self, now: u64) -> u64 {
        if let Some(since) = self.since.take() {
            self.idle_ns += now.saturating_sub(since);
        }
        self.idle_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs passes of the given (duration, found work) on a clock starting at 0.
    fn run(passes: &[(u64, bool)]) -> (IdleTimer, u64) {
        let mut t = IdleTimer::default();
        let mut clock = 0;
        for &(len, work) in passes {
            t.pass_begins(|| clock);
            clock += len;
            if work {
                t.found_work();
            } else {
                t.found_nothing(|| clock);
            }
        }
        (t, clock)
    }

    #[test]
    fn the_pass_that_ends_a_stretch_counts_as_busy() {
        // busy 0-1000, idle passes end at 1010, 1020, 1030, busy 1030-2030, idle to 2040.
        let (mut t, end) = run(&[
            (1000, true),
            (10, false),
            (10, false),
            (10, false),
            (1000, true),
        ]);
        // From the end of the first empty pass (1010) to the start of the busy one (1030).
        assert_eq!(t.idle_ns(), 20);
        assert_eq!(end, 2030);
        // An open stretch is closed by finish.
        let (mut t2, end2) = run(&[(1000, true), (10, false), (10, false)]);
        assert_eq!(t2.finish(end2 + 100), 110);
        assert_eq!(t.finish(end), 20);
    }

    #[test]
    fn alternating_passes_are_mostly_busy() {
        // One empty pass of 10 ns between busy passes of 500 ns: the empty pass's own 10 ns
        // count as busy (the stretch opens at its end), nothing else is idle.
        let mut passes = Vec::new();
        for _ in 0..100 {
            passes.push((500, true));
            passes.push((10, false));
        }
        passes.push((500, true));
        let (t, end) = run(&passes);
        assert_eq!(t.idle_ns(), 0);
        assert_eq!(end, 101 * 500 + 100 * 10);
    }

    #[test]
    fn a_loop_that_always_finds_work_never_reads_the_clock() {
        let mut t = IdleTimer::default();
        for _ in 0..10 {
            t.pass_begins(|| panic!("clock read while busy"));
            assert!(!t.found_work());
        }
        // The first empty pass reads it once, the next pass's start once more.
        let mut reads = 0;
        assert!(t.found_nothing(|| {
            reads += 1;
            5
        }));
        assert!(!t.found_nothing(|| panic!("stretch already open")));
        t.pass_begins(|| {
            reads += 1;
            25
        });
        assert!(t.found_work());
        assert_eq!((reads, t.idle_ns()), (2, 20));
    }
}
