// SPDX-License-Identifier: Apache-2.0
//! The Linux VFIO ioctls a userspace driver needs (`include/uapi/linux/vfio.h`): container
//! and group set-up, the device fd, region info, and type1 IOMMU DMA maps.
//!
//! VFIO numbers its ioctls with `_IO(';', 100 + n)` whatever the argument, and passes a
//! pointer, an integer or a string depending on the call; each wrapper below states which.
//! Every call goes through rustix's `ioctl` with one small `Ioctl` impl, so the only unsafe
//! code is the one `ioctl` call per wrapper with a SAFETY line naming its argument.

use std::ffi::CStr;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};

use rustix::ioctl::{Ioctl, IoctlOutput, Opcode, opcode};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::MemError;
use crate::mmap::MmapRegion;

/// `VFIO_API_VERSION`: the only version there is.
pub const VFIO_API_VERSION: i32 = 0;
/// `VFIO_TYPE1v2_IOMMU`: the x86 IOMMU model.
pub const VFIO_TYPE1V2_IOMMU: u32 = 3;
/// `VFIO_NOIOMMU_IOMMU`: no translation; the device sees physical addresses.
pub const VFIO_NOIOMMU_IOMMU: u32 = 8;
/// `VFIO_GROUP_FLAGS_VIABLE`: every device of the group is bound to a VFIO driver.
pub const VFIO_GROUP_FLAGS_VIABLE: u32 = 1;
/// `VFIO_REGION_INFO_FLAG_MMAP`.
pub const VFIO_REGION_INFO_FLAG_MMAP: u32 = 1 << 2;

const fn vfio_op(n: u8) -> Opcode {
    opcode::none(b';', 100 + n)
}
const GET_API_VERSION: Opcode = vfio_op(0);
const CHECK_EXTENSION: Opcode = vfio_op(1);
const SET_IOMMU: Opcode = vfio_op(2);
const GROUP_GET_STATUS: Opcode = vfio_op(3);
const GROUP_SET_CONTAINER: Opcode = vfio_op(4);
const GROUP_GET_DEVICE_FD: Opcode = vfio_op(6);
const DEVICE_GET_REGION_INFO: Opcode = vfio_op(8);
const IOMMU_MAP_DMA: Opcode = vfio_op(13);
const IOMMU_UNMAP_DMA: Opcode = vfio_op(14);

/// `struct vfio_group_status`.
#[repr(C)]
#[derive(Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
struct GroupStatus {
    argsz: u32,
    flags: u32,
}
const _: () = assert!(size_of::<GroupStatus>() == 8);

/// `struct vfio_region_info` (capability chain not requested).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct RegionInfo {
    argsz: u32,
    /// `VFIO_REGION_INFO_FLAG_*`.
    pub flags: u32,
    index: u32,
    cap_offset: u32,
    /// Region size in bytes.
    pub size: u64,
    /// Offset of the region in the device fd (for pread/pwrite/mmap).
    pub offset: u64,
}
const _: () = assert!(size_of::<RegionInfo>() == 32);

/// `struct vfio_iommu_type1_dma_map`.
#[repr(C)]
#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
struct DmaMap {
    argsz: u32,
    flags: u32,
    vaddr: u64,
    iova: u64,
    size: u64,
}
const _: () = assert!(size_of::<DmaMap>() == 32);

/// `struct vfio_iommu_type1_dma_unmap` (without the trailing bitmap).
#[repr(C)]
#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
struct DmaUnmap {
    argsz: u32,
    flags: u32,
    iova: u64,
    size: u64,
}
const _: () = assert!(size_of::<DmaUnmap>() == 24);

/// One VFIO ioctl: an `_IO` opcode and whatever VFIO reads or writes through the argument.
struct VfioCall {
    op: Opcode,
    arg: *mut core::ffi::c_void,
}

// SAFETY: each constructor below pairs an opcode with the argument VFIO documents for it
// (a pointer to a live struct with `argsz` set, a pointer to an int, a NUL-terminated
// string, or a plain integer); IS_MUTATING is true so rustix never assumes the argument is
// left untouched; the output is the ioctl's return value and reads nothing through `arg`.
unsafe impl Ioctl for VfioCall {
    type Output = IoctlOutput;
    const IS_MUTATING: bool = true;
    fn opcode(&self) -> Opcode {
        self.op
    }
    fn as_ptr(&mut self) -> *mut core::ffi::c_void {
        self.arg
    }
    unsafe fn output_from_ptr(
        out: IoctlOutput,
        _: *mut core::ffi::c_void,
    ) -> rustix::io::Result<IoctlOutput> {
        Ok(out)
    }
}

