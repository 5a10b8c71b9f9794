// SPDX-License-Identifier: Apache-2.0
//! The time-series logs of a finished run written to files, named as fio names them.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::iolog::LogKind;
use crate::result::BenchResult;

/// Writes every job's logs into `dir` (file names as fio's, the job number counting
/// every job of the run from 1) and returns their paths.
pub fn write_logs(r: &BenchResult, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (i, j) in r.jobs.iter().enumerate() {
        let Some(log) = &j.output.stats.log else {
            continue;
        };
        let o = &j.options;
        let name = |set: &Option<String>| {
            set.as_ref().map(|p| {
                if p.is_empty() {
                    o.name.clone()
                } else {
                    p.clone()
                }
            })
        };
        let mut files = Vec::new();
        if let Some(p) = name(&o.write_lat_log) {
            files.extend([LogKind::Lat, LogKind::Clat, LogKind::Slat].map(|k| (p.clone(), k)));
        }
        if let Some(p) = name(&o.write_iops_log) {
            files.push((p, LogKind::Iops));
        }
        if let Some(p) = name(&o.write_bw_log) {
            files.push((p, LogKind::Bw));
        }
        for (prefix, kind) in files {
            let path = dir.join(format!("{prefix}_{}.{}.log", kind.suffix(), i + 1));
            let mut text = String::new();
            log.render(kind, *o.bs, &mut text);
            let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
            f.write_all(text.as_bytes())?;
            f.flush()?;
            written.push(path);
        }
    }
    Ok(written)
}
