// SPDX-License-Identifier: Apache-2.0
//! The memory of a malloc bdev: how it is backed, how it is made to read zeroes again, and
//! what backs it now.

use std::sync::Arc;

use nvmemu_mem::{ByteSize, MemError, MmapRegion, PageKind, Progress, Residency};

use crate::{BdevError, BdevOp};

/// Write Zeroes of at least this many bytes on a [`MallocBacking::Lazy`] bdev discards pages
/// (one madvise) instead of filling.
pub const WRITE_ZEROES_DISCARD_THRESHOLD: u64 = 64 << 10;

/// Where a malloc bdev's memory comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MallocBacking {
    /// Every page faulted in at creation, in transparent huge pages where the kernel gives
    /// them: reads of unwritten blocks cost what reads of written ones do, and a bdev the
    /// machine cannot hold is refused at creation instead of being killed later.
    #[default]
    Populated,
    /// Like `Populated`, from the hugetlbfs pool (`vm.nr_hugepages`); refused when the pool
    /// has too few free pages.
    HugePages,
    /// Sparse (the old behaviour): a page is committed when first written, unwritten blocks
    /// read from the kernel's shared zero page (faster than any written block), and
    /// Deallocate and large Write Zeroes give pages back. Nothing is reserved: the process
    /// can be killed for memory later, when the namespace fills.
    Lazy,
}

/// What backs a malloc bdev right now (`bdev_get_bdevs`, the serve start-up line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryReport {
    /// How it was created.
    pub backing: MallocBacking,
    /// Page size of the mapping (the base page size, or the huge page size of the pool).
    pub page_size: u64,
    /// Bytes resident and in transparent huge pages; `None` when `/proc/self/smaps` could
    /// not be read.
    pub residency: Option<Residency>,
    /// The NUMA node its pages are bound to; `None`: the kernel's default policy.
    pub numa_node: Option<u32>,
}

/// A hold on a malloc bdev's memory, for a transport that sends a Read's data straight from
/// it instead of a copy: while a hold lives, so does the mapping, even after the bdev is
/// deleted. Each [`BdevChannel`](crate::BdevChannel) has its own (see
/// [`BdevChannel::memory`](crate::BdevChannel::memory)), so the reference count of the one
/// a controller clones is touched by that controller's thread alone.
#[derive(Debug)]
pub struct MemoryHold(Arc<Storage>);

impl MemoryHold {
    pub(crate) fn new(storage: Arc<Storage>) -> MemoryHold {
        MemoryHold(storage)
    }

    /// The bdev's bytes: byte `offset` of the bdev is byte `offset` of the region.
    pub fn region(&self) -> &MmapRegion {
        &self.0.mem
    }
}

/// A malloc bdev's memory and how it was made.
#[derive(Debug)]
pub(crate) struct Storage {
    pub(crate) mem: MmapRegion,
    backing: MallocBacking,
    numa_node: Option<u32>,
}

impl Storage {
    /// `size` bytes backed as asked, bound to NUMA node `numa_node` when given (before any
    /// page is faulted in); `progress` hears about a long population.
    pub(crate) fn new(
        size: u64,
        backing: MallocBacking,
        numa_node: Option<u32>,
        progress: &dyn Fn(Progress),
    ) -> Result<Storage, BdevError> {
        let mem = match backing {
            MallocBacking::Lazy => MmapRegion::anonymous(size).and_then(|m| {
                numa_node.map_or(Ok(()), |n| m.bind_to_node(n))?;
                Ok(m)
            }),
            MallocBacking::Populated => {
                MmapRegion::anonymous_populated(size, PageKind::Base, numa_node, progress)
            }
            MallocBacking::HugePages => {
                MmapRegion::anonymous_populated(size, PageKind::HugeTlb, numa_node, progress)
            }
        }
        .map_err(|source| {
            let size = ByteSize(size);
            match source {
                MemError::NotEnoughMemory { .. }
                | MemError::NoHugePages { .. }
                | MemError::Populate { .. } => BdevError::NoMemory { size, source },
                _ => BdevError::Map { size, source },
            }
        })?;
        Ok(Storage {
            mem,
            backing,
            numa_node,
        })
    }