fn err(op: &'static str) -> impl FnOnce(rustix::io::Errno) -> MemError {
    move |e| crate::memfd::os(op, e)
}

/// `argsz` of a VFIO argument struct (all are a few dozen bytes).
#[allow(clippy::cast_possible_truncation)]
const fn argsz<T>() -> u32 {
    size_of::<T>() as u32
}

/// Pointer to `v` as the untyped ioctl argument.
fn ptr<T>(v: &mut T) -> *mut core::ffi::c_void {
    (v as *mut T).cast()
}

/// An integer passed by value in the pointer-sized ioctl argument.
fn int_arg(v: u32) -> *mut core::ffi::c_void {
    std::ptr::without_provenance_mut(v as usize)
}

/// `VFIO_GET_API_VERSION` on a container fd (`/dev/vfio/vfio`).
pub fn api_version(container: BorrowedFd<'_>) -> Result<i32, MemError> {
    let call = VfioCall {
        op: GET_API_VERSION,
        arg: std::ptr::null_mut(),
    };
    // SAFETY: GET_API_VERSION takes no argument; `container` is a live fd.
    unsafe { rustix::ioctl::ioctl(container, call) }.map_err(err("VFIO_GET_API_VERSION"))
}

/// `VFIO_CHECK_EXTENSION`: whether the container supports IOMMU model `ext`.
pub fn check_extension(container: BorrowedFd<'_>, ext: u32) -> Result<bool, MemError> {
    let call = VfioCall {
        op: CHECK_EXTENSION,
        arg: int_arg(ext),
    };
    // SAFETY: CHECK_EXTENSION takes the extension number by value, never as a pointer.
    let r =
        unsafe { rustix::ioctl::ioctl(container, call) }.map_err(err("VFIO_CHECK_EXTENSION"))?;
    Ok(r > 0)
}

/// `VFIO_SET_IOMMU`: give the container its IOMMU model (after a group joined it).
pub fn set_iommu(container: BorrowedFd<'_>, model: u32) -> Result<(), MemError> {
    let call = VfioCall {
        op: SET_IOMMU,
        arg: int_arg(model),
    };
    // SAFETY: SET_IOMMU takes the model number by value, never as a pointer.
    unsafe { rustix::ioctl::ioctl(container, call) }.map_err(err("VFIO_SET_IOMMU"))?;
    Ok(())
}

/// `VFIO_GROUP_GET_STATUS`: the group's flags (`VFIO_GROUP_FLAGS_VIABLE`, ...).
pub fn group_flags(group: BorrowedFd<'_>) -> Result<u32, MemError> {
    let mut st = GroupStatus {
        argsz: argsz::<GroupStatus>(),
        flags: 0,
    };
    let call = VfioCall {
        op: GROUP_GET_STATUS,
        arg: ptr(&mut st),
    };
    // SAFETY: `st` is a live vfio_group_status with argsz set; the kernel writes at most
    // argsz bytes into it during the call.
    unsafe { rustix::ioctl::ioctl(group, call) }.map_err(err("VFIO_GROUP_GET_STATUS"))?;
    Ok(st.flags)
}

/// `VFIO_GROUP_SET_CONTAINER`: add `group` to `container`.
pub fn group_set_container(
    group: BorrowedFd<'_>,
    container: BorrowedFd<'_>,
) -> Result<(), MemError> {
    let mut fd: RawFd = std::os::fd::AsRawFd::as_raw_fd(&container);
    let call = VfioCall {
        op: GROUP_SET_CONTAINER,
        arg: ptr(&mut fd),
    };
    // SAFETY: SET_CONTAINER reads one int (the container fd, live for the call) through
    // the pointer.
    unsafe { rustix::ioctl::ioctl(group, call) }.map_err(err("VFIO_GROUP_SET_CONTAINER"))?;
    Ok(())
}

