// SPDX-License-Identifier: Apache-2.0
//! `nvmemu bench --plot FILE` and `nvmemu plot`: an SVG of finished runs, drawn from
//! their JSON reports.
//!
//! The completion latency percentile curve of every job and direction (latency on a log
//! scale against the percentile on a "nines" scale, so 99 %, 99.9 % and 99.99 % are evenly
//! spaced, as HdrHistogram plots do); when the report carries a latency breakdown, one
//! stacked bar of the layers; IOPS and mean latency over time ([`crate::plot_time`]); and
//! a line per run with its IOPS, machine, namespace and date. Several reports are drawn
//! over each other. The SVG is written by hand (a few dozen elements), which keeps a
//! plotting library and its font stack out of the build.
//!
//! The input is the JSON report ([`crate::render_json`], ideally JSON+ so the histogram
//! bins give the full curve; without bins the fixed fio percentiles are used). A breakdown
//! is any object or array named `lat_breakdown`, `latency_breakdown` or `breakdown` in the
//! report or a job, mapping a layer name to nanoseconds (a number, or an object with
//! `delta_ns`, `mean_ns`, `avg_ns`, `ns` or `mean`); an object
//! with a `layers` array (the shape `nvmemu bench --lat-breakdown` prints) is read through it.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Map, Value};

use crate::svg::esc;
pub use crate::svg::fmt_ns;

/// Why a plot could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The report is not JSON.
    #[error("the report is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// No job recorded a completion latency.
    #[error("the report has no completion latencies to plot")]
    NoLatencies,
    /// The file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// One curve: `(fraction completed, latency ns)` points in increasing order.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// Legend label (`job 0 read`).
    pub label: String,
    /// Points, fraction in `[0, 1]`.
    pub points: Vec<(f64, f64)>,
    /// Number of samples behind the curve.
    pub samples: u64,
}

/// One layer of a latency breakdown.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    /// Layer name.
    pub name: String,
    /// Mean nanoseconds per I/O spent there.
    pub ns: f64,
}

const W: f64 = 900.0;
const CHART_H: f64 = 420.0;
/// Height of the breakdown panel without its legend.
const BAR_H: f64 = 100.0;
/// One legend line per layer under the bar.
const LEGEND_ROW: f64 = 18.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 180.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
/// The last "nine" drawn: 99.9999 %.
const MAX_NINES: f64 = 6.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Draws the report in `json` as an SVG document.
pub fn render_svg(json: &str) -> Result<String, PlotError> {
    render_runs(&[(String::new(), json.to_string())])
}

/// Draws several reports `(label, json)` over each other: their percentile curves in one
/// chart, their IOPS and latency over time in the panels below, one line per run saying
/// what it was. A latency breakdown is drawn for a single report only.
pub fn render_runs(runs: &[(String, String)]) -> Result<String, PlotError> {
    let docs = runs
        .iter()
        .map(|(label, json)| Ok((label.as_str(), serde_json::from_str::<Value>(json)?)))
        .collect::<Result<Vec<(&str, Value)>, PlotError>>()?;
    let mut curves = Vec::new();
    let mut series = Vec::new();
    for (label, doc) in &docs {
        for mut c in self::curves(doc) {
            if !label.is_empty() {
                c.label = format!("{label}: {}", c.label);
            }
            curves.push(c);
        }
        series.extend(crate::plot_time::series(doc, label));
    }
    if curves.is_empty() {
        return Err(PlotError::NoLatencies);
    }
    let layers = match docs.as_slice() {
        [(_, doc)] => breakdown(doc),
        _ => Vec::new(),
    };
    let bar_h = if layers.is_empty() {
        0.0
    } else {
        BAR_H + LEGEND_ROW * layers.len() as f64
    };
    let time_h = if series.is_empty() {
        0.0
    } else {
        2.0 * crate::plot_time::PANEL_H
    };
    let lines_h = crate::plot_time::RUN_LINE_H * docs.len() as f64 + 12.0;
    let height = CHART_H + bar_h + time_h + lines_h;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{W}" height="{height}" fill="white"/>"#
    );
    let title = match docs.as_slice() {
        [(_, doc)] => title_of(doc),
        _ => format!("nvmemu bench: {} runs", docs.len()),
    };
    chart(&mut s, &title, &curves);
    if !layers.is_empty() {
        bar(&mut s, &layers, CHART_H);
    }
    let top = CHART_H + bar_h;
    crate::plot_time::panels(&mut s, &series, top, (LEFT, W - RIGHT), &COLORS);
    for (i, (label, doc)) in docs.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<text x="{LEFT}" y="{:.1}">{}</text>"#,
            top + time_h + 14.0 + crate::plot_time::RUN_LINE_H * i as f64,
            esc(&crate::plot_time::run_line(doc, label))
        );
    }
    s.push_str("</svg>\n");
    Ok(s)
}

