// SPDX-License-Identifier: Apache-2.0
//! The driver's DMA memory: one memfd-backed pool, registered with the device once, carved
//! into page-aligned buffers by a first-fit free list.
//!
//! The pool is allocated at attach time. Queues, PRP list pages and the caller's I/O buffers
//! are all `DmaBuf`s cut from it; the I/O path only borrows them, it never allocates.
//! A buffer's pages return to the free list when the last `DmaBuf` sharing them is dropped.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};

use nvmemu_mem::{Iova, MemError, MmapRegion, Protection, create_memfd, page_size_of};

use crate::dma_addrs::DeviceAddrs;

/// The huge page size a physically addressed pool needs at least.
const HUGE_PAGE: u64 = 2 << 20;
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// Device address at which the DMA pool is registered (vfio-user, VFIO with an IOMMU).
pub const DMA_POOL_IOVA: u64 = 1 << 32;

/// Allocation granularity: the NVMe memory page (CC.MPS = 0).
pub const DMA_PAGE: u64 = nvmemu_spec::PAGE_SIZE;

/// Why a DMA allocation failed.
#[derive(Debug, thiserror::Error)]
pub enum DmaAllocError {
    /// No free extent is large enough.
    #[error(
        "DMA pool exhausted: {requested} bytes requested, largest free extent {largest_free} bytes"
    )]
    Exhausted {
        /// Bytes requested (rounded up to pages).
        requested: u64,
        /// Largest free extent.
        largest_free: u64,
    },
    /// A zero-byte allocation or pool.
    #[error("zero-sized DMA allocation")]
    ZeroSize,
    /// A slice outside its parent buffer.
    #[error("slice {offset:#x} + {len:#x} is outside a buffer of {size:#x} bytes")]
    BadSlice {
        /// Offset of the slice.
        offset: u64,
        /// Length of the slice.
        len: u64,
        /// Length of the parent.
        size: u64,
    },
    /// A physically addressed pool got normal pages: the device needs huge pages there.
    #[error(
        "no huge pages for {bytes} bytes of DMA memory: reserve some with \
         `echo 64 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages` (or `nvmemu bind`)"
    )]
    NoHugePages {
        /// Pool size asked for.
        bytes: u64,
    },
    /// A buffer larger than a huge page in a physically addressed pool.
    #[error(
        "{requested} bytes of DMA memory requested in one buffer, but with physical addresses \
         a buffer is at most one huge page ({limit} bytes)"
    )]
    NotContiguous {
        /// Bytes requested (rounded up to pages).
        requested: u64,
        /// The huge page size.
        limit: u64,
    },
    /// No physical address for a page of the pool.
    #[error(
        "no physical address for DMA pool offset {offset:#x}: /proc/self/pagemap shows page \
         frame numbers only to CAP_SYS_ADMIN (run as root)"
    )]
    NoAddress {
        /// Pool offset of the page.
        offset: u64,
    },
    /// Reading the physical addresses failed.
    #[error("cannot read /proc/self/pagemap")]
    Pagemap(#[source] std::io::Error),
    /// Creating or mapping the pool memory failed.
    #[error("creating the DMA pool failed")]
    Mem(#[from] MemError),
}

/// Free extents in pages, sorted by start, never adjacent (coalesced on free).
#[derive(Debug, Default)]
struct FreeList {
    extents: Vec<(u64, u64)>,
}

impl FreeList {
    fn new(pages: u64) -> FreeList {
        FreeList {
            extents: vec![(0, pages)],
        }
    }

    /// First fit: take `pages` from the first extent that holds them.
    fn alloc(&mut self, pages: u64) -> Option<u64> {
        let idx = self.extents.iter().position(|&(_, n)| n >= pages)?;
        let (start, n) = self.extents.get(idx).copied()?;
        if n == pages {
            self.extents.remove(idx);
        } else if let Some(e) = self.extents.get_mut(idx) {
            *e = (start + pages, n - pages);
        }
        Some(start)
    }

    /// First fit that stays inside one aligned group of `group` pages: the lowest place in a
    /// free extent where `pages` fit without crossing a multiple of `group`.
    fn alloc_within(&mut self, pages: u64, group: u64) -> Option<u64> {
        if pages == 0 || pages > group {
            return None;
        }
        let (idx, at) = self.extents.iter().enumerate().find_map(|(i, &(s, n))| {
            let mut p = s;
            if p / group != (p + pages - 1) / group {
                p = (p / group + 1) * group;
            }
            (p + pages <= s + n).then_some((i, p))
        })?;
        let (s, n) = self.extents.remove(idx);
        let tail_start = at + pages;
        if s + n > tail_start {
            self.extents.insert(idx, (tail_start, s + n - tail_start));
        }
        if at > s {
            self.extents.insert(idx, (s, at - s));
        }
        Some(at)
    }

    fn free(&mut self, start: u64, pages: u64) {
        let mut idx = self.extents.partition_point(|&(s, _)| s < start);
        self.extents.insert(idx, (start, pages));
        // Merge with the predecessor, then with the successor.
        if let Some(prev) = idx.checked_sub(1)
            && let (Some(&(ps, pn)), Some(&(s, n))) =
                (self.extents.get(prev), self.extents.get(idx))
            && ps + pn == s
        {
            self.extents[prev] = (ps, pn + n);
            self.extents.remove(idx);
            idx = prev;
        }
        if let (Some(&(s, n)), Some(&(ns, nn))) = (self.extents.get(idx), self.extents.get(idx + 1))
            && s + n == ns
        {
            self.extents[idx] = (s, n + nn);
            self.extents.remove(idx + 1);
        }
    }

    fn largest(&self) -> u64 {
        self.extents.iter().map(|&(_, n)| n).max().unwrap_or(0)
    }

    fn free_pages(&self) -> u64 {
        self.extents.iter().map(|&(_, n)| n).sum()
    }
}

#[derive(Debug)]
struct PoolInner {
    region: Arc<MmapRegion>,
    fd: OwnedFd,
    addrs: DeviceAddrs,
    size: u64,
    free: Mutex<FreeList>,
}

impl PoolInner {
    fn free_list(&self) -> std::sync::MutexGuard<'_, FreeList> {
        // A panic while holding the lock cannot leave the list inconsistent (each operation
        // completes its Vec edits before returning), so a poisoned lock is still usable.
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A pool of DMA memory: one memfd (hugetlb when available), mapped once in this process and
/// registered with the device at `iova()`, or (`DmaPool::physical`) reached by the device at
/// the physical address of each huge page. Cheap to clone; clones share the pool.
#[derive(Debug, Clone)]
pub struct DmaPool {
    inner: Arc<PoolInner>,
}

impl DmaPool {
    /// Create a pool of at least `bytes` bytes (rounded up to the memfd's page size) whose
    /// device address is `iova`.
    pub fn new(bytes: u64, iova: Iova) -> Result<DmaPool, DmaAllocError> {
        let (fd, region, size) = Self::map(bytes)?;
        Ok(Self::from_parts(
            fd,
            region,
            size,
            DeviceAddrs::Linear(iova),
        ))
    }

    /// Create a pool of at least `bytes` bytes on huge pages, every page touched, whose
    /// device addresses are what `resolve` returns for the mapping and its page size: one
    /// address per page (physical addresses from `/proc/self/pagemap`). Each buffer then
    /// lies inside one huge page, so it is contiguous for the device.
    pub fn physical(
        bytes: u64,
        resolve: impl FnOnce(&MmapRegion, u64) -> Result<Vec<u64>, DmaAllocError>,
    ) -> Result<DmaPool, DmaAllocError> {
        let (fd, region, size) = Self::map(bytes)?;
        let page = page_size_of(fd.as_fd())?;
        if page < HUGE_PAGE {
            return Err(DmaAllocError::NoHugePages { bytes: size });
        }
        // Fault every page in now: a page has a physical address only once it exists.
        region.fill(0, size, 0)?;
        let bases = resolve(&region, page)?;
        if bases.len() as u64 != size / page {
            return Err(DmaAllocError::NoAddress {
                offset: bases.len() as u64 * page,
            });
        }
        Ok(Self::from_parts(
            fd,
            region,
            size,
            DeviceAddrs::pages(page, bases),
        ))
    }

    fn map(bytes: u64) -> Result<(OwnedFd, MmapRegion, u64), DmaAllocError> {
        if bytes == 0 {
            return Err(DmaAllocError::ZeroSize);
        }
        let fd = create_memfd("nvmemu-driver-dma", bytes, true)?;
        let page = page_size_of(fd.as_fd())?.max(DMA_PAGE);
        let size = bytes
            .checked_next_multiple_of(page)
            .ok_or(DmaAllocError::ZeroSize)?;
        let region = MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite)?;
        Ok((fd, region, size))
    }

    /// A pool laid out as a physical one, whose 2 MiB pages the device sees at `bases`, on
    /// ordinary memory: tests the placement rules where no huge pages are reserved.
    #[cfg(test)]
    pub(crate) fn with_huge_page_addrs(bytes: u64, bases: Vec<u64>) -> DmaPool {
        let (fd, region, size) = Self::map(bytes).unwrap();
        Self::from_parts(fd, region, size, DeviceAddrs::pages(HUGE_PAGE, bases))
    }

    fn from_parts(fd: OwnedFd, region: MmapRegion, size: u64, addrs: DeviceAddrs) -> DmaPool {
        DmaPool {
            inner: Arc::new(PoolInner {
                region: Arc::new(region),
                fd,
                addrs,
                size,
                free: Mutex::new(FreeList::new(size / DMA_PAGE)),
            }),
        }
    }

    /// The pool mapping (VFIO's MAP_DMA is given its address).
    pub fn region(&self) -> &MmapRegion {
        &self.inner.region
    }

    /// The memfd backing the pool (passed to DMA_MAP).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }

    /// The most one allocation may span (`None`: the whole pool), as the device sees it
    /// contiguous only within each huge page of a physical pool.
    pub(crate) fn contiguous_limit(&self) -> Option<u64> {
        self.inner.addrs.contiguous_limit()
    }

    /// Device address of the first byte.
    pub fn iova(&self) -> Iova {
        Iova(self.inner.addrs.at(0))
    }

    /// Pool size in bytes.
    pub fn size(&self) -> u64 {
        self.inner.size
    }

    /// Bytes not allocated.
    pub fn free_bytes(&self) -> u64 {
        self.inner.free_list().free_pages() * DMA_PAGE
    }

    /// Allocate `len` bytes, page aligned, zero-filled.
    pub fn alloc(&self, len: u64) -> Result<DmaBuf, DmaAllocError> {
        if len == 0 {
            return Err(DmaAllocError::ZeroSize);
        }
        let pages = len.div_ceil(DMA_PAGE);
        let limit = self.inner.addrs.contiguous_limit();
        if let Some(limit) = limit
            && pages * DMA_PAGE > limit
        {
            return Err(DmaAllocError::NotContiguous {
                requested: pages * DMA_PAGE,
                limit,
            });
        }
        let start = {
            let mut free = self.inner.free_list();
            let found = match limit {
                Some(limit) => free.alloc_within(pages, limit / DMA_PAGE),
                None => free.alloc(pages),
            };
            match found {
                Some(s) => s,
                None => {
                    return Err(DmaAllocError::Exhausted {
                        requested: pages * DMA_PAGE,
                        largest_free: free.largest() * DMA_PAGE,
                    });
                }
            }
        };
        let alloc = Arc::new(Allocation {
            pool: Arc::clone(&self.inner),
            start_page: start,
            pages,
        });
        let offset = start * DMA_PAGE;
        let buf = DmaBuf {
            iova: self.inner.addrs.at(offset),
            offset,
            len,
            alloc,
        };
        buf.fill(0, len, 0)?;
        Ok(buf)
    }

    /// Allocate `count` buffers of `each` bytes (one allocation, sliced): a per-thread slab
    /// of I/O buffers, made once before the I/O loop.
    pub fn alloc_slab(&self, count: usize, each: u64) -> Result<Vec<DmaBuf>, DmaAllocError> {
        if self.inner.addrs.contiguous_limit().is_some() {
            // One allocation would cross huge pages: buffers one by one, each inside one.
            return (0..count).map(|_| self.alloc(each)).collect();
        }
        let each_pages = each.div_ceil(DMA_PAGE) * DMA_PAGE;
        let total = each_pages
            .checked_mul(count as u64)
            .ok_or(DmaAllocError::ZeroSize)?;
        let whole = self.alloc(total)?;
        (0..count as u64)
            .map(|i| whole.slice(i * each_pages, each))
            .collect()
    }
}

/// Pages taken from a pool; returned when the last `DmaBuf` referring to them drops.
#[derive(Debug)]
struct Allocation {
    pool: Arc<PoolInner>,
    start_page: u64,
    pages: u64,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        self.pool.free_list().free(self.start_page, self.pages);
    }
}

