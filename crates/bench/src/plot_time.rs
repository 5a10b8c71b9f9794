// SPDX-License-Identifier: Apache-2.0
//! The over-time panels of `--plot` and `nvmemu plot`: IOPS and mean completion latency
//! of every job (of every run, when several reports are overlaid) against time, from the
//! reports' `time_series` (500 ms samples), and one line per run saying what it was: its
//! IOPS, machine, namespace and date.

use std::fmt::Write as _;

use serde_json::Value;

use crate::report::num::{Unit, num2str};
use crate::svg::{esc, fmt_ns};

/// Height of one over-time panel.
pub const PANEL_H: f64 = 200.0;
/// Height of one run's line under the panels.
pub const RUN_LINE_H: f64 = 18.0;

/// One job direction over time.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// `(ms, IOPS, mean clat ns)` per sample.
    pub points: Vec<(f64, f64, f64)>,
}

/// Every job direction with samples in `doc`; labels start with `run` when not empty.
pub fn series(doc: &Value, run: &str) -> Vec<Series> {
    let mut out = Vec::new();
    let jobs = doc.get("jobs").and_then(Value::as_array);
    for (i, job) in jobs.into_iter().flatten().enumerate() {
        for dir in ["read", "write"] {
            let Some(ts) = job.get("time_series").and_then(|t| t.get(dir)) else {
                continue;
            };
            let col = |k: &str| -> Vec<f64> {
                ts.get(k)
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_f64).collect())
                    .unwrap_or_default()
            };
            let (t, iops, clat) = (col("t_ms"), col("iops"), col("clat_mean_ns"));
            let points: Vec<(f64, f64, f64)> = t
                .iter()
                .zip(&iops)
                .zip(&clat)
                .map(|((t, i), c)| (*t, *i, *c))
                .collect();
            if points.is_empty() {
                continue;
            }
            let name = job.get("jobname").and_then(Value::as_str).unwrap_or("job");
            let label = format!(
                "{run}{}{name}.{i} {dir}",
                if run.is_empty() { "" } else { ": " }
            );
            out.push(Series { label, points });
        }
    }
    out
}

/// One line saying what the run in `doc` was: `14.0k IOPS · AMD EPYC, 2 CPUs ·
/// in-process malloc 1024MiB, 512 B LBA · Tue Nov 24 22:41:15 2026`.
pub fn run_line(doc: &Value, run: &str) -> String {
    let jobs = doc.get("jobs").and_then(Value::as_array);
    let iops: f64 = jobs
        .into_iter()
        .flatten()
        .flat_map(|j| ["read", "write"].map(|d| j.get(d).and_then(|d| d.get("iops"))))
        .filter_map(|v| v.and_then(Value::as_f64))
        .sum();
    let m = doc.get("machine");
    let get = |k: &str| m.and_then(|m| m.get(k));
    let cpu = get("cpu_model").and_then(Value::as_str).unwrap_or("?");
    let cpus = get("cpus").and_then(Value::as_u64).unwrap_or(0);
    let ns = get("namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("namespace not recorded");
    let date = doc.get("time").and_then(Value::as_str).unwrap_or("?");
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let iops = num2str(iops.max(0.0) as u64, 4, 1, false, Unit::None);
    let prefix = if run.is_empty() {
        String::new()
    } else {
        format!("{run}: ")
    };
    format!("{prefix}{iops} IOPS · {cpu}, {cpus} CPUs · {ns} · {date}")
}

/// A panel: its title, the value it draws from a point, and how an axis value reads.
type Panel = (&'static str, fn(&(f64, f64, f64)) -> f64, fn(f64) -> String);

/// Draws the IOPS and latency panels from `top`, in `left..right`, with `colors`;
/// returns the height used (0 without series).
pub fn panels(
    s: &mut String,
    series: &[Series],
    top: f64,
    (left, right): (f64, f64),
    colors: &[&str],
) -> f64 {
    if series.is_empty() {
        return 0.0;
    }
    let t_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max);
    let panels: [Panel; 2] = [
        (
            "IOPS over time (500 ms samples)",
            |p| p.1,
            |v| {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                num2str(v.max(0.0) as u64, 4, 1, false, Unit::None)
            },
        ),
        ("mean completion latency over time", |p| p.2, fmt_ns),
    ];
    for (k, (title, value, label)) in panels.iter().enumerate() {
        let y0 = top + k as f64 * PANEL_H + 30.0;
        let y1 = top + (k + 1) as f64 * PANEL_H - 20.0;
        let v_max = series
            .iter()
            .flat_map(|s| s.points.iter().map(value))
            .fold(0.0f64, f64::max)
            .max(1.0);
        let px = |t: f64| left + t / t_max * (right - left);
        let py = |v: f64| y1 - v / v_max * (y1 - y0);
        let _ = writeln!(
            s,
            r#"<text x="{left}" y="{}" font-size="14">{title}</text>"#,
            y0 - 10.0
        );
        let _ = writeln!(
            s,
            r##"<rect x="{left}" y="{y0}" width="{}" height="{}" fill="none" stroke="#444"/>"##,
            right - left,
            y1 - y0
        );
        for f in [0.0, 0.5, 1.0] {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                left - 6.0,
                py(v_max * f) + 4.0,
                label(v_max * f)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{right}" y="{}" text-anchor="end">{:.1} s</text>"#,
            y1 + 14.0,
            t_max / 1000.0
        );
        for (i, ser) in series.iter().enumerate() {
            let color = colors
                .get(i % colors.len().max(1))
                .copied()
                .unwrap_or("black");
            let mut d = String::new();
            for (n, p) in ser.points.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1},{:.1} ",
                    if n == 0 { "M" } else { "L" },
                    px(p.0),
                    py(value(p))
                );
            }
            let _ = writeln!(
                s,
                r#"<path d="{}" fill="none" stroke="{color}" stroke-width="2"><title>{}</title></path>"#,
                d.trim_end(),
                esc(&ser.label)
            );
        }
    }
    2.0 * PANEL_H
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "time": "Tue Nov 24 22:41:15 2026",
            "machine": {"cpu_model": "Test CPU", "cpus": 2, "namespace": "in-process malloc 64.0MiB, 512 B LBA"},
            "jobs": [{
                "jobname": "rr",
                "read": {"iops": 14000.0},
                "write": {"iops": 0.0},
                "time_series": {"read": {"t_ms": [500, 1000], "iops": [13000, 15000], "clat_mean_ns": [2000, 2500]}},
            }],
        })
    }

    #[test]
    fn series_and_the_run_line_come_from_the_report() {
        let s = series(&doc(), "a.json");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].label, "a.json: rr.0 read");
        assert_eq!(
            s[0].points,
            [(500.0, 13000.0, 2000.0), (1000.0, 15000.0, 2500.0)]
        );
        assert_eq!(
            run_line(&doc(), ""),
            "14.0k IOPS · Test CPU, 2 CPUs · in-process malloc 64.0MiB, 512 B LBA · Tue Nov 24 22:41:15 2026"
        );
        let mut svg = String::new();
        assert_eq!(
            panels(&mut svg, &s, 0.0, (80.0, 700.0), &["red"]),
            2.0 * PANEL_H
        );
        assert_eq!(svg.matches("<path ").count(), 2, "{svg}");
        assert!(
            svg.contains("IOPS over time") && svg.contains("15.0k"),
            "{svg}"
        );
    }
}