/// [`render_svg`] into the file at `path`.
pub fn write_svg(json: &str, path: &Path) -> Result<(), PlotError> {
    let svg = render_svg(json)?;
    std::fs::write(path, svg).map_err(|source| PlotError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// The clat curves of every job and direction with completions.
pub fn curves(doc: &Value) -> Vec<Curve> {
    let mut out = Vec::new();
    let jobs = doc.get("jobs").and_then(Value::as_array);
    for (i, job) in jobs.into_iter().flatten().enumerate() {
        for dir in ["read", "write"] {
            let Some(clat) = job.get(dir).and_then(|d| d.get("clat_ns")) else {
                continue;
            };
            let samples = clat.get("N").and_then(Value::as_u64).unwrap_or(0);
            if samples == 0 {
                continue;
            }
            let points = clat
                .get("bins")
                .and_then(Value::as_object)
                .map(from_bins)
                .filter(|p| !p.is_empty())
                .or_else(|| {
                    clat.get("percentile")
                        .and_then(Value::as_object)
                        .map(from_percentiles)
                })
                .unwrap_or_default();
            if !points.is_empty() {
                out.push(Curve {
                    label: format!("job {i} {dir}"),
                    points,
                    samples,
                });
            }
        }
    }
    out
}

/// Cumulative fractions from histogram bins (`"latency ns": count`).
fn from_bins(bins: &Map<String, Value>) -> Vec<(f64, f64)> {
    let mut b: Vec<(f64, u64)> = bins
        .iter()
        .filter_map(|(k, v)| Some((k.parse::<f64>().ok()?, v.as_u64()?)))
        .filter(|&(ns, n)| ns > 0.0 && n > 0)
        .collect();
    b.sort_by(|x, y| x.0.total_cmp(&y.0));
    let total: u64 = b.iter().map(|&(_, n)| n).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut seen = 0u64;
    let mut pts = Vec::with_capacity(b.len() + 1);
    if let Some(&(first, _)) = b.first() {
        pts.push((0.0, first));
    }
    for (ns, n) in b {
        seen += n;
        pts.push((seen as f64 / total as f64, ns));
    }
    pts
}

/// Points from fio's fixed percentile list (`"99.000000": ns`).
fn from_percentiles(p: &Map<String, Value>) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = p
        .iter()
        .filter_map(|(k, v)| Some((k.parse::<f64>().ok()? / 100.0, v.as_f64()?)))
        .filter(|&(f, ns)| (0.0..=1.0).contains(&f) && ns > 0.0)
        .collect();
    pts.sort_by(|x, y| x.0.total_cmp(&y.0));
    pts
}

/// The latency breakdown, if the report has one.
pub fn breakdown(doc: &Value) -> Vec<Layer> {
    let mut scopes = vec![doc];
    if let Some(jobs) = doc.get("jobs").and_then(Value::as_array) {
        scopes.extend(jobs);
    }
    if let Some(t) = doc.get("target") {
        scopes.push(t);
    }
    for scope in scopes {
        for key in ["lat_breakdown", "latency_breakdown", "breakdown"] {
            if let Some(v) = scope.get(key) {
                let layers = layers_of(v);
                if !layers.is_empty() {
                    return layers;
                }
            }
        }
    }
    Vec::new()
}

fn layer_ns(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| {
        ["delta_ns", "mean_ns", "avg_ns", "ns", "mean"]
            .iter()
            .find_map(|k| v.get(*k).and_then(Value::as_f64))
    })
}

fn layers_of(v: &Value) -> Vec<Layer> {
    // `nvmemu bench --lat-breakdown`'s shape: {"layers": [{"layer", "delta_ns", ...}], ...}.
    if let Some(inner) = v.get("layers") {
        return layers_of(inner);
    }
    let raw: Vec<Layer> = match v {
        Value::Object(m) => m
            .iter()
            .filter_map(|(k, v)| {
                Some(Layer {
                    name: k.clone(),
                    ns: layer_ns(v)?,
                })
            })
            .collect(),
        Value::Array(a) => a
            .iter()
            .filter_map(|e| {
                let name = ["layer", "name"]
                    .iter()
                    .find_map(|k| e.get(*k).and_then(Value::as_str))?;
                Some(Layer {
                    name: name.to_string(),
                    ns: layer_ns(e)?,
                })
            })
            .collect(),
        _ => Vec::new(),
    };
    raw.into_iter()
        .filter(|l| l.ns.is_finite() && l.ns > 0.0)
        .collect()
}

/// `-log10(1 - f)`, capped: 0 at 0 %, 1 at 90 %, 2 at 99 %, ...
fn nines(f: f64) -> f64 {
    if f >= 1.0 {
        MAX_NINES
    } else {
        (-(1.0 - f).log10()).clamp(0.0, MAX_NINES)
    }
}

