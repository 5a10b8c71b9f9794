// SPDX-License-Identifier: Apache-2.0
//! Per-job statistics, shaped like fio's `thread_stat`: exact min/max/mean/stddev
//! per latency kind, an HDR histogram (ns) for percentiles, 500 ms bandwidth and
//! IOPS samples, and fio's depth / submit / complete / latency bucket maps.
//! Recording never allocates.

use hdrhistogram::Histogram;

pub use crate::io_latency::IoLatency;
use crate::iolog::{IoLog, LogSpec};

/// Highest latency the histograms resolve (100 s); larger values saturate.
pub const HIST_MAX_NS: u64 = 100_000_000_000;
/// Significant digits of the histograms (0.1 % bucket error).
pub const HIST_SIGFIG: u8 = 3;
/// fio's default `bwavgtime` / `iopsavgtime` sample interval.
pub const SAMPLE_MS: u64 = 500;

/// Exact running min / max / mean / sample stddev of integer samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunningStat {
    /// Number of samples.
    pub n: u64,
    /// Smallest sample (0 when `n == 0`).
    pub min: u64,
    /// Largest sample.
    pub max: u64,
    sum: u128,
    sumsq: u128,
    /// Set on a total of jobs added up side by side: its mean and S, kept as fio keeps
    /// them. The sum of the jobs' means times the total sample count is in general no
    /// whole number, so `sum` and `sumsq` cannot hold it. Such a total takes no samples.
    side_by_side: Option<Moments>,
}

/// A mean and a sum of squared deviations from it (fio's `S`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Moments {
    mean: f64,
    s: f64,
}

impl RunningStat {
    /// Adds one sample.
    pub fn add(&mut self, v: u64) {
        self.add_n(v, 1);
    }

    /// Adds `count` samples of value `v`.
    #[inline]
    pub fn add_n(&mut self, v: u64, count: u64) {
        if count == 0 {
            return;
        }
        self.min = if self.n == 0 { v } else { self.min.min(v) };
        self.max = self.max.max(v);
        self.n += count;
        // v * v fits in u128; times a count it can overflow (only for absurd inputs, such
        // as 2^40 ns seen 2^60 times), so that product saturates instead of wrapping.
        let (v, count) = (u128::from(v), u128::from(count));
        self.sum += v * count;
        self.sumsq = self.sumsq.saturating_add((v * v).saturating_mul(count));
    }

    /// Adds all samples of `other`.
    pub fn merge(&mut self, other: &RunningStat) {
        if other.n == 0 {
            return;
        }
        self.min = if self.n == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.n += other.n;
        self.sum += other.sum;
        self.sumsq += other.sumsq;
    }

    /// Adds `other` as fio's `group_reporting` adds bandwidth and IOPS samples
    /// (`sum_stat` with `pure_sum`): the jobs ran side by side, so minimum, maximum and
    /// mean add up, as do the sample counts and the sums of squared deviations (fio's
    /// `S`), from which the standard deviation follows as for any other stat.
    pub fn add_side_by_side(&mut self, other: &RunningStat) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *other;
            return;
        }
        self.side_by_side = Some(Moments {
            mean: self.mean() + other.mean(),
            s: self.squared_deviations() + other.squared_deviations(),
        });
        self.min += other.min;
        self.max += other.max;
        self.n += other.n;
    }

    /// The sum of squared deviations from the mean (fio's `S`).
    fn squared_deviations(&self) -> f64 {
        if let Some(m) = self.side_by_side {
            return m.s;
        }
        if self.n == 0 {
            return 0.0;
        }
        let mean = self.mean();
        (self.sumsq as f64 - self.n as f64 * mean * mean).max(0.0)
    }

    /// Arithmetic mean (0 without samples).
    pub fn mean(&self) -> f64 {
        if let Some(m) = self.side_by_side {
            m.mean
        } else if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// Sample standard deviation, as fio's `sqrt(S / (n - 1))`.
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        if let Some(m) = self.side_by_side {
            return (m.s / (self.n - 1) as f64).sqrt();
        }
        let n = u128::from(self.n);
        let num = n
            .checked_mul(self.sumsq)
            .and_then(|a| self.sum.checked_mul(self.sum).map(|b| a.saturating_sub(b)));
        let var = match num {
            Some(num) => num as f64 / (n * (n - 1)) as f64,
            None => {
                let mean = self.mean();
                ((self.sumsq as f64 / self.n as f64 - mean * mean) * self.n as f64
                    / (self.n - 1) as f64)
                    .max(0.0)
            }
        };
        var.sqrt()
    }
}

