// SPDX-License-Identifier: Apache-2.0
//! [`plan_jobs`]: checks the options against the namespace and resolves them into
//! one [`JobPlan`] per job (its range, block counts, batching, seed).

use std::time::Duration;

use crate::engine::Geometry;
use crate::error::BenchError;
use crate::options::{Batching, BenchOptions, RwMode, VerifyMode, WorkloadOptions};
use crate::pace::Pacer;
use crate::sizes::Sizes;
use crate::think::ThinkPlan;
use crate::verify::{self, Checksum, Method};
use crate::workload_values::RandomDistribution;

/// How a job verifies.
#[derive(Debug, Clone)]
pub struct VerifyPlan {
    /// Block format.
    pub method: Method,
    /// fio `do_verify`: read back and check (else only write verifiable blocks).
    pub do_verify: bool,
    /// fio `verify_only`: replay the writes without issuing them, then read back.
    pub verify_only: bool,
    /// fio `verify_backlog`: check written blocks after every this many writes.
    pub backlog: Option<u64>,
}

/// Everything a job needs to know, resolved against the namespace.
#[derive(Debug, Clone)]
pub struct JobPlan {
    /// Job number (0-based).
    pub job: u32,
    /// Workload.
    pub rw: RwMode,
    /// Units a sequential workload adds to its offset after each I/O (fio's `rw=read:N`).
    pub seq_add_units: i64,
    /// Percentage of reads.
    pub read_pct: u8,
    /// LBA size.
    pub block_size: u32,
    /// Logical blocks per unit (the grain every I/O size is a multiple of).
    pub unit_blocks: u32,
    /// I/O sizes per direction, in units.
    pub sizes: Sizes,
    /// First LBA of the job's range.
    pub first_lba: u64,
    /// Number of units in the range.
    pub units: u64,
    /// I/Os in flight.
    pub iodepth: usize,
    /// Commands per doorbell, free slots before a refill and completions per poll
    /// (fio's `iodepth_batch_submit` and `iodepth_batch_complete_min`/`_max`).
    pub batching: Batching,
    /// Without `time_based`: bytes per loop (`io_size`, else the range), after ramp.
    pub loop_bytes: u64,
    /// fio `loops`.
    pub loops: u32,
    /// All loops' bytes (for the status line's estimate).
    pub size_bytes: u64,
    /// fio `number_ios`: stop after this many I/Os.
    pub number_ios: Option<u64>,
    /// Stop after ramp + runtime.
    pub runtime: Option<Duration>,
    /// Statistics are reset after this long.
    pub ramp: Duration,
    /// Ignore `size_bytes`, run for `runtime`.
    pub time_based: bool,
    /// Verification, if any.
    pub verify: Option<VerifyPlan>,
    /// Random workloads touch every unit once per pass (fio's random map); false with
    /// `norandommap` (independent draws).
    pub random_map: bool,
    /// Offset distribution of random workloads.
    pub distribution: RandomDistribution,
    /// fio `thinktime` and the options that trigger it.
    pub thinktime: Option<ThinkPlan>,
    /// fio `rate` / `rate_iops`.
    pub pacer: Option<Pacer>,
    /// PRNG seed.
    pub seed: u64,
    /// The time-series logs to keep, if any.
    pub log: Option<crate::iolog::LogSpec>,
}

/// Largest verify generation table per job (units), 256 Mi entries (1 GiB).
const MAX_VERIFY_UNITS: u64 = 1 << 28;

/// The job's thinktime, if it pauses: fio's blocks default of 1 applies unless only
/// `thinktime_iotime` was given; `thinktime_spin` longer than `thinktime` lengthens it.
fn think_plan(w: &WorkloadOptions) -> Option<ThinkPlan> {
    let pause = w.thinktime.filter(|t| !t.is_zero())?;
    let blocks = match (w.thinktime_blocks, w.thinktime_iotime) {
        (Some(b), _) => Some(u64::from(b.max(1))),
        (None, Some(_)) => None,
        (None, None) => Some(1),
    };
    Some(ThinkPlan {
        pause: pause.max(w.thinktime_spin.unwrap_or_default()),
        blocks,
        blocks_type: w.thinktime_blocks_type,
        iotime: w.thinktime_iotime.filter(|t| !t.is_zero()),
    })
}

fn verify_method(opts: &BenchOptions) -> Option<Method> {
    let w = &opts.workload;
    let pattern = || {
        Method::Pattern(
            w.verify_pattern
                .as_ref()
                .map_or(vec![0xa5], |p| p.0.clone()),
        )
    };
    Some(match opts.verify {
        VerifyMode::Off if w.verify_pattern.is_some() => pattern(),
        VerifyMode::Off => return None,
        VerifyMode::Pattern => pattern(),
        VerifyMode::Crc32c => Method::Header(Checksum::Crc32c),
        VerifyMode::Md5 => Method::Header(Checksum::Md5),
        VerifyMode::Sha256 => Method::Header(Checksum::Sha256),
        VerifyMode::Xxhash => Method::Header(Checksum::Xxhash),
    })
}