fn chart(s: &mut String, title: &str, curves: &[Curve]) {
    let (x0, x1) = (LEFT, W - RIGHT);
    let (y0, y1) = (TOP, CHART_H - BOTTOM);
    let max_samples = curves.iter().map(|c| c.samples).max().unwrap_or(1);
    // Draw as many nines as the samples support (1000 samples: 99.9 %).
    let xmax = (max_samples as f64).log10().ceil().clamp(2.0, MAX_NINES);
    let all = curves.iter().flat_map(|c| c.points.iter().map(|p| p.1));
    let (lo, hi) = all.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let dlo = lo.max(1.0).log10().floor();
    let dhi = hi.max(10.0).log10().ceil().max(dlo + 1.0);
    let px = |f: f64| x0 + nines(f).min(xmax) / xmax * (x1 - x0);
    let py = |ns: f64| y1 - (ns.max(1.0).log10() - dlo) / (dhi - dlo) * (y1 - y0);

    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        (x0 + x1) / 2.0,
        esc(title)
    );
    // Grid: decades of latency, nines of percentile.
    let mut d = dlo;
    while d <= dhi {
        let y = py(10f64.powf(d));
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 6.0,
            y + 4.0,
            fmt_ns(10f64.powf(d))
        );
        d += 1.0;
    }
    let mut n = 0.0;
    while n <= xmax {
        let x = x0 + n / xmax * (x1 - x0);
        let label = if n == 0.0 {
            "0%".to_string()
        } else {
            format!("{}%", 100.0 - 100.0 / 10f64.powf(n))
        };
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{label}</text>"##,
            y1 + 16.0
        );
        n += 1.0;
    }
    let _ = writeln!(
        s,
        r##"<rect x="{x0}" y="{y0}" width="{}" height="{}" fill="none" stroke="#444"/>"##,
        x1 - x0,
        y1 - y0
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">percentile of completions (clat)</text>"#,
        (x0 + x1) / 2.0,
        y1 + 36.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18 {}) rotate(-90)" text-anchor="middle">completion latency (log scale)</text>"#,
        (y0 + y1) / 2.0
    );
    for (i, c) in curves.iter().enumerate() {
        let color = COLORS.get(i % COLORS.len()).copied().unwrap_or("black");
        let d = step_path(&c.points, &px, &py);
        let _ = writeln!(
            s,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="2"/>"#
        );
        let ly = y0 + 14.0 + 18.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            x1 + 12.0,
            x1 + 32.0,
            x1 + 38.0,
            ly + 4.0,
            esc(&c.label)
        );
    }
}

/// The SVG path of one curve as steps (latency holds until the next bucket), one point
/// per pixel: thousands of histogram buckets land on the same pixel.
fn step_path(points: &[(f64, f64)], px: &dyn Fn(f64) -> f64, py: &dyn Fn(f64) -> f64) -> String {
    let mut d = String::new();
    let mut prev: Option<(f64, f64)> = None;
    let last = points.len().saturating_sub(1);
    for (k, &(f, ns)) in points.iter().enumerate() {
        let (x, y) = (px(f), py(ns));
        if let Some((x_prev, y_prev)) = prev
            && k != last
            && (x - x_prev).abs() < 0.5
            && (y - y_prev).abs() < 0.5
        {
            continue;
        }
        match prev {
            None => {
                let _ = write!(d, "M{x:.1},{y:.1}");
            }
            Some((_, py_prev)) => {
                let _ = write!(d, " L{x:.1},{py_prev:.1} L{x:.1},{y:.1}");
            }
        }
        prev = Some((x, y));
    }
    d
}

fn title_of(doc: &Value) -> String {
    let opts = doc
        .get("jobs")
        .and_then(|j| j.get(0))
        .and_then(|j| j.get("job options"));
    let get = |k: &str| {
        opts.and_then(|o| o.get(k))
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    };
    format!(
        "nvmemu bench: rw={} bs={} iodepth={}",
        get("rw"),
        get("bs"),
        get("iodepth")
    )
}