/// One latency kind: exact moments plus a histogram for percentiles.
#[derive(Debug, Clone)]
pub struct LatStat {
    /// Exact min / max / mean / stddev in ns.
    pub stat: RunningStat,
    /// Distribution in ns.
    pub hist: Histogram<u64>,
}

impl LatStat {
    /// An empty latency record.
    pub fn new() -> LatStat {
        let hist = Histogram::new_with_bounds(1, HIST_MAX_NS, HIST_SIGFIG)
            .expect("constant histogram bounds are valid");
        LatStat {
            stat: RunningStat::default(),
            hist,
        }
    }

    /// Records one latency in ns.
    #[inline]
    pub fn add(&mut self, ns: u64) {
        self.add_n(ns, 1);
    }

    /// Records `count` latencies of `ns` each.
    #[inline]
    pub fn add_n(&mut self, ns: u64, count: u64) {
        self.stat.add_n(ns, count);
        self.hist.saturating_record_n(ns, count);
    }

    /// Forgets every sample (ramp end); keeps the allocation.
    pub fn reset(&mut self) {
        self.stat = RunningStat::default();
        self.hist.reset();
    }

    /// Adds `other`'s samples.
    pub fn merge(&mut self, other: &LatStat) {
        self.stat.merge(&other.stat);
        // Same bounds on both sides, so add cannot fail; ignore a mismatch.
        let _ = self.hist.add(&other.hist);
    }
}

impl Default for LatStat {
    fn default() -> Self {
        LatStat::new()
    }
}

/// Statistics of one direction (read or write).
#[derive(Debug, Clone, Default)]
pub struct DirStats {
    /// Bytes completed.
    pub io_bytes: u64,
    /// I/Os completed.
    pub total_ios: u64,
    /// Submission latency: submit call start to doorbell. Moments only: fio prints no
    /// percentiles for it, so a histogram would be recorded per I/O and never read.
    pub slat: RunningStat,
    /// Completion latency: doorbell to completion seen.
    pub clat: LatStat,
    /// Total latency: submit call start to completion seen. Moments only, as `slat`.
    pub lat: RunningStat,
    /// Bandwidth samples in KiB/s, one per 500 ms.
    pub bw: RunningStat,
    /// IOPS samples, one per 500 ms.
    pub iops: RunningStat,
    /// The same samples over time, with the window's mean clat: what `--plot` draws.
    pub series: Vec<SeriesPoint>,
    origin_ns: u64,
    last_sample_ns: u64,
    bytes_at_sample: u64,
    ios_at_sample: u64,
    clat_at_sample: (u64, u128),
}

/// One 500 ms sample of a direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeriesPoint {
    /// End of the window, ms after ramp_time.
    pub t_ms: u64,
    /// I/Os per second in the window.
    pub iops: u64,
    /// Mean completion latency in the window, ns (0 without completions).
    pub clat_ns: u64,
}

/// Samples kept without growing: 128 s of 500 ms windows (longer runs grow the list
/// once per doubling, never per I/O).
const SERIES_PREALLOC: usize = 256;

impl DirStats {
    /// Forgets every sample and restarts the 500 ms sampling at `now_ns`.
    pub fn reset(&mut self, now_ns: u64) {
        self.io_bytes = 0;
        self.total_ios = 0;
        self.slat = RunningStat::default();
        self.clat.reset();
        self.lat = RunningStat::default();
        self.bw = RunningStat::default();
        self.iops = RunningStat::default();
        self.series.clear();
        self.series.reserve(SERIES_PREALLOC);
        self.origin_ns = now_ns;
        self.last_sample_ns = now_ns;
        self.bytes_at_sample = 0;
        self.ios_at_sample = 0;
        self.clat_at_sample = (0, 0);
    }

