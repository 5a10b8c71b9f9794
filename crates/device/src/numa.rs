// SPDX-License-Identifier: Apache-2.0
//! NUMA placement: the machine's nodes as sysfs lists them, which CPUs the pollers of a
//! node get, and which node a namespace's memory follows.

use std::path::Path;

use crate::affinity::{CoreMaskError, parse_core_mask, parse_cpu_list};

/// Where the kernel lists the NUMA nodes.
pub const SYSFS_NODES: &str = "/sys/devices/system/node";

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaNode {
    /// The node number (`nodeN`).
    pub id: u32,
    /// Its CPUs, ascending (empty for a memory-only node).
    pub cpus: Vec<usize>,
    /// It has memory to allocate from (`has_memory`; a CPU-only node has none).
    pub has_memory: bool,
}

/// The machine's NUMA nodes, ascending by number; at least one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaTopology {
    nodes: Vec<NumaNode>,
}

/// Why a `--numa-node` / core mask choice was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlacementError {
    /// No such node, or one without memory.
    #[error("NUMA node {node} does not exist or has no memory; this machine has {nodes}")]
    NoSuchNode {
        /// The node asked for.
        node: u32,
        /// What the machine has (`node 0 (CPUs 0-1)`).
        nodes: String,
    },
    /// Pollers asked for on a node without CPUs.
    #[error("NUMA node {node} has no CPUs for pollers; this machine has {nodes}")]
    NoCpus {
        /// The node asked for.
        node: u32,
        /// What the machine has.
        nodes: String,
    },
    /// A core of the mask is on another node.
    #[error(
        "core {core} of the core mask is not on NUMA node {node} (its CPUs: {cpus}); \
         leave out -m or name CPUs of that node"
    )]
    CoreOffNode {
        /// The offending core.
        core: usize,
        /// The node asked for.
        node: u32,
        /// That node's CPUs.
        cpus: String,
    },
    /// The core mask itself.
    #[error(transparent)]
    Mask(#[from] CoreMaskError),
}

impl NumaTopology {
    /// The running machine's nodes ([`SYSFS_NODES`]).
    pub fn read() -> NumaTopology {
        Self::read_from(Path::new(SYSFS_NODES))
    }

