// SPDX-License-Identifier: Apache-2.0
//! VFIO_USER_DMA_MAP and VFIO_USER_DMA_UNMAP.

use std::os::fd::OwnedFd;

use tracing::debug;
use zerocopy::{FromBytes, IntoBytes};

use super::Reply;
use crate::Errno;
use crate::device::Device;
use crate::types::{DmaMap, DmaUnmap};
use crate::wire::{DMA_MAP_SIZE, DMA_UNMAP_SIZE, DmaMapWire, DmaUnmapWire};

const MAP_SIZE: u32 = DMA_MAP_SIZE;
const UNMAP_SIZE: u32 = DMA_UNMAP_SIZE;
const MAP_FLAGS: u32 = DmaMap::FLAG_READ | DmaMap::FLAG_WRITE;

/// Validates a DMA_MAP request; returns the map and its fd (0 or 1 fds accepted).
pub(crate) fn decode_map(
    payload: &[u8],
    mut fds: Vec<OwnedFd>,
) -> Result<(DmaMap, Option<OwnedFd>), Errno> {
    let (wire, _) = DmaMapWire::read_from_prefix(payload).map_err(|_| Errno::INVAL)?;
    if wire.argsz < MAP_SIZE || wire.flags & !MAP_FLAGS != 0 || wire.size == 0 {
        debug!(target: "guest", argsz = wire.argsz, flags = wire.flags, size = wire.size, "vfio-user: bad DMA_MAP");
        return Err(Errno::INVAL);
    }
    if fds.len() > 1 {
        debug!(target: "guest", fds = fds.len(), "vfio-user: DMA_MAP with more than one fd");
        return Err(Errno::INVAL);
    }
    let fd = fds.pop();
    // A range may end exactly at the top of the address space (last byte 2^64 - 1).
    let overflows = wire.addr.checked_add(wire.size - 1).is_none()
        || (fd.is_some() && wire.offset.checked_add(wire.size).is_none());
    if overflows {
        return Err(Errno::INVAL);
    }
    let map = DmaMap {
        flags: wire.flags,
        offset: wire.offset,
        iova: wire.addr,
        size: wire.size,
    };
    Ok((map, fd))
}

/// DMA_MAP: reply has no payload.
pub(super) fn map(
    device: &mut dyn Device,
    payload: &[u8],
    fds: Vec<OwnedFd>,
) -> Result<Reply<'static>, Errno> {
    let (map, fd) = decode_map(payload, fds)?;
    device.dma_map(&map, fd)?;
    Ok(Reply::default())
}

/// Validates a DMA_UNMAP request. GET_DIRTY_BITMAP is ENOTSUP; ALL needs addr == size == 0.
pub(crate) fn decode_unmap(payload: &[u8]) -> Result<(DmaUnmap, DmaUnmapWire), Errno> {
    let (wire, _) = DmaUnmapWire::read_from_prefix(payload).map_err(|_| Errno::INVAL)?;
    if wire.argsz < UNMAP_SIZE {
        return Err(Errno::INVAL);
    }
    if wire.flags & DmaUnmap::FLAG_GET_DIRTY_BITMAP != 0 {
        return Err(Errno::NOTSUP);
    }
    let valid = match wire.flags {
        DmaUnmap::FLAG_ALL => wire.addr == 0 && wire.size == 0,
        // QEMU with a virtual IOMMU unmaps up to the top of the address space: addr + size
        // may be exactly 2^64.
        0 => wire.size != 0 && wire.addr.checked_add(wire.size - 1).is_some(),
        _ => false,
    };
    if !valid {
        debug!(target: "guest", flags = wire.flags, addr = wire.addr, size = wire.size, "vfio-user: bad DMA_UNMAP");
        return Err(Errno::INVAL);
    }
    Ok((
        DmaUnmap {
            flags: wire.flags,
            iova: wire.addr,
            size: wire.size,
        },
        wire,
    ))
}

/// DMA_UNMAP: any attached fd (SPDK's client sends one) was closed by the caller; the reply
/// echoes the 24-byte request struct.
pub(super) fn unmap(device: &mut dyn Device, payload: &[u8]) -> Result<Reply<'static>, Errno> {
    let (unmap, wire) = decode_unmap(payload)?;
    device.dma_unmap(&unmap)?;
    Ok(Reply::bytes(wire.as_bytes().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unmap_wire(flags: u32, addr: u64, size: u64) -> Vec<u8> {
        DmaUnmapWire {
            argsz: 24,
            flags,
            addr,
            size,
        }
        .as_bytes()
        .to_vec()
    }

    #[test]
    fn unmap_flag_rules() {
        assert!(decode_unmap(&unmap_wire(DmaUnmap::FLAG_ALL, 0, 0)).is_ok());
        assert_eq!(
            decode_unmap(&unmap_wire(DmaUnmap::FLAG_ALL, 0x1000, 0)).err(),
            Some(Errno::INVAL)
        );
        assert_eq!(
            decode_unmap(&unmap_wire(1, 0x1000, 0x1000)).err(),
            Some(Errno::NOTSUP)
        );
        assert_eq!(
            decode_unmap(&unmap_wire(4, 0x1000, 0x1000)).err(),
            Some(Errno::INVAL)
        );
        assert_eq!(
            decode_unmap(&unmap_wire(0, 0x1000, 0)).err(),
            Some(Errno::INVAL)
        );
        assert_eq!(
            decode_unmap(&unmap_wire(0, u64::MAX, 2)).err(),
            Some(Errno::INVAL)
        );
        // Up to the top of the address space, as QEMU's vIOMMU sends: 0xfef00000 + size = 2^64.
        let top = decode_unmap(&unmap_wire(0, 0xfef0_0000, 0u64.wrapping_sub(0xfef0_0000)));
        assert_eq!(top.unwrap().0.size, 0xffff_ffff_0110_0000);
        assert_eq!(
            decode_unmap(&unmap_wire(0, 0x1000, 0x1000)).unwrap().0.iova,
            0x1000
        );
    }

    #[test]
    fn map_rules() {
        let w = |flags, addr, size| {
            DmaMapWire {
                argsz: 32,
                flags,
                offset: 0,
                addr,
                size,
            }
            .as_bytes()
            .to_vec()
        };
        assert!(decode_map(&w(3, 0x1000, 0x1000), vec![]).is_ok());
        assert_eq!(
            decode_map(&w(3, 0x1000, 0), vec![]).err(),
            Some(Errno::INVAL)
        );
        assert_eq!(
            decode_map(&w(0x10, 0x1000, 0x1000), vec![]).err(),
            Some(Errno::INVAL)
        );
        assert_eq!(
            decode_map(&w(3, u64::MAX, 0x1000), vec![]).err(),
            Some(Errno::INVAL)
        );
        assert_eq!(decode_map(&[0; 31], vec![]).err(), Some(Errno::INVAL));
        // The last page of the address space is a valid range.
        assert!(decode_map(&w(3, u64::MAX - 0xfff, 0x1000), vec![]).is_ok());
    }
}
