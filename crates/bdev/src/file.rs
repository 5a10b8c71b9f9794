// SPDX-License-Identifier: Apache-2.0
//! The storage of a file-backed bdev (SPDK's aio and uring bdevs): a regular file or a block
//! device, opened twice: with `O_DIRECT` where the file system allows it (transfers that
//! meet its alignment bypass the page cache), and buffered for the rest.
//!
//! The controller moves a namespace's data through its own io_uring (`nvmemu_mem::uring`)
//! with the fds this hands out, so its poller never blocks on the file. The blocking calls
//! here serve only a controller that could make neither an io_uring nor worker threads.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nvmemu_mem::MmapRegion;
use rustix::fs::{FallocateFlags, FileType, Mode, OFlags, StatxFlags};

use crate::{BdevError, BdevOp};

/// Bytes moved per system call by the blocking path.
const BOUNCE: usize = 128 << 10;

/// Which SPDK module a file bdev answers as (they differ in name and product name only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileEngine {
    /// `bdev_aio_create`.
    Aio,
    /// `bdev_uring_create`.
    Uring,
}

/// An open backing file.
#[derive(Debug)]
pub struct FileBacking {
    path: PathBuf,
    buffered: Arc<OwnedFd>,
    /// The same file with `O_DIRECT`, when the file system accepts it.
    direct: Option<Arc<OwnedFd>>,
    /// `O_DIRECT`'s alignment of memory addresses and of file offsets and lengths.
    dio_align: (u64, u64),
    readonly: bool,
    /// Its size in bytes when opened.
    size: u64,
    /// The logical block size of a block device (`None` for a regular file).
    device_block_size: Option<u32>,
    /// A transfer that could not use `O_DIRECT` was logged (once per bdev).
    logged_buffered: AtomicBool,
}

impl FileBacking {
    /// Open `path` (read-write unless `readonly`); an error names the file and the errno.
    pub(crate) fn open(path: &Path, readonly: bool) -> Result<FileBacking, BdevError> {
        let open_err = |source| BdevError::Open {
            path: path.display().to_string(),
            source,
        };
        let access = if readonly {
            OFlags::RDONLY
        } else {
            OFlags::RDWR
        };
        let flags = access | OFlags::CLOEXEC;
        let buffered = rustix::fs::open(path, flags, Mode::empty()).map_err(open_err)?;
        let stat = rustix::fs::fstat(&buffered).map_err(open_err)?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        let device_block_size = match kind {
            FileType::BlockDevice => {
                Some(rustix::fs::ioctl_blksszget(&buffered).map_err(open_err)?)
            }
            FileType::RegularFile => None,
            _ => return Err(open_err(rustix::io::Errno::INVAL)),
        };
        let size = rustix::fs::seek(&buffered, rustix::fs::SeekFrom::End(0)).map_err(open_err)?;
        let direct = match rustix::fs::open(path, flags | OFlags::DIRECT, Mode::empty()) {
            Ok(fd) => Some(Arc::new(fd)),
            Err(e) => {
                tracing::info!(path = %path.display(), error = %e, "O_DIRECT refused by the file system; the namespace uses the page cache");
                None
            }
        };
        let dio_align = direct_alignment(&buffered, device_block_size);
        Ok(FileBacking {
            path: path.to_owned(),
            buffered: Arc::new(buffered),
            direct,
            dio_align,
            readonly,
            size,
            device_block_size,
            logged_buffered: AtomicBool::new(false),
        })
    }

    /// The path it was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether it was opened read-only.
    pub fn is_readonly(&self) -> bool {
        self.readonly
    }

    /// Whether `O_DIRECT` is in use for aligned transfers.
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// Its size in bytes when opened.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// A block device's logical block size.
    pub(crate) fn device_block_size(&self) -> Option<u32> {
        self.device_block_size
    }

    /// The fd without `O_DIRECT` (flush, deallocate, any transfer).
    pub fn buffered_fd(&self) -> &Arc<OwnedFd> {
        &self.buffered
    }

    /// `O_DIRECT`'s (memory address, file offset and length) alignment; None when the
    /// file system refused `O_DIRECT`.
    pub fn dio_align(&self) -> Option<(u64, u64)> {
        self.direct.as_ref().map(|_| self.dio_align)
    }

    /// The fd for a transfer: the `O_DIRECT` one if `direct` (the caller checked the
    /// transfer against [`FileBacking::dio_align`]) and the file has one, else the
    /// buffered one; the first transfer that could not go direct is logged.
    pub fn fd_for(&self, direct: bool) -> &Arc<OwnedFd> {
        match &self.direct {
            Some(fd) if direct => fd,
            Some(_) => {
                if !self.logged_buffered.swap(true, Ordering::Relaxed) {
                    tracing::info!(path = %self.path.display(), "a transfer not aligned for O_DIRECT goes through the page cache (logged once per bdev)");
                }
                &self.buffered
            }
            None => &self.buffered,
        }
    }

