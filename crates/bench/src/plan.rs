// SPDX-License-Identifier: Apache-2.0
//! [`plan_jobs`]: checks the options against the namespace and resolves them into
//! one [`JobPlan`] per job (its range, block counts, batching, seed).

use std::time::Duration;

use crate::engine::Geometry;
use crate::error::BenchError;
use crate::options::{BenchOptions, RwMode, VerifyMode};
use crate::verify;

/// Everything a job needs to know, resolved against the namespace.
#[derive(Debug, Clone)]
pub struct JobPlan {
    /// Job number (0-based).
    pub job: u32,
    /// Workload.
    pub rw: RwMode,
    /// Percentage of reads.
    pub read_pct: u8,
    /// LBA size.
    pub block_size: u32,
    /// Logical blocks per I/O (`bs / block_size`).
    pub blocks_per_io: u32,
    /// First LBA of the job's range.
    pub first_lba: u64,
    /// Number of `bs`-sized units in the range.
    pub units: u64,
    /// I/Os in flight.
    pub iodepth: usize,
    /// Commands per doorbell (fio `iodepth_batch_submit`), 1..=iodepth.
    pub submit_batch: usize,
    /// Free slots needed before refilling (fio `iodepth_batch_complete_min`), 1..=iodepth.
    pub refill_min: usize,
    /// Most completions taken per poll (fio `iodepth_batch_complete_max`), 1..=iodepth.
    pub reap_max: usize,
    /// Without `time_based`: stop after this many bytes (after ramp).
    pub size_bytes: u64,
    /// Stop after ramp + runtime.
    pub runtime: Option<Duration>,
    /// Statistics are reset after this long.
    pub ramp: Duration,
    /// Ignore `size_bytes`, run for `runtime`.
    pub time_based: bool,
    /// `verify=crc32c`.
    pub verify: bool,
    /// Random workloads touch every unit once per pass (fio's random map); false with
    /// `norandommap` (independent draws).
    pub random_map: bool,
    /// PRNG seed.
    pub seed: u64,
    /// The time-series logs to keep, if any.
    pub log: Option<crate::iolog::LogSpec>,
}

/// Largest verify generation table per job (units), 256 Mi entries (1 GiB).
const MAX_VERIFY_UNITS: u64 = 1 << 28;

/// Resolves options against the namespace into one plan per job.
pub fn plan_jobs(opts: &BenchOptions, geometry: Geometry) -> Result<Vec<JobPlan>, BenchError> {
    let block_size = geometry.block_size;
    let bs = opts.bs;
    let bad_bs = BenchError::BlockSize {
        bs,
        block_size,
        max_transfer: geometry.max_transfer,
    };
    if block_size == 0 || bs == 0 || bs / u64::from(block_size) * u64::from(block_size) != bs {
        return Err(bad_bs);
    }
    if geometry.max_transfer != 0 && bs > u64::from(geometry.max_transfer) {
        return Err(bad_bs);
    }
    let blocks_per_io = u32::try_from(bs / u64::from(block_size)).map_err(|_| bad_bs)?;
    if opts.time_based && opts.runtime.is_none() {
        return Err(BenchError::TimeBasedWithoutRuntime);
    }
    let verify = opts.verify == VerifyMode::Crc32c;
    if verify && (block_size as usize) < verify::MIN_BLOCK {
        return Err(BenchError::Verify {
            reason: "LBA size below 64 bytes",
        });
    }
    let capacity = geometry.num_blocks.saturating_mul(u64::from(block_size));
    let offset = opts.offset.resolve(capacity) / bs * bs;
    let avail = capacity.saturating_sub(offset);
    let size = opts.size.map_or(avail, |s| s.resolve(avail));
    let range_err = BenchError::Range {
        offset,
        size,
        capacity,
    };
    if offset >= capacity || size > avail || size < bs {
        return Err(range_err);
    }
    // Verify jobs get disjoint slices so they never overwrite each other's
    // blocks; other jobs all cover the whole range, as fio's do.
    let per_job = if verify {
        size / u64::from(opts.numjobs) / bs * bs
    } else {
        size / bs * bs
    };
    if per_job == 0 {
        return Err(range_err);
    }
    let units = per_job / bs;
    if verify && units > MAX_VERIFY_UNITS {
        return Err(BenchError::Verify {
            reason: "range too large for the generation table; lower --size",
        });
    }
    let batching = opts.batching();
    let seed = opts.seed();
    Ok((0..opts.numjobs)
        .map(|job| {
            let start = if verify {
                offset + u64::from(job) * per_job
            } else {
                offset
            };
            JobPlan {
                job,
                rw: opts.rw,
                read_pct: opts.rw.read_pct(opts.rwmixread),
                block_size,
                blocks_per_io,
                first_lba: start / u64::from(block_size),
                units,
                iodepth: usize::try_from(opts.iodepth).unwrap_or(1),
                submit_batch: batching.submit,
                refill_min: batching.refill_min,
                reap_max: batching.reap_max,
                size_bytes: per_job,
                runtime: opts.time_limit(),
                ramp: opts.ramp_time.unwrap_or(Duration::ZERO),
                time_based: opts.time_based,
                verify,
                random_map: !opts.norandommap,
                seed,
                log: opts.log_spec(),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::SizeSpec;

    #[test]
    fn bad_plans_are_rejected() {
        let g = Geometry {
            block_size: 4096,
            num_blocks: 1024,
            max_transfer: 128 * 1024,
        };
        let o = BenchOptions {
            bs: 512,
            ..BenchOptions::default()
        };
        assert!(matches!(
            plan_jobs(&o, g),
            Err(BenchError::BlockSize { .. })
        ));
        let o = BenchOptions {
            bs: 1 << 20,
            ..BenchOptions::default()
        };
        assert!(matches!(
            plan_jobs(&o, g),
            Err(BenchError::BlockSize { .. })
        ));
        let o = BenchOptions {
            time_based: true,
            ..BenchOptions::default()
        };
        assert!(matches!(
            plan_jobs(&o, g),
            Err(BenchError::TimeBasedWithoutRuntime)
        ));
        let o = BenchOptions {
            size: Some(SizeSpec::Bytes(8 << 20)),
            ..BenchOptions::default()
        };
        assert!(matches!(plan_jobs(&o, g), Err(BenchError::Range { .. })));
    }

    #[test]
    fn verify_jobs_get_disjoint_slices() {
        let g = Geometry {
            block_size: 512,
            num_blocks: 1 << 12,
            max_transfer: 128 * 1024,
        };
        let o = BenchOptions {
            numjobs: 4,
            verify: VerifyMode::Crc32c,
            ..BenchOptions::default()
        };
        let p = plan_jobs(&o, g).unwrap();
        assert_eq!(p[1].first_lba, p[0].first_lba + p[0].units * 8);
        assert_eq!(p[3].first_lba + p[3].units * 8, 1 << 12);
    }
}