/// `VFIO_GROUP_GET_DEVICE_FD`: the fd of device `name` (its PCI address) in `group`.
pub fn group_device_fd(group: BorrowedFd<'_>, name: &CStr) -> Result<OwnedFd, MemError> {
    let call = VfioCall {
        op: GROUP_GET_DEVICE_FD,
        arg: name.as_ptr().cast_mut().cast(),
    };
    // SAFETY: GET_DEVICE_FD only reads the NUL-terminated string, which outlives the call.
    let fd =
        unsafe { rustix::ioctl::ioctl(group, call) }.map_err(err("VFIO_GROUP_GET_DEVICE_FD"))?;
    if fd < 0 {
        return Err(err("VFIO_GROUP_GET_DEVICE_FD")(rustix::io::Errno::BADF));
    }
    // SAFETY: on success the ioctl returns a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `VFIO_DEVICE_GET_REGION_INFO` for region `index` (0-5 BARs, 7 config space).
pub fn region_info(device: BorrowedFd<'_>, index: u32) -> Result<RegionInfo, MemError> {
    let mut info = RegionInfo {
        argsz: argsz::<RegionInfo>(),
        index,
        ..RegionInfo::default()
    };
    let call = VfioCall {
        op: DEVICE_GET_REGION_INFO,
        arg: ptr(&mut info),
    };
    // SAFETY: `info` is a live vfio_region_info with argsz set; the kernel writes at most
    // argsz bytes into it (a capability chain that does not fit is only announced).
    unsafe { rustix::ioctl::ioctl(device, call) }.map_err(err("VFIO_DEVICE_GET_REGION_INFO"))?;
    Ok(info)
}

/// `VFIO_IOMMU_MAP_DMA`: let the device read and write all of `region` at `iova`. The
/// kernel pins the pages; they stay pinned (even if `region` is dropped) until unmapped.
pub fn map_dma(container: BorrowedFd<'_>, region: &MmapRegion, iova: u64) -> Result<(), MemError> {
    let mut map = DmaMap {
        argsz: argsz::<DmaMap>(),
        flags: 0b11, // VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE
        vaddr: region.addr() as u64,
        iova,
        size: region.len(),
    };
    let call = VfioCall {
        op: IOMMU_MAP_DMA,
        arg: ptr(&mut map),
    };
    // SAFETY: MAP_DMA reads the live struct; the range it names is `region`'s own mapping,
    // which the kernel pins by itself, so no Rust object is aliased by the device.
    unsafe { rustix::ioctl::ioctl(container, call) }.map_err(err("VFIO_IOMMU_MAP_DMA"))?;
    Ok(())
}

/// `VFIO_IOMMU_UNMAP_DMA` of exactly `[iova, iova + size)`.
pub fn unmap_dma(container: BorrowedFd<'_>, iova: u64, size: u64) -> Result<(), MemError> {
    let mut unmap = DmaUnmap {
        argsz: argsz::<DmaUnmap>(),
        flags: 0,
        iova,
        size,
    };
    let call = VfioCall {
        op: IOMMU_UNMAP_DMA,
        arg: ptr(&mut unmap),
    };
    // SAFETY: UNMAP_DMA reads the live struct and writes back `size` (unmapped bytes).
    unsafe { rustix::ioctl::ioctl(container, call) }.map_err(err("VFIO_IOMMU_UNMAP_DMA"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn opcodes_match_the_uapi_header() {
        // _IO(';', 100 + n) = (0x3B << 8) | (100 + n).
        assert_eq!(GET_API_VERSION, 0x3B64);
        assert_eq!(GROUP_GET_DEVICE_FD, 0x3B6A);
        assert_eq!(DEVICE_GET_REGION_INFO, 0x3B6C);
        assert_eq!(IOMMU_MAP_DMA, 0x3B71);
        assert_eq!(IOMMU_UNMAP_DMA, 0x3B72);
    }

    #[test]
    fn ioctl_on_a_non_vfio_fd_is_an_error_not_a_crash() {
        let f = tempfile::tempfile().unwrap();
        assert!(api_version(f.as_fd()).is_err());
        assert!(group_flags(f.as_fd()).is_err());
        assert!(region_info(f.as_fd(), 0).is_err());
    }
}