    /// Blocking read of `len` bytes at `offset` into `dst` at `dst_offset`.
    pub(crate) fn read(
        &self,
        offset: u64,
        dst: &MmapRegion,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), BdevError> {
        let mut buf = vec![0u8; bounce_len(len)];
        for (done, n) in pieces(len) {
            let chunk = buf.get_mut(..n).unwrap_or_default();
            self.pread_all(BdevOp::Read, offset + done, chunk)?;
            dst.copy_from(dst_offset + done, chunk)
                .map_err(|source| buffer_err(BdevOp::Read, offset, len, source))?;
        }
        Ok(())
    }

    /// Blocking write of `len` bytes of `src` at `src_offset` to `offset`.
    pub(crate) fn write(
        &self,
        offset: u64,
        src: &MmapRegion,
        src_offset: u64,
        len: u64,
    ) -> Result<(), BdevError> {
        let op = BdevOp::Write;
        let mut buf = vec![0u8; bounce_len(len)];
        for (done, n) in pieces(len) {
            let chunk = buf.get_mut(..n).unwrap_or_default();
            src.copy_to(src_offset + done, chunk)
                .map_err(|source| buffer_err(op, offset, len, source))?;
            let mut at = 0;
            while let Some(rest) = chunk.get(at..).filter(|r| !r.is_empty()) {
                let pos = offset + done + at as u64;
                at += rustix::io::pwrite(self.buffered.as_fd(), rest, pos)
                    .map_err(io_err(op, pos, n as u64))?;
            }
        }
        Ok(())
    }

    /// Blocking compare of `len` bytes at `offset` with `src` at `src_offset`.
    pub(crate) fn compare(
        &self,
        offset: u64,
        src: &MmapRegion,
        src_offset: u64,
        len: u64,
    ) -> Result<bool, BdevError> {
        let op = BdevOp::Compare;
        let (mut ours, mut theirs) = (vec![0u8; bounce_len(len)], vec![0u8; bounce_len(len)]);
        for (done, n) in pieces(len) {
            let (a, b) = (
                ours.get_mut(..n).unwrap_or_default(),
                theirs.get_mut(..n).unwrap_or_default(),
            );
            self.pread_all(op, offset + done, a)?;
            src.copy_to(src_offset + done, b)
                .map_err(|source| buffer_err(op, offset, len, source))?;
            if a != b {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Blocking hole punch: `len` bytes at `offset` read back as zeroes.
    pub(crate) fn punch(&self, op: BdevOp, offset: u64, len: u64) -> Result<(), BdevError> {
        let mode = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        rustix::fs::fallocate(self.buffered.as_fd(), mode, offset, len)
            .map_err(io_err(op, offset, len))
    }

    /// Blocking `fdatasync`.
    pub(crate) fn flush(&self) -> Result<(), BdevError> {
        rustix::fs::fdatasync(self.buffered.as_fd()).map_err(io_err(BdevOp::Flush, 0, 0))
    }

    fn pread_all(&self, op: BdevOp, offset: u64, buf: &mut [u8]) -> Result<(), BdevError> {
        let len = buf.len() as u64;
        let mut at = 0;
        while let Some(rest) = buf.get_mut(at..).filter(|r| !r.is_empty()) {
            let pos = offset + at as u64;
            match rustix::io::pread(self.buffered.as_fd(), rest, pos) {
                Ok(0) => return Err(io_err(op, offset, len)(rustix::io::Errno::IO)),
                Ok(n) => at += n,
                Err(e) => return Err(io_err(op, offset, len)(e)),
            }
        }
        Ok(())
    }
}

/// `O_DIRECT`'s (memory, offset) alignment: what `statx` reports (Linux 6.1 on), else the
/// device's logical block size, else 512.
fn direct_alignment(fd: &OwnedFd, device_block_size: Option<u32>) -> (u64, u64) {
    let fallback = u64::from(device_block_size.unwrap_or(512));
    let reported = rustix::fs::statx(
        fd,
        "",
        rustix::fs::AtFlags::EMPTY_PATH,
        StatxFlags::DIOALIGN,
    )
    .ok()
    .filter(|s| s.stx_mask & StatxFlags::DIOALIGN.bits() != 0)
    .map(|s| {
        (
            u64::from(s.stx_dio_mem_align),
            u64::from(s.stx_dio_offset_align),
        )
    });
    match reported {
        Some((m, o)) if m.is_power_of_two() && o.is_power_of_two() => (m, o),
        _ => (fallback, fallback),
    }
}

fn bounce_len(len: u64) -> usize {
    usize::try_from(len).unwrap_or(BOUNCE).min(BOUNCE)
}

/// `(done, n)` for each bounce-sized piece of `len` bytes.
fn pieces(len: u64) -> impl Iterator<Item = (u64, usize)> {
    (0..len)
        .step_by(BOUNCE)
        .map(move |done| (done, bounce_len(len - done)))
}

fn io_err(op: BdevOp, offset: u64, len: u64) -> impl FnOnce(rustix::io::Errno) -> BdevError {
    move |e| BdevError::File {
        op,
        offset,
        len,
        source: e.into(),
    }
}

fn buffer_err(op: BdevOp, offset: u64, len: u64, source: nvmemu_mem::MemError) -> BdevError {
    BdevError::Buffer {
        op,
        offset,
        len,
        source,
    }
}
