// SPDX-License-Identifier: Apache-2.0
//! The in-process target of `nvmemu bench`: which CPUs its pollers and the jobs
//! get, its controllers (one namespace, each on a socket in a temporary
//! directory), and its poller counters as the bench's [`TargetProbe`].

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use nvmemu_bdev::Bdev;
use nvmemu_bench::{CoreCounters, TargetProbe, TargetSnapshot};
use nvmemu_ctrl::{ControllerConfig, LatencyHook, Namespace};
use nvmemu_device::{Backoff, ControllerSpec, NumaTopology, Target, TargetConfig};
use nvmemu_spec::Nsid;

use crate::ns_spec::{NsKind, NsSpec};

/// CPUs this process may run on (its affinity mask), ascending; `[0]` if unknown.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => {
            let cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
                .filter(|&c| set.is_set(c))
                .collect();
            if cpus.is_empty() { vec![0] } else { cpus }
        }
        Err(_) => vec![0],
    }
}

/// Where the poller and the jobs run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetPlacement {
    /// Poller CPUs (one poller each; pinned).
    pub target_cpus: Vec<usize>,
    /// Default job CPUs: the allowed CPUs the pollers do not use (empty: unpinned).
    pub job_cpus: Vec<usize>,
    /// Pollers spin without backing off (they have CPUs of their own).
    pub busy_poll: bool,
    /// Something the user should know about the placement.
    pub warning: Option<String>,
}

impl TargetPlacement {
    /// Poller on `target` (default: the last allowed CPU), jobs on the rest.
    /// `jobs` is the user's `--cpus_allowed`, checked for overlap only.
    pub fn choose(allowed: &[usize], target: Option<&[usize]>, jobs: Option<&[usize]>) -> Self {
        let last = allowed.last().copied().unwrap_or(0);
        let target_cpus: Vec<usize> = match target {
            Some(t) if !t.is_empty() => t.to_vec(),
            _ => vec![last],
        };
        let job_cpus: Vec<usize> = allowed
            .iter()
            .copied()
            .filter(|c| !target_cpus.contains(c))
            .collect();
        let shared = match jobs {
            Some(j) => j.iter().any(|c| target_cpus.contains(c)),
            None => job_cpus.is_empty(),
        };
        let warning = shared.then(|| {
            format!(
                "the target poller (CPU {}) shares a CPU with the jobs: it backs off when idle \
                 and results will be lower than on separate cores",
                list(&target_cpus)
            )
        });
        TargetPlacement {
            target_cpus,
            job_cpus,
            busy_poll: !shared,
            warning,
        }
    }
}

fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The NUMA node of the in-process namespace's memory: `numa=N` of `--ns` (checked against
/// the machine), else, on a machine with more than one node, the pollers' node.
pub fn namespace_node(
    ns: &NsSpec,
    target_cpus: &[usize],
    topology: &NumaTopology,
) -> Result<Option<u32>> {
    if let Some(node) = ns.numa_node {
        topology.memory_node(node).context("--ns numa=")?;
    }
    Ok(topology.namespace_node(ns.numa_node, target_cpus))
}

/// A target whose controllers serve one namespace (NSID 1), each on a socket in a
/// temporary directory, removed with it.
#[derive(Debug)]
pub struct EmbeddedTarget {
    target: Target,
    bdev: Arc<Bdev>,
    dir: tempfile::TempDir,
    dirs: Vec<PathBuf>,
    pollers: usize,
}

impl EmbeddedTarget {
    /// Starts the pollers and the controller.
    #[cfg(test)]
    pub fn start(ns: &NsSpec, placement: &TargetPlacement) -> Result<EmbeddedTarget> {
        Self::start_with(ns, placement, 1, None)
    }

