// SPDX-License-Identifier: Apache-2.0
//! The data pointer walk: PRP entries and lists (NVMe Base 1.4, 4.3) and SGLs (4.4) turned
//! into contiguous pieces of mapped client memory, without heap allocation.
//!
//! The walk hands each contiguous piece `(region, offset, len)` to a callback, which moves
//! it with one copy. Adjacent pages of the same mapping are merged first, so a physically
//! contiguous buffer costs one copy however many PRP entries describe it. PRP lists and SGL
//! segments are copied out of client memory once, into a stack buffer, and validated there.
//! Every loop is bounded by the transfer length (PRP) or a descriptor budget (SGL), so a
//! hostile chain cannot spin.

use std::sync::Arc;

use nvmemu_mem::{Access, GuestMemory, Iova, MmapRegion};
use nvmemu_spec::{DataPtr, PAGE_SIZE, SglDescriptor, SglKind, Status};
use zerocopy::{FromZeros, IntoBytes};

/// Most SGL descriptors (segment pointers included) one command may use.
pub(crate) const MAX_SGL_DESCRIPTORS: u32 = 1024;

/// SGL descriptors copied out of client memory per read.
const SGL_CHUNK: u32 = 32;

/// PRP entries in one list page.
const PRP_PER_PAGE: usize = (PAGE_SIZE / 8) as usize;

const PAGE_MASK: u64 = PAGE_SIZE - 1;

/// One contiguous piece of a transfer, in transfer order.
#[derive(Debug)]
pub(crate) enum Chunk<'m> {
    /// `len` bytes at `offset` in `region`.
    Mem {
        /// The mapping.
        region: &'m MmapRegion,
        /// Offset inside the mapping.
        offset: u64,
        /// Length in bytes.
        len: u64,
    },
    /// `len` bytes a Bit Bucket descriptor discards (reads only).
    Skip(u64),
}

impl Chunk<'_> {
    /// Length of the piece in bytes.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Chunk::Mem { len, .. } | Chunk::Skip(len) => *len,
        }
    }
}

/// Translate one range; any failure is the host's (unmapped, no fd, read-only).
fn map(
    mem: &GuestMemory,
    addr: u64,
    len: u64,
    access: Access,
) -> Result<(&Arc<MmapRegion>, u64), Status> {
    mem.translate(Iova(addr), len, access).map_err(|e| {
        tracing::debug!(target: "guest", error = %e, "data pointer outside mapped memory");
        Status::DATA_TRANSFER_ERROR
    })
}

/// Merges pieces that continue each other in the same mapping, then calls the sink.
struct Coalesce<'m, F> {
    pending: Option<(&'m Arc<MmapRegion>, u64, u64)>,
    sink: F,
}

impl<'m, F: FnMut(Chunk<'m>) -> Result<(), Status>> Coalesce<'m, F> {
    fn push(&mut self, region: &'m Arc<MmapRegion>, offset: u64, len: u64) -> Result<(), Status> {
        if let Some((r, o, l)) = &mut self.pending
            && Arc::ptr_eq(r, region)
            && o.checked_add(*l) == Some(offset)
        {
            *l += len;
            return Ok(());
        }
        self.flush()?;
        self.pending = Some((region, offset, len));
        Ok(())
    }

    fn skip(&mut self, len: u64) -> Result<(), Status> {
        self.flush()?;
        (self.sink)(Chunk::Skip(len))
    }

    fn flush(&mut self) -> Result<(), Status> {
        match self.pending.take() {
            Some((region, offset, len)) => (self.sink)(Chunk::Mem {
                region,
                offset,
                len,
            }),
            None => Ok(()),
        }
    }

    /// Map `[addr, addr + len)`, splitting it where it crosses from one DMA region into an
    /// adjacent one (an SGL data block may; a PRP page never does).
    fn push_range(
        &mut self,
        mem: &'m GuestMemory,
        mut addr: u64,
        mut len: u64,
        access: Access,
    ) -> Result<(), Status> {
        while len > 0 {
            let (region, offset, piece) = match mem.translate(Iova(addr), len, access) {
                Ok((region, offset)) => (region, offset, len),
                Err(_) => {
                    let piece = region_remaining(mem, addr).map_or(len, |r| r.min(len));
                    let (region, offset) = map(mem, addr, piece, access)?;
                    (region, offset, piece)
                }
            };
            self.push(region, offset, piece)?;
            addr = addr.checked_add(piece).ok_or(Status::DATA_TRANSFER_ERROR)?;
            len -= piece;
        }
        Ok(())
    }
}

