// SPDX-License-Identifier: Apache-2.0
//! Anonymous memory backed from the start (a malloc namespace): the memory check before
//! anything is mapped, the parallel population, and the residency report.
//!
//! Population uses `MADV_POPULATE_WRITE` (Linux 5.14+): it faults every page in writable,
//! like a first write would, but a page that cannot be had comes back as an error (ENOMEM,
//! or EFAULT where a touch would raise SIGBUS, e.g. an empty hugetlbfs pool) instead of a
//! signal. The allocator may still reclaim or call the OOM killer on the way, which is why
//! the size is checked against `MemAvailable` first. Older kernels answer EINVAL; there the
//! pages are touched one by one, which is as safe as the check before it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::mm::{self, Advice, MapFlags};

use crate::memfd::system_page_size;
use crate::meminfo::{ByteSize, MemInfo, Residency, parse_smaps};
use crate::mmap::HUGE_PAGE;
use crate::{MemError, MmapRegion};

/// Bytes of `MemAvailable` a populated mapping leaves to everything else.
pub const MEMORY_HEADROOM: u64 = 256 << 20;

/// Population works in chunks of this many bytes: the unit of sharing between threads and
/// of progress (a multiple of every huge page size in use).
const CHUNK: usize = 64 << 20;

/// At most this many threads populate one mapping (page zeroing is bound by memory
/// bandwidth long before this).
const MAX_THREADS: usize = 8;

/// How often `progress` is called while a population runs.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

/// Which pages back a populated anonymous mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKind {
    /// Base pages, advised MADV_HUGEPAGE so the kernel uses transparent huge pages where
    /// it can.
    Base,
    /// Pages of the hugetlbfs pool (`MAP_HUGETLB`, the default huge page size), reserved
    /// when mapped; fails when the pool has too few free.
    HugeTlb,
}

/// How far a population has come; passed to the progress callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes populated so far.
    pub done: u64,
    /// Bytes to populate.
    pub total: u64,
    /// Time since the population started.
    pub elapsed: Duration,
}

impl MmapRegion {
    /// Private anonymous memory of `len` bytes, every page of it faulted in before this
    /// returns, so reads never come from the kernel's zero page and writes never wait for
    /// an allocation. Fails without mapping anything when the memory is not there
    /// (`NotEnoughMemory` against `MemAvailable` less [`MEMORY_HEADROOM`], `NoHugePages`
    /// against the free pool), and with `Populate` when the kernel runs out on the way.
    ///
    /// With `node`, the mapping is bound to that NUMA node before any page is faulted in
    /// ([`MmapRegion::bind_to_node`]), so every page comes from it.
    ///
    /// Several threads populate chunks in parallel; `progress` is called on the calling
    /// thread every [`PROGRESS_INTERVAL`] until done (never for a quick one).
    pub fn anonymous_populated(
        len: u64,
        pages: PageKind,
        node: Option<u32>,
        progress: &dyn Fn(Progress),
    ) -> Result<MmapRegion, MemError> {
        let info = MemInfo::read();
        let region = match pages {
            PageKind::Base => {
                if let Some(info) = info {
                    let available = info.available.saturating_sub(MEMORY_HEADROOM);
                    if len > available {
                        return Err(MemError::NotEnoughMemory {
                            asked: ByteSize(len),
                            available: ByteSize(info.available),
                        });
                    }
                }
                // Accounted (no MAP_NORESERVE): under strict overcommit the mmap itself
                // refuses what cannot be committed.
                MmapRegion::map_anonymous(len, system_page_size(), MapFlags::empty())?
            }
            PageKind::HugeTlb => map_hugetlb(len, info)?,
        };
        if let Some(node) = node {
            region.bind_to_node(node)?;
        }
        populate(&region, progress)?;
        Ok(region)
    }

    /// How much of this mapping is resident now, from `/proc/self/smaps` (one pass over the
    /// process's mappings: a control-path call).
    pub fn residency(&self) -> Result<Residency, MemError> {
        let file = std::fs::File::open("/proc/self/smaps").map_err(|source| MemError::Os {
            op: "open /proc/self/smaps",
            source,
        })?;
        let (base, len) = self.mapping();
        let start = base.as_ptr().addr();
        Ok(parse_smaps(
            std::io::BufReader::new(file),
            start,
            start.saturating_add(len),
        ))
    }
}