/// The I/O sizes of a job, checked against the namespace.
struct BlockPlan {
    /// Every I/O size is a multiple of this (bytes).
    grain: u64,
    unit_blocks: u32,
    sizes: Sizes,
    min_bs: u64,
    max_bs: u64,
}

/// Checks every block size against the LBA size and the largest transfer, and finds the
/// grain they share.
fn block_plan(opts: &BenchOptions, geometry: Geometry) -> Result<BlockPlan, BenchError> {
    let block_size = geometry.block_size;
    let size_lists = opts.size_lists();
    let lists = size_lists.as_ref().map(|l| &l.0);
    let grain = Sizes::grain(lists, *opts.bs);
    let sizes_bytes: Vec<u64> = lists.map_or(vec![*opts.bs], |l| {
        l.iter()
            .flat_map(crate::workload_values::BlockSizes::sizes)
            .collect()
    });
    let bad_bs = |bs: u64| BenchError::BlockSize {
        bs,
        block_size,
        max_transfer: geometry.max_transfer,
    };
    for &bs in &sizes_bytes {
        if block_size == 0 || bs == 0 || bs % u64::from(block_size) != 0 {
            return Err(bad_bs(bs));
        }
        if geometry.max_transfer != 0 && bs > u64::from(geometry.max_transfer) {
            return Err(bad_bs(bs));
        }
    }
    Ok(BlockPlan {
        grain,
        unit_blocks: u32::try_from(grain / u64::from(block_size)).map_err(|_| bad_bs(grain))?,
        sizes: Sizes::new(lists, *opts.bs, grain),
        min_bs: sizes_bytes.iter().copied().min().unwrap_or(*opts.bs),
        max_bs: sizes_bytes.iter().copied().max().unwrap_or(*opts.bs),
    })
}

/// The verify method, refused where it cannot work.
fn checked_verify_method(
    opts: &BenchOptions,
    block_size: u32,
) -> Result<Option<Method>, BenchError> {
    let w = &opts.workload;
    let method = verify_method(opts);
    let verify = method.is_some();
    if verify && (block_size as usize) < verify::MIN_BLOCK {
        return Err(BenchError::Verify {
            reason: "LBA size below 64 bytes",
        });
    }
    if w.verify_only && !verify {
        return Err(BenchError::Conflict {
            reason: "verify_only needs a verify method: add --verify=crc32c (or the method the data was written with)",
        });
    }
    if w.verify_only && (opts.time_based || opts.ramp_time.is_some_and(|r| !r.is_zero())) {
        return Err(BenchError::Conflict {
            reason: "verify_only replays a size-based job: drop time_based and ramp_time",
        });
    }
    Ok(method)
}

/// Where the jobs' ranges start (bytes) and how many units each covers.
fn job_range(
    opts: &BenchOptions,
    geometry: Geometry,
    blocks: &BlockPlan,
    verify: bool,
) -> Result<(u64, u64, u64), BenchError> {
    let bs = blocks.grain;
    let capacity = geometry
        .num_blocks
        .saturating_mul(u64::from(geometry.block_size));
    let offset = opts.offset.resolve(capacity) / bs * bs;
    let avail = capacity.saturating_sub(offset);
    // As fio does on a block device, a size beyond the end is cut at the end.
    let size = opts.size.map_or(avail, |s| s.resolve(avail)).min(avail);
    let range_err = BenchError::Range {
        offset,
        size,
        capacity,
    };
    if size < blocks.min_bs && offset < capacity {
        return Err(BenchError::SizeTooSmall {
            size,
            min_bs: blocks.min_bs,
        });
    }
    if offset >= capacity || size < blocks.max_bs {
        return Err(range_err);
    }
    // Verify jobs get disjoint slices so they never overwrite each other's
    // blocks; other jobs all cover the whole range, as fio's do.
    let per_job = if verify {
        size / u64::from(opts.numjobs) / bs * bs
    } else {
        size / bs * bs
    };
    if per_job == 0 || per_job < blocks.max_bs {
        return Err(range_err);
    }
    let units = per_job / bs;
    if verify && units > MAX_VERIFY_UNITS {
        return Err(BenchError::Verify {
            reason: "range too large for the generation table; lower --size",
        });
    }
    Ok((offset, per_job, units))
}

