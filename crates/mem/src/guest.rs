// SPDX-License-Identifier: Apache-2.0
//! The client's DMA regions: IOVA -> mapping (vfio-user `VFIO_USER_DMA_MAP`).
//!
//! A `GuestMemory` is an immutable snapshot. The control thread builds a new one on each
//! DMA_MAP/DMA_UNMAP and hands it to the poller; the old snapshot (and with it the mmaps of
//! removed regions) is dropped only after the poller has let go of it.

use std::sync::Arc;

use crate::region_table::RegionTable;
use crate::{DmaError, MmapRegion};

/// An I/O virtual address as the client's DMA_MAP defined it (guest physical address for
/// QEMU, the process's own virtual address for SPDK's client).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Iova(pub u64);

/// Direction of a DMA access, checked against the region's protection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The device reads client memory (SQEs, write data, PRP lists).
    Read,
    /// The device writes client memory (CQEs, read data).
    Write,
}

/// How a DMA region is backed.
#[derive(Debug, Clone)]
pub enum DmaBacking {
    /// Mapped from the fd the client passed: usable zero-copy.
    Mapped(Arc<MmapRegion>),
    /// The client passed no fd (QEMU ROM/BIOS blocks, its own view of our BAR): recorded so
    /// the map succeeds, but any command that touches it fails with Data Transfer Error.
    NoFd,
}

/// One DMA region.
#[derive(Debug, Clone)]
pub struct DmaRegion {
    /// First IOVA.
    pub iova: Iova,
    /// Size in bytes (non-zero).
    pub size: u64,
    /// Whether the device may write it (DMA_MAP flag WRITE).
    pub writable: bool,
    /// Backing.
    pub backing: DmaBacking,
}

/// A snapshot of the client's DMA regions, sorted by IOVA, none overlapping. Snapshots
/// share what they have in common, so a new one costs about the square root of the
/// table's size, not its size (see `region_table`).
#[derive(Debug, Clone, Default)]
pub struct GuestMemory {
    regions: RegionTable,
}

impl GuestMemory {
    /// An empty table.
    pub fn new() -> GuestMemory {
        GuestMemory::default()
    }

    /// A copy of this table with `region` added; fails on overlap, zero size or wrap.
    ///
    /// A region may end exactly at the top of the address space (`iova + size == 2^64`).
    /// A `Mapped` region whose mapping is shorter than `size` is `BadRange`.
    pub fn with_region(&self, region: DmaRegion) -> Result<GuestMemory, DmaError> {
        let (iova, size) = (region.iova.0, region.size);
        let bad = DmaError::BadRange { iova, size };
        let last = last_byte(iova, size).ok_or(bad.clone())?;
        let short = match &region.backing {
            DmaBacking::Mapped(m) => m.len() < size,
            DmaBacking::NoFd => false,
        };
        if short {
            return Err(bad);
        }
        let overlaps_prev = self
            .regions
            .at_or_before(iova)
            .is_some_and(|prev| region_last(prev) >= iova);
        let overlaps_next = self
            .regions
            .at_or_after(iova)
            .is_some_and(|next| next.iova.0 <= last);
        if overlaps_prev || overlaps_next {
            return Err(DmaError::Overlap { iova, size });
        }
        Ok(GuestMemory {
            regions: self.regions.with(region),
        })
    }

    /// A copy of this table without every region inside `[iova, iova + size)`, as the
    /// kernel's VFIO type1 unmaps: a range that holds no region removes nothing (QEMU with a
    /// virtual IOMMU unmaps whole address-space ranges it never mapped), one that cuts through
    /// a region changes nothing and fails. Also returns how many regions went.
    pub fn without_range(&self, iova: Iova, size: u64) -> Result<(GuestMemory, usize), DmaError> {
        let bad = DmaError::BadRange { iova: iova.0, size };
        let last = last_byte(iova.0, size).ok_or(bad)?;
        let splits = |r: &DmaRegion| DmaError::SplitsRegion {
            iova: iova.0,
            size,
            region: r.iova.0,
        };
        if let Some(prev) = self.regions.at_or_before(iova.0)
            && prev.iova.0 < iova.0
            && region_last(prev) >= iova.0
        {
            return Err(splits(prev));
        }
        let mut regions = self.regions.clone();
        let mut removed = 0;
        let mut next = self.regions.at_or_after(iova.0);
        while let Some(r) = next.filter(|r| r.iova.0 <= last) {
            let r_last = region_last(r);
            if r_last > last {
                return Err(splits(r));
            }
            regions = regions.without(r.iova.0).ok_or_else(|| splits(r))?;
            removed += 1;
            next = match r_last.checked_add(1) {
                Some(after) => self.regions.at_or_after(after),
                None => None,
            };
        }
        Ok((GuestMemory { regions }, removed))
    }

