// SPDX-License-Identifier: Apache-2.0
//! What `nvmemu bench` checks before it starts anything: CPUs named on the command line
//! exist for this process, output files can be written, the in-process target can take
//! the block size and depth asked for (before its namespace is backed), and the queue
//! depth fits what a controller offers (as soon as its CAP is read). Each failure is one
//! line saying what was wrong and what to do.

use std::path::Path;

use anyhow::{Result, bail};
use nvmemu_bench::{BenchOptions, Geometry, plan_jobs};
use nvmemu_ctrl::ControllerConfig;
use nvmemu_driver::MAX_TRANSFER_CAP;

use crate::ns_spec::NsSpec;

/// `0,1,2` for a CPU list.
pub fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Fails when `flag` names a CPU outside `allowed` (the process's affinity mask): pinning
/// there would fail, so the run would not measure what was asked for.
pub fn check_cpus(flag: &str, named: Option<&[usize]>, allowed: &[usize]) -> Result<()> {
    if let Some(cpu) = named
        .unwrap_or_default()
        .iter()
        .find(|c| !allowed.contains(c))
    {
        bail!(
            "{flag} names CPU {cpu}, which this process cannot run on; use CPUs from {}",
            cpu_list(allowed)
        );
    }
    Ok(())
}

/// The warning for `numjobs` jobs pinned round-robin to `job_cpus`, when some must share.
pub fn shared_cpus_warning(numjobs: u32, job_cpus: &[usize]) -> Option<String> {
    let n = job_cpus.len();
    (n > 0 && usize::try_from(numjobs).unwrap_or(usize::MAX) > n).then(|| {
        format!(
            "warning: {numjobs} jobs share {n} CPU{} ({}); jobs on one CPU take turns, so \
             lower --numjobs or allow more CPUs",
            if n == 1 { "" } else { "s" },
            cpu_list(job_cpus)
        )
    })
}

/// Fails unless `path` can be written (an existing file is left as it is; a new one is
/// created and removed again), so a run is not lost to a bad output path at its end.
pub fn check_writable(flag: &str, path: &Path) -> Result<()> {
    let existed = path.exists();
    let opened = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path);
    match opened {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => bail!(
            "{flag} {}: cannot write there ({e}); choose a writable path",
            path.display()
        ),
    }
}

/// Fails when an I/O queue of a controller with `max_entries` entries (CAP.MQES + 1)
/// cannot hold `iodepth` commands (a queue of N entries holds N - 1).
pub fn check_depth(iodepth: u32, max_entries: u32) -> Result<()> {
    let max = max_entries.saturating_sub(1);
    if iodepth > max {
        bail!(
            "--iodepth={iodepth} is more than the {max} commands an I/O queue of this \
             controller holds (CAP.MQES allows {max_entries} entries); use --iodepth={max} \
             or less"
        );
    }
    Ok(())
}

/// The namespace the in-process target will serve for `ns`, as the driver will see it.
pub fn embedded_geometry(ns: &NsSpec) -> Geometry {
    let mdts = ControllerConfig::default().mdts;
    let max = 4096u64
        .checked_shl(u32::from(mdts))
        .filter(|_| mdts != 0)
        .unwrap_or(MAX_TRANSFER_CAP)
        .min(MAX_TRANSFER_CAP);
    Geometry {
        block_size: ns.lba,
        num_blocks: ns.num_blocks(),
        max_transfer: u32::try_from(max).unwrap_or(u32::MAX),
    }
}

/// Everything the in-process target's geometry and queue size decide, checked before it
/// starts (and backs its namespace): block size against LBA size and MDTS, the range,
/// verify limits, and the queue depth.
pub fn check_embedded(opts: &BenchOptions, ns: &NsSpec) -> Result<()> {
    plan_jobs(opts, embedded_geometry(ns))?;
    let config = ControllerConfig::default();
    check_queues(opts.numjobs, u32::from(config.max_io_queues))?;
    check_depth(opts.iodepth, u32::from(config.max_queue_entries))
}

/// Fails when `numjobs` jobs need more I/O queue pairs (one each) than the controller
/// grants.
pub fn check_queues(numjobs: u32, granted: u32) -> Result<()> {
    if numjobs > granted {
        bail!(
            "--numjobs={numjobs} needs {numjobs} I/O queues (one per job) but the controller \
             grants {granted}; use --numjobs={granted} or less"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_outside_the_mask_are_fatal_with_one_line() {
        assert!(check_cpus("--target-cpus", Some(&[1]), &[0, 1]).is_ok());
        assert!(check_cpus("--cpus_allowed", None, &[0]).is_ok());
        let e = check_cpus("--target-cpus", Some(&[9]), &[0, 1])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--target-cpus names CPU 9, which this process cannot run on; use CPUs from 0,1"
        );
        let e = check_cpus("--cpus_allowed", Some(&[0, 5]), &[0, 1])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--cpus_allowed names CPU 5,"), "{e}");
    }

    #[test]
    fn more_jobs_than_cpus_is_one_warning() {
        assert_eq!(shared_cpus_warning(1, &[0]), None);
        assert_eq!(shared_cpus_warning(2, &[0, 1]), None);
        assert_eq!(shared_cpus_warning(4, &[]), None);
        let w = shared_cpus_warning(3, &[0]).unwrap();
        assert!(w.starts_with("warning: 3 jobs share 1 CPU (0);"), "{w}");
        assert!(!w.contains('\n'));
    }

    #[test]
    fn output_paths_are_checked_without_leaving_files() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("plot.svg");
        check_writable("--plot", &new).unwrap();
        assert!(!new.exists());
        std::fs::write(&new, b"kept").unwrap();
        check_writable("--plot", &new).unwrap();
        assert_eq!(std::fs::read(&new).unwrap(), b"kept");
        let e = check_writable("--plot", &dir.path().join("no/such/dir/p.svg"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot write there"), "{e}");
        assert!(check_writable("--plot", dir.path()).is_err());
    }

    #[test]
    fn more_jobs_than_io_queues_is_one_line() {
        assert!(check_queues(127, 127).is_ok());
        let e = check_queues(1000, 127).unwrap_err().to_string();
        assert_eq!(
            e,
            "--numjobs=1000 needs 1000 I/O queues (one per job) but the controller grants \
             127; use --numjobs=127 or less"
        );
    }

    #[test]
    fn depth_beyond_mqes_is_rejected() {
        assert!(check_depth(1023, 1024).is_ok());
        let e = check_depth(1024, 1024).unwrap_err().to_string();
        assert!(e.contains("use --iodepth=1023 or less"), "{e}");
    }

    #[test]
    fn embedded_checks_catch_block_size_and_depth_before_start() {
        let ns: NsSpec = "malloc:size=16M,lba=4096".parse().unwrap();
        let ok = BenchOptions {
            bs: (4096).into(),
            iodepth: 32,
            size: Some(nvmemu_bench::SizeSpec::Bytes(1 << 20)),
            ..BenchOptions::default()
        };
        check_embedded(&ok, &ns).unwrap();
        for bad in [
            BenchOptions {
                bs: (3).into(),
                ..ok.clone()
            },
            BenchOptions {
                bs: (512).into(),
                ..ok.clone()
            },
            BenchOptions {
                bs: (2 << 20).into(),
                ..ok.clone()
            },
            BenchOptions {
                iodepth: 4096,
                ..ok.clone()
            },
        ] {
            assert!(check_embedded(&bad, &ns).is_err(), "{bad:?}");
        }
    }
}
