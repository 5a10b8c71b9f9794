// SPDX-License-Identifier: Apache-2.0
//! The SGL walk (NVMe Base 1.4, 4.4): Data Block, Bit Bucket, Segment and Last Segment
//! descriptors, copied out of client memory in chunks, bounded by a descriptor budget.

use nvmemu_mem::{Access, GuestMemory};
use nvmemu_spec::{SglDescriptor, SglKind, Status};
use zerocopy::{FromZeros, IntoBytes};

use super::{Chunk, Coalesce, map};

/// Most SGL descriptors (segment pointers included) one command may use.
const MAX_SGL_DESCRIPTORS: u32 = 1024;

/// SGL descriptors copied out of client memory per read.
const SGL_CHUNK: u32 = 32;

pub(super) fn walk_sgl<'m, F: FnMut(Chunk<'m>) -> Result<(), Status>>(
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

/// Where the next SGL segment is.
struct Segment {
    addr: u64,
    len: u32,
    last: bool,
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

#[cfg(test)]
mod tests {
    use nvmemu_mem::Access;
    use nvmemu_spec::{DataPtr, SglDescriptor, SglKind, Status};

    use zerocopy::IntoBytes;

    use super::super::tests::pieces;
    use crate::test_utils::HostMemory;

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
}
