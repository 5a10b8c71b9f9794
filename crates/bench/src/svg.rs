// SPDX-License-Identifier: Apache-2.0
//! Text helpers shared by the SVG charts of `--plot` and `nvmemu plot`.

/// `s` escaped for SVG text and attribute values.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A latency as text: 850ns, 12.5us, 3.2ms.
pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.3}ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3}us", ns / 1e3)
    } else {
        format!("{ns:.0}ns")
    }
    .replace(".000", "")
}
