// SPDX-License-Identifier: Apache-2.0
//! The per-layer latency breakdown (`nvmemu bench --lat-breakdown`): six TSC timestamps per
//! command (client submit, doorbell write, target SQE fetch, backend done, CQE post, client
//! reap) summed per layer by the job thread, printed as layer / cumulative ns / delta ns / %.

use std::sync::atomic::{AtomicU64, Ordering};

use nvmemu_mem::global_clock;

/// Layer names, each ending at the named moment.
pub const LAYERS: [&str; 5] = [
    "submit -> doorbell (client)",
    "doorbell -> SQE fetch (target poll)",
    "SQE fetch -> backend done (decode, PRP, copy)",
    "backend done -> CQE post (completion)",
    "CQE post -> reap (client poll)",
];

/// Sums of per-layer ticks over the commands traced (written by job threads, Relaxed).
#[derive(Debug, Default)]
pub struct LatBreakdown {
    sums: [AtomicU64; 5],
    count: AtomicU64,
    skipped: AtomicU64,
}

impl LatBreakdown {
    /// Add one command's six raw TSC readings (submit, doorbell, fetch, done, post, reap);
    /// a command whose readings are missing or out of order is counted as skipped.
    pub fn add(&self, t: [u64; 6]) {
        if t.contains(&0) || t.windows(2).any(|w| w[1] < w[0]) {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        for (i, s) in self.sums.iter().enumerate() {
            if let (Some(a), Some(b)) = (t.get(i), t.get(i + 1)) {
                s.fetch_add(b - a, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Commands traced.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Mean ns per layer.
    pub fn mean_ns(&self) -> [f64; 5] {
        let n = self.count().max(1) as f64;
        let clock = global_clock();
        let mut out = [0.0; 5];
        for (o, s) in out.iter_mut().zip(&self.sums) {
            *o = clock.ticks_to_ns(s.load(Ordering::Relaxed)) as f64 / n;
        }
        out
    }

    /// The table; `overhead` = (IOPS without tracing, IOPS with) when both were measured.
    pub fn render_text(&self, overhead: Option<(f64, f64)>) -> String {
        let m = self.mean_ns();
        let total: f64 = m.iter().sum();
        let mut s = format!(
            "Latency breakdown ({} commands traced, {} skipped; TSC timestamps):\n  {:<46} {:>10} {:>10} {:>7}\n",
            self.count(),
            self.skipped.load(Ordering::Relaxed),
            "layer",
            "cum ns",
            "delta ns",
            "%"
        );
        let mut cum = 0.0;
        for (name, d) in LAYERS.iter().zip(m) {
            cum += d;
            s.push_str(&format!(
                "  {name:<46} {cum:>10.0} {d:>10.0} {:>6.1}%\n",
                if total > 0.0 { 100.0 * d / total } else { 0.0 }
            ));
        }
        s.push_str(&format!(
            "  {:<46} {total:>10.0}\n",
            "total (submit -> reap)"
        ));
        if let Some((off, on)) = overhead {
            s.push_str(&format!(
                "  tracing overhead: {off:.0} IOPS without, {on:.0} with ({:+.1}%)\n",
                if off > 0.0 {
                    100.0 * (on - off) / off
                } else {
                    0.0
                }
            ));
        }
        s
    }

    /// The `"lat_breakdown"` JSON object.
    pub fn to_json(&self, overhead: Option<(f64, f64)>) -> serde_json::Value {
        let m = self.mean_ns();
        let total: f64 = m.iter().sum();
        let mut cum = 0.0;
        let layers: Vec<serde_json::Value> = LAYERS
            .iter()
            .zip(m)
            .map(|(name, d)| {
                cum += d;
                serde_json::json!({
                    "layer": name,
                    "cum_ns": cum,
                    "delta_ns": d,
                    "pct": if total > 0.0 { 100.0 * d / total } else { 0.0 },
                })
            })
            .collect();
        serde_json::json!({
            "commands": self.count(),
            "skipped": self.skipped.load(Ordering::Relaxed),
            "total_ns": total,
            "layers": layers,
            "iops_without": overhead.map(|o| o.0),
            "iops_with": overhead.map(|o| o.1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_sum_to_the_round_trip_and_bad_readings_are_skipped() {
        let b = LatBreakdown::default();
        b.add([100, 200, 400, 700, 800, 1000]);
        b.add([100, 200, 0, 700, 800, 1000]);
        b.add([100, 50, 400, 700, 800, 1000]);
        assert_eq!(b.count(), 1);
        let j = b.to_json(Some((10.0, 9.0)));
        assert_eq!(j["skipped"], 2);
        assert_eq!(j["layers"].as_array().map(Vec::len), Some(5));
        assert!(b.render_text(None).contains("SQE fetch"));
    }
}