    /// Number of regions.
    pub fn len(&self) -> usize {
        self.regions.len()
    }

    /// Whether the table has no region.
    pub fn is_empty(&self) -> bool {
        self.regions.len() == 0
    }

    /// The regions, sorted by IOVA.
    pub fn regions(&self) -> impl Iterator<Item = &DmaRegion> {
        self.regions.iter()
    }

    /// The region holding `iova`, if any. O(log regions), no allocation.
    #[inline]
    pub fn region_at(&self, iova: Iova) -> Option<&DmaRegion> {
        self.regions
            .at_or_before(iova.0)
            .filter(|r| iova.0 - r.iova.0 < r.size)
    }

    /// Resolve `[iova, iova + len)` to a mapping and the offset inside it. The range must lie
    /// in one fd-backed region that allows `access`. Binary search: O(log regions).
    ///
    /// `len == 0` is allowed but `iova` must still fall inside a region. Errors, in order of
    /// checking: `NotMapped` (no single region covers the range, even if two adjacent ones
    /// do together), `NoFd`, `Lost` (a fault in the mapping was recovered), `ReadOnly`
    /// (`Access::Write` to a region without WRITE); `Inconsistent` only if the lookup has a
    /// bug (see [`DmaError::Inconsistent`]).
    #[inline]
    pub fn translate(
        &self,
        iova: Iova,
        len: u64,
        access: Access,
    ) -> Result<(&Arc<MmapRegion>, u64), DmaError> {
        match self.lookup(iova, len, access) {
            Some(found) => Ok(found),
            None => Err(self.refusal(iova, len, access)),
        }
    }

    /// [`translate`](Self::translate) without the reason for a refusal, for the I/O path: its
    /// answer comes back in two registers, `translate`'s through memory, where the caller's
    /// 16-byte reload of two 8-byte stores waits for every older store to reach the cache.
    #[inline]
    pub fn lookup(&self, iova: Iova, len: u64, access: Access) -> Option<(&Arc<MmapRegion>, u64)> {
        let region = self.regions.at_or_before(iova.0)?;
        // at_or_before guarantees region.iova <= iova, so this cannot underflow.
        let offset = iova.0 - region.iova.0;
        if offset >= region.size || len > region.size - offset {
            return None;
        }
        let DmaBacking::Mapped(mmap) = &region.backing else {
            return None;
        };
        if mmap.is_lost() || (access == Access::Write && !region.writable) {
            return None;
        }
        Some((mmap, offset))
    }

    /// Why [`lookup`](Self::lookup) refused `[iova, iova + len)` (`translate`'s order). It
    /// reads the same snapshot, and a mapping's lost flag only ever sets, so it finds the
    /// reason the lookup found or, if the mapping was lost in between, `Lost`; a range it
    /// finds usable is `Inconsistent`.
    #[cold]
    fn refusal(&self, iova: Iova, len: u64, access: Access) -> DmaError {
        let iova = iova.0;
        let within = |r: &&DmaRegion| len <= r.size - (iova - r.iova.0);
        match self.region_at(Iova(iova)).filter(within) {
            None => DmaError::NotMapped { iova, len },
            Some(r) => match &r.backing {
                DmaBacking::NoFd => DmaError::NoFd { iova },
                DmaBacking::Mapped(m) if m.is_lost() => DmaError::Lost { iova },
                _ if access == Access::Write && !r.writable => DmaError::ReadOnly { iova },
                DmaBacking::Mapped(_) => DmaError::Inconsistent { iova, len },
            },
        }
    }

    /// Copy a `T` out of client memory at `iova`.
    #[inline]
    pub fn read_obj<T: zerocopy::FromBytes>(&self, iova: Iova) -> Result<T, DmaError> {
        let (m, off) = self.translate(iova, size_of::<T>() as u64, Access::Read)?;
        Ok(m.read_obj(off)?)
    }

    /// Copy `src` into client memory at `iova`.
    #[inline]
    pub fn write_bytes(&self, iova: Iova, src: &[u8]) -> Result<(), DmaError> {
        let (m, off) = self.translate(iova, src.len() as u64, Access::Write)?;
        Ok(m.copy_from(off, src)?)
    }

