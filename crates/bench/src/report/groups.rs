// SPDX-License-Identifier: Apache-2.0
//! fio's reporting groups: the jobs each "Run status group N" line sums and, with
//! `group_reporting`, one combined entry per group instead of one per job.

use crate::job_output::MAX_VERIFY_DETAILS;
use crate::result::{BenchResult, JobResult};

/// A job entry of a report: one job, or a group's jobs combined.
#[derive(Debug, Clone)]
pub struct Shown {
    /// The job (or the combination, named after the group's first job).
    pub job: JobResult,
    /// How many jobs it stands for (fio's `jobs=N`).
    pub jobs: u32,
    /// The jobs' runtimes added up (fio's `job_runtime`, the base of the CPU shares).
    pub job_runtime_ms: u64,
}

/// The entries to report, in job order.
pub fn shown_jobs(r: &BenchResult) -> Vec<Shown> {
    let mut out: Vec<Shown> = Vec::new();
    for j in &r.jobs {
        let grouped = r.options.group_reporting || j.options.group_reporting;
        match out
            .iter_mut()
            .find(|s| grouped && s.job.groupid == j.groupid)
        {
            Some(s) => {
                combine(&mut s.job, j);
                s.jobs += 1;
                s.job_runtime_ms += j.output.runtime_ms;
            }
            None => out.push(Shown {
                job: j.clone(),
                jobs: 1,
                job_runtime_ms: j.output.runtime_ms,
            }),
        }
    }
    out
}

/// The group ids of the run, ascending.
pub fn group_ids(r: &BenchResult) -> Vec<u32> {
    let mut ids: Vec<u32> = r.jobs.iter().map(|j| j.groupid).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Adds `b` to `a` as fio's `sum_thread_stats` does: counts and latency samples pooled,
/// bandwidth and IOPS added up, the longest runtime, the first error.
fn combine(a: &mut JobResult, b: &JobResult) {
    let (o, p) = (&mut a.output, &b.output);
    o.stats.merge(&p.stats);
    o.runtime_ms = o.runtime_ms.max(p.runtime_ms);
    for (a, b) in o.dir_runtime_ms.iter_mut().zip(p.dir_runtime_ms) {
        *a = (*a).max(b);
    }
    o.elapsed_ms = o.elapsed_ms.max(p.elapsed_ms);
    o.usage.add(&p.usage);
    if o.error.is_none() {
        o.error.clone_from(&p.error);
    }
    o.verify.errors += p.verify.errors;
    o.verify.verified_ios += p.verify.verified_ios;
    o.verify.unverifiable_ios += p.verify.unverifiable_ios;
    let room = MAX_VERIFY_DETAILS.saturating_sub(o.verify.first.len());
    o.verify
        .first
        .extend(p.verify.first.iter().take(room).cloned());
}
