// SPDX-License-Identifier: Apache-2.0
//! The sorted table behind `GuestMemory`: regions in chunks shared between snapshots.
//!
//! Every DMA_MAP or DMA_UNMAP publishes a new snapshot while the poller may still be reading
//! the old one. Copying one flat array per change made 65,535 maps quadratic (about 2*10^9
//! region copies); here a change copies one chunk of at most [`CHUNK`] regions plus the
//! small per-chunk index, and shares every other chunk with the previous snapshot.
//!
//! A lookup is two binary searches: over the first IOVA of each chunk (a dense `u64`
//! array), then inside one chunk. No allocation, no lock. (`imbl`'s `OrdMap` shares nodes
//! the same way, but its nearest-key lookup builds a cursor whose stack is a heap `Vec`
//! once the tree has more than one level: an allocation per I/O.)

use std::sync::Arc;

use crate::guest::DmaRegion;

/// Most regions in one chunk: what one change copies, besides the index.
const CHUNK: usize = 128;
/// A chunk that shrinks below this is merged with a neighbour, so a long life of maps and
/// unmaps cannot leave many tiny chunks (and so a long index to copy).
const MIN_CHUNK: usize = CHUNK / 4;

/// Regions sorted by IOVA, non-overlapping (the caller checks), in shared chunks.
#[derive(Debug, Clone, Default)]
pub(crate) struct RegionTable {
    /// First IOVA of each chunk, ascending.
    firsts: Vec<u64>,
    /// The chunks, none empty.
    chunks: Vec<Arc<[DmaRegion]>>,
    len: usize,
}

impl RegionTable {
    /// Number of regions.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The regions in IOVA order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &DmaRegion> {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The region with the highest start at or below `iova` (whether or not it reaches
    /// `iova`).
    #[inline]
    pub(crate) fn at_or_before(&self, iova: u64) -> Option<&DmaRegion> {
        // Up to CHUNK regions (every client seen so far) make one chunk: skip the index.
        let chunk = match self.chunks.as_slice() {
            [only] => only,
            chunks => {
                let c = self.firsts.partition_point(|&f| f <= iova).checked_sub(1)?;
                chunks.get(c)?
            }
        };
        let i = chunk.partition_point(|r| r.iova.0 <= iova).checked_sub(1)?;
        chunk.get(i)
    }

    /// The region with the lowest start at or above `iova`.
    pub(crate) fn at_or_after(&self, iova: u64) -> Option<&DmaRegion> {
        // The first chunk that may hold it: the one before the first chunk starting above.
        let c = self
            .firsts
            .partition_point(|&f| f <= iova)
            .saturating_sub(1);
        self.chunks
            .get(c..)?
            .iter()
            .flat_map(|chunk| chunk.iter())
            .find(|r| r.iova.0 >= iova)
    }

    /// A copy with `region` added (it must overlap nothing in the table).
    pub(crate) fn with(&self, region: DmaRegion) -> RegionTable {
        let mut t = self.clone();
        let iova = region.iova.0;
        if t.chunks.is_empty() {
            t.replace(0, 0, vec![region]);
            return t;
        }
        // The chunk it falls in, or the first one when it starts before everything.
        let c = t.firsts.partition_point(|&f| f <= iova).saturating_sub(1);
        let mut regions = t.chunks[c].to_vec();
        let i = regions.partition_point(|r| r.iova.0 < iova);
        regions.insert(i, region);
        t.replace(c, 1, regions);
        t
    }

    /// A copy without the region starting at `iova`, or `None` when no region starts there.
    pub(crate) fn without(&self, iova: u64) -> Option<RegionTable> {
        let c = self.firsts.partition_point(|&f| f <= iova).checked_sub(1)?;
        let chunk = self.chunks.get(c)?;
        let i = chunk.binary_search_by_key(&iova, |r| r.iova.0).ok()?;
        let mut t = self.clone();
        let mut regions = chunk.to_vec();
        regions.remove(i);
        // Merge a small remainder into a neighbour (whole chunks only: order is kept).
        let (at, count) = if regions.len() < MIN_CHUNK && t.chunks.len() > 1 {
            if c + 1 < t.chunks.len() {
                regions.extend(t.chunks[c + 1].iter().cloned());
                (c, 2)
            } else {
                let mut merged = t.chunks[c - 1].to_vec();
                merged.append(&mut regions);
                regions = merged;
                (c - 1, 2)
            }
        } else {
            (c, 1)
        };
        t.replace(at, count, regions);
        Some(t)
    }

