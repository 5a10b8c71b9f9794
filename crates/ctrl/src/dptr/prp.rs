// SPDX-License-Identifier: Apache-2.0
//! The PRP walk (NVMe Base 1.4, 4.3): PRP1, PRP2 as a second page or a PRP list, and
//! chained list pages, bounded by the transfer length.

use nvmemu_mem::{Access, GuestMemory};
use nvmemu_spec::{PAGE_SIZE, Status};
use zerocopy::IntoBytes;

use super::{Chunk, Coalesce, map};

/// PRP entries in one list page.
const PRP_PER_PAGE: usize = (PAGE_SIZE / 8) as usize;

const PAGE_MASK: u64 = PAGE_SIZE - 1;

/// Bytes from `prp1` to the end of its memory page.
#[inline(always)]
pub(super) fn first_page_room(prp1: u64) -> u64 {
    PAGE_SIZE - (prp1 & PAGE_MASK)
}

/// PRP1 and a second page inline, a PRP list out of line: inlined into the walk, the common
/// one- and two-page commands keep their pending piece in registers (a 16-byte reload of
/// it from memory waits for every older store, see `GuestMemory::lookup`).
#[inline(always)]
pub(super) fn walk_prp<'m, F: FnMut(Chunk<'m>) -> Result<(), Status>>(
    mem: &'m GuestMemory,
    prp1: u64,
    prp2: u64,
    len: u64,
    access: Access,
    out: &mut Coalesce<'m, F>,
) -> Result<(), Status> {
    if len == 0 {
        return Ok(());
    }
    // PRP entries are dword aligned (NVMe Base 1.4, 4.3 "Physical Region Page Entry"):
    // bits 1:0 of an offset must be 00b, else PRP Offset Invalid.
    if prp1 & 0x3 != 0 {
        return Err(Status::PRP_OFFSET_INVALID);
    }
    let first = len.min(first_page_room(prp1));
    let (region, offset) = map(mem, prp1, first, access)?;
    out.push(region, offset, first)?;
    let remaining = len - first;
    if remaining == 0 {
        return Ok(());
    }
    if remaining <= PAGE_SIZE {
        // PRP2 is the second (and last) data page: it must start a page.
        if prp2 & PAGE_MASK != 0 {
            return Err(Status::PRP_OFFSET_INVALID);
        }
        let (region, offset) = map(mem, prp2, remaining, access)?;
        return out.push(region, offset, remaining);
    }
    walk_prp_list(mem, prp2, remaining, access, out)
}

