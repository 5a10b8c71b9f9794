// SPDX-License-Identifier: Apache-2.0
//! A log-linear histogram of tick counts in SPDK's bucket layout, so `bdev_get_histogram`
//! can hand its buckets out as they are.
//!
//! Layout (the format SPDK's `histogram_data.h` documents): `1 << granularity` buckets per
//! range and `65 - granularity` ranges. Range 0 holds the values below `1 << granularity`
//! one per bucket; range `r >= 1` holds `[2^(r+g-1), 2^(r+g))` in buckets `2^(r-1)` wide.
//! Recording is a leading-zero count, a shift and an add: no branch on the value's size
//! beyond the range-0 test, no allocation.

/// SPDK's default granularity (`bucket_shift`): 128 buckets per power of two.
pub const DEFAULT_GRANULARITY: u32 = 7;
/// Largest granularity accepted (buckets per histogram: `(65 - g) << g`, 2.4 MiB at 15).
pub const MAX_GRANULARITY: u32 = 12;

/// Counts per bucket, plus the exact sum and maximum of what was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLinearHist {
    granularity: u32,
    buckets: Box<[u64]>,
    count: u64,
    sum: u128,
    max: u64,
}

impl LogLinearHist {
    /// An empty histogram; `granularity` is clamped to `1..=MAX_GRANULARITY`.
    pub fn new(granularity: u32) -> LogLinearHist {
        let g = granularity.clamp(1, MAX_GRANULARITY);
        let len = ((65 - g) as usize) << g;
        LogLinearHist {
            granularity: g,
            buckets: vec![0; len].into_boxed_slice(),
            count: 0,
            sum: 0,
            max: 0,
        }
    }

    /// Buckets per range, as a power of two (SPDK's `bucket_shift` / `granularity`).
    pub fn granularity(&self) -> u32 {
        self.granularity
    }

    /// The bucket index of `v`.
    #[inline(always)]
    #[allow(clippy::cast_possible_truncation)] // masked to `granularity` (<= 12) bits
    fn index(&self, v: u64) -> usize {
        let g = self.granularity;
        let lsb = 64 - g;
        let clz = v.leading_zeros();
        let range = lsb.saturating_sub(clz);
        let shift = range.saturating_sub(1);
        let mask = (1u64 << g) - 1;
        ((range as usize) << g) | ((v >> shift) & mask) as usize
    }

    /// Count one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.record_n(v, 1);
    }

    /// Count `n` equal values (the commands of one batch share some layers).
    #[inline]
    pub fn record_n(&mut self, v: u64, n: u64) {
        self.count_in_bucket(v, n);
        self.add_totals(n, u128::from(v) * u128::from(n), v);
    }

    /// Count `n` values `v` in their bucket only: the caller adds their count, sum and
    /// maximum with [`add_totals`](Self::add_totals), once for a whole batch.
    #[inline(always)]
    pub(crate) fn count_in_bucket(&mut self, v: u64, n: u64) {
        let i = self.index(v);
        if let Some(b) = self.buckets.get_mut(i) {
            *b += n;
        }
    }

    /// Add `n` values of sum `sum` and maximum `max` counted with `count_in_bucket`.
    #[inline(always)]
    pub(crate) fn add_totals(&mut self, n: u64, sum: u128, max: u64) {
        self.count += n;
        self.sum += sum;
        self.max = self.max.max(max);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact sum of the values recorded.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// Largest value recorded (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean of the values recorded (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        self.sum as f64 / self.count as f64
    }

    /// The first value past bucket `i` (its exclusive upper end).
    #[allow(clippy::cast_possible_truncation)] // a range number is below 65
    fn bucket_end(&self, i: usize) -> u64 {
        let g = self.granularity;
        let range = (i >> g) as u32;
        let index = (i as u64 & ((1u64 << g) - 1)) + 1;
        if range == 0 {
            return index;
        }
        (1u64 << (range + g - 1)).saturating_add(index << (range - 1))
    }

    /// The value at quantile `q` (0..=1): the upper end of the bucket holding it, capped at
    /// the maximum recorded (0 when empty).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // 0..=count
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return self.bucket_end(i).saturating_sub(1).min(self.max);
            }
        }
        self.max
    }

    /// Add `other`'s counts (histograms of another granularity are re-bucketed by their
    /// buckets' lower ends).
    pub fn merge(&mut self, other: &LogLinearHist) {
        if other.granularity == self.granularity {
            for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
                *a += b;
            }
        } else {
            for (i, &c) in other.buckets.iter().enumerate() {
                if c > 0 {
                    let start = if i == 0 { 0 } else { other.bucket_end(i - 1) };
                    let j = self.index(start);
                    if let Some(b) = self.buckets.get_mut(j) {
                        *b += c;
                    }
                }
            }
        }
        self.count += other.count;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// The buckets as SPDK sends them: each count a little-endian u64, range 0 first.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.buckets.iter().flat_map(|b| b.to_le_bytes()).collect()
    }

    /// The bucket counts, range 0 first.
    pub fn buckets(&self) -> &[u64] {
        &self.buckets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_the_documented_layout() {
        let mut h = LogLinearHist::new(7);
        assert_eq!(h.buckets().len(), 58 * 128);
        // Range 0 and 1: one value per bucket.
        assert_eq!(h.index(0), 0);
        assert_eq!(h.index(127), 127);
        assert_eq!(h.index(128), 128);
        assert_eq!(h.index(255), 128 + 127);
        // Range 2: two values per bucket, from 256.
        assert_eq!(h.index(256), 256);
        assert_eq!(h.index(257), 256);
        assert_eq!(h.index(258), 257);
        assert_eq!(h.index(u64::MAX), 58 * 128 - 1);
        for v in [
            0,
            1,
            127,
            128,
            255,
            256,
            300,
            511,
            512,
            1 << 20,
            u64::MAX / 3,
        ] {
            let i = h.index(v);
            let start = if i == 0 { 0 } else { h.bucket_end(i - 1) };
            assert!(start <= v && (v < h.bucket_end(i) || h.bucket_end(i) == u64::MAX));
        }
        h.record(300);
        assert_eq!(h.buckets()[h.index(300)], 1);
        h.record_n(300, 4);
        assert_eq!(h.buckets()[h.index(300)], 5);
        assert_eq!((h.count(), h.sum(), h.max()), (5, 1500, 300));
    }

    #[test]
    fn quantiles_mean_and_max() {
        let mut h = LogLinearHist::new(7);
        for v in 1..=1000u64 {
            h.record(v);
        }
        assert_eq!(h.count(), 1000);
        assert_eq!(h.sum(), 500_500);
        assert_eq!(h.max(), 1000);
        assert!((h.mean() - 500.5).abs() < 1e-9);
        let p50 = h.quantile(0.5);
        assert!((500..=504).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99);
        assert!((990..=1000).contains(&p99), "{p99}");
        assert_eq!(h.quantile(1.0), 1000);
        assert_eq!(LogLinearHist::new(7).quantile(0.5), 0);
    }

    #[test]
    fn merging_adds_counts_even_across_granularities() {
        let (mut a, mut b, mut c) = (
            LogLinearHist::new(7),
            LogLinearHist::new(7),
            LogLinearHist::new(4),
        );
        a.record(10);
        b.record(10_000);
        c.record(5_000);
        a.merge(&b);
        a.merge(&c);
        assert_eq!(a.count(), 3);
        assert_eq!(a.max(), 10_000);
        assert_eq!(a.buckets().iter().sum::<u64>(), 3);
        assert_eq!(a.to_le_bytes().len(), a.buckets().len() * 8);
    }
}