    /// Replace `count` chunks from `at` with `regions` (sorted), split into chunks of at
    /// most `CHUNK` and no empty one; recounts and re-indexes.
    fn replace(&mut self, at: usize, count: usize, regions: Vec<DmaRegion>) {
        let removed: usize = self.chunks[at..at + count].iter().map(|c| c.len()).sum();
        self.len = self.len - removed + regions.len();
        let pieces = regions.len().div_ceil(CHUNK);
        let new: Vec<Arc<[DmaRegion]>> = if pieces == 0 {
            Vec::new()
        } else {
            // Even pieces: a full chunk that gains one region splits into two halves.
            let each = regions.len().div_ceil(pieces);
            regions.chunks(each).map(Arc::from).collect()
        };
        let firsts: Vec<u64> = new.iter().map(|c| c[0].iova.0).collect();
        self.chunks.splice(at..at + count, new);
        self.firsts.splice(at..at + count, firsts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::{DmaBacking, Iova};

    fn region(iova: u64) -> DmaRegion {
        DmaRegion {
            iova: Iova(iova),
            size: 1,
            writable: true,
            backing: DmaBacking::NoFd,
        }
    }

    fn starts(t: &RegionTable) -> Vec<u64> {
        t.iter().map(|r| r.iova.0).collect()
    }

    /// The invariants every snapshot keeps: sorted, chunks non-empty and at most CHUNK,
    /// the index matching the chunks, the count matching the regions.
    fn check(t: &RegionTable) {
        let s = starts(t);
        assert!(s.windows(2).all(|w| w[0] < w[1]), "sorted");
        assert_eq!(t.len(), s.len());
        assert_eq!(t.firsts.len(), t.chunks.len());
        for (f, c) in t.firsts.iter().zip(&t.chunks) {
            assert!(!c.is_empty() && c.len() <= CHUNK, "chunk of {}", c.len());
            assert_eq!(*f, c[0].iova.0);
        }
    }

    #[test]
    fn inserts_in_any_order_keep_it_sorted_and_chunked() {
        let mut t = RegionTable::default();
        let mut expected = Vec::new();
        // A permutation of 0..1000 (7 is coprime with 1000), spread out by 16.
        for k in 0..1000u64 {
            let iova = (k * 7 % 1000) * 16;
            t = t.with(region(iova));
            expected.push(iova);
        }
        check(&t);
        expected.sort_unstable();
        assert_eq!(starts(&t), expected);
        assert!(t.chunks.len() >= 1000 / CHUNK);
        for &iova in &expected {
            assert_eq!(t.at_or_before(iova + 3).unwrap().iova.0, iova);
            assert_eq!(t.at_or_after(iova).unwrap().iova.0, iova);
        }
        assert!(t.at_or_after(999 * 16 + 1).is_none());
    }

    #[test]
    fn removals_merge_small_chunks_and_leave_old_snapshots_alone() {
        let mut t = RegionTable::default();
        for k in 0..600u64 {
            t = t.with(region(k * 16));
        }
        let full = t.clone();
        // Remove all but every tenth region, from the middle outwards.
        for k in (0..600u64).filter(|k| k % 10 != 0) {
            t = t.without(k * 16).unwrap();
            check(&t);
        }
        assert_eq!(starts(&t), (0..60).map(|k| k * 160).collect::<Vec<_>>());
        assert!(
            t.chunks.len() <= 2,
            "{} chunks for 60 regions",
            t.chunks.len()
        );
        assert!(t.without(16).is_none(), "already gone");
        assert_eq!(full.len(), 600, "the old snapshot is untouched");
        check(&full);
        for k in (0..60u64).map(|k| k * 160) {
            t = t.without(k).unwrap();
        }
        assert_eq!(t.len(), 0);
        assert!(t.chunks.is_empty() && t.at_or_before(u64::MAX).is_none());
    }

    #[test]
    fn a_change_shares_every_chunk_it_does_not_touch() {
        let mut t = RegionTable::default();
        for k in 0..(4 * CHUNK as u64) {
            t = t.with(region(k * 16));
        }
        let next = t.with(region(8));
        let shared = t
            .chunks
            .iter()
            .filter(|c| next.chunks.iter().any(|n| Arc::ptr_eq(c, n)))
            .count();
        assert!(
            shared >= t.chunks.len() - 1,
            "{shared} of {}",
            t.chunks.len()
        );
    }
}