/// A buffer in the DMA pool: a device address plus a window of the pool mapping.
///
/// The device may write it at any time while a command is in flight, so it is never a Rust
/// slice: data moves in and out with `copy_from`/`copy_to`. Clones and slices share the
/// pages; an in-flight command holds a clone, so the pages are not reused before it completes.
#[derive(Debug, Clone)]
pub struct DmaBuf {
    alloc: Arc<Allocation>,
    /// Device address of the first byte (the buffer is contiguous for the device).
    iova: u64,
    /// Offset of the window inside the pool mapping.
    offset: u64,
    len: u64,
}

impl DmaBuf {
    /// Device address of the first byte.
    pub fn iova(&self) -> Iova {
        Iova(self.iova)
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty buffer (never produced by the allocator).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A window `[offset, offset + len)` of this buffer sharing its pages.
    pub fn slice(&self, offset: u64, len: u64) -> Result<DmaBuf, DmaAllocError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(DmaBuf {
                alloc: Arc::clone(&self.alloc),
                iova: self.iova + offset,
                offset: self.offset + offset,
                len,
            }),
            _ => Err(DmaAllocError::BadSlice {
                offset,
                len,
                size: self.len,
            }),
        }
    }

    /// The pool mapping and the offset of this buffer inside it (for region-to-region copies).
    pub fn region(&self) -> (&Arc<MmapRegion>, u64) {
        (&self.alloc.pool.region, self.offset)
    }

    fn check(&self, offset: u64, len: u64) -> Result<u64, MemError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.offset + offset),
            _ => Err(MemError::OutOfBounds {
                offset,
                len,
                size: self.len,
            }),
        }
    }

    /// Copy `src` into the buffer at `offset`.
    pub fn copy_from(&self, offset: u64, src: &[u8]) -> Result<(), MemError> {
        let at = self.check(offset, src.len() as u64)?;
        self.alloc.pool.region.copy_from(at, src)
    }

    /// Copy `dst.len()` bytes at `offset` out of the buffer.
    pub fn copy_to(&self, offset: u64, dst: &mut [u8]) -> Result<(), MemError> {
        let at = self.check(offset, dst.len() as u64)?;
        self.alloc.pool.region.copy_to(at, dst)
    }

    /// Set `len` bytes at `offset` to `byte`.
    pub fn fill(&self, offset: u64, len: u64, byte: u8) -> Result<(), MemError> {
        let at = self.check(offset, len)?;
        self.alloc.pool.region.fill(at, len, byte)
    }

    /// Copy a `T` out of the buffer at `offset`.
    pub fn read_obj<T: FromBytes>(&self, offset: u64) -> Result<T, MemError> {
        let at = self.check(offset, size_of::<T>() as u64)?;
        self.alloc.pool.region.read_obj(at)
    }

    /// Copy a `T` into the buffer at `offset`.
    pub fn write_obj<T: IntoBytes + Immutable>(
        &self,
        offset: u64,
        value: &T,
    ) -> Result<(), MemError> {
        let at = self.check(offset, size_of::<T>() as u64)?;
        self.alloc.pool.region.write_obj(at, value)
    }

    /// Store `words` at `offset` (8-byte aligned) from registers: a queue entry (see
    /// `MmapRegion::store_u64s`).
    #[inline]
    pub(crate) fn store_u64s<const N: usize>(
        &self,
        offset: u64,
        words: [u64; N],
    ) -> Result<(), MemError> {
        let at = self.check(offset, 8 * N as u64)?;
        self.alloc.pool.region.store_u64s(at, words)
    }

    /// Cache hint: done with the line holding `offset` (see `MmapRegion::demote`).
    #[inline]
    pub(crate) fn demote(&self, offset: u64) {
        if let Ok(at) = self.check(offset, 1) {
            self.alloc.pool.region.demote(at);
        }
    }

    /// Atomic 16-bit Acquire load at `offset` (a CQE's status/phase word).
    pub(crate) fn load_acquire_u16(&self, offset: u64) -> Result<u16, MemError> {
        let at = self.check(offset, 2)?;
        self.alloc.pool.region.load_acquire_u16(at)
    }

    /// Atomic 16-bit Release store at `offset` (tests: posting a CQE by hand).
    #[cfg(test)]
    pub(crate) fn store_release_u16(&self, offset: u64, value: u16) -> Result<(), MemError> {
        let at = self.check(offset, 2)?;
        self.alloc.pool.region.store_release_u16(at, value)
    }
}

#[cfg(test)]
mod tests;