/// Bytes from `addr` to the end of the DMA region holding it (slow path only).
fn region_remaining(mem: &GuestMemory, addr: u64) -> Option<u64> {
    let regions = mem.regions();
    let idx = regions
        .partition_point(|r| r.iova.0 <= addr)
        .checked_sub(1)?;
    let r = regions.get(idx)?;
    let end = r.iova.0.checked_add(r.size)?;
    (addr < end).then(|| end - addr)
}

/// Walk `len` bytes described by `dptr`. `access` is the device's direction on the data:
/// `Write` when the device fills client memory (Read, Identify), `Read` when it consumes it.
///
/// Always inlined: called, it copies the caller's closure with a 16-byte load that spans
/// two 8-byte stores, which cannot be forwarded and waits for every older store (the
/// previous command's CQE) to reach the cache.
#[inline(always)]
pub(crate) fn walk<'m>(
    mem: &'m GuestMemory,
    dptr: &DataPtr,
    len: u64,
    access: Access,
    sink: impl FnMut(Chunk<'m>) -> Result<(), Status>,
) -> Result<(), Status> {
    let mut out = Coalesce {
        pending: None,
        sink,
    };
    match dptr {
        DataPtr::Prp { prp1, prp2 } => walk_prp(mem, *prp1, *prp2, len, access, &mut out)?,
        DataPtr::Sgl(desc) => walk_sgl(mem, desc, len, access, &mut out)?,
    }
    out.flush()
}

fn walk_prp<'m, F: FnMut(Chunk<'m>) -> Result<(), Status>>(
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
    let first = len.min(PAGE_SIZE - (prp1 & PAGE_MASK));
    let (region, offset) = map(mem, prp1, first, access)?;
    out.push(region, offset, first)?;
    let mut remaining = len - first;
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

/// Where the next SGL segment is.
struct Segment {
    addr: u64,
    len: u32,
    last: bool,
}

fn walk_sgl<'m, F: FnMut(Chunk<'m>) -> Result<(), Status>>(
    mem: &'m GuestMemory,
    first: &SglDescriptor,
    len: u64,
    access: Access,
    out: &mut Coalesce<'m, F>,
) -> Result<(), Status> {
    let mut remaining = len;
    let mut budget = MAX_SGL_DESCRIPTORS;
    let mut next = match data_or_segment(mem, first.kind(), access, &mut remaining, out)? {
        Some(seg) => seg,
        None => return check_consumed(remaining),
    };
    let mut buf = [SglDescriptor::new_zeroed(); SGL_CHUNK as usize];
    loop {
        let Segment {
            addr,
            len: seg_len,
            last,
        } = next;
        if seg_len == 0 || seg_len % 16 != 0 {
            return Err(Status::INVALID_SGL_SEGMENT);
        }
        let count = seg_len / 16;
        if count > budget {
            return Err(Status::INVALID_SGL_COUNT);
        }
        budget -= count;
        let mut following = None;
        let mut index = 0u32;
        while index < count {
            let n = (count - index).min(SGL_CHUNK);
            let descs = buf.get_mut(..n as usize).ok_or(Status::INTERNAL_ERROR)?;
            let at = addr
                .checked_add(u64::from(index) * 16)
                .ok_or(Status::DATA_TRANSFER_ERROR)?;
            let (region, offset) = map(mem, at, u64::from(n) * 16, Access::Read)?;
            region
                .copy_to(offset, descs.as_mut_bytes())
                .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
            for desc in descs.iter() {
                index += 1;
                let kind = desc.kind();
                if let SglKind::Segment { .. } | SglKind::LastSegment { .. } = kind {
                    // Only the last descriptor of a non-last segment may point onwards.
                    if last || index != count {
                        return Err(Status::INVALID_SGL_SEGMENT);
                    }
                }
                following = data_or_segment(mem, kind, access, &mut remaining, out)?;
            }
        }
        match following {
            Some(seg) => next = seg,
            None => return check_consumed(remaining),
        }
    }
}

