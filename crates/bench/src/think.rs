// SPDX-License-Identifier: Apache-2.0
//! `thinktime`: when a job stalls between I/Os, as fio does.
//!
//! A stall is due once `thinktime_blocks` I/Os completed (`thinktime_blocks_type=complete`,
//! the default) or were issued (`issue`) since the last stall, or once `thinktime_iotime`
//! passed since it. Until then the job keeps up to `iodepth` I/Os in flight, so with the
//! default count the depth is not capped by `thinktime_blocks`. A due stall stops issuing,
//! waits for every I/O in flight, then idles `thinktime` (busy-polling, so `thinktime_spin`
//! only lengthens it when longer). The count the stall was due at starts the next window:
//! completions while draining count toward it, as in fio.

use std::time::Duration;

/// What `thinktime_blocks` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BlocksType {
    /// I/Os completed (fio's default).
    #[default]
    Complete,
    /// I/Os issued: caps the depth at `thinktime_blocks`.
    Issue,
}

impl BlocksType {
    /// fio's name for it.
    pub fn to_fio(self) -> &'static str {
        match self {
            BlocksType::Complete => "complete",
            BlocksType::Issue => "issue",
        }
    }
}

/// Parses `thinktime_blocks_type` (`complete` or `issue`).
pub fn parse_blocks_type(s: &str) -> Result<BlocksType, String> {
    match s.trim() {
        "complete" => Ok(BlocksType::Complete),
        "issue" => Ok(BlocksType::Issue),
        other => Err(format!(
            "thinktime_blocks_type={other} is not complete or issue"
        )),
    }
}

/// A job's thinktime settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThinkPlan {
    /// Idle time per stall.
    pub pause: Duration,
    /// I/Os between stalls; `None` when only `thinktime_iotime` triggers them.
    pub blocks: Option<u64>,
    /// Whether `blocks` counts completions or submissions.
    pub blocks_type: BlocksType,
    /// Time of I/O between stalls.
    pub iotime: Option<Duration>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Where a job is in its thinktime cycle.
#[derive(Debug, Clone)]
pub struct Thinker {
    plan: ThinkPlan,
    issued: u64,
    completed: u64,
    /// Count at the last stall.
    last: u64,
    /// When I/O resumed after the last stall (the job's start before the first).
    resumed_ns: Option<u64>,
    /// The count a due stall started at.
    due_at: Option<u64>,
    /// End of the idle period, once nothing is in flight.
    until_ns: Option<u64>,
}

impl Thinker {
    /// A thinker for `plan`.
    pub fn new(plan: ThinkPlan) -> Thinker {
        Thinker {
            plan,
            issued: 0,
            completed: 0,
            last: 0,
            resumed_ns: None,
            due_at: None,
            until_ns: None,
        }
    }

    fn count(&self) -> u64 {
        match self.plan.blocks_type {
            BlocksType::Complete => self.completed,
            BlocksType::Issue => self.issued,
        }
    }

    /// Counts one workload I/O issued.
    #[inline]
    pub fn issued(&mut self) {
        self.issued += 1;
    }

    /// Counts `n` I/Os completed.
    #[inline]
    pub fn completed(&mut self, n: u64) {
        self.completed += n;
    }

    /// Whether issuing must stop at `now_ns` (a stall is due or under way).
    #[inline]
    pub fn stalled(&mut self, now_ns: u64) -> bool {
        if self.due_at.is_some() {
            return true;
        }
        let resumed = *self.resumed_ns.get_or_insert(now_ns);
        let by_blocks = self
            .plan
            .blocks
            .is_some_and(|b| self.count() >= self.last.saturating_add(b));
        let by_time = self
            .plan
            .iotime
            .is_some_and(|t| now_ns.saturating_sub(resumed) >= nanos(t));
        if by_blocks || by_time {
            self.due_at = Some(self.count());
        }
        self.due_at.is_some()
    }

    /// Moves a stall on at `now_ns` with `inflight` I/Os outstanding: the idle period
    /// starts once they completed, and issuing resumes after it. Returns whether issuing
    /// must still wait.
    #[inline]
    pub fn wait(&mut self, inflight: usize, now_ns: u64) -> bool {
        if !self.stalled(now_ns) {
            return false;
        }
        if inflight > 0 {
            return true;
        }
        match self.until_ns {
            None => {
                self.until_ns = Some(now_ns.saturating_add(nanos(self.plan.pause)));
                true
            }
            Some(u) if now_ns >= u => {
                self.until_ns = None;
                self.last = self.due_at.take().unwrap_or(self.last);
                self.resumed_ns = Some(now_ns);
                false
            }
            Some(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(blocks: Option<u64>, blocks_type: BlocksType, iotime: Option<u64>) -> ThinkPlan {
        ThinkPlan {
            pause: Duration::from_micros(1000),
            blocks,
            blocks_type,
            iotime: iotime.map(Duration::from_millis),
        }
    }

    #[test]
    fn completions_trigger_by_default_so_depth_is_not_capped() {
        let mut t = Thinker::new(plan(Some(8), BlocksType::Complete, None));
        // 32 issued, none complete: no stall yet.
        for _ in 0..32 {
            assert!(!t.wait(0, 1_000));
            t.issued();
        }
        t.completed(8);
        assert!(t.wait(24, 2_000), "8 completions make a stall due");
        t.completed(24);
        assert!(t.wait(0, 3_000));
        assert!(t.wait(0, 1_002_999));
        assert!(!t.wait(0, 1_003_000));
        // The window restarts at the count the stall was due at (8): 32 completed already.
        assert!(t.stalled(1_003_001));
    }

    #[test]
    fn issue_type_caps_the_depth() {
        let mut t = Thinker::new(plan(Some(8), BlocksType::Issue, None));
        let mut n = 0;
        while !t.wait(n, 0) {
            t.issued();
            n += 1;
        }
        assert_eq!(n, 8);
    }

    #[test]
    fn iotime_alone_triggers_by_time() {
        let mut t = Thinker::new(plan(None, BlocksType::Complete, Some(9)));
        assert!(!t.wait(0, 0));
        for _ in 0..1000 {
            t.issued();
        }
        t.completed(1000);
        assert!(!t.wait(0, 8_999_999));
        assert!(t.wait(0, 9_000_000));
        assert!(!t.wait(0, 10_000_000));
        assert!(!t.wait(0, 18_999_999));
        assert!(t.wait(0, 19_000_000));
    }

    #[test]
    fn blocks_type_parses() {
        assert_eq!(parse_blocks_type("issue"), Ok(BlocksType::Issue));
        assert_eq!(parse_blocks_type("complete"), Ok(BlocksType::Complete));
        assert!(parse_blocks_type("both").is_err());
    }
}