    /// Make `[offset, offset + len)` read as zeroes (range checked by the caller). A lazy
    /// bdev discards whole pages when `discard` (Deallocate, large Write Zeroes); a backed
    /// one always fills, which keeps its pages: filling is also the cheaper of the two, as
    /// a discarded range must be faulted in again (1 GiB: about 25 ms to fill, 75 ms to
    /// discard and repopulate; 2 MiB: 50 us against 110 us, on the development VM).
    pub(crate) fn zero(
        &self,
        op: BdevOp,
        offset: u64,
        len: u64,
        discard: bool,
    ) -> Result<(), BdevError> {
        if discard && self.backing == MallocBacking::Lazy {
            self.mem.discard(offset, len)
        } else {
            self.mem.fill(offset, len, 0)
        }
        .map_err(|source| BdevError::Io {
            op,
            offset,
            len,
            source,
        })
    }

    /// What backs it now.
    pub(crate) fn report(&self) -> MemoryReport {
        MemoryReport {
            backing: self.backing,
            page_size: self.mem.page_size(),
            residency: self.mem.residency().ok(),
            numa_node: self.numa_node,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resident(s: &Storage) -> u64 {
        s.report().residency.unwrap().resident_bytes
    }

    #[test]
    fn populated_storage_stays_resident_through_zeroing() {
        let size = 32 << 20;
        let s = Storage::new(size, MallocBacking::Populated, None, &|_| {}).unwrap();
        assert!(resident(&s) >= size);
        s.mem.fill(0, size, 0x5a).unwrap();
        s.zero(BdevOp::Deallocate, 4096, 16 << 20, true).unwrap();
        s.zero(BdevOp::WriteZeroes, 20 << 20, 1 << 20, true)
            .unwrap();
        assert!(s.mem.is_zero(4096, 16 << 20).unwrap());
        assert!(s.mem.is_zero(20 << 20, 1 << 20).unwrap());
        assert_eq!(s.mem.read_obj::<u8>(4095).unwrap(), 0x5a);
        assert!(resident(&s) >= size, "zeroing gave pages back");
        let r = s.report();
        assert_eq!((r.backing, r.page_size), (MallocBacking::Populated, 4096));
    }

    #[test]
    fn lazy_storage_is_sparse_and_discards() {
        let size = 32 << 20;
        let s = Storage::new(size, MallocBacking::Lazy, None, &|_| {}).unwrap();
        assert!(resident(&s) < size / 8);
        s.mem.fill(0, size, 1).unwrap();
        assert!(resident(&s) >= size);
        s.zero(BdevOp::Deallocate, 0, size, true).unwrap();
        assert!(s.mem.is_zero(0, size).unwrap());
        assert!(resident(&s) < size / 8, "discard kept the pages");
    }

    #[test]
    fn storage_bound_to_a_node_says_so_and_keeps_its_pages_there() {
        for backing in [MallocBacking::Populated, MallocBacking::Lazy] {
            let s = Storage::new(4 << 20, backing, Some(0), &|_| {}).unwrap();
            s.mem.fill(0, 4 << 20, 7).unwrap();
            assert_eq!(s.report().numa_node, Some(0));
            if let Some(m) = s.mem.numa_maps().unwrap() {
                assert_eq!(m.policy, "bind:0", "{backing:?}");
            }
        }
        let s = Storage::new(4 << 20, MallocBacking::Populated, None, &|_| {}).unwrap();
        assert_eq!(s.report().numa_node, None);
    }

    #[test]
    fn unbackable_sizes_name_the_memory_not_the_geometry() {
        // More than any machine has: refused by the MemAvailable check.
        let e = Storage::new(1 << 50, MallocBacking::Populated, None, &|_| {}).unwrap_err();
        assert!(matches!(e, BdevError::NoMemory { .. }), "{e:?}");
        assert!(e.to_string().contains("1024.0 TiB"), "{e}");
        // Beyond the address space even lazily: the mmap fails.
        let e = Storage::new(1 << 62, MallocBacking::Lazy, None, &|_| {}).unwrap_err();
        assert!(matches!(e, BdevError::Map { .. }), "{e:?}");
        assert!(e.to_string().starts_with("cannot map"), "{e}");
    }
}
