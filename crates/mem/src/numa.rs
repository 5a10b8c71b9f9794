// SPDX-License-Identifier: Apache-2.0
//! NUMA placement of a mapping: binding its pages to one node (`mbind`, which neither
//! rustix nor nix wraps) and reading back the policy and the pages per node the kernel
//! reports in `/proc/self/numa_maps`.

use std::io::BufRead;

use crate::MemError;
use crate::mmap::MmapRegion;

/// `MPOL_BIND` (linux/mempolicy.h): allocate only on the nodes of the mask.
const MPOL_BIND: libc::c_ulong = 2;
/// `MPOL_MF_MOVE`: move pages already faulted in elsewhere onto the node.
const MPOL_MF_MOVE: libc::c_ulong = 1 << 1;
/// Nodes a mask can name: the kernel's largest `CONFIG_NODES_SHIFT` is 10.
pub const MAX_NUMA_NODES: u32 = 1024;
const MASK_WORDS: usize = (MAX_NUMA_NODES / u64::BITS) as usize;

/// What `/proc/self/numa_maps` says about a mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaMaps {
    /// The memory policy as the kernel prints it: `default`, `bind:0`, `interleave:0-1`.
    pub policy: String,
    /// Pages resident on each node (`N0=512`), ascending by node.
    pub pages_per_node: Vec<(u32, u64)>,
}

impl MmapRegion {
    /// Bind the mapping's pages to NUMA node `node` (`MPOL_BIND`; pages already faulted in
    /// elsewhere are moved). Called before the pages are faulted in, every page comes from
    /// that node; a node without memory (or not allowed to this process) is EINVAL.
    pub fn bind_to_node(&self, node: u32) -> Result<(), MemError> {
        let os = |source| MemError::Os {
            op: "mbind",
            source,
        };
        if node >= MAX_NUMA_NODES {
            return Err(os(std::io::Error::from_raw_os_error(libc::EINVAL)));
        }
        let mut mask = [0u64; MASK_WORDS];
        mask[(node / u64::BITS) as usize] = 1 << (node % u64::BITS);
        let (base, len) = self.mapping();
        // The kernel reads maxnode - 1 bits of the mask.
        let maxnode = libc::c_ulong::from(MAX_NUMA_NODES) + 1;
        // SAFETY: mbind only changes the memory policy of `[base, base + len)`, which is
        // this live mapping (`mapping()` is the window this handle owns, page aligned) and
        // holds no Rust reference; the kernel reads `MASK_WORDS` u64 words of `mask`, a live
        // stack array of exactly that size (maxnode - 1 = MAX_NUMA_NODES bits), and writes
        // nothing back into our memory.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                base.as_ptr(),
                len,
                MPOL_BIND,
                mask.as_ptr(),
                maxnode,
                MPOL_MF_MOVE,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(os(std::io::Error::last_os_error()))
        }
    }

    /// The mapping's line of `/proc/self/numa_maps` (a control-path call: one pass over
    /// the process's mappings); `None` when the kernel has no NUMA support or the line is
    /// not there.
    pub fn numa_maps(&self) -> Result<Option<NumaMaps>, MemError> {
        let file = match std::fs::File::open("/proc/self/numa_maps") {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(MemError::Os {
                    op: "open /proc/self/numa_maps",
                    source,
                });
            }
        };
        let start = self.mapping().0.as_ptr().addr();
        Ok(parse_numa_maps(std::io::BufReader::new(file), start))
    }
}

/// The line of a `numa_maps` text whose mapping starts at `start`.
fn parse_numa_maps(text: impl BufRead, start: usize) -> Option<NumaMaps> {
    let want = format!("{start:x}");
    let line = text
        .lines()
        .map_while(Result::ok)
        .find(|l| l.split_whitespace().next() == Some(want.as_str()))?;
    let mut fields = line.split_whitespace().skip(1);
    let policy = fields.next()?.to_owned();
    let mut pages_per_node: Vec<(u32, u64)> = fields
        .filter_map(|f| {
            let (node, pages) = f.strip_prefix('N')?.split_once('=')?;
            Some((node.parse().ok()?, pages.parse().ok()?))
        })
        .collect();
    pages_per_node.sort_unstable();
    Some(NumaMaps {
        policy,
        pages_per_node,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numa_maps_lines_parse() {
        let text = "7f0000000000 default anon=3 dirty=3 N0=3 kernelpagesize_kB=4\n\
                    7f0000200000 bind:1 anon=1024 dirty=1024 N1=1000 N0=24 kernelpagesize_kB=4\n";
        let m = parse_numa_maps(text.as_bytes(), 0x7f00_0020_0000).unwrap();
        assert_eq!(m.policy, "bind:1");
        assert_eq!(m.pages_per_node, vec![(0, 24), (1, 1000)]);
        assert_eq!(
            parse_numa_maps(text.as_bytes(), 0x7f00_0000_0000)
                .unwrap()
                .policy,
            "default"
        );
        assert!(parse_numa_maps(text.as_bytes(), 0x1000).is_none());
    }

    #[test]
    fn a_bound_mapping_reports_bind_and_its_pages_on_the_node() {
        let region = MmapRegion::anonymous(4 << 20).unwrap();
        region.bind_to_node(0).unwrap();
        region.fill(0, 4 << 20, 1).unwrap();
        let Some(m) = region.numa_maps().unwrap() else {
            eprintln!("no /proc/self/numa_maps on this kernel: nothing to check");
            return;
        };
        assert_eq!(m.policy, "bind:0");
        let on_0 = m.pages_per_node.iter().find(|(n, _)| *n == 0).unwrap().1;
        assert!(on_0 > 0, "{m:?}");
    }

    #[test]
    fn a_node_that_is_not_there_is_refused() {
        let region = MmapRegion::anonymous(1 << 20).unwrap();
        let e = region.bind_to_node(MAX_NUMA_NODES - 1).unwrap_err();
        assert!(matches!(e, MemError::Os { op: "mbind", .. }), "{e:?}");
        let e = region.bind_to_node(MAX_NUMA_NODES).unwrap_err();
        assert!(matches!(e, MemError::Os { op: "mbind", .. }), "{e:?}");
        if let Some(m) = region.numa_maps().unwrap() {
            assert_eq!(m.policy, "default", "a refused bind changed the policy");
        }
    }
}