    /// Takes a bandwidth / IOPS sample if 500 ms passed since the last one.
    pub fn maybe_sample(&mut self, now_ns: u64) {
        let spent_ns = now_ns.saturating_sub(self.last_sample_ns);
        if spent_ns < SAMPLE_MS * 1_000_000 {
            return;
        }
        let spent_ms = (spent_ns / 1_000_000).max(1);
        let db = self.io_bytes - self.bytes_at_sample;
        let di = self.total_ios - self.ios_at_sample;
        self.bw.add(db * 1000 / spent_ms / 1024);
        self.iops.add(di * 1000 / spent_ms);
        let (n0, sum0) = self.clat_at_sample;
        let (n, sum) = (self.clat.stat.n, self.clat.stat.sum);
        let clat_ns = sum
            .saturating_sub(sum0)
            .checked_div(u128::from(n.saturating_sub(n0)))
            .map_or(0, |m| u64::try_from(m).unwrap_or(u64::MAX));
        self.series.push(SeriesPoint {
            t_ms: now_ns.saturating_sub(self.origin_ns) / 1_000_000,
            iops: di * 1000 / spent_ms,
            clat_ns,
        });
        self.clat_at_sample = (n, sum);
        self.last_sample_ns = now_ns;
        self.bytes_at_sample = self.io_bytes;
        self.ios_at_sample = self.total_ios;
    }
}

/// Index into fio's 7-entry depth map (`1, 2, 4, 8, 16, 32, >=64`).
pub fn depth_index(depth: usize) -> usize {
    match depth {
        0..=1 => 0,
        2..=3 => 1,
        4..=7 => 2,
        8..=15 => 3,
        16..=31 => 4,
        32..=63 => 5,
        _ => 6,
    }
}

/// Index into fio's submit / complete batch map (`0, 4, 8, 16, 32, 64, >=64`).
pub fn batch_index(n: usize) -> usize {
    match n {
        0 => 0,
        1..=4 => 1,
        5..=8 => 2,
        9..=16 => 3,
        17..=32 => 4,
        33..=64 => 5,
        _ => 6,
    }
}

/// Bucket of a value 0..1000 in fio's `2, 4, 10, 20, 50, 100, 250, 500, 750, 1000` map.
pub fn lat_bucket(v: u64) -> usize {
    match v {
        0..=1 => 0,
        2..=3 => 1,
        4..=9 => 2,
        10..=19 => 3,
        20..=49 => 4,
        50..=99 => 5,
        100..=249 => 6,
        250..=499 => 7,
        500..=749 => 8,
        _ => 9,
    }
}

/// fio's per-job latency distribution (`lat (nsec)`, `lat (usec)`, `lat (msec)`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatBuckets {
    /// Below 1 us.
    pub n: [u64; 10],
    /// 1 us to 1 ms.
    pub u: [u64; 10],
    /// From 1 ms; last two: `2000` (1-2 s) and `>=2000`.
    pub m: [u64; 12],
}

impl LatBuckets {
    /// Counts one completion latency.
    pub fn add(&mut self, ns: u64) {
        self.add_n(ns, 1);
    }

    /// Counts `count` completions of latency `ns`.
    #[inline]
    pub fn add_n(&mut self, ns: u64, count: u64) {
        let slot = if ns < 1000 {
            self.n.get_mut(lat_bucket(ns))
        } else if ns < 1_000_000 {
            self.u.get_mut(lat_bucket(ns / 1000))
        } else {
            let ms = ns / 1_000_000;
            let i = match ms {
                0..=999 => lat_bucket(ms),
                1000..=1999 => 10,
                _ => 11,
            };
            self.m.get_mut(i)
        };
        if let Some(c) = slot {
            *c += count;
        }
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &LatBuckets) {
        for (a, b) in self.n.iter_mut().zip(other.n) {
            *a += b;
        }
        for (a, b) in self.u.iter_mut().zip(other.u) {
            *a += b;
        }
        for (a, b) in self.m.iter_mut().zip(other.m) {
            *a += b;
        }
    }
}

/// Completions not yet recorded: a run of consecutive ones with equal [`IoLatency`], kept
/// as one sample with a count. The commands of one doorbell share their start and issue
/// times and those reaped in one poll their completion time, so at iodepth 16 a poll's
/// worth of completions is recorded with one histogram update instead of one each
/// (the same samples either way, just fewer updates).
#[derive(Debug, Clone, Copy, Default)]
pub struct PendingLatencies {
    /// The run's latencies and the bytes of each of its I/Os (sizes vary with bssplit).
    run: Option<(IoLatency, u64)>,
    count: u64,
}

