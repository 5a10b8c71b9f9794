// SPDX-License-Identifier: Apache-2.0
//! VFIO_USER_DEVICE_GET_REGION_INFO, VFIO_USER_REGION_READ and VFIO_USER_REGION_WRITE.

use tracing::debug;
use zerocopy::{FromBytes, IntoBytes};

use super::Reply;
use crate::Errno;
use crate::device::Device;
use crate::types::RegionInfo;
use crate::wire::{
    CAP_SPARSE_MMAP, CapHeaderWire, MAX_DATA_XFER, REGION_FLAG_CAPS, REGION_INFO_SIZE,
    RegionAccessWire, RegionInfoWire, SparseAreaWire, SparseCapWire,
};

const INFO_SIZE: usize = size_of::<RegionInfoWire>();
const SPARSE_CAP_SIZE: usize = size_of::<SparseCapWire>() + size_of::<SparseAreaWire>();
const ACCESS_SIZE: usize = size_of::<RegionAccessWire>();

/// DEVICE_GET_REGION_INFO.
///
/// Requests of any length >= 32 are accepted (SPDK sends 4064 bytes, QEMU 32). The reply's
/// `argsz` is the full size; only `min(full, client argsz)` bytes are sent. The sparse-mmap
/// capability (one area) is included only if it fits, and the region fd only together with
/// it, or with the full reply of an MMAP region without sparse areas; so a client that
/// retries with the full size (QEMU) gets exactly one fd once.
pub(super) fn info<'d>(
    device: &'d dyn Device,
    payload: &[u8],
    client_max_fds: u32,
) -> Result<Reply<'d>, Errno> {
    let (req, _) = RegionInfoWire::read_from_prefix(payload).map_err(|_| Errno::INVAL)?;
    let client_argsz = usize::try_from(req.argsz).map_err(|_| Errno::INVAL)?;
    if client_argsz < INFO_SIZE {
        debug!(target: "guest", argsz = req.argsz, "vfio-user: region info argsz too small");
        return Err(Errno::INVAL);
    }
    let info = device.region_info(req.index)?;
    Ok(build_info_reply(
        req.index,
        &info,
        client_argsz,
        client_max_fds,
    ))
}

fn build_info_reply<'d>(
    index: u32,
    info: &RegionInfo<'d>,
    client_argsz: usize,
    client_max_fds: u32,
) -> Reply<'d> {
    let area = info.sparse.first();
    let full = INFO_SIZE + if area.is_some() { SPARSE_CAP_SIZE } else { 0 };
    let caps_fit = area.is_some() && client_argsz >= full;
    let mmap = info.flags & RegionInfo::FLAG_MMAP != 0;
    let mut flags = info.flags & !REGION_FLAG_CAPS;
    if caps_fit {
        flags |= REGION_FLAG_CAPS;
    }
    let head = RegionInfoWire {
        argsz: u32::try_from(full).unwrap_or(u32::MAX),
        flags,
        index,
        cap_offset: if caps_fit { REGION_INFO_SIZE } else { 0 },
        size: info.size,
        offset: info.file_offset,
    };
    let mut payload = head.as_bytes().to_vec();
    if let Some(area) = area.filter(|_| caps_fit) {
        let cap = SparseCapWire {
            header: CapHeaderWire {
                id: CAP_SPARSE_MMAP,
                version: 1,
                next: 0,
            },
            nr_areas: 1,
            reserved: 0,
        };
        payload.extend_from_slice(cap.as_bytes());
        payload.extend_from_slice(
            SparseAreaWire {
                offset: area.offset,
                size: area.size,
            }
            .as_bytes(),
        );
    }
    let send_fd = mmap && client_max_fds >= 1 && (caps_fit || area.is_none());
    Reply {
        payload,
        fd: if send_fd { info.fd } else { None },
    }
}

/// Decodes the REGION_READ/WRITE prefix and checks `count` and the offset range.
fn access(payload: &[u8]) -> Result<(RegionAccessWire, &[u8]), Errno> {
    let (req, data) = RegionAccessWire::read_from_prefix(payload).map_err(|_| Errno::INVAL)?;
    if req.count > MAX_DATA_XFER {
        debug!(target: "guest", count = req.count, "vfio-user: region access too large");
        return Err(Errno::TOOBIG);
    }
    if req.offset.checked_add(u64::from(req.count)).is_none() {
        return Err(Errno::INVAL);
    }
    Ok((req, data))
}