fn check_consumed(remaining: u64) -> Result<(), Status> {
    if remaining == 0 {
        Ok(())
    } else {
        Err(Status::DATA_SGL_LENGTH_INVALID)
    }
}

/// Handle one descriptor: emit data, or return the segment it points to.
fn data_or_segment<'m, F: FnMut(Chunk<'m>) -> Result<(), Status>>(
    mem: &'m GuestMemory,
    kind: SglKind,
    access: Access,
    remaining: &mut u64,
    out: &mut Coalesce<'m, F>,
) -> Result<Option<Segment>, Status> {
    match kind {
        SglKind::DataBlock { addr, len } => {
            let len = u64::from(len);
            *remaining = remaining
                .checked_sub(len)
                .ok_or(Status::DATA_SGL_LENGTH_INVALID)?;
            out.push_range(mem, addr, len, access)?;
            Ok(None)
        }
        SglKind::BitBucket { len } => {
            // A bit bucket discards data the controller would write to the host; it has no
            // meaning when the controller reads host memory.
            if access == Access::Read {
                return Err(Status::SGL_DESCRIPTOR_TYPE_INVALID);
            }
            let len = u64::from(len);
            *remaining = remaining
                .checked_sub(len)
                .ok_or(Status::DATA_SGL_LENGTH_INVALID)?;
            out.skip(len)?;
            Ok(None)
        }
        SglKind::Segment { addr, len } => Ok(Some(Segment {
            addr,
            len,
            last: false,
        })),
        SglKind::LastSegment { addr, len } => Ok(Some(Segment {
            addr,
            len,
            last: true,
        })),
        SglKind::Unsupported { sgl_id } => {
            tracing::debug!(target: "guest", sgl_id, "unsupported SGL descriptor type");
            Err(Status::SGL_DESCRIPTOR_TYPE_INVALID)
        }
    }
}

/// Copy `src` to the host buffer described by `dptr`, then zeroes up to `len` bytes
/// (admin data: Identify, log pages).
pub(crate) fn copy_to_host(
    mem: &GuestMemory,
    dptr: &DataPtr,
    src: &[u8],
    len: u64,
) -> Result<(), Status> {
    let mut pos = 0usize;
    walk(mem, dptr, len, Access::Write, |chunk| {
        let Chunk::Mem {
            region,
            offset,
            len,
        } = chunk
        else {
            let skip = usize::try_from(chunk.len()).map_err(|_| Status::INTERNAL_ERROR)?;
            pos = pos.saturating_add(skip);
            return Ok(());
        };
        let n = usize::try_from(len).map_err(|_| Status::INTERNAL_ERROR)?;
        let have = src.get(pos..).unwrap_or(&[]);
        let copy = have.len().min(n);
        let res = match have.get(..copy) {
            Some(bytes) if !bytes.is_empty() => region.copy_from(offset, bytes),
            _ => Ok(()),
        }
        .and_then(|()| region.fill(offset + copy as u64, (n - copy) as u64, 0));
        res.map_err(|_| Status::DATA_TRANSFER_ERROR)?;
        pos = pos.saturating_add(n);
        Ok(())
    })
}