    /// Starts the pollers and `controllers` controllers per poller, each serving the same
    /// namespace (one bdev) on its own socket directory; `latency` is handed to the first
    /// controller (`--lat-breakdown`). Controller i is on poller i mod the number of pollers
    /// ([`EmbeddedTarget::poller_of`]).
    pub fn start_with(
        ns: &NsSpec,
        placement: &TargetPlacement,
        controllers: u32,
        latency: Option<LatencyHook>,
    ) -> Result<EmbeddedTarget> {
        let dir = tempfile::Builder::new()
            .prefix("nvmemu-bench-")
            .tempdir()
            .context("cannot create a temporary directory for the socket")?;
        crate::signals::remove_on_forced_exit(dir.path());
        let target = Target::start(TargetConfig {
            poller_timeout: nvmemu_device::CALL_TIMEOUT,
            client_budget: nvmemu_device::ClientBudget::default(),
            deadlines: nvmemu_device::Deadlines::default(),
            cores: placement.target_cpus.clone(),
            pin: true,
            backoff: if placement.busy_poll {
                Backoff::NONE
            } else {
                Backoff::default()
            },
        })
        .context("cannot start the in-process target")?;
        // A malloc namespace is backed before the run (unless lazy=on), so the run never
        // takes a first-touch page fault and reads hit real pages rather than the kernel's
        // shared zero page (which would make cold reads look faster than written data).
        let node = namespace_node(ns, &placement.target_cpus, &NumaTopology::read())?;
        let bdev = match ns.kind {
            NsKind::Malloc => {
                Bdev::malloc_on_node("bench0", ns.lba, ns.num_blocks(), ns.backing, node, &|_| {})
            }
            NsKind::Null => Bdev::null("bench0", ns.lba, ns.num_blocks()),
            NsKind::File => Bdev::open_file(
                "bench0",
                ns.path.as_deref().unwrap_or(std::path::Path::new("")),
                Some(ns.lba),
                false,
                nvmemu_bdev::FileEngine::Aio,
            ),
        }
        .map_err(|e| anyhow::anyhow!(nvmemu::error_chain(&e)))
        .context("cannot create the namespace")?;
        bdev.model().set(ns.model.clone());
        let bdev = Arc::new(bdev);
        let shared = Arc::clone(&bdev);
        let mut dirs = Vec::new();
        let pollers = u32::try_from(placement.target_cpus.len().max(1)).unwrap_or(1);
        // The target puts each new controller on its least loaded poller, the first of
        // equals: adding them in order deals them out round-robin.
        for i in 0..controllers.max(1).saturating_mul(pollers) {
            let d = if i == 0 {
                dir.path().to_path_buf()
            } else {
                let d = dir.path().join(format!("c{i}"));
                std::fs::create_dir(&d).context("cannot create a socket directory")?;
                d
            };
            let id = target
                .add_controller(ControllerSpec {
                    socket_dir: d.clone(),
                    socket_mode: 0o600,
                    config: ControllerConfig {
                        serial: format!("NVMEMU-BENCH{i}"),
                        cntlid: u16::try_from(i + 1).unwrap_or(u16::MAX),
                        ..ControllerConfig::default()
                    },
                    namespaces: vec![Namespace::new(Nsid(1), Arc::clone(&shared))],
                    admission: nvmemu_device::Admission::default(),
                })
                .context("cannot start the in-process controller")?;
            if i == 0
                && let Some(trace) = latency.clone()
            {
                // Installed before any client can connect.
                target
                    .on_controller(id, move |c| c.ctrl.set_trace(Some(trace)))
                    .context("cannot install the latency trace")?;
            }
            dirs.push(d);
        }
        Ok(EmbeddedTarget {
            target,
            bdev,
            dir,
            dirs,
            pollers: usize::try_from(pollers).unwrap_or(1),
        })
    }

    /// The poller (index into the target CPUs) serving controller `i` of [`Self::dirs`].
    pub fn poller_of(&self, i: usize) -> usize {
        i % self.pollers
    }

    /// How much of a malloc namespace's memory is in transparent huge pages now (a buffer
    /// without them pays a page walk per random read, so runs are compared with it):
    /// `100 % of 1.0 GiB in transparent huge pages`. None for null namespaces.
    pub fn memory_line(&self) -> Option<String> {
        let r = self.bdev.memory()?.residency?;
        let share = if r.resident_bytes == 0 {
            0.0
        } else {
            100.0 * r.transparent_huge_bytes as f64 / r.resident_bytes as f64
        };
        Some(format!(
            "{share:.0} % of {} in transparent huge pages",
            nvmemu_mem::ByteSize(r.resident_bytes)
        ))
    }

    /// Number of pollers.
    pub fn pollers(&self) -> usize {
        self.pollers
    }

    /// The socket directories of all controllers (`cntrl` inside each), first one first.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The socket directory (`cntrl` inside).
    #[cfg(test)]
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Stops the controller and the pollers, then removes the directory.
    pub fn shutdown(self) {
        self.target.shutdown();
        crate::signals::forget(self.dir.path());
        drop(self.dir);
    }
}

impl TargetProbe for EmbeddedTarget {
    fn snapshot(&self) -> Option<TargetSnapshot> {
        Some(TargetSnapshot {
            cores: self
                .target
                .poller_stats()
                .into_iter()
                .map(|(cpu, s)| CoreCounters {
                    cpu,
                    busy_ns: s.busy_ns(),
                    total_ns: s.elapsed_ns,
                    commands: s.commands,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poller_takes_the_last_cpu_and_jobs_the_rest() {
        let p = TargetPlacement::choose(&[0, 1], None, None);
        assert_eq!(p.target_cpus, vec![1]);
        assert_eq!(p.job_cpus, vec![0]);
        assert!(p.busy_poll);
        assert!(p.warning.is_none());
        let p = TargetPlacement::choose(&[0, 1, 2, 3], Some(&[0]), None);
        assert_eq!(p.job_cpus, vec![1, 2, 3]);
    }

    #[test]
    fn sharing_a_cpu_backs_off_and_warns() {
        let p = TargetPlacement::choose(&[0], None, None);
        assert_eq!(p.target_cpus, vec![0]);
        assert!(p.job_cpus.is_empty());
        assert!(!p.busy_poll);
        assert!(p.warning.is_some());
        let p = TargetPlacement::choose(&[0, 1], None, Some(&[1]));
        assert!(!p.busy_poll);
        assert!(p.warning.unwrap().contains("CPU 1"));
    }
}