/// REGION_READ: reply = the 16-byte request prefix followed by `count` bytes of data.
pub(super) fn read(device: &mut dyn Device, payload: &[u8]) -> Result<Reply<'static>, Errno> {
    let (req, _) = access(payload)?;
    let count = usize::try_from(req.count).map_err(|_| Errno::INVAL)?;
    let mut reply = vec![0u8; ACCESS_SIZE + count];
    let (head, data) = reply
        .split_at_mut_checked(ACCESS_SIZE)
        .ok_or(Errno::INVAL)?;
    head.copy_from_slice(req.as_bytes());
    device.region_read(req.region, req.offset, data)?;
    Ok(Reply::bytes(reply))
}

/// REGION_WRITE: the payload must be exactly 16 + `count` bytes; reply = the 16-byte prefix.
pub(super) fn write(device: &mut dyn Device, payload: &[u8]) -> Result<Reply<'static>, Errno> {
    let (req, data) = access(payload)?;
    if u64::try_from(data.len()).ok() != Some(u64::from(req.count)) {
        debug!(target: "guest", count = req.count, len = data.len(), "vfio-user: region write size mismatch");
        return Err(Errno::INVAL);
    }
    device.region_write(req.region, req.offset, data)?;
    Ok(Reply::bytes(req.as_bytes().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::SparseArea;
    use std::os::fd::AsFd;

    #[test]
    fn truncated_reply_has_full_argsz_no_caps_no_fd() {
        let (f, _g) = std::os::unix::net::UnixStream::pair().unwrap();
        let info = RegionInfo {
            flags: 7,
            size: 0x4000,
            file_offset: 0,
            sparse: vec![SparseArea {
                offset: 0x1000,
                size: 0x1000,
            }],
            fd: Some(f.as_fd()),
        };
        let r = build_info_reply(0, &info, 32, 16);
        assert_eq!(r.payload.len(), 32);
        let (w, _) = RegionInfoWire::read_from_prefix(&r.payload).unwrap();
        assert_eq!((w.argsz, w.flags, w.cap_offset), (64, 7, 0));
        assert!(r.fd.is_none());

        let r = build_info_reply(0, &info, 4064, 16);
        assert_eq!(r.payload.len(), 64);
        let (w, _) = RegionInfoWire::read_from_prefix(&r.payload).unwrap();
        assert_eq!((w.argsz, w.flags, w.cap_offset), (64, 15, 32));
        assert!(r.fd.is_some());

        // A client that accepts no fds gets none.
        assert!(build_info_reply(0, &info, 64, 0).fd.is_none());
    }

    #[test]
    fn whole_region_mmap_sends_fd_with_full_reply() {
        let (f, _g) = std::os::unix::net::UnixStream::pair().unwrap();
        let info = RegionInfo {
            flags: 7,
            size: 0x1000,
            file_offset: 0,
            sparse: vec![],
            fd: Some(f.as_fd()),
        };
        let r = build_info_reply(2, &info, 32, 1);
        assert_eq!(r.payload.len(), 32);
        assert!(r.fd.is_some());
        // Without MMAP the fd is never sent.
        let info = RegionInfo { flags: 3, ..info };
        assert!(build_info_reply(2, &info, 32, 1).fd.is_none());
    }

    #[test]
    fn access_limits() {
        let big = RegionAccessWire {
            offset: 0,
            region: 0,
            count: MAX_DATA_XFER + 1,
        };
        assert_eq!(access(big.as_bytes()).err(), Some(Errno::TOOBIG));
        let wrap = RegionAccessWire {
            offset: u64::MAX,
            region: 0,
            count: 2,
        };
        assert_eq!(access(wrap.as_bytes()).err(), Some(Errno::INVAL));
        assert_eq!(access(&[0; 15]).err(), Some(Errno::INVAL));
    }
}