    /// Copy client memory at `iova` into `dst`.
    #[inline]
    pub fn read_bytes(&self, iova: Iova, dst: &mut [u8]) -> Result<(), DmaError> {
        let (m, off) = self.translate(iova, dst.len() as u64, Access::Read)?;
        Ok(m.copy_to(off, dst)?)
    }
}

/// The last byte of `[iova, iova + size)`, or `None` when `size` is 0 or the range wraps.
fn last_byte(iova: u64, size: u64) -> Option<u64> {
    iova.checked_add(size.checked_sub(1)?)
}

/// The last byte of a region already in the table (validated on insert).
fn region_last(r: &DmaRegion) -> u64 {
    r.iova.0.saturating_add(r.size.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemError;

    fn mapped(iova: u64, size: u64, writable: bool) -> DmaRegion {
        DmaRegion {
            iova: Iova(iova),
            size,
            writable,
            backing: DmaBacking::Mapped(Arc::new(MmapRegion::anonymous(size).unwrap())),
        }
    }

    fn nofd(iova: u64, size: u64) -> DmaRegion {
        DmaRegion {
            iova: Iova(iova),
            size,
            writable: true,
            backing: DmaBacking::NoFd,
        }
    }

    fn iovas(g: &GuestMemory) -> Vec<u64> {
        g.regions().map(|r| r.iova.0).collect()
    }

    #[test]
    fn regions_are_kept_sorted_and_adjacent_ones_are_allowed() {
        let g = GuestMemory::new()
            .with_region(mapped(0x3000, 0x1000, true))
            .unwrap()
            .with_region(mapped(0x1000, 0x1000, true))
            .unwrap()
            .with_region(mapped(0x2000, 0x1000, true))
            .unwrap()
            .with_region(nofd(0x4000, 0x1000))
            .unwrap();
        assert_eq!(iovas(&g), [0x1000, 0x2000, 0x3000, 0x4000]);
    }

    #[test]
    fn overlaps_are_rejected_and_leave_the_table_unchanged() {
        let g = GuestMemory::new()
            .with_region(mapped(0x2000, 0x2000, true))
            .unwrap();
        for (iova, size) in [
            (0x2000, 0x1000),  // same start
            (0x1000, 0x1001),  // last byte of new = first of old
            (0x3fff, 0x10),    // first byte of new = last of old
            (0x1000, 0x10000), // covers it
            (0x2800, 0x100),   // inside it
        ] {
            assert_eq!(
                g.with_region(nofd(iova, size)).unwrap_err(),
                DmaError::Overlap { iova, size },
                "{iova:#x}+{size:#x}"
            );
        }
        assert_eq!(iovas(&g), [0x2000]);
    }

    #[test]
    fn empty_wrapping_and_undersized_regions_are_bad_ranges() {
        let g = GuestMemory::new();
        assert_eq!(
            g.with_region(nofd(0x1000, 0)).unwrap_err(),
            DmaError::BadRange {
                iova: 0x1000,
                size: 0
            }
        );
        assert_eq!(
            g.with_region(nofd(u64::MAX, 2)).unwrap_err(),
            DmaError::BadRange {
                iova: u64::MAX,
                size: 2
            }
        );
        // Ending exactly at the top of the address space is fine.
        let top = g.with_region(nofd(u64::MAX - 0xfff, 0x1000)).unwrap();
        assert_eq!(
            top.translate(Iova(u64::MAX), 1, Access::Read).unwrap_err(),
            DmaError::NoFd { iova: u64::MAX }
        );
        let mut small = mapped(0x1000, 0x1000, true);
        small.size = 0x2000;
        assert_eq!(
            g.with_region(small).unwrap_err(),
            DmaError::BadRange {
                iova: 0x1000,
                size: 0x2000
            }
        );
    }

    #[test]
    fn unmap_takes_whole_regions_in_the_range() {
        let g = GuestMemory::new()
            .with_region(mapped(0x1000, 0x1000, true))
            .unwrap()
            .with_region(mapped(0x2000, 0x1000, true))
            .unwrap()
            .with_region(mapped(0x5000, 0x1000, true))
            .unwrap();
        let splits = |iova, size, region| DmaError::SplitsRegion { iova, size, region };
        // Cutting through a region, at its start, its end or inside: nothing changes.
        assert_eq!(
            g.without_range(Iova(0x1800), 0x800).unwrap_err(),
            splits(0x1800, 0x800, 0x1000)
        );
        assert_eq!(
            g.without_range(Iova(0x1000), 0x1800).unwrap_err(),
            splits(0x1000, 0x1800, 0x2000)
        );
        assert_eq!(
            g.without_range(Iova(0x0), 0x5800).unwrap_err(),
            splits(0x0, 0x5800, 0x5000)
        );
        // Exactly one region.
        let (g2, n) = g.without_range(Iova(0x1000), 0x1000).unwrap();
        assert_eq!((iovas(&g2), n), (vec![0x2000, 0x5000], 1));
        assert_eq!(
            iovas(&g),
            [0x1000, 0x2000, 0x5000],
            "the old snapshot is untouched"
        );
        // A range holding two regions and a gap takes both; one holding none takes nothing.
        let (g3, n) = g.without_range(Iova(0x0), 0x4000).unwrap();
        assert_eq!((iovas(&g3), n), (vec![0x5000], 2));
        let (g4, n) = g2.without_range(Iova(0x1000), 0x1000).unwrap();
        assert_eq!((iovas(&g4), n), (vec![0x2000, 0x5000], 0));
        // Zero size and wrap-around are bad ranges; the whole address space is not.
        assert!(matches!(
            g.without_range(Iova(0x1000), 0),
            Err(DmaError::BadRange { .. })
        ));
        assert!(matches!(
            g.without_range(Iova(u64::MAX), 2),
            Err(DmaError::BadRange { .. })
        ));
        let (g5, n) = g.without_range(Iova(0), u64::MAX).unwrap();
        assert_eq!((g5.len(), n), (0, 3));
    }

    #[test]
    fn unmap_reaches_a_region_at_the_top_of_the_address_space() {
        let top = 1u64 << 63;
        let g = GuestMemory::new().with_region(nofd(top, top)).unwrap();
        let (g2, n) = g.without_range(Iova(top), top).unwrap();
        assert_eq!((g2.len(), n), (0, 1));
    }

    #[test]
    fn translate_edges() {
        let g = GuestMemory::new()
            .with_region(mapped(0x1000, 0x1000, true))
            .unwrap()
            .with_region(mapped(0x2000, 0x1000, true))
            .unwrap();
        let (m, off) = g.translate(Iova(0x1fff), 1, Access::Read).unwrap();
        assert_eq!((m.len(), off), (0x1000, 0xfff));
        let (_, off) = g.translate(Iova(0x1000), 0x1000, Access::Write).unwrap();
        assert_eq!(off, 0);
        // One byte too long, even though the next region is adjacent.
        assert_eq!(
            g.translate(Iova(0x1fff), 2, Access::Read).unwrap_err(),
            DmaError::NotMapped {
                iova: 0x1fff,
                len: 2
            }
        );
        assert_eq!(
            g.translate(Iova(0x1000), 0x2000, Access::Read).unwrap_err(),
            DmaError::NotMapped {
                iova: 0x1000,
                len: 0x2000
            }
        );
        // Last byte of the second region, and one past it.
        let (_, off) = g.translate(Iova(0x2fff), 1, Access::Read).unwrap();
        assert_eq!(off, 0xfff);
        assert!(matches!(
            g.translate(Iova(0x3000), 1, Access::Read),
            Err(DmaError::NotMapped { .. })
        ));
        // Before the first region, and a huge length that would overflow.
        assert!(matches!(
            g.translate(Iova(0xfff), 1, Access::Read),
            Err(DmaError::NotMapped { .. })
        ));
        assert!(matches!(
            g.translate(Iova(0x1800), u64::MAX, Access::Read),
            Err(DmaError::NotMapped { .. })
        ));
        // Zero length still needs a covering region.
        assert_eq!(g.translate(Iova(0x2fff), 0, Access::Read).unwrap().1, 0xfff);
        assert!(g.translate(Iova(0x3000), 0, Access::Read).is_err());
        assert!(
            GuestMemory::new()
                .translate(Iova(0), 0, Access::Read)
                .is_err()
        );
    }

    #[test]
    fn a_region_whose_memory_was_taken_away_is_lost() {
        use std::os::fd::AsFd;
        let fd = rustix::fs::memfd_create("lost", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, 8192).unwrap();
        let m = MmapRegion::map_shared(fd.as_fd(), 0, 8192, crate::Protection::ReadWrite);
        let g = GuestMemory::new()
            .with_region(DmaRegion {
                iova: Iova(0x1000),
                size: 8192,
                writable: true,
                backing: DmaBacking::Mapped(Arc::new(m.unwrap())),
            })
            .unwrap();
        g.write_bytes(Iova(0x1000), &[1]).unwrap();
        rustix::fs::ftruncate(&fd, 0).unwrap();
        // The access that finds the memory gone completes (recovered); later ones are refused.
        g.write_bytes(Iova(0x2000), &[2]).unwrap();
        for iova in [0x1000, 0x2000, 0x2FFF] {
            let err = g.translate(Iova(iova), 1, Access::Read).unwrap_err();
            assert_eq!(err, DmaError::Lost { iova });
        }
    }

    /// A region without an fd at 0x1000 and a read-only mapped one at 0x2000, 4 KiB each.
    fn nofd_then_read_only() -> GuestMemory {
        GuestMemory::new()
            .with_region(nofd(0x1000, 0x1000))
            .unwrap()
            .with_region(mapped(0x2000, 0x1000, false))
            .unwrap()
    }

    #[test]
    fn nofd_and_read_only_regions() {
        let g = nofd_then_read_only();
        assert_eq!(
            g.translate(Iova(0x1800), 4, Access::Read).unwrap_err(),
            DmaError::NoFd { iova: 0x1800 }
        );
        assert_eq!(
            g.translate(Iova(0x2004), 4, Access::Write).unwrap_err(),
            DmaError::ReadOnly { iova: 0x2004 }
        );
        assert!(g.lookup(Iova(0x1800), 4, Access::Read).is_none());
        assert!(g.lookup(Iova(0x2004), 4, Access::Write).is_none());
        assert!(g.lookup(Iova(0x2004), 4, Access::Read).is_some());
        assert_eq!(
            g.write_bytes(Iova(0x2004), &[1]).unwrap_err(),
            DmaError::ReadOnly { iova: 0x2004 }
        );
        assert_eq!(g.read_obj::<u32>(Iova(0x2004)).unwrap(), 0);
    }

    /// The reason for a refusal names what the lookup found; a range the snapshot maps for
    /// the access (which the lookup cannot have refused) is named a bug, not `NotMapped`.
    #[test]
    fn a_refusal_names_its_reason_and_a_usable_range_is_inconsistent() {
        let g = nofd_then_read_only();
        let cases = [
            (
                0x800,
                4,
                Access::Read,
                DmaError::NotMapped {
                    iova: 0x800,
                    len: 4,
                },
            ),
            (
                0x1ffe,
                4,
                Access::Read,
                DmaError::NotMapped {
                    iova: 0x1ffe,
                    len: 4,
                },
            ),
            (0x1800, 4, Access::Read, DmaError::NoFd { iova: 0x1800 }),
            (
                0x2004,
                4,
                Access::Write,
                DmaError::ReadOnly { iova: 0x2004 },
            ),
            (
                0x2004,
                4,
                Access::Read,
                DmaError::Inconsistent {
                    iova: 0x2004,
                    len: 4,
                },
            ),
        ];
        for (iova, len, access, want) in cases {
            assert_eq!(
                g.refusal(Iova(iova), len, access),
                want,
                "{iova:#x} {access:?}"
            );
            let refused = g.lookup(Iova(iova), len, access).is_none();
            assert_eq!(refused, !matches!(want, DmaError::Inconsistent { .. }));
        }
        let usable = g.refusal(Iova(0x2004), 4, Access::Read).to_string();
        assert!(usable.contains("a bug"), "{usable}");
    }

    #[test]
    fn bytes_and_objects_round_trip() {
        let g = GuestMemory::new()
            .with_region(mapped(0x10_0000, 0x2000, true))
            .unwrap();
        g.write_bytes(Iova(0x10_0ffe), &[1, 2, 3, 4]).unwrap();
        let mut out = [0u8; 4];
        g.read_bytes(Iova(0x10_0ffe), &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        assert_eq!(g.read_obj::<u32>(Iova(0x10_0ffe)).unwrap(), 0x0403_0201);
        assert!(matches!(
            g.read_obj::<u64>(Iova(0x10_1ffc)),
            Err(DmaError::NotMapped { len: 8, .. })
        ));
        assert!(g.write_bytes(Iova(0x10_1fff), &[0, 0]).is_err());
    }

    #[test]
    fn mem_errors_convert_with_their_message() {
        let e = DmaError::from(MemError::Misaligned { offset: 3 });
        assert_eq!(
            e,
            DmaError::Mem {
                reason: "atomic access at offset 0x3 is not aligned".into()
            }
        );
    }
}
