// SPDX-License-Identifier: Apache-2.0
//! Tests of the DMA pool: the free list, disjoint buffers, huge-page and group bounds, exhaustion.

use super::*;

#[test]
fn free_list_first_fit_and_coalesce() {
    let mut f = FreeList::new(10);
    assert_eq!(f.alloc(3), Some(0));
    assert_eq!(f.alloc(3), Some(3));
    assert_eq!(f.alloc(5), None);
    assert_eq!(f.alloc(4), Some(6));
    assert_eq!(f.free_pages(), 0);
    f.free(3, 3);
    f.free(0, 3);
    assert_eq!(f.extents, vec![(0, 6)]);
    f.free(6, 4);
    assert_eq!(f.extents, vec![(0, 10)]);
    assert_eq!(f.largest(), 10);
}

#[test]
fn free_list_merges_with_predecessor_only() {
    let mut f = FreeList::new(8);
    let a = f.alloc(2).unwrap();
    let b = f.alloc(2).unwrap();
    let _c = f.alloc(2).unwrap();
    f.free(a, 2);
    f.free(b, 2);
    assert_eq!(f.extents, vec![(0, 4), (6, 2)]);
}

#[test]
fn pool_buffers_are_disjoint_and_returned_on_drop() {
    let pool = DmaPool::new(64 * 1024, Iova(1 << 32)).unwrap();
    let total = pool.free_bytes();
    let a = pool.alloc(5000).unwrap();
    let b = pool.alloc(4096).unwrap();
    assert_eq!(a.iova(), Iova(1 << 32));
    assert_eq!(b.iova(), Iova((1 << 32) + 8192));
    a.copy_from(0, &[0xAA; 5000]).unwrap();
    b.copy_from(0, &[0xBB; 4096]).unwrap();
    let mut out = [0u8; 4];
    a.copy_to(4996, &mut out).unwrap();
    assert_eq!(out, [0xAA; 4]);
    assert!(a.copy_to(4998, &mut out).is_err());
    let s = a.slice(4096, 904).unwrap();
    assert_eq!(s.iova(), Iova((1 << 32) + 4096));
    drop(a);
    // The slice still holds the pages.
    assert_eq!(pool.free_bytes(), total - 3 * 4096);
    drop(s);
    drop(b);
    assert_eq!(pool.free_bytes(), total);
}

#[test]
fn alloc_within_never_crosses_a_group() {
    let mut f = FreeList::new(16);
    assert_eq!(f.alloc_within(3, 4), Some(0));
    // [3, 4) is too short for 2 pages inside one group of 4: next group.
    assert_eq!(f.alloc_within(2, 4), Some(4));
    assert_eq!(f.alloc_within(1, 4), Some(3));
    assert_eq!(f.extents, vec![(6, 10)]);
    assert_eq!(f.alloc_within(4, 4), Some(8));
    assert_eq!(f.alloc_within(5, 4), None);
    assert_eq!(f.extents, vec![(6, 2), (12, 4)]);
}

#[test]
fn physical_pool_buffers_stay_inside_one_huge_page() {
    // Pages in reverse order, 1 GiB apart, as pagemap might give them.
    let pool = DmaPool::with_huge_page_addrs(4 << 20, vec![2 << 30, 1 << 30]);
    physical_placement(&pool);
    // The same on real huge pages where the machine has them, with a resolver standing in
    // for pagemap; without them the error must say how to reserve them.
    match DmaPool::physical(4 << 20, |r, page| {
        Ok((0..r.len() / page).rev().map(|i| (i + 1) << 30).collect())
    }) {
        Ok(pool) => physical_placement(&pool),
        Err(e @ DmaAllocError::NoHugePages { .. }) => {
            assert!(e.to_string().contains("nr_hugepages"));
        }
        Err(e) => panic!("{e}"),
    }
}

fn physical_placement(pool: &DmaPool) {
    assert_eq!(pool.iova(), Iova(2 << 30));
    let a = pool.alloc(1 << 20).unwrap();
    let b = pool.alloc(1 << 20).unwrap();
    // 1.5 MiB does not fit behind a and b in the first huge page: the second one.
    let c = pool.alloc(3 << 19).unwrap();
    assert_eq!(a.iova(), Iova(2 << 30));
    assert_eq!(b.iova(), Iova((2 << 30) + (1 << 20)));
    assert_eq!(c.iova(), Iova(1 << 30));
    assert_eq!(c.slice(4096, 8).unwrap().iova(), Iova((1 << 30) + 4096));
    assert!(matches!(
        pool.alloc(3 << 20),
        Err(DmaAllocError::NotContiguous { .. })
    ));
    let slab = pool.alloc_slab(2, 4096).unwrap();
    assert_eq!(slab[0].iova(), Iova((1 << 30) + (3 << 19)));
}

#[test]
fn pool_exhaustion_is_an_error() {
    let pool = DmaPool::new(16 * 1024, Iova(0)).unwrap();
    let size = pool.size();
    let _all = pool.alloc(size).unwrap();
    assert!(matches!(
        pool.alloc(1),
        Err(DmaAllocError::Exhausted {
            requested: 4096,
            largest_free: 0
        })
    ));
}

#[test]
fn slab_slices_are_page_strided() {
    let pool = DmaPool::new(64 * 1024, Iova(0x10_0000)).unwrap();
    let slab = pool.alloc_slab(3, 512).unwrap();
    assert_eq!(slab.len(), 3);
    assert_eq!(slab[1].iova().0 - slab[0].iova().0, 4096);
    assert_eq!(slab[2].len(), 512);
}
