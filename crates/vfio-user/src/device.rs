// SPDX-License-Identifier: Apache-2.0
//! The seam between the protocol layer and a device implementation.

use std::os::fd::OwnedFd;

use crate::Errno;
use crate::types::{DeviceInfo, DmaMap, DmaUnmap, IrqData, IrqInfo, RegionInfo, SetIrqs};

/// A device served over vfio-user.
///
/// The server calls these methods from the connection's thread, one request at a time, only
/// after the request passed protocol validation (see the crate docs). Returned errnos go back
/// to the client in an error reply (unless the request was NO_REPLY); a returned errno of 0
/// is sent as EIO.
pub trait Device {
    /// DEVICE_GET_INFO.
    fn device_info(&self) -> DeviceInfo;
    /// DEVICE_GET_REGION_INFO for `index` (may be out of range: return EINVAL).
    fn region_info(&self, index: u32) -> Result<RegionInfo<'_>, Errno>;
    /// DEVICE_GET_IRQ_INFO for `index` (may be out of range: return EINVAL).
    fn irq_info(&self, index: u32) -> Result<IrqInfo, Errno>;
    /// DEVICE_SET_IRQS. `data` matches `req.data()`; for eventfds it holds 0 or `count` fds.
    fn set_irqs(&mut self, req: &SetIrqs, data: IrqData) -> Result<(), Errno>;
    /// REGION_READ: fill `data` (at most 1 MiB) from `index` at `offset`.
    fn region_read(&mut self, index: u32, offset: u64, data: &mut [u8]) -> Result<(), Errno>;
    /// REGION_WRITE: store `data` (at most 1 MiB) into `index` at `offset`.
    fn region_write(&mut self, index: u32, offset: u64, data: &[u8]) -> Result<(), Errno>;
    /// DMA_MAP with the client's memory fd, if it sent one.
    fn dma_map(&mut self, map: &DmaMap, fd: Option<OwnedFd>) -> Result<(), Errno>;
    /// DMA_UNMAP. Every reference to the region must be gone when this returns.
    fn dma_unmap(&mut self, unmap: &DmaUnmap) -> Result<(), Errno>;
    /// DEVICE_RESET.
    fn reset(&mut self) -> Result<(), Errno>;
    /// The client went away or the connection was dropped: drop its maps and eventfds.
    /// Called exactly once per [`crate::serve_connection`] call.
    fn disconnected(&mut self);
    /// Whether the device cannot serve a client now (e.g. its backend stopped answering
    /// and its state cannot be trusted until it answers again). Checked before and after
    /// each request: the client is then dropped, and a later client's request gets ENODEV
    /// for as long as this stays true. Default: never.
    fn failed(&self) -> bool {
        false
    }
    /// Whether a new client may attach now (an access policy such as an NVMe-oF subsystem's
    /// host list). Asked when a client's VERSION arrives: a refused client gets EACCES and
    /// is closed; the device says why in its own log line. Default: always.
    fn admits_clients(&self) -> bool {
        true
    }
}
