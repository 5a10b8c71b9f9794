// SPDX-License-Identifier: Apache-2.0
//! Reports: pure functions of a [`BenchResult`] in fio's formats.

pub mod groups;
pub mod header;
mod json;
pub mod num;
mod terse;
mod text;

pub use header::render_header;
pub use json::render_json;
pub use terse::render_terse;
pub use text::render_text;

use crate::options::OutputFormat;
use crate::result::BenchResult;
use groups::Shown;

/// The fio release whose report layout (text lines, JSON keys and their order, terse fields) the
/// reports follow, in fio's own format: scripts that parse `"fio version"` or the terse
/// version field get a version they know. nvmemu's own version is reported beside it.
pub const FIO_VERSION: &str = "fio-3.33";

/// Group totals, fio's `group_run_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Bytes per direction over all jobs.
    pub io_bytes: [u64; 3],
    /// Aggregate bandwidth, bytes/s: `io_bytes * 1000 / max_run`.
    pub agg: [u64; 3],
    /// Smallest per-job bandwidth, bytes/s.
    pub min_bw: [u64; 3],
    /// Largest per-job bandwidth, bytes/s.
    pub max_bw: [u64; 3],
    /// Shortest job runtime with I/O in this direction, ms.
    pub min_run: [u64; 3],
    /// Longest, ms.
    pub max_run: [u64; 3],
}

/// Computes the totals of group `groupid` over the report's entries, as fio does: with
/// group_reporting the group is one entry, so its minimum and maximum are the total.
pub fn group_stats(shown: &[Shown], groupid: u32) -> GroupStats {
    let mut g = GroupStats {
        min_bw: [u64::MAX; 3],
        ..GroupStats::default()
    };
    for j in shown
        .iter()
        .map(|s| &s.job)
        .filter(|j| j.groupid == groupid)
    {
        let o = &j.output;
        for (i, (d, &runt)) in o.stats.dirs.iter().zip(&o.dir_runtime_ms).enumerate() {
            if runt == 0 || d.io_bytes == 0 {
                continue;
            }
            if g.min_run[i] == 0 || runt < g.min_run[i] {
                g.min_run[i] = runt;
            }
            g.max_run[i] = g.max_run[i].max(runt);
            let bw = d.io_bytes.saturating_mul(1000) / runt;
            g.min_bw[i] = g.min_bw[i].min(bw);
            g.max_bw[i] = g.max_bw[i].max(bw);
            g.io_bytes[i] += d.io_bytes;
        }
    }
    for i in 0..3 {
        if g.min_bw[i] == u64::MAX {
            g.min_bw[i] = 0;
        }
        g.agg[i] = g.io_bytes[i]
            .saturating_mul(1000)
            .checked_div(g.max_run[i])
            .unwrap_or(0);
    }
    g
}

/// The job threads' user and system CPU time as percentages of their runtimes.
pub fn cpu_pct(s: &Shown) -> (f64, f64) {
    if s.job_runtime_ms == 0 {
        return (0.0, 0.0);
    }
    let runt = s.job_runtime_ms as f64;
    let u = &s.job.output.usage;
    (
        u.usr_ms as f64 * 100.0 / runt,
        u.sys_ms as f64 * 100.0 / runt,
    )
}

/// Counts as percentages of `total`; non-zero counts show at least `floor`
/// (fio: 0.1 for depth maps, 0.01 for latency buckets).
pub fn pct_dist(counts: &[u64], total: u64, floor: f64) -> Vec<f64> {
    counts
        .iter()
        .map(|&c| {
            if total == 0 {
                return 0.0;
            }
            let p = c as f64 * 100.0 / total as f64;
            if p < floor && c > 0 { floor } else { p }
        })
        .collect()
}

/// Renders `result` in every format `format` selects, in fio's order: terse lines,
/// JSON, then the normal report.
pub fn render(result: &BenchResult, format: OutputFormat) -> String {
    let mut out = String::new();
    if format.terse {
        out.push_str(&render_terse(result));
    }
    if format.json || format.json_plus {
        out.push_str(&render_json(result, format.json_plus));
        out.push('\n');
    }
    if format.normal {
        out.push_str(&render_text(result));
    }
    out
}