impl PendingLatencies {
    /// Adds one completion of `bytes`; a change of latencies or size records the previous run.
    #[inline]
    pub fn add(&mut self, stats: &mut JobStats, io: IoLatency, bytes: u64) {
        if self.run == Some((io, bytes)) {
            self.count += 1;
        } else {
            self.flush(stats);
            self.run = Some((io, bytes));
            self.count = 1;
        }
    }

    /// Records the pending run.
    pub fn flush(&mut self, stats: &mut JobStats) {
        let (Some((io, bytes)), count) = (self.run.take(), std::mem::take(&mut self.count)) else {
            return;
        };
        if let Some(ds) = stats.dirs.get_mut(io.dir) {
            ds.slat.add_n(io.slat, count);
            ds.clat.add_n(io.clat, count);
            ds.lat.add_n(io.lat, count);
            ds.io_bytes += bytes * count;
            ds.total_ios += count;
        }
        stats.lat_buckets.add_n(io.clat, count);
        if let Some(log) = &mut stats.log {
            log.record(&io, count);
        }
    }
}

/// Everything a job records, reset at the end of `ramp_time`.
#[derive(Debug, Clone, Default)]
pub struct JobStats {
    /// Read (`[0]`), write (`[1]`) and trim (`[2]`) statistics.
    pub dirs: [DirStats; 3],
    /// I/Os issued, bucketed by the queue depth after their submission.
    pub depth_map: [u64; 7],
    /// Doorbell batches, bucketed by size.
    pub submit_map: [u64; 7],
    /// Number of doorbell batches.
    pub total_submit: u64,
    /// Reap calls that found completions, bucketed by count.
    pub complete_map: [u64; 7],
    /// Number of such reap calls.
    pub total_complete: u64,
    /// Completion latency distribution.
    pub lat_buckets: LatBuckets,
    /// The time-series logs, when the job writes any.
    pub log: Option<Box<IoLog>>,
}

impl JobStats {
    /// Statistics that also keep the logs `log` asks for.
    pub fn with_log(log: Option<LogSpec>) -> JobStats {
        JobStats {
            log: log.map(|s| Box::new(IoLog::new(s))),
            ..JobStats::default()
        }
    }

    /// Forgets every sample (end of ramp) and restarts sampling at `now_ns`.
    pub fn reset(&mut self, now_ns: u64) {
        if let Some(log) = &mut self.log {
            log.reset(now_ns);
        }
        for d in &mut self.dirs {
            d.reset(now_ns);
        }
        self.depth_map = [0; 7];
        self.submit_map = [0; 7];
        self.total_submit = 0;
        self.complete_map = [0; 7];
        self.total_complete = 0;
        self.lat_buckets = LatBuckets::default();
    }

    /// Counts a doorbell for `n` commands, rung with `inflight` commands in flight.
    pub fn count_submit(&mut self, n: usize, inflight: usize) {
        self.total_submit += 1;
        if let Some(c) = self.submit_map.get_mut(batch_index(n)) {
            *c += 1;
        }
        if let Some(c) = self.depth_map.get_mut(depth_index(inflight)) {
            *c += n as u64;
        }
    }

    /// Adds `other`'s statistics (fio's `group_reporting`): counts and latency samples
    /// are pooled; bandwidth and IOPS add up, as the jobs ran side by side.
    pub fn merge(&mut self, other: &JobStats) {
        for (a, b) in self.dirs.iter_mut().zip(&other.dirs) {
            a.io_bytes += b.io_bytes;
            a.total_ios += b.total_ios;
            a.slat.merge(&b.slat);
            a.clat.merge(&b.clat);
            a.lat.merge(&b.lat);
            a.bw.add_side_by_side(&b.bw);
            a.iops.add_side_by_side(&b.iops);
        }
        let add = |a: &mut [u64], b: &[u64]| a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
        add(&mut self.depth_map, &other.depth_map);
        add(&mut self.submit_map, &other.submit_map);
        add(&mut self.complete_map, &other.complete_map);
        self.total_submit += other.total_submit;
        self.total_complete += other.total_complete;
        self.lat_buckets.merge(&other.lat_buckets);
    }

    /// Counts a reap call that found `n` completions.
    pub fn count_complete(&mut self, n: usize) {
        self.total_complete += 1;
        if let Some(c) = self.complete_map.get_mut(batch_index(n)) {
            *c += 1;
        }
    }
}

#[cfg(test)]
mod tests;
