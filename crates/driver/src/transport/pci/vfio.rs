// SPDX-License-Identifier: Apache-2.0
//! Opening a function bound to `vfio-pci`: container, group (an IOMMU group, or a no-IOMMU
//! group `/dev/vfio/noiommu-N`), IOMMU model, device fd and its regions.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nvmemu_mem::vfio;

use super::sysfs::{self, NOIOMMU_PARAM, open_rw};
use super::{Bar0, ConfigAccess, Dma, PciAddress};
use crate::transport::TransportError;

/// VFIO_PCI_BAR0_REGION_INDEX.
const BAR0_REGION: u32 = 0;
/// VFIO_PCI_CONFIG_REGION_INDEX.
const CONFIG_REGION: u32 = 7;

/// What an open VFIO device leaves the transport.
pub(super) struct VfioDevice {
    pub bar0: Bar0,
    pub config: ConfigAccess,
    pub dma: Dma,
    /// The group (and, without an IOMMU, the container) stay open while the device is used.
    pub keep: Vec<OwnedFd>,
}

pub(super) fn ioctl_failed(what: String) -> impl FnOnce(nvmemu_mem::MemError) -> TransportError {
    move |e| TransportError::Io {
        what,
        source: std::io::Error::other(e),
    }
}

pub(super) fn open(addr: PciAddress) -> Result<VfioDevice, TransportError> {
    let Some(group_no) = sysfs::iommu_group(addr) else {
        return Err(TransportError::Setup(format!(
            "{addr} has no IOMMU group: boot with the IOMMU on (intel_iommu=on / amd_iommu=on), \
             or enable VFIO's no-IOMMU mode (echo 1 > {NOIOMMU_PARAM}) and bind it to vfio-pci again"
        )));
    };
    let noiommu = Path::new("/dev/vfio").join(format!("noiommu-{group_no}"));
    let (group_path, model) = if noiommu.exists() {
        (noiommu, vfio::VFIO_NOIOMMU_IOMMU)
    } else {
        (
            Path::new("/dev/vfio").join(&group_no),
            vfio::VFIO_TYPE1V2_IOMMU,
        )
    };
    let container = open_rw(Path::new("/dev/vfio/vfio"))?;
    let version = vfio::api_version(container.as_fd()).map_err(ioctl_failed(
        "VFIO_GET_API_VERSION on /dev/vfio/vfio".into(),
    ))?;
    if version != vfio::VFIO_API_VERSION
        || !vfio::check_extension(container.as_fd(), model).unwrap_or(false)
    {
        return Err(TransportError::Setup(format!(
            "the kernel's VFIO (API version {version}) lacks IOMMU model {model} \
             (3: type1v2, 8: no-IOMMU; no-IOMMU needs {NOIOMMU_PARAM} = Y)"
        )));
    }
    let group = open_rw(&group_path)?;
    let flags = vfio::group_flags(group.as_fd()).map_err(ioctl_failed(format!(
        "VFIO_GROUP_GET_STATUS on {}",
        group_path.display()
    )))?;
    if flags & vfio::VFIO_GROUP_FLAGS_VIABLE == 0 {
        return Err(TransportError::Setup(format!(
            "IOMMU group {group_no} is not viable: bind every function in \
             /sys/kernel/iommu_groups/{group_no}/devices to vfio-pci (or unbind it)"
        )));
    }
    vfio::group_set_container(group.as_fd(), container.as_fd()).map_err(ioctl_failed(
        "VFIO_GROUP_SET_CONTAINER (is another process using the group?)".into(),
    ))?;
    vfio::set_iommu(container.as_fd(), model).map_err(ioctl_failed("VFIO_SET_IOMMU".into()))?;
    let name =
        CString::new(addr.to_string()).map_err(|_| TransportError::BadAccess { offset: 0 })?;
    let device: OwnedFd = vfio::group_device_fd(group.as_fd(), &name).map_err(ioctl_failed(
        format!("VFIO_GROUP_GET_DEVICE_FD for {addr} (no-IOMMU needs CAP_SYS_RAWIO: run as root)"),
    ))?;
    let device = File::from(device);
    let bar = vfio::region_info(device.as_fd(), BAR0_REGION)
        .map_err(ioctl_failed("VFIO_DEVICE_GET_REGION_INFO (BAR0)".into()))?;
    if bar.flags & vfio::VFIO_REGION_INFO_FLAG_MMAP == 0 {
        return Err(TransportError::Unsupported(format!(
            "vfio-pci does not let BAR0 of {addr} be mmapped"
        )));
    }
    let cfg = vfio::region_info(device.as_fd(), CONFIG_REGION)
        .map_err(ioctl_failed("VFIO_DEVICE_GET_REGION_INFO (config)".into()))?;
    let config_file = device.try_clone().map_err(|e| TransportError::Io {
        what: "dup of the VFIO device fd".into(),
        source: e,
    })?;
    let mut keep = vec![OwnedFd::from(group)];
    let dma = if model == vfio::VFIO_NOIOMMU_IOMMU {
        keep.push(OwnedFd::from(container));
        Dma::Physical
    } else {
        Dma::Iommu {
            container: OwnedFd::from(container),
        }
    };
    Ok(VfioDevice {
        bar0: Bar0 {
            file: device,
            offset: bar.offset,
            size: bar.size,
        },
        config: ConfigAccess {
            file: config_file,
            offset: cfg.offset,
        },
        dma,
        keep,
    })
}