/// Resolves options against the namespace into one plan per job.
pub fn plan_jobs(opts: &BenchOptions, geometry: Geometry) -> Result<Vec<JobPlan>, BenchError> {
    let w = &opts.workload;
    let block_size = geometry.block_size;
    let blocks = block_plan(opts, geometry)?;
    let bs = blocks.grain;
    if opts.time_based && opts.runtime.is_none() {
        return Err(BenchError::TimeBasedWithoutRuntime);
    }
    let method = checked_verify_method(opts, block_size)?;
    let verify = method.is_some();
    let (offset, per_job, units) = job_range(opts, geometry, &blocks, verify)?;
    let batching = opts.batching();
    let seed = opts.seed();
    let unit_bytes = i64::try_from(bs).unwrap_or(i64::MAX);
    if opts.rw.seq_add % unit_bytes != 0 {
        return Err(BenchError::Conflict {
            reason: "the rw offset step (rw=read:N) must be a multiple of the block size",
        });
    }
    let seq_add_units = opts.rw.seq_add / unit_bytes;
    let read_pct = match (opts.rw.mode, w.rwmixwrite) {
        (RwMode::Rw | RwMode::Randrw, Some(wr)) => 100 - wr.min(100),
        (rw, _) => rw.read_pct(opts.rwmixread),
    };
    let loop_bytes = w.io_size.unwrap_or(per_job);
    Ok((0..opts.numjobs)
        .map(|job| {
            let start = if verify {
                offset + u64::from(job) * per_job
            } else {
                offset
            };
            JobPlan {
                job,
                rw: opts.rw.mode,
                seq_add_units,
                read_pct,
                block_size,
                unit_blocks: blocks.unit_blocks,
                sizes: blocks.sizes.clone(),
                first_lba: start / u64::from(block_size),
                units,
                iodepth: usize::try_from(opts.iodepth).unwrap_or(1),
                batching,
                loop_bytes,
                loops: w.loops.max(1),
                size_bytes: loop_bytes.saturating_mul(u64::from(w.loops.max(1))),
                number_ios: w.number_ios,
                runtime: opts.time_limit(),
                ramp: opts.ramp_time.unwrap_or(Duration::ZERO),
                time_based: opts.time_based,
                verify: method.clone().map(|method| VerifyPlan {
                    method,
                    do_verify: w.do_verify,
                    verify_only: w.verify_only,
                    backlog: w.verify_backlog,
                }),
                random_map: !opts.norandommap,
                distribution: w.random_distribution,
                thinktime: think_plan(w),
                pacer: Pacer::new(w.rate, w.rate_iops),
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
    fn a_size_beyond_the_end_is_cut_at_the_end_as_fio_does_on_a_device() {
        let g = Geometry {
            block_size: 512,
            num_blocks: 8192,
            max_transfer: 128 * 1024,
        };
        let o = BenchOptions {
            size: Some(SizeSpec::Bytes(10 << 30)),
            offset: SizeSpec::Bytes(1 << 20),
            ..BenchOptions::default()
        };
        let p = plan_jobs(&o, g).unwrap();
        assert_eq!(p[0].first_lba, 2048);
        assert_eq!(p[0].units * 4096, 3 << 20);
        assert_eq!(p[0].loop_bytes, 3 << 20);
    }

    #[test]
    fn bad_plans_are_rejected() {
        let g = Geometry {
            block_size: 4096,
            num_blocks: 1024,
            max_transfer: 128 * 1024,
        };
        let o = BenchOptions {
            bs: 512.into(),
            ..BenchOptions::default()
        };
        assert!(matches!(
            plan_jobs(&o, g),
            Err(BenchError::BlockSize { .. })
        ));
        let o = BenchOptions {
            bs: (1 << 20).into(),
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
            offset: SizeSpec::Bytes(4 << 20),
            ..BenchOptions::default()
        };
        assert!(matches!(plan_jobs(&o, g), Err(BenchError::Range { .. })));
        let o = BenchOptions {
            size: Some(SizeSpec::Bytes(1024)),
            ..BenchOptions::default()
        };
        assert_eq!(
            plan_jobs(&o, g).unwrap_err().to_string(),
            "Size too small, must not be less than minimum block size: 1024 < 4096 \
             (raise --size or lower --bs)"
        );
        let o = BenchOptions {
            workload: crate::WorkloadOptions {
                verify_only: true,
                ..Default::default()
            },
            ..BenchOptions::default()
        };
        assert!(matches!(plan_jobs(&o, g), Err(BenchError::Conflict { .. })));
        let o = BenchOptions {
            verify: VerifyMode::Crc32c,
            time_based: true,
            runtime: Some(Duration::from_secs(1)),
            ..o
        };
        assert!(matches!(plan_jobs(&o, g), Err(BenchError::Conflict { .. })));
        // Every bssplit size must fit the LBA size and the transfer limit.
        let o = BenchOptions {
            workload: crate::WorkloadOptions {
                bssplit: Some(crate::parse_bssplit("4k/50:256k/50").unwrap()),
                ..Default::default()
            },
            ..BenchOptions::default()
        };
        assert!(matches!(
            plan_jobs(&o, g),
            Err(BenchError::BlockSize { bs: 262_144, .. })
        ));
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
        assert_eq!(p[0].unit_blocks, 8);
        assert_eq!(p[1].first_lba, p[0].first_lba + p[0].units * 8);
        assert_eq!(p[3].first_lba + p[3].units * 8, 1 << 12);
    }
}
