// SPDX-License-Identifier: Apache-2.0
//! The lines fio prints before a run: one per job definition saying what it runs
//! (`NAME: (g=0): rw=randread, bs=(R) 4096B-4096B, ..., ioengine=..., iodepth=32`, a `...`
//! line under it for its numjobs clones) and `Starting N threads`. A saved report then
//! says what ran.

use std::fmt::Write as _;

use super::num::{Unit, num2str};
use crate::options::BenchOptions;

/// The engine name the job line reports: nvmemu's own userspace driver.
pub const IOENGINE: &str = "nvmemu";

/// The job lines and the "Starting" line for job definitions `(groupid, options)`.
pub fn render_header(defs: &[(u32, &BenchOptions)]) -> String {
    let mut out = String::new();
    for (gid, o) in defs {
        let bs = num2str(o.bs, 4, 1, true, Unit::Byte);
        let _ = writeln!(
            out,
            "{}: (g={gid}): rw={}, bs=(R) {bs}-{bs}, (W) {bs}-{bs}, (T) {bs}-{bs}, ioengine={IOENGINE}, iodepth={}",
            o.name,
            o.rw.as_str(),
            o.iodepth
        );
        if o.numjobs > 1 {
            out.push_str("...\n");
        }
    }
    // Jobs are threads of this process, as fio's with `thread`.
    let n: u64 = defs.iter().map(|(_, o)| u64::from(o.numjobs)).sum();
    let _ = writeln!(out, "Starting {n} thread{}", if n == 1 { "" } else { "s" });
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
            rw: RwMode::Randread,
            iodepth: 32,
            numjobs: 2,
            ..BenchOptions::default()
        };
        let b = BenchOptions {
            name: "seqwrite".into(),
            rw: RwMode::Write,
            bs: 128 << 10,
            ..BenchOptions::default()
        };
        let h = render_header(&[(0, &a), (1, &b)]);
        assert_eq!(
            h,
            "randread: (g=0): rw=randread, bs=(R) 4096B-4096B, (W) 4096B-4096B, \
             (T) 4096B-4096B, ioengine=nvmemu, iodepth=32\n...\n\
             seqwrite: (g=1): rw=write, bs=(R) 128KiB-128KiB, (W) 128KiB-128KiB, \
             (T) 128KiB-128KiB, ioengine=nvmemu, iodepth=1\nStarting 3 threads\n"
        );
        assert!(render_header(&[(0, &b)]).ends_with("Starting 1 thread\n"));
    }
}
