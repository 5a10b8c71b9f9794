// SPDX-License-Identifier: Apache-2.0
//! fio's time-series logs (`write_lat_log`, `write_iops_log`, `write_bw_log`,
//! `log_avg_msec`): `NAME_lat.N.log`, `NAME_clat.N.log`, `NAME_slat.N.log`,
//! `NAME_iops.N.log` and `NAME_bw.N.log` for job number N (1-based over the run), one
//! line per entry: `time (ms), value, direction (0 read, 1 write), block size, priority`.
//! Latencies are in ns, bandwidth in KiB/s.
//!
//! Recording stays off the I/O path's costs: completions reach the log as the runs of
//! equal latencies the statistics already batch ([`crate::stats::PendingLatencies`]),
//! and are stored in preallocated chunks of [`CHUNK`] runs (a new chunk once per that
//! many runs, never per I/O). With `log_avg_msec` a job keeps only its current window's
//! sums and one entry per window and direction. Files are written after the run.

use std::fmt::Write as _;

use crate::io_latency::IoLatency;

/// Runs per preallocated chunk (1.5 MiB).
pub const CHUNK: usize = 1 << 16;

/// Which logs a job keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogSpec {
    /// `_lat`, `_clat` and `_slat`.
    pub lat: bool,
    /// `_iops`.
    pub iops: bool,
    /// `_bw`.
    pub bw: bool,
    /// `log_avg_msec`: 0 logs every I/O.
    pub avg_ms: u64,
}

/// `count` completions of one direction at `at_ns` with equal latencies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Run {
    at_ns: u64,
    count: u64,
    dir: usize,
    slat: u64,
    clat: u64,
    lat: u64,
}

/// Sums over one window and direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Window {
    n: u64,
    slat: u128,
    clat: u128,
    lat: u128,
}

/// One closed window of one direction.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Averaged {
    end_ms: u64,
    span_ms: u64,
    dir: usize,
    n: u64,
    slat: u64,
    clat: u64,
    lat: u64,
}

/// A job's log, recorded while it runs.
#[derive(Debug, Clone, Default)]
pub struct IoLog {
    spec: LogSpec,
    /// Time 0 of the log (the end of ramp_time).
    origin_ns: u64,
    chunks: Vec<Vec<Run>>,
    win_start_ns: u64,
    win: [Window; 2],
    closed: Vec<Averaged>,
    /// Directions that completed I/O: their IOPS and bandwidth windows are logged even
    /// when empty (a stall shows as 0, as in fio).
    seen: [bool; 2],
    last_ns: u64,
}

/// Which file of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    /// Total latency.
    Lat,
    /// Completion latency.
    Clat,
    /// Submission latency.
    Slat,
    /// IOPS.
    Iops,
    /// Bandwidth.
    Bw,
}

impl LogKind {
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            LogKind::Lat => "lat",
            LogKind::Clat => "clat",
            LogKind::Slat => "slat",
            LogKind::Iops => "iops",
            LogKind::Bw => "bw",
        }
    }
}

impl IoLog {
    /// An empty log; the first chunk is allocated now, before any I/O.
    pub fn new(spec: LogSpec) -> IoLog {
        let chunks = if spec.avg_ms == 0 {
            vec![Vec::with_capacity(CHUNK)]
        } else {
            Vec::new()
        };
        IoLog {
            spec,
            chunks,
            ..IoLog::default()
        }
    }

    /// Forgets everything (end of ramp_time) and starts the log's clock at `now_ns`;
    /// keeps the first chunk's allocation.
    pub fn reset(&mut self, now_ns: u64) {
        self.chunks.truncate(1);
        if let Some(c) = self.chunks.first_mut() {
            c.clear();
        }
        self.closed.clear();
        self.win = [Window::default(); 2];
        self.origin_ns = now_ns;
        self.win_start_ns = now_ns;
        self.last_ns = now_ns;
    }

