// SPDX-License-Identifier: Apache-2.0
//! What data a command capsule moves, and how much: from its SGL (the only data pointer
//! NVMe/TCP uses) and, for Read, Write and Compare, from the blocks it names.

use nvmemu_spec::{Psdt, SglDescriptor, Sqe, Status};

/// The data a command moves, from its SGL (the only data pointer NVMe/TCP uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transfer {
    None,
    /// Host to controller, `len` bytes in the capsule.
    InCapsule(u32),
    /// Host to controller, `len` bytes to ask for with R2T.
    Solicit(u32),
    /// Controller to host, `len` bytes.
    Read(u32),
}

/// SGL identifier bytes: Data Block with offset addressing (in-capsule data), Transport
/// Data Block (data moved by the transport).
const SGL_DATA_BLOCK_OFFSET: u8 = 0x01;
const SGL_TRANSPORT_DATA_BLOCK: u8 = 0x5A;

/// Read, Write and Compare move NLB blocks, whatever the SGL says: their transfer must fit
/// the SGL, and their PRPs describe exactly it. Otherwise a controller that moved more
/// than the PRPs describe would take a data page for a PRP list (or write into one).
#[inline]
pub(crate) fn rw_bytes(sqe: &Sqe, block_shifts: &[u8]) -> Option<u32> {
    if !matches!(sqe.opcode(), 0x01 | 0x02 | 0x05) {
        return None;
    }
    let index = usize::try_from(sqe.nsid.checked_sub(1)?).ok()?;
    let shift = *block_shifts.get(index).filter(|s| **s > 0)?;
    let blocks = (sqe.cdw12 & 0xFFFF) + 1;
    Some(blocks.checked_shl(u32::from(shift)).unwrap_or(u32::MAX))
}

#[inline]
pub(crate) fn transfer(sqe: &Sqe, icd: usize, slot_bytes: u64) -> Result<Transfer, Status> {
    if sqe.psdt() == Psdt::Prp {
        // A fabrics host always sends an SGL; a PRP is acceptable only without data.
        return if sqe.dptr1 == 0 && sqe.dptr2 == 0 && icd == 0 {
            Ok(Transfer::None)
        } else {
            Err(Status::INVALID_FIELD)
        };
    }
    let d = SglDescriptor::from_dptr(sqe.dptr1, sqe.dptr2);
    let len = d.len;
    if u64::from(len) > slot_bytes {
        return Err(Status::DATA_SGL_LENGTH_INVALID);
    }
    let dir = sqe.opcode() & 0b11;
    if icd > 0 {
        if d.sgl_id != SGL_DATA_BLOCK_OFFSET || d.addr != 0 {
            return Err(Status::SGL_DESCRIPTOR_TYPE_INVALID);
        }
        if len as usize != icd || dir != 0b01 {
            return Err(Status::DATA_SGL_LENGTH_INVALID);
        }
        return Ok(Transfer::InCapsule(len));
    }
    if len == 0 {
        return Ok(Transfer::None);
    }
    if d.sgl_id != SGL_TRANSPORT_DATA_BLOCK {
        return Err(Status::SGL_DESCRIPTOR_TYPE_INVALID);
    }
    match dir {
        0b01 => Ok(Transfer::Solicit(len)),
        0b10 => Ok(Transfer::Read(len)),
        _ => Err(Status::INVALID_FIELD),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmemu_spec::{Cid, SglKind};

    fn sqe_with(opcode: u8, sgl_id: u8, addr: u64, len: u32) -> Sqe {
        let d = SglDescriptor {
            addr,
            len,
            reserved: [0; 3],
            sgl_id,
        };
        let (d1, d2) = d.to_dptr();
        Sqe {
            cdw0: Sqe::make_cdw0(opcode, Psdt::SglMptrContiguous, Cid(7)),
            dptr1: d1,
            dptr2: d2,
            ..Sqe::default()
        }
    }

    #[test]
    fn transfers_follow_the_sgl_and_the_opcode_direction() {
        let w = sqe_with(0x01, SGL_DATA_BLOCK_OFFSET, 0, 512);
        assert_eq!(transfer(&w, 512, 4096), Ok(Transfer::InCapsule(512)));
        assert_eq!(
            transfer(&w, 511, 4096),
            Err(Status::DATA_SGL_LENGTH_INVALID)
        );
        let w = sqe_with(0x01, SGL_TRANSPORT_DATA_BLOCK, 0, 8192);
        assert_eq!(transfer(&w, 0, 8192), Ok(Transfer::Solicit(8192)));
        assert_eq!(transfer(&w, 0, 4096), Err(Status::DATA_SGL_LENGTH_INVALID));
        let r = sqe_with(0x02, SGL_TRANSPORT_DATA_BLOCK, 0, 4096);
        assert_eq!(transfer(&r, 0, 4096), Ok(Transfer::Read(4096)));
        // A host address (plain Data Block) is never accepted over TCP.
        let bad = SglDescriptor::new(SglKind::DataBlock {
            addr: 0x1000,
            len: 4096,
        });
        let (d1, d2) = bad.to_dptr();
        let r = Sqe {
            dptr1: d1,
            dptr2: d2,
            ..r
        };
        assert_eq!(
            transfer(&r, 0, 4096),
            Err(Status::SGL_DESCRIPTOR_TYPE_INVALID)
        );
        // In-capsule data with a read opcode.
        let r = sqe_with(0x02, SGL_DATA_BLOCK_OFFSET, 0, 512);
        assert_eq!(
            transfer(&r, 512, 4096),
            Err(Status::DATA_SGL_LENGTH_INVALID)
        );
    }
}