/// Copy `dst.len()` bytes from the host buffer described by `dptr` into `dst`.
pub(crate) fn copy_from_host(
    mem: &GuestMemory,
    dptr: &DataPtr,
    dst: &mut [u8],
) -> Result<(), Status> {
    let mut pos = 0usize;
    walk(mem, dptr, dst.len() as u64, Access::Read, |chunk| {
        let n = usize::try_from(chunk.len()).map_err(|_| Status::INTERNAL_ERROR)?;
        let end = pos.checked_add(n).ok_or(Status::INTERNAL_ERROR)?;
        if let Chunk::Mem { region, offset, .. } = chunk {
            let piece = dst.get_mut(pos..end).ok_or(Status::INTERNAL_ERROR)?;
            region
                .copy_to(offset, piece)
                .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
        }
        pos = end;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_utils::HostMemory;

    /// Collect the (iova-relative offset, len) pieces a walk produces.
    fn pieces(
        host: &HostMemory,
        dptr: DataPtr,
        len: u64,
        access: Access,
    ) -> Result<Vec<(u64, u64)>, Status> {
        let mut v = Vec::new();
        walk(&host.guest(), &dptr, len, access, |c| {
            match c {
                Chunk::Mem { offset, len, .. } => v.push((offset, len)),
                Chunk::Skip(len) => v.push((u64::MAX, len)),
            }
            Ok(())
        })?;
        Ok(v)
    }

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

    fn sgl(kind: SglKind) -> DataPtr {
        DataPtr::Sgl(SglDescriptor::new(kind))
    }

    #[test]
    fn sgl_segments_bit_bucket_and_lengths() {
        let host = HostMemory::new(1 << 20);
        let seg2 = [SglDescriptor::new(SglKind::DataBlock {
            addr: host.iova(0x9000),
            len: 100,
        })];
        host.write(0x3000, seg2.as_bytes());
        let seg1 = [
            SglDescriptor::new(SglKind::DataBlock {
                addr: host.iova(0x8000),
                len: 300,
            }),
            SglDescriptor::new(SglKind::BitBucket { len: 112 }),
            SglDescriptor::new(SglKind::LastSegment {
                addr: host.iova(0x3000),
                len: 16,
            }),
        ];
        host.write(0x2000, seg1.as_bytes());
        let d = sgl(SglKind::Segment {
            addr: host.iova(0x2000),
            len: 48,
        });
        assert_eq!(
            pieces(&host, d, 512, Access::Write),
            Ok(vec![(0x8000, 300), (u64::MAX, 112), (0x9000, 100)])
        );
        // Bit buckets are for reads only.
        assert_eq!(
            pieces(&host, d, 512, Access::Read),
            Err(Status::SGL_DESCRIPTOR_TYPE_INVALID)
        );
        // Lengths must add up to the transfer exactly.
        assert_eq!(
            pieces(&host, d, 511, Access::Write),
            Err(Status::DATA_SGL_LENGTH_INVALID)
        );
        assert_eq!(
            pieces(&host, d, 600, Access::Write),
            Err(Status::DATA_SGL_LENGTH_INVALID)
        );
    }

    #[test]
    fn sgl_invalid_types_and_segments() {
        let host = HostMemory::new(1 << 20);
        assert_eq!(
            pieces(
                &host,
                sgl(SglKind::Unsupported { sgl_id: 0x40 }),
                512,
                Access::Write
            ),
            Err(Status::SGL_DESCRIPTOR_TYPE_INVALID)
        );
        assert_eq!(
            pieces(
                &host,
                sgl(SglKind::LastSegment {
                    addr: host.iova(0x2000),
                    len: 17
                }),
                512,
                Access::Write
            ),
            Err(Status::INVALID_SGL_SEGMENT)
        );
        // A last segment may not point onwards.
        host.write(
            0x2000,
            [SglDescriptor::new(SglKind::Segment {
                addr: host.iova(0x2000),
                len: 16,
            })]
            .as_bytes(),
        );
        assert_eq!(
            pieces(
                &host,
                sgl(SglKind::LastSegment {
                    addr: host.iova(0x2000),
                    len: 16
                }),
                512,
                Access::Write
            ),
            Err(Status::INVALID_SGL_SEGMENT)
        );
        // A segment pointing at itself runs out of descriptor budget.
        assert_eq!(
            pieces(
                &host,
                sgl(SglKind::Segment {
                    addr: host.iova(0x2000),
                    len: 16
                }),
                512,
                Access::Write
            ),
            Err(Status::INVALID_SGL_COUNT)
        );
    }

    #[test]
    fn copy_helpers_round_trip_and_zero_fill() {
        let host = HostMemory::new(1 << 20);
        host.write(0x4000, &[0xAA; 64]);
        let d = DataPtr::Prp {
            prp1: host.iova(0x4000),
            prp2: 0,
        };
        copy_to_host(&host.guest(), &d, &[1, 2, 3], 16).unwrap();
        let mut back = [0u8; 17];
        copy_from_host(&host.guest(), &d, &mut back).unwrap();
        assert_eq!(&back[..4], &[1, 2, 3, 0]);
        assert_eq!(back[15], 0);
        assert_eq!(back[16], 0xAA);
    }
}