/// Map `len` bytes of hugetlbfs pool pages, refusing up front when the pool is short.
fn map_hugetlb(len: u64, info: Option<MemInfo>) -> Result<MmapRegion, MemError> {
    let info = info.unwrap_or_default();
    let page = info.huge_page_size;
    // A kernel without hugetlbfs reports no page size: count in the usual 2 MiB.
    let shown = if page == 0 { HUGE_PAGE as u64 } else { page };
    let short = |free: u64| MemError::NoHugePages {
        asked: len.div_ceil(shown),
        free,
        page_size: ByteSize(shown),
    };
    if page == 0 {
        return Err(short(0));
    }
    if len.div_ceil(page) > info.huge_pages_free {
        return Err(short(info.huge_pages_free));
    }
    // Without MAP_NORESERVE the kernel reserves the pages at mmap (ENOMEM if another
    // process took them since the check), so population cannot run short later.
    MmapRegion::map_anonymous(len, page, MapFlags::HUGETLB).map_err(|e| match e {
        MemError::Os { source, .. }
            if source.raw_os_error() == Some(Errno::NOMEM.raw_os_error()) =>
        {
            short(MemInfo::read().map_or(0, |i| i.huge_pages_free))
        }
        other => other,
    })
}

/// Fault in every page of `region`'s mapping, in chunks shared by up to [`MAX_THREADS`]
/// threads; the calling thread works too and reports progress between its chunks.
fn populate(region: &MmapRegion, progress: &dyn Fn(Progress)) -> Result<(), MemError> {
    let (_, len) = region.mapping();
    let chunk = usize::try_from(region.page_size()).map_or(CHUNK, |p| CHUNK.max(p));
    let chunks = len.div_ceil(chunk);
    let work = Work {
        region,
        chunk,
        chunks,
        next: AtomicUsize::new(0),
        done: AtomicU64::new(0),
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, MAX_THREADS)
        .min(chunks);
    let start = Instant::now();
    std::thread::scope(|s| {
        for i in 1..threads {
            // A thread that cannot be started leaves its share to the others.
            let _ = std::thread::Builder::new()
                .name(format!("nvmemu-populate{i}"))
                .spawn_scoped(s, || work.run(|| {}));
        }
        let mut next_report = start + PROGRESS_INTERVAL;
        work.run(|| {
            let now = Instant::now();
            if now >= next_report {
                next_report = now + PROGRESS_INTERVAL;
                progress(Progress {
                    done: work.done.load(Ordering::Relaxed),
                    total: len as u64,
                    elapsed: now - start,
                });
            }
        });
    });
    match work
        .error
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
    {
        Some(source) => Err(MemError::Populate {
            asked: ByteSize(len as u64),
            done: ByteSize(work.done.into_inner()),
            source: source.into(),
        }),
        None => Ok(()),
    }
}

/// A population shared by its threads.
struct Work<'a> {
    region: &'a MmapRegion,
    /// Bytes per chunk: [`CHUNK`], or one page when pages are larger.
    chunk: usize,
    chunks: usize,
    /// Index of the next chunk nobody has taken.
    next: AtomicUsize,
    /// Bytes populated (for progress only).
    done: AtomicU64,
    /// Set on the first error: the others stop taking chunks.
    failed: AtomicBool,
    error: Mutex<Option<Errno>>,
}

impl Work<'_> {
    /// Take chunks until none is left or one failed; `between` runs after each chunk.
    fn run(&self, mut between: impl FnMut()) {
        // The counters only hand out chunk numbers and count bytes; the pages themselves
        // are ordered by the scope's join, so Relaxed is enough throughout.
        while !self.failed.load(Ordering::Relaxed) {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.chunks {
                break;
            }
            match populate_chunk(self.region, i * self.chunk, self.chunk) {
                Ok(n) => {
                    self.done.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) => {
                    self.failed.store(true, Ordering::Relaxed);
                    let mut slot = self.error.lock().unwrap_or_else(PoisonError::into_inner);
                    slot.get_or_insert(e);
                }
            }
            between();
        }
    }
}

