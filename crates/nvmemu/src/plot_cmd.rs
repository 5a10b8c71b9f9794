// SPDX-License-Identifier: Apache-2.0
//! `nvmemu plot`: saved `nvmemu bench` JSON reports drawn over each other in one SVG
//! (percentile curves, IOPS and latency over time, one line per run), to compare runs.

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};

/// Arguments of `nvmemu plot`.
#[derive(Debug, clap::Args)]
pub struct PlotArgs {
    /// Reports of `nvmemu bench --output-format=json` (or json+, which draws the full
    /// percentile curves), labelled by file name.
    #[arg(required = true, value_name = "REPORT")]
    pub reports: Vec<PathBuf>,
    /// The SVG to write.
    #[arg(short, long, value_name = "FILE", default_value = "nvmemu-plot.svg")]
    pub output: PathBuf,
}

/// The first JSON value of a report file (a `normal,json` report has text after it).
fn first_json(text: &str) -> Option<serde_json::Value> {
    let start = text.find('{')?;
    serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<serde_json::Value>()
        .next()?
        .ok()
}

/// `nvmemu plot`.
pub fn run(args: &PlotArgs) -> Result<()> {
    let mut runs = Vec::with_capacity(args.reports.len());
    for path in &args.reports {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let doc = first_json(&text).ok_or_else(|| {
            anyhow!(
                "{} holds no JSON report; save one with nvmemu bench --output-format=json",
                path.display()
            )
        })?;
        let label = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        runs.push((label, doc.to_string()));
    }
    let svg = nvmemu_bench::plot::render_runs(&runs).context("plot")?;
    std::fs::write(&args.output, svg).map_err(|e| {
        anyhow!(
            "-o {}: cannot write there ({e}); choose a writable path",
            args.output.display()
        )
    })?;
    nvmemu::console::print(&format!("{}\n", args.output.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_part_of_a_report_is_found() {
        let v = first_json("{\"jobs\": []}\nnvmemu: (groupid=0 ...").unwrap();
        assert!(v["jobs"].is_array());
        assert!(first_json("no json here").is_none());
    }
}
