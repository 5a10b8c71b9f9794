// SPDX-License-Identifier: Apache-2.0
//! VFIO_USER_DEVICE_GET_INFO and VFIO_USER_DEVICE_RESET.

use zerocopy::{FromBytes, IntoBytes};

use super::Reply;
use crate::Errno;
use crate::device::Device;
use crate::wire::{DEVICE_INFO_SIZE, DeviceInfoWire};

const INFO_SIZE: u32 = DEVICE_INFO_SIZE;

/// DEVICE_GET_INFO: the request needs argsz >= 16; the reply is exactly 16 bytes (no device
/// capabilities: QEMU's and SPDK's buffers hold only 16).
pub(super) fn info(device: &dyn Device, payload: &[u8]) -> Result<Reply<'static>, Errno> {
    let (req, _) = DeviceInfoWire::read_from_prefix(payload).map_err(|_| Errno::INVAL)?;
    if req.argsz < INFO_SIZE {
        return Err(Errno::INVAL);
    }
    let info = device.device_info();
    let reply = DeviceInfoWire {
        argsz: INFO_SIZE,
        flags: info.flags,
        num_regions: info.num_regions,
        num_irqs: info.num_irqs,
    };
    Ok(Reply::bytes(reply.as_bytes().to_vec()))
}

/// DEVICE_RESET: header only (a stray payload is ignored); the reply is header only.
pub(super) fn reset(device: &mut dyn Device) -> Result<Reply<'static>, Errno> {
    device.reset()?;
    Ok(Reply::default())
}