/// Populate `chunk` bytes at `offset` of the mapping (fewer at its end); returns how many.
fn populate_chunk(region: &MmapRegion, offset: usize, chunk: usize) -> Result<usize, Errno> {
    let (base, len) = region.mapping();
    let n = chunk.min(len.saturating_sub(offset));
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: offset < len (n > 0), so base + offset lies inside the live mapping.
    let start = unsafe { base.add(offset) };
    let advised = loop {
        // SAFETY: [start, start + n) lies inside this live private anonymous mapping (offset
        // + n <= len) and is page aligned (chunk and len are multiples of the page size).
        // MADV_POPULATE_WRITE only faults the pages in as a write would, leaving their
        // contents (zero: nothing has been written yet) and the address range unchanged.
        match unsafe { mm::madvise(start.as_ptr().cast(), n, Advice::LinuxPopulateWrite) } {
            // A signal arrived: pages already in are skipped quickly on the retry.
            Err(Errno::INTR) => continue,
            other => break other,
        }
    };
    match advised {
        Ok(()) => Ok(n),
        // Before Linux 5.14 (unknown advice; our mapping is never an incompatible one, the
        // other cause): touch each page instead.
        Err(Errno::INVAL) => {
            let page = usize::try_from(region.page_size()).unwrap_or(4096);
            let mut p = 0;
            while p < n {
                // SAFETY: start + p lies inside the live, writable mapping (p < n); the
                // mapping is fresh and private to the caller (no reference into it exists,
                // nobody else writes it yet), and writing a zero byte keeps its contents.
                unsafe { start.add(p).as_ptr().write_volatile(0) };
                p += page;
            }
            Ok(n)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn populated_memory_is_resident_and_zero() {
        let len = 96 << 20;
        let calls = Cell::new(0);
        let m = MmapRegion::anonymous_populated(len, PageKind::Base, None, &|_| {
            calls.set(calls.get() + 1);
        })
        .unwrap();
        let r = m.residency().unwrap();
        assert!(r.resident_bytes >= len, "{r:?}");
        assert!(m.is_zero(0, len).unwrap());
        m.write_obj(len - 8, &7u64).unwrap();
        assert_eq!(m.read_obj::<u64>(len - 8).unwrap(), 7);
        // A lazy mapping of the same size is not resident, even after a read.
        let lazy = MmapRegion::anonymous(len).unwrap();
        assert!(lazy.is_zero(0, len).unwrap());
        let r = lazy.residency().unwrap();
        assert!(r.resident_bytes < len / 4, "{r:?}");
    }

    #[test]
    fn populated_memory_bound_to_a_node_is_all_on_that_node() {
        let len = 8 << 20;
        let m = MmapRegion::anonymous_populated(len, PageKind::Base, Some(0), &|_| {}).unwrap();
        let Some(maps) = m.numa_maps().unwrap() else {
            eprintln!("no /proc/self/numa_maps on this kernel: nothing to check");
            return;
        };
        assert_eq!(maps.policy, "bind:0");
        assert!(maps.pages_per_node.iter().all(|(n, _)| *n == 0), "{maps:?}");
        let unbound = MmapRegion::anonymous_populated(len, PageKind::Base, None, &|_| {}).unwrap();
        assert_eq!(unbound.numa_maps().unwrap().unwrap().policy, "default");
        // A node the machine lacks fails before any page is faulted in.
        let e = MmapRegion::anonymous_populated(len, PageKind::Base, Some(1000), &|_| {});
        assert!(matches!(e, Err(MemError::Os { op: "mbind", .. })), "{e:?}");
    }

    #[test]
    fn more_than_available_is_refused_before_mapping() {
        let info = MemInfo::read().unwrap();
        let asked = info.available + (1 << 30);
        let e = MmapRegion::anonymous_populated(asked, PageKind::Base, None, &|_| {}).unwrap_err();
        assert!(
            matches!(e, MemError::NotEnoughMemory { asked: a, .. } if a.0 == asked),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(text.contains("available") && text.contains("GiB"), "{text}");
    }

    #[test]
    fn hugetlb_pages_are_used_or_refused_with_the_pool_figures() {
        let len = 4 << 20;
        match MmapRegion::anonymous_populated(len, PageKind::HugeTlb, None, &|_| {}) {
            Ok(m) => {
                assert_eq!(m.page_size(), MemInfo::read().unwrap().huge_page_size);
                assert!(m.residency().unwrap().resident_bytes >= len);
                m.fill(0, len, 3).unwrap();
                assert_eq!(m.read_obj::<u8>(len - 1).unwrap(), 3);
            }
            Err(MemError::NoHugePages { asked, .. }) => assert!(asked >= 1),
            Err(e) => panic!("{e:?}"),
        }
        // A pool never holds this many.
        let e = map_hugetlb(1 << 50, MemInfo::read()).unwrap_err();
        assert!(matches!(e, MemError::NoHugePages { .. }), "{e:?}");
        assert!(e.to_string().contains("huge pages"));
        // No hugetlbfs at all: counted in 2 MiB pages, none free.
        let e = map_hugetlb(4 << 20, Some(MemInfo::default())).unwrap_err();
        assert!(
            matches!(
                e,
                MemError::NoHugePages {
                    asked: 2,
                    free: 0,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn progress_is_reported_only_for_long_populations() {
        let seen = Cell::new(None);
        let m = MmapRegion::anonymous_populated(CHUNK as u64 + 4096, PageKind::Base, None, &|p| {
            seen.set(Some(p));
        })
        .unwrap();
        assert_eq!(seen.get(), None);
        assert_eq!(m.len(), CHUNK as u64 + 4096);
    }
}
