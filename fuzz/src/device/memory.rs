// SPDX-License-Identifier: Apache-2.0
//! Client memory: unsealed memfds the client may map, write, shrink and grow, with a record
//! of what the server may legitimately write, to check that it wrote nowhere else.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{MemfdFlags, ftruncate, memfd_create};
use rustix::io::{pread, pwrite};

/// A client memfd, its expected contents and the windows the server may write.
pub struct ClientMem {
    fd: OwnedFd,
    /// What the file holds outside the server's windows: a canary pattern, then whatever
    /// the client wrote; zeros past an old end after a shrink and regrow.
    shadow: Vec<u8>,
    /// `[start, end)` file ranges ever DMA-mapped writable (the server may write there).
    server_writable: Vec<(u64, u64)>,
}

/// The canary byte at `offset`: unlikely to be produced by a stray write of zeros, a CQE
/// or a copy of namespace data at another offset.
fn canary(offset: usize) -> u8 {
    (offset.wrapping_mul(31) ^ (offset >> 8)) as u8 | 1
}

impl ClientMem {
    /// A memfd of `size` bytes filled with the canary pattern.
    pub fn new(size: u64) -> ClientMem {
        let fd = memfd_create("nvmemu-fuzz-client", MemfdFlags::CLOEXEC).expect("memfd");
        ftruncate(&fd, size).expect("ftruncate");
        let shadow: Vec<u8> = (0..usize::try_from(size).expect("small"))
            .map(canary)
            .collect();
        pwrite(&fd, &shadow, 0).expect("pwrite");
        ClientMem {
            fd,
            shadow,
            server_writable: Vec::new(),
        }
    }

    /// The fd, to hand to DMA_MAP (or anywhere else).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The file's current size.
    pub fn len(&self) -> u64 {
        self.shadow.len() as u64
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.shadow.is_empty()
    }

    /// The client writes `bytes` at `offset` (cut at the end of the file: a write past it
    /// would grow it).
    pub fn write(&mut self, offset: u64, bytes: &[u8]) {
        let Ok(start) = usize::try_from(offset) else {
            return;
        };
        let Some(end) = start
            .checked_add(bytes.len())
            .map(|e| e.min(self.shadow.len()))
        else {
            return;
        };
        if start >= end {
            return;
        }
        let bytes = &bytes[..end - start];
        pwrite(&self.fd, bytes, offset).expect("pwrite");
        self.shadow[start..end].copy_from_slice(bytes);
    }

    /// The client reads `len` bytes at `offset` (zeros past the end of the file).
    pub fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        // Past the end pread returns short and the zeros stay; an error would make the
        // oracle compare zeros, so it is a harness failure.
        pread(&self.fd, &mut out, offset).expect("pread of client memory");
        out
    }

    /// The client shrinks or grows the file (`ftruncate`): what the server mapped past the
    /// new end is gone, and reads as zeros once the file grows again.
    pub fn resize(&mut self, size: u64) {
        ftruncate(&self.fd, size).expect("ftruncate");
        self.shadow.resize(usize::try_from(size).expect("small"), 0);
    }

    /// The server was allowed to write `[offset, offset + size)` (a writable DMA_MAP).
    pub fn allow_server_writes(&mut self, offset: u64, size: u64) {
        self.server_writable
            .push((offset, offset.saturating_add(size)));
    }

    /// Panics unless every byte the server was never allowed to write still holds what
    /// the client put there.
    pub fn check_untouched(&self) {
        let now = self.read(0, self.shadow.len());
        for (i, (&got, &want)) in now.iter().zip(&self.shadow).enumerate() {
            let at = i as u64;
            if got != want && !self.server_writable.iter().any(|&(s, e)| s <= at && at < e) {
                panic!(
                    "the server wrote outside its DMA windows: offset {at:#x} is {got:#04x}, \
                     expected {want:#04x} (windows {:x?})",
                    self.server_writable
                );
            }
        }
    }
}
