// SPDX-License-Identifier: Apache-2.0
//! What sysfs says about a PCI function: its directory, the driver bound to it, its IOMMU
//! group, and the errors that tell the user how to fix a missing piece.

use std::io;
use std::path::PathBuf;

use super::PciAddress;
use crate::transport::TransportError;

/// Where the kernel lists PCI functions.
pub const SYSFS_PCI_DEVICES: &str = "/sys/bus/pci/devices";
/// VFIO's no-IOMMU switch (only in kernels built with CONFIG_VFIO_NOIOMMU).
pub const NOIOMMU_PARAM: &str = "/sys/module/vfio/parameters/enable_unsafe_noiommu_mode";

/// `/sys/bus/pci/devices/ADDR`.
pub fn device_dir(addr: PciAddress) -> PathBuf {
    PathBuf::from(SYSFS_PCI_DEVICES).join(addr.to_string())
}

/// The name of the driver bound to `addr` (`nvme`, `uio_pci_generic`, `vfio-pci`), if any.
/// Fails if the function does not exist.
pub fn bound_driver(addr: PciAddress) -> Result<Option<String>, TransportError> {
    let dir = device_dir(addr);
    if !dir.exists() {
        return Err(TransportError::Setup(format!(
            "no PCI function {addr} in {SYSFS_PCI_DEVICES} (lspci -D lists the functions)"
        )));
    }
    Ok(link_name(dir.join("driver")))
}

/// The IOMMU group number of `addr`, if it has one.
pub fn iommu_group(addr: PciAddress) -> Option<String> {
    link_name(device_dir(addr).join("iommu_group"))
}

/// The domain type of `addr`'s IOMMU group when it translates DMA (`DMA`, `DMA-FQ`), so
/// physical addresses do not reach memory; `None` without a group or in an identity domain.
pub fn translating_iommu(addr: PciAddress) -> Option<String> {
    let group = iommu_group(addr)?;
    let path = PathBuf::from("/sys/kernel/iommu_groups")
        .join(group)
        .join("type");
    let kind = std::fs::read_to_string(path).ok()?.trim().to_string();
    kind.starts_with("DMA").then_some(kind)
}

fn link_name(link: PathBuf) -> Option<String> {
    let target = std::fs::read_link(link).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// Opens `path` for reading and writing (a BAR or config file, a VFIO node).
pub(super) fn open_rw(path: &std::path::Path) -> Result<std::fs::File, TransportError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| io_error(path, e))
}

/// An error for a failed open/read of `path`, with the fix for the usual causes.
pub fn io_error(path: &std::path::Path, e: io::Error) -> TransportError {
    let hint = match e.kind() {
        io::ErrorKind::PermissionDenied => ": permission denied (run as root)",
        io::ErrorKind::NotFound => ": not found",
        _ => "",
    };
    TransportError::Io {
        what: format!("cannot open {}{hint}", path.display()),
        source: e,
    }
}
