// SPDX-License-Identifier: Apache-2.0
//! The lines fio prints before a run: one per job definition saying what it runs
//! (`NAME: (g=0): rw=randread, bs=(R) 4096B-4096B, ..., ioengine=..., iodepth=32`, each
//! direction's smallest and largest block size, a `...` line under it for its numjobs
//! clones), the fio version whose report this one follows, `Starting N threads` and the
//! blank line fio's status line leaves. A saved report then says what ran.

use std::fmt::Write as _;

use super::FIO_VERSION;
use super::num::{Unit, num2str};
use crate::options::BenchOptions;

/// The engine name the job line reports: nvmemu's own userspace driver.
pub const IOENGINE: &str = "nvmemu";

/// The smallest and largest block size of direction `dir` (0 read, 1 write, 2 trim).
fn bs_span(o: &BenchOptions, dir: usize) -> (u64, u64) {
    let sizes = o
        .size_lists()
        .and_then(|l| l.0.get(dir).map(crate::workload_values::BlockSizes::sizes))
        .unwrap_or_else(|| vec![*o.bs]);
    let min = sizes.iter().copied().min().unwrap_or(*o.bs);
    let max = sizes.iter().copied().max().unwrap_or(*o.bs);
    (min, max)
}

/// The job lines and the "Starting" line for job definitions `(groupid, options)`.
pub fn render_header(defs: &[(u32, &BenchOptions)]) -> String {
    let mut out = String::new();
    for (gid, o) in defs {
        let span = |dir| {
            let (min, max) = bs_span(o, dir);
            let size = |b| num2str(b, 4, 1, true, Unit::Byte);
            format!("{}-{}", size(min), size(max))
        };
        let _ = writeln!(
            out,
            "{}: (g={gid}): rw={}, bs=(R) {}, (W) {}, (T) {}, ioengine={IOENGINE}, iodepth={}",
            o.name,
            o.rw.as_str(),
            span(0),
            span(1),
            span(2),
            o.iodepth
        );
        if o.numjobs > 1 {
            out.push_str("...\n");
        }
    }
    // Jobs are threads of this process, as fio's with `thread`.
    let n: u64 = defs.iter().map(|(_, o)| u64::from(o.numjobs)).sum();
    let _ = writeln!(
        out,
        "{FIO_VERSION}\nStarting {n} thread{}\n",
        if n == 1 { "" } else { "s" }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::RwMode;

    #[test]
    fn job_lines_name_what_runs() {
        let a = BenchOptions {
            name: "randread".into(),
            rw: RwMode::Randread.into(),
            iodepth: 32,
            numjobs: 2,
            ..BenchOptions::default()
        };
        let b = BenchOptions {
            name: "seqwrite".into(),
            rw: RwMode::Write.into(),
            bs: (128 << 10).into(),
            ..BenchOptions::default()
        };
        let h = render_header(&[(0, &a), (1, &b)]);
        assert_eq!(
            h,
            "randread: (g=0): rw=randread, bs=(R) 4096B-4096B, (W) 4096B-4096B, \
             (T) 4096B-4096B, ioengine=nvmemu, iodepth=32\n...\n\
             seqwrite: (g=1): rw=write, bs=(R) 128KiB-128KiB, (W) 128KiB-128KiB, \
             (T) 128KiB-128KiB, ioengine=nvmemu, iodepth=1\nfio-3.33\nStarting 3 threads\n\n"
        );
        assert!(render_header(&[(0, &b)]).ends_with("\nfio-3.33\nStarting 1 thread\n\n"));
    }

    #[test]
    fn mixed_block_sizes_show_each_directions_span_as_fio_does() {
        let o = BenchOptions {
            name: "mix".into(),
            rw: RwMode::Randrw.into(),
            workload: crate::WorkloadOptions {
                bssplit: Some(crate::parse_bssplit("4k/50:1m/50,8k/100").unwrap()),
                ..Default::default()
            },
            ..BenchOptions::default()
        };
        let h = render_header(&[(0, &o)]);
        assert!(
            h.starts_with(
                "mix: (g=0): rw=randrw, bs=(R) 4096B-1024KiB, (W) 8192B-8192B, \
                 (T) 8192B-8192B, ioengine=nvmemu"
            ),
            "{h}"
        );
    }
}