    /// Records `count` completions with the latencies of `io`.
    #[inline]
    pub fn record(&mut self, io: &IoLatency, count: u64) {
        self.last_ns = self.last_ns.max(io.at_ns);
        if self.spec.avg_ms == 0 {
            self.push(Run {
                at_ns: io.at_ns,
                count,
                dir: io.dir,
                slat: io.slat,
                clat: io.clat,
                lat: io.lat,
            });
            return;
        }
        let span = self.spec.avg_ms.saturating_mul(1_000_000);
        while io.at_ns.saturating_sub(self.win_start_ns) >= span && span > 0 {
            self.close_window(span);
            self.win_start_ns += span;
        }
        if let Some(seen) = self.seen.get_mut(io.dir) {
            *seen = true;
        }
        if let Some(w) = self.win.get_mut(io.dir) {
            let c = u128::from(count);
            w.n += count;
            w.slat += u128::from(io.slat) * c;
            w.clat += u128::from(io.clat) * c;
            w.lat += u128::from(io.lat) * c;
        }
    }

    fn push(&mut self, run: Run) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => c.push(run),
            _ => {
                let mut c = Vec::with_capacity(CHUNK);
                c.push(run);
                self.chunks.push(c);
            }
        }
    }

    /// Closes the current window of `span_ns` (its entries end at the window's end).
    fn close_window(&mut self, span_ns: u64) {
        let end_ms = (self.win_start_ns + span_ns - self.origin_ns) / 1_000_000;
        let span_ms = span_ns / 1_000_000;
        for (dir, w) in self.win.iter_mut().enumerate() {
            if self.seen.get(dir).copied().unwrap_or(false) {
                self.closed.push(averaged(w, end_ms, span_ms, dir));
            }
            *w = Window::default();
        }
    }

    /// The closed windows plus the one still open, ending at the last completion
    /// rounded up to a whole millisecond: never at the time of the window before it,
    /// however soon after that the run ended, and its rate times its span is its I/Os.
    fn windows(&self) -> Vec<Averaged> {
        let mut all = self.closed.clone();
        let open_ns = self.last_ns.saturating_sub(self.win_start_ns);
        let span_ms = open_ns.div_ceil(1_000_000).max(1);
        let end_ms = self.win_start_ns.saturating_sub(self.origin_ns) / 1_000_000 + span_ms;
        for (dir, w) in self.win.iter().enumerate() {
            if w.n > 0 {
                all.push(averaged(w, end_ms, span_ms, dir));
            }
        }
        all
    }

    /// The lines of one log, `bs` bytes per I/O.
    pub fn render(&self, kind: LogKind, bs: u64, out: &mut String) {
        let mut line = |t: u64, v: u64, dir: usize| {
            let _ = writeln!(out, "{t}, {v}, {dir}, {bs}, 0");
        };
        if self.spec.avg_ms == 0 {
            for r in self.chunks.iter().flatten() {
                let t = r.at_ns.saturating_sub(self.origin_ns) / 1_000_000;
                let v = match kind {
                    LogKind::Lat => r.lat,
                    LogKind::Clat => r.clat,
                    LogKind::Slat => r.slat,
                    // fio: each I/O counts 1; its bandwidth is its size over its latency.
                    LogKind::Iops => 1,
                    LogKind::Bw => bs.saturating_mul(1_000_000_000) / r.lat.max(1) / 1024,
                };
                for _ in 0..r.count {
                    line(t, v, r.dir);
                }
            }
            return;
        }
        for a in self.windows() {
            let latency = matches!(kind, LogKind::Lat | LogKind::Clat | LogKind::Slat);
            if latency && a.n == 0 {
                continue;
            }
            let v = match kind {
                LogKind::Lat => a.lat,
                LogKind::Clat => a.clat,
                LogKind::Slat => a.slat,
                LogKind::Iops => a.n * 1000 / a.span_ms.max(1),
                LogKind::Bw => a.n.saturating_mul(bs) * 1000 / a.span_ms.max(1) / 1024,
            };
            line(a.end_ms, v, a.dir);
        }
    }
}

