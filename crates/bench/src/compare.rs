// SPDX-License-Identifier: Apache-2.0
//! Real runs against the ceiling probe (`nvmemu bench --ceiling-compare=N`): the probe and the
//! real run alternate N times, and the medians of each are compared, so a result reads as a
//! fraction of what the same machine could do at the same moment.

use crate::ceiling::CeilingResult;
use crate::result::BenchResult;

/// The headline numbers of one real run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunSummary {
    /// I/Os per second over all jobs.
    pub iops: f64,
    /// Mean total latency (submit to completion seen), ns.
    pub avg_lat_ns: f64,
    /// Busy target ns per I/O, when a target was observed.
    pub target_ns_per_io: Option<f64>,
}

impl RunSummary {
    /// Sums IOPS over jobs and directions; averages latency over all I/Os.
    pub fn from_result(r: &BenchResult) -> RunSummary {
        let (mut iops, mut lat_sum, mut n) = (0.0, 0.0, 0u64);
        for j in &r.jobs {
            let ms = j.output.runtime_ms;
            for d in &j.output.stats.dirs {
                if ms > 0 {
                    iops += d.total_ios as f64 * 1000.0 / ms as f64;
                }
                lat_sum += d.lat.mean() * d.lat.n as f64;
                n += d.lat.n;
            }
        }
        RunSummary {
            iops,
            avg_lat_ns: if n == 0 { 0.0 } else { lat_sum / n as f64 },
            target_ns_per_io: r.target.as_ref().map(|t| t.target_ns_per_io),
        }
    }
}

/// Median of `v` (0 when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v.get(m).copied().unwrap_or(0.0)
    } else {
        (v.get(m - 1).copied().unwrap_or(0.0) + v.get(m).copied().unwrap_or(0.0)) / 2.0
    }
}

/// N interleaved probe and real runs.
#[derive(Debug, Clone, Default)]
pub struct Comparison {
    /// Probe results in run order.
    pub probe: Vec<CeilingResult>,
    /// Real runs in run order.
    pub real: Vec<RunSummary>,
}

impl Comparison {
    /// Median probe ops/s.
    pub fn probe_ops(&self) -> f64 {
        median(self.probe.iter().map(CeilingResult::ops_per_sec).collect())
    }
    /// Median probe round trip, ns.
    pub fn probe_rtt_ns(&self) -> f64 {
        median(self.probe.iter().map(|p| p.avg_rtt_ns).collect())
    }
    /// Median real IOPS.
    pub fn real_iops(&self) -> f64 {
        median(self.real.iter().map(|r| r.iops).collect())
    }
    /// Median real mean latency, ns.
    pub fn real_lat_ns(&self) -> f64 {
        median(self.real.iter().map(|r| r.avg_lat_ns).collect())
    }
    /// Real IOPS as a fraction of the probe's ops/s (medians).
    pub fn iops_ratio(&self) -> f64 {
        ratio(self.real_iops(), self.probe_ops())
    }
    /// Real mean latency over the probe's round trip (medians; 1.0 = as fast as the probe).
    pub fn latency_ratio(&self) -> f64 {
        ratio(self.real_lat_ns(), self.probe_rtt_ns())
    }

    /// Text summary.
    pub fn render_text(&self) -> String {
        let mode = self
            .probe
            .first()
            .map_or("copy", |p| if p.opts.copy { "copy" } else { "nocopy" });
        let mut s = format!(
            "ceiling-compare: {} interleaved runs, probe mode {mode}\n",
            self.real.len()
        );
        for (i, (p, r)) in self.probe.iter().zip(&self.real).enumerate() {
            s.push_str(&format!(
                "  run {i}: probe {:.0} ops/s rtt {:.0} ns | real {:.0} IOPS lat {:.0} ns ({:.1}%)\n",
                p.ops_per_sec(),
                p.avg_rtt_ns,
                r.iops,
                r.avg_lat_ns,
                100.0 * ratio(r.iops, p.ops_per_sec())
            ));
        }
        s.push_str(&format!(
            "  median: probe {:.0} ops/s, rtt {:.0} ns; real {:.0} IOPS, lat {:.0} ns\n  ratio: iops {:.1}% of the probe, latency {:.2}x the probe\n",
            self.probe_ops(),
            self.probe_rtt_ns(),
            self.real_iops(),
            self.real_lat_ns(),
            100.0 * self.iops_ratio(),
            self.latency_ratio()
        ));
        s
    }

    /// The `"ceiling_compare"` JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "runs": self.real.len(),
            "probe": self.probe.iter().map(CeilingResult::to_json).collect::<Vec<_>>(),
            "real": self.real.iter().map(|r| serde_json::json!({
                "iops": r.iops,
                "avg_lat_ns": r.avg_lat_ns,
                "target_ns_per_io": r.target_ns_per_io,
            })).collect::<Vec<_>>(),
            "median_probe_ops_per_sec": self.probe_ops(),
            "median_probe_rtt_ns": self.probe_rtt_ns(),
            "median_real_iops": self.real_iops(),
            "median_real_lat_ns": self.real_lat_ns(),
            "iops_ratio": self.iops_ratio(),
            "latency_ratio": self.latency_ratio(),
        })
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