/// The data pages after the first, from the PRP list at `prp2`.
#[inline(never)]
fn walk_prp_list<'m, F: FnMut(Chunk<'m>) -> Result<(), Status>>(
    mem: &'m GuestMemory,
    prp2: u64,
    mut remaining: u64,
    access: Access,
    out: &mut Coalesce<'m, F>,
) -> Result<(), Status> {
    // PRP2 points to a PRP list. It may start inside a page (Linux's 256-byte list pool);
    // the last entry of each list page points to the next list page when more are needed.
    let mut entries_left = remaining.div_ceil(PAGE_SIZE);
    // Each list page yields at least one data entry or the walk stops below, so this bound
    // is only reached by a degenerate chain.
    let mut pages_left = entries_left + 1;
    let mut list = prp2;
    let mut buf = [0u64; PRP_PER_PAGE];
    while entries_left > 0 {
        if list & 0x7 != 0 || pages_left == 0 {
            return Err(Status::PRP_OFFSET_INVALID);
        }
        pages_left -= 1;
        let slots = (PAGE_SIZE - (list & PAGE_MASK)) / 8;
        let chain = entries_left > slots;
        let to_read = if chain { slots } else { entries_left };
        let data_entries = if chain { slots - 1 } else { entries_left };
        // Copy the entries once; only the copy is looked at.
        let bytes = to_read * 8;
        let entries = buf
            .get_mut(..usize::try_from(to_read).map_err(|_| Status::INTERNAL_ERROR)?)
            .ok_or(Status::INTERNAL_ERROR)?;
        let (region, offset) = map(mem, list, bytes, Access::Read)?;
        region
            .copy_to(offset, entries.as_mut_bytes())
            .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
        let data = usize::try_from(data_entries).map_err(|_| Status::INTERNAL_ERROR)?;
        for &entry in entries.iter().take(data) {
            if entry & PAGE_MASK != 0 {
                return Err(Status::PRP_OFFSET_INVALID);
            }
            let piece = remaining.min(PAGE_SIZE);
            let (region, offset) = map(mem, entry, piece, access)?;
            out.push(region, offset, piece)?;
            remaining -= piece;
        }
        entries_left -= data_entries;
        if chain {
            list = entries.last().copied().ok_or(Status::PRP_OFFSET_INVALID)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use nvmemu_mem::Access;
    use nvmemu_spec::{DataPtr, Status};

    use zerocopy::IntoBytes;

    use super::super::tests::pieces;
    use crate::test_utils::HostMemory;

    #[test]
    fn prp1_only_with_offset() {
        let host = HostMemory::new(1 << 20);
        let p = pieces(
            &host,
            DataPtr::Prp {
                prp1: host.iova(0x2100),
                prp2: 0,
            },
            0x100,
            Access::Write,
        );
        assert_eq!(p, Ok(vec![(0x2100, 0x100)]));
    }

    #[test]
    fn prp2_as_second_page_must_be_aligned() {
        let host = HostMemory::new(1 << 20);
        let ok = pieces(
            &host,
            DataPtr::Prp {
                prp1: host.iova(0x1800),
                prp2: host.iova(0x5000),
            },
            4096,
            Access::Read,
        );
        assert_eq!(ok, Ok(vec![(0x1800, 0x800), (0x5000, 0x800)]));
        let bad = pieces(
            &host,
            DataPtr::Prp {
                prp1: host.iova(0x1800),
                prp2: host.iova(0x5010),
            },
            4096,
            Access::Read,
        );
        assert_eq!(bad, Err(Status::PRP_OFFSET_INVALID));
    }

    #[test]
    fn contiguous_prp_list_coalesces_into_one_piece() {
        let host = HostMemory::new(1 << 20);
        let list = 0x1000;
        let entries: Vec<u64> = (1..4).map(|i| host.iova(0x10000 + i * 4096)).collect();
        host.write(list, entries.as_bytes());
        let p = pieces(
            &host,
            DataPtr::Prp {
                prp1: host.iova(0x10000),
                prp2: host.iova(list),
            },
            4 * 4096,
            Access::Write,
        );
        assert_eq!(p, Ok(vec![(0x10000, 4 * 4096)]));
    }

    #[test]
    fn prp_list_entry_with_offset_is_rejected() {
        let host = HostMemory::new(1 << 20);
        let entries = [host.iova(0x20000), host.iova(0x30008)];
        host.write(0x1000, entries.as_bytes());
        let p = pieces(
            &host,
            DataPtr::Prp {
                prp1: host.iova(0x10000),
                prp2: host.iova(0x1000),
            },
            3 * 4096,
            Access::Write,
        );
        assert_eq!(p, Err(Status::PRP_OFFSET_INVALID));
    }

    #[test]
    fn chained_prp_list_at_a_page_end() {
        let host = HostMemory::new(1 << 20);
        // The list starts 16 bytes before the page end: one data entry, then a chain pointer.
        let list = 0x1FF0;
        host.write(list, [host.iova(0x20000), host.iova(0x3000)].as_bytes());
        host.write(0x3000, [host.iova(0x40000), host.iova(0x50000)].as_bytes());
        let p = pieces(
            &host,
            DataPtr::Prp {
                prp1: host.iova(0x10000),
                prp2: host.iova(list),
            },
            4 * 4096,
            Access::Write,
        );
        assert_eq!(
            p,
            Ok(vec![
                (0x10000, 4096),
                (0x20000, 4096),
                (0x40000, 4096),
                (0x50000, 4096)
            ])
        );
    }

    #[test]
    fn self_pointing_chain_terminates() {
        let host = HostMemory::new(1 << 20);
        let list = 0x1FF8;
        host.write(list, [host.iova(list)].as_bytes());
        let p = pieces(
            &host,
            DataPtr::Prp {
                prp1: host.iova(0x10000),
                prp2: host.iova(list),
            },
            3 * 4096,
            Access::Write,
        );
        assert_eq!(p, Err(Status::PRP_OFFSET_INVALID));
    }

    #[test]
    fn unmapped_prp_is_data_transfer_error() {
        let host = HostMemory::new(1 << 20);
        let p = pieces(
            &host,
            DataPtr::Prp {
                prp1: 0x10,
                prp2: 0,
            },
            512,
            Access::Write,
        );
        assert_eq!(p, Err(Status::DATA_TRANSFER_ERROR));
    }
}