    /// The nodes listed under `root` (`nodeN/cpulist`, and `has_memory` when present). A
    /// kernel without NUMA support lists none: then one node 0 with every online CPU.
    pub fn read_from(root: &Path) -> NumaTopology {
        let read = |p: &Path| std::fs::read_to_string(p).ok();
        let with_memory = read(&root.join("has_memory")).and_then(|t| parse_cpu_list(t.trim()));
        let mut nodes: Vec<NumaNode> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name();
                let id: u32 = name.to_str()?.strip_prefix("node")?.parse().ok()?;
                let mut cpus = parse_cpu_list(read(&e.path().join("cpulist"))?.trim())?;
                cpus.sort_unstable();
                let has_memory = with_memory
                    .as_ref()
                    .is_none_or(|m| usize::try_from(id).is_ok_and(|i| m.contains(&i)));
                Some(NumaNode {
                    id,
                    cpus,
                    has_memory,
                })
            })
            .collect();
        nodes.sort_unstable_by_key(|n| n.id);
        if nodes.is_empty() {
            let online = std::thread::available_parallelism().map_or(1, usize::from);
            nodes.push(NumaNode {
                id: 0,
                cpus: (0..online).collect(),
                has_memory: true,
            });
        }
        NumaTopology { nodes }
    }

    /// The nodes, ascending.
    pub fn nodes(&self) -> &[NumaNode] {
        &self.nodes
    }

    /// Node `id`, when the machine has it.
    pub fn node(&self, id: u32) -> Option<&NumaNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The node of `cpu`.
    pub fn node_of_cpu(&self, cpu: usize) -> Option<u32> {
        self.nodes
            .iter()
            .find(|n| n.cpus.contains(&cpu))
            .map(|n| n.id)
    }

    /// The nodes of `cpus`, ascending and once each (`0,1`; `?` for a CPU of no node).
    pub fn nodes_of(&self, cpus: &[usize]) -> String {
        let mut nodes: Vec<Option<u32>> = cpus.iter().map(|&c| self.node_of_cpu(c)).collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
            .iter()
            .map(|n| n.map_or("?".into(), |n| n.to_string()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node `id` if it exists and has memory to bind a namespace to.
    pub fn memory_node(&self, id: u32) -> Result<&NumaNode, PlacementError> {
        self.node(id)
            .filter(|n| n.has_memory)
            .ok_or_else(|| PlacementError::NoSuchNode {
                node: id,
                nodes: self.describe(),
            })
    }

    /// The cores for the pollers: the core mask's (SPDK's `-m`, default `0x1`) and, with
    /// `node`, only CPUs of that node: without a mask its first CPU, with one every core of
    /// the mask must be on it.
    pub fn poller_cores(
        &self,
        mask: Option<&str>,
        node: Option<u32>,
    ) -> Result<Vec<usize>, PlacementError> {
        let Some(id) = node else {
            return Ok(parse_core_mask(mask.unwrap_or("0x1"))?);
        };
        let n = self.memory_node(id)?;
        let Some(mask) = mask else {
            return match n.cpus.first() {
                Some(&cpu) => Ok(vec![cpu]),
                None => Err(PlacementError::NoCpus {
                    node: id,
                    nodes: self.describe(),
                }),
            };
        };
        let cores = parse_core_mask(mask)?;
        match cores.iter().find(|c| !n.cpus.contains(c)) {
            Some(&core) => Err(PlacementError::CoreOffNode {
                core,
                node: id,
                cpus: cpu_ranges(&n.cpus),
            }),
            None => Ok(cores),
        }
    }

    /// The node a namespace's memory is bound to: the one named, else, on a machine with
    /// more than one node, the node every poller is on (memory follows the pollers), else
    /// none (the kernel's default policy).
    pub fn namespace_node(&self, named: Option<u32>, pollers: &[usize]) -> Option<u32> {
        if named.is_some() || self.nodes.len() < 2 {
            return named;
        }
        let first = self.node_of_cpu(*pollers.first()?)?;
        pollers
            .iter()
            .all(|&c| self.node_of_cpu(c) == Some(first))
            .then_some(first)
    }

    /// `node 0 (CPUs 0-3), node 1 (CPUs 4-7)`: for errors and the start-up log.
    pub fn describe(&self) -> String {
        self.nodes
            .iter()
            .map(|n| {
                let memory = if n.has_memory { "" } else { ", no memory" };
                format!("node {} (CPUs {}{memory})", n.id, cpu_ranges(&n.cpus))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `0-3,8`: ascending CPUs as ranges; `none` for an empty list.
pub fn cpu_ranges(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs node directory: `(node, cpulist)` pairs and the `has_memory` list.
    fn fake(nodes: &[(u32, &str)], has_memory: &str) -> (tempfile::TempDir, NumaTopology) {
        let dir = tempfile::tempdir().unwrap();
        for (id, cpus) in nodes {
            let d = dir.path().join(format!("node{id}"));
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("cpulist"), format!("{cpus}\n")).unwrap();
        }
        std::fs::write(dir.path().join("has_memory"), format!("{has_memory}\n")).unwrap();
        let topo = NumaTopology::read_from(dir.path());
        (dir, topo)
    }

    #[test]
    fn two_nodes_parse_from_sysfs() {
        let (_d, t) = fake(&[(1, "1,3"), (0, "0,2"), (2, "")], "0-1");
        let ids: Vec<u32> = t.nodes().iter().map(|n| n.id).collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(t.node(1).unwrap().cpus, [1, 3]);
        assert_eq!((t.node_of_cpu(2), t.node_of_cpu(3)), (Some(0), Some(1)));
        assert_eq!(t.nodes_of(&[3, 0, 1, 2]), "0,1");
        assert_eq!(t.nodes_of(&[9]), "?");
        assert!(!t.node(2).unwrap().has_memory);
        assert_eq!(
            t.describe(),
            "node 0 (CPUs 0,2), node 1 (CPUs 1,3), node 2 (CPUs none, no memory)"
        );
    }

    #[test]
    fn pollers_go_on_the_named_node() {
        let (_d, t) = fake(&[(0, "0"), (1, "1")], "0-1");
        assert_eq!(t.poller_cores(None, None), Ok(vec![0]));
        assert_eq!(t.poller_cores(None, Some(1)), Ok(vec![1]));
        assert_eq!(t.poller_cores(Some("0x2"), Some(1)), Ok(vec![1]));
        let e = t.poller_cores(Some("0x3"), Some(1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "core 0 of the core mask is not on NUMA node 1 (its CPUs: 1); \
             leave out -m or name CPUs of that node"
        );
        let e = t.poller_cores(None, Some(4)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "NUMA node 4 does not exist or has no memory; \
             this machine has node 0 (CPUs 0), node 1 (CPUs 1)"
        );
    }

    #[test]
    fn a_node_without_memory_or_cpus_is_refused_for_what_it_lacks() {
        let (_d, t) = fake(&[(0, "0-1"), (1, "")], "0-1");
        assert!(matches!(
            t.poller_cores(None, Some(1)),
            Err(PlacementError::NoCpus { node: 1, .. })
        ));
        let (_d, t) = fake(&[(0, "0"), (1, "1")], "0");
        assert!(matches!(
            t.memory_node(1),
            Err(PlacementError::NoSuchNode { node: 1, .. })
        ));
    }

    #[test]
    fn namespace_memory_follows_the_pollers_on_a_many_node_machine() {
        let (_d, t) = fake(&[(0, "0,2"), (1, "1,3")], "0-1");
        assert_eq!(t.namespace_node(None, &[1, 3]), Some(1));
        assert_eq!(
            t.namespace_node(None, &[0, 1]),
            None,
            "pollers on both nodes"
        );
        assert_eq!(
            t.namespace_node(Some(0), &[1]),
            Some(0),
            "the named node wins"
        );
        let (_d, one) = fake(&[(0, "0-1")], "0");
        assert_eq!(
            one.namespace_node(None, &[1]),
            None,
            "one node: kernel default"
        );
        assert_eq!(one.namespace_node(Some(0), &[1]), Some(0));
    }

    #[test]
    fn no_sysfs_nodes_means_one_node_with_every_cpu() {
        let dir = tempfile::tempdir().unwrap();
        let t = NumaTopology::read_from(dir.path());
        assert_eq!(t.nodes().len(), 1);
        assert_eq!(t.node_of_cpu(0), Some(0));
    }

    #[test]
    fn this_machine_has_node_0() {
        let t = NumaTopology::read();
        assert!(t.memory_node(0).is_ok(), "{}", t.describe());
        assert!(t.memory_node(999).is_err());
    }

    #[test]
    fn cpu_lists_print_as_ranges() {
        assert_eq!(cpu_ranges(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(cpu_ranges(&[]), "none");
    }
}