fn bar(s: &mut String, layers: &[Layer], top: f64) {
    let (x0, x1) = (LEFT, W - RIGHT);
    let total: f64 = layers.iter().map(|l| l.ns).sum();
    let y = top + 40.0;
    let h = 36.0;
    let _ = writeln!(
        s,
        r#"<text x="{x0}" y="{}" font-size="14">latency breakdown per I/O: {} in total</text>"#,
        top + 24.0,
        fmt_ns(total)
    );
    let mut x = x0;
    for (i, l) in layers.iter().enumerate() {
        let w = l.ns / total * (x1 - x0);
        let color = COLORS.get(i % COLORS.len()).copied().unwrap_or("black");
        let _ = writeln!(
            s,
            r#"<rect x="{x:.1}" y="{y}" width="{w:.1}" height="{h}" fill="{color}" stroke="white"/>"#
        );
        // Legend: one line per layer (layer names are long).
        let lx = x0;
        let ly = y + h + 24.0 + i as f64 * LEGEND_ROW;
        let _ = writeln!(
            s,
            r#"<rect x="{lx:.1}" y="{}" width="12" height="12" fill="{color}"/><text x="{:.1}" y="{ly}">{} {} ({:.0}%)</text>"#,
            ly - 10.0,
            lx + 16.0,
            esc(&l.name),
            fmt_ns(l.ns),
            l.ns / total * 100.0
        );
        x += w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(bins: bool, breakdown: Option<Value>) -> String {
        let mut clat = json!({
            "N": 1000,
            "percentile": {"50.000000": 2000, "99.000000": 8000, "99.900000": 20000},
        });
        if bins {
            clat["bins"] = json!({"1500": 500, "2500": 490, "9000": 9, "21000": 1});
        }
        let mut doc = json!({
            "jobs": [{
                "job options": {"rw": "randread", "bs": "512", "iodepth": "16"},
                "read": {"clat_ns": clat},
                "write": {"clat_ns": {"N": 0}},
            }],
        });
        if let Some(b) = breakdown {
            doc["lat_breakdown"] = b;
        }
        doc.to_string()
    }

    #[test]
    fn bins_give_a_cumulative_curve_ending_at_one() {
        let doc: Value = serde_json::from_str(&report(true, None)).unwrap();
        let c = curves(&doc);
        assert_eq!(c.len(), 1, "the write side has no samples");
        assert_eq!(c[0].label, "job 0 read");
        assert_eq!(c[0].points.first(), Some(&(0.0, 1500.0)));
        assert_eq!(c[0].points[1], (0.5, 1500.0));
        assert_eq!(c[0].points[2], (0.99, 2500.0));
        assert_eq!(c[0].points.last(), Some(&(1.0, 21000.0)));
    }

    #[test]
    fn without_bins_the_fixed_percentiles_are_used() {
        let doc: Value = serde_json::from_str(&report(false, None)).unwrap();
        let c = curves(&doc);
        let want = [(0.5, 2000.0), (0.99, 8000.0), (0.999, 20000.0)];
        assert_eq!(c[0].points.len(), want.len());
        for (got, want) in c[0].points.iter().zip(want) {
            assert!((got.0 - want.0).abs() < 1e-9, "{got:?} vs {want:?}");
            assert_eq!(got.1, want.1);
        }
    }

    #[test]
    fn svg_has_the_curve_and_the_breakdown_bar() {
        let b = json!({"driver": 300.0, "transport": {"mean_ns": 700.0}, "ctrl": 250, "bad": "x"});
        let svg = render_svg(&report(true, Some(b))).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("rw=randread bs=512 iodepth=16"));
        assert_eq!(svg.matches("<path").count(), 1);
        assert!(svg.contains("latency breakdown per I/O: 1.250us in total"));
        assert!(svg.contains("transport 700ns (56%)"));
        assert!(!svg.contains(">bad"));
        let plain = render_svg(&report(true, None)).unwrap();
        assert!(!plain.contains("breakdown"));
    }

    #[test]
    fn the_lat_breakdown_shape_of_nvmemu_bench() {
        let doc = json!({"lat_breakdown": {"commands": 10, "total_ns": 30.0, "layers": [
            {"layer": "submit", "cum_ns": 10.0, "delta_ns": 10.0, "pct": 33.3},
            {"layer": "target", "cum_ns": 30.0, "delta_ns": 20.0, "pct": 66.7}
        ]}});
        let l = breakdown(&doc);
        assert_eq!(
            l,
            vec![
                Layer {
                    name: "submit".into(),
                    ns: 10.0
                },
                Layer {
                    name: "target".into(),
                    ns: 20.0
                }
            ]
        );
    }

    #[test]
    fn array_breakdowns_and_escaping() {
        let doc = json!({"jobs": [], "target": {"breakdown": [
            {"layer": "a<b", "avg_ns": 10.0}, {"name": "c", "ns": 5}, {"layer": "zero", "ns": 0}
        ]}});
        let l = breakdown(&doc);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].name, "a<b");
        assert_eq!(esc(&l[0].name), "a&lt;b");
    }

    #[test]
    fn reports_without_latencies_are_refused() {
        assert!(matches!(
            render_svg(r#"{"jobs": []}"#),
            Err(PlotError::NoLatencies)
        ));
        assert!(matches!(render_svg("not json"), Err(PlotError::Json(_))));
        assert_eq!(fmt_ns(850.0), "850ns");
        assert_eq!(fmt_ns(12_500.0), "12.500us");
        assert_eq!(fmt_ns(1e6), "1ms");
    }
}