fn averaged(w: &Window, end_ms: u64, span_ms: u64, dir: usize) -> Averaged {
    let n = w.n;
    let mean = |s: u128| u64::try_from(s / u128::from(n.max(1))).unwrap_or(u64::MAX);
    Averaged {
        end_ms,
        span_ms,
        dir,
        n,
        slat: mean(w.slat),
        clat: mean(w.clat),
        lat: mean(w.lat),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(at_ms: u64, dir: usize, clat: u64) -> IoLatency {
        IoLatency {
            dir,
            slat: 100,
            clat,
            lat: clat + 100,
            at_ns: at_ms * 1_000_000,
        }
    }

    #[test]
    fn per_io_logs_have_a_line_per_io_in_fio_format() {
        let mut l = IoLog::new(LogSpec {
            lat: true,
            iops: true,
            ..LogSpec::default()
        });
        l.reset(0);
        l.record(&io(3, 0, 900), 2);
        l.record(&io(5, 1, 1900), 1);
        let mut s = String::new();
        l.render(LogKind::Clat, 4096, &mut s);
        assert_eq!(
            s,
            "3, 900, 0, 4096, 0\n3, 900, 0, 4096, 0\n5, 1900, 1, 4096, 0\n"
        );
        let mut s = String::new();
        l.render(LogKind::Iops, 4096, &mut s);
        assert_eq!(s.lines().count(), 3);
        let mut s = String::new();
        l.render(LogKind::Bw, 4096, &mut s);
        // 4 KiB in 1 us is 3.9 GiB/s.
        assert!(s.starts_with("3, 4000000, 0, 4096, 0\n"), "{s}");
    }

    #[test]
    fn averaged_logs_have_one_entry_per_window_and_direction() {
        let mut l = IoLog::new(LogSpec {
            iops: true,
            avg_ms: 100,
            ..LogSpec::default()
        });
        l.reset(1_000_000_000);
        let t0 = 1000;
        l.record(&io(t0 + 10, 0, 1000), 10);
        l.record(&io(t0 + 90, 0, 3000), 10);
        l.record(&io(t0 + 150, 0, 1000), 5);
        l.record(&io(t0 + 160, 1, 1000), 5);
        l.record(&io(t0 + 450, 0, 1000), 1);
        let mut s = String::new();
        l.render(LogKind::Iops, 512, &mut s);
        // Windows without I/O show as 0 for the directions the job does.
        assert_eq!(
            s,
            "100, 200, 0, 512, 0\n200, 50, 0, 512, 0\n200, 50, 1, 512, 0\n\
             300, 0, 0, 512, 0\n300, 0, 1, 512, 0\n400, 0, 0, 512, 0\n400, 0, 1, 512, 0\n\
             450, 20, 0, 512, 0\n"
        );
        let mut s = String::new();
        l.render(LogKind::Clat, 512, &mut s);
        assert!(s.starts_with("100, 2000, 0, 512, 0\n"), "{s}");
        assert_eq!(s.lines().count(), 4, "latency logs skip empty windows: {s}");
    }

    #[test]
    fn a_last_window_under_a_millisecond_ends_after_the_one_before() {
        let mut l = IoLog::new(LogSpec {
            iops: true,
            avg_ms: 100,
            ..LogSpec::default()
        });
        l.reset(0);
        l.record(&io(50, 0, 1000), 10);
        // The run's last 3 I/Os complete 0.3 ms into the second window.
        let last = IoLatency {
            at_ns: 100_300_000,
            ..io(0, 0, 1000)
        };
        l.record(&last, 3);
        let mut s = String::new();
        l.render(LogKind::Iops, 512, &mut s);
        // Its entry covers the whole millisecond it began: 3 I/Os in 1 ms.
        assert_eq!(s, "100, 100, 0, 512, 0\n101, 3000, 0, 512, 0\n");
    }

    #[test]
    fn chunks_grow_without_losing_runs() {
        let mut l = IoLog::new(LogSpec {
            iops: true,
            ..LogSpec::default()
        });
        l.reset(0);
        for i in 0..(CHUNK as u64 + 10) {
            l.record(&io(i / 1000, 0, i + 1), 1);
        }
        assert_eq!(l.chunks.len(), 2);
        let mut s = String::new();
        l.render(LogKind::Iops, 4096, &mut s);
        assert_eq!(s.lines().count(), CHUNK + 10);
    }
}
