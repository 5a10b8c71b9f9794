// SPDX-License-Identifier: Apache-2.0
//! A vectored socket send whose pieces may lie in a mapping: a transport sends a PDU's
//! header from its own buffer and the data straight from the mapping, in one system call,
//! without first copying the data into a buffer of its own.

use std::io;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::{MmapRegion, us};

/// Most pieces one [`SendPieces`] holds, so one send passes to the kernel; more are left for
/// the next send. A read takes two (its C2HData header with the response before it, and
/// its data): with 64, a batch of 32 reads (QD32) and its last response took two
/// `sendmsg` calls, the second for 24 bytes.
pub const MAX_SEND_PIECES: usize = 128;

/// One piece of a vectored send.
#[derive(Debug, Clone, Copy)]
pub enum SendPiece<'a> {
    /// Bytes of an ordinary buffer.
    Bytes(&'a [u8]),
    /// `len` bytes of `region` at `offset`.
    Region {
        /// The mapping.
        region: &'a MmapRegion,
        /// Where the bytes start in it.
        offset: u64,
        /// How many.
        len: u64,
    },
}

/// Up to [`MAX_SEND_PIECES`] pieces gathered for one send, in order, kept as the iovecs the
/// kernel takes: a region piece is bounds-checked when pushed, and the storage is left
/// uninitialised until then. Filling 64 pieces up front for every send, then 64 iovecs from
/// them, was most of a send's bookkeeping (callgrind).
pub struct SendPieces<'a> {
    /// The first `len` are initialised, each naming bytes borrowed for `'a`.
    iov: [MaybeUninit<libc::iovec>; MAX_SEND_PIECES],
    len: usize,
    _borrows: PhantomData<(&'a [u8], &'a MmapRegion)>,
}

impl<'a> SendPieces<'a> {
    /// No pieces.
    #[must_use]
    pub fn new() -> SendPieces<'a> {
        SendPieces {
            iov: [const { MaybeUninit::uninit() }; MAX_SEND_PIECES],
            len: 0,
            _borrows: PhantomData,
        }
    }

    /// Add `piece` after the others: Ok(false) (nothing added) when the list is full, an
    /// empty piece skipped; a region piece out of the mapping's bounds is `InvalidInput`.
    pub fn push(&mut self, piece: SendPiece<'a>) -> io::Result<bool> {
        match piece {
            SendPiece::Bytes(b) => Ok(self.push_bytes(b)),
            SendPiece::Region {
                region,
                offset,
                len,
            } => self.push_region(region, offset, len),
        }
    }

    /// [`SendPieces::push`] of `SendPiece::Bytes(b)`, inlined into the caller's loop.
    #[inline]
    pub fn push_bytes(&mut self, b: &'a [u8]) -> bool {
        self.push_raw(b.as_ptr().cast_mut(), b.len())
    }

    /// [`SendPieces::push`] of a `SendPiece::Region`, inlined into the caller's loop.
    #[inline]
    pub fn push_region(
        &mut self,
        region: &'a MmapRegion,
        offset: u64,
        len: u64,
    ) -> io::Result<bool> {
        let p = region
            .span(offset, len)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(self.push_raw(p, us(len)))
    }

    /// Store an iovec of `len` bytes at `base`, borrowed for `'a` (the callers' types
    /// say so): false when the list is full, an empty piece skipped.
    #[inline(always)]
    fn push_raw(&mut self, base: *mut u8, len: usize) -> bool {
        let Some(entry) = self.iov.get_mut(self.len) else {
            return false;
        };
        if len > 0 {
            entry.write(libc::iovec {
                iov_base: base.cast(),
                iov_len: len,
            });
            self.len += 1;
        }
        true
    }

    /// Whether [`MAX_SEND_PIECES`] are in the list.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.len == MAX_SEND_PIECES
    }

    /// The iovecs pushed.
    fn iovecs(&self) -> &[libc::iovec] {
        // SAFETY: `len <= MAX_SEND_PIECES` (push checks it) and the first `len` entries
        // were written by `push` (`iovec` is `Copy`, nothing to drop); `MaybeUninit<T>`
        // has `T`'s layout, so the cast slice is aligned; it borrows `self`.
        unsafe { std::slice::from_raw_parts(self.iov.as_ptr().cast::<libc::iovec>(), self.len) }
    }

    /// The bytes a send of the whole list would send, copied (tests, diagnostics: this
    /// allocates).
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut all = Vec::<u8>::new();
        for v in self.iovecs() {
            // SAFETY: each iovec names `iov_len` bytes borrowed for `'a` (which `self`
            // does not outlive): a slice, or an in-bounds range of a live mapping (`span`
            // checked it in `push`). They are copied with a raw copy, as
            // `MmapRegion::copy_to` does, never made a reference into a mapping.
            unsafe {
                let src = v.iov_base.cast::<u8>().cast_const();
                let at = all.len();
                all.reserve(v.iov_len);
                std::ptr::copy_nonoverlapping(src, all.as_mut_ptr().add(at), v.iov_len);
                all.set_len(at + v.iov_len);
            }
        }
        all
    }

    /// Send the pieces in order on socket `fd` with one non-blocking `sendmsg` (no
    /// SIGPIPE); returns how many bytes the kernel took, which may end inside any piece.
    /// The kernel reads the mappings while the call runs: bytes another thread changes
    /// meanwhile go out as the kernel finds them.
    pub fn send(&self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        if self.len == 0 {
            return Ok(0);
        }
        // SAFETY: an all-zero msghdr is valid (no name, no control data); its iovec fields
        // are set below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = self.iovecs().as_ptr().cast_mut();
        msg.msg_iovlen = self.len;
        loop {
            // SAFETY: `msg` names the `len` iovecs pushed, each pointing at bytes that stay
            // valid for the call: a slice borrowed for `'a`, or an in-bounds range of a
            // mapping borrowed for `'a` (`span` checked it). The kernel only reads them and
            // the iovecs (through a pointer made from a shared borrow), and no Rust reference
            // into a mapping is made. `fd` is a borrowed open fd.
            let n = unsafe {
                libc::sendmsg(
                    fd.as_raw_fd(),
                    &raw const msg,
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if let Ok(n) = usize::try_from(n) {
                return Ok(n);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Default for SendPieces<'_> {
    fn default() -> Self {
        SendPieces::new()
    }
}

impl std::fmt::Debug for SendPieces<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendPieces")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn pieces_go_out_in_order_and_bad_ranges_send_nothing() {
        let region = MmapRegion::anonymous(4096).unwrap();
        region.copy_from(100, b"middle").unwrap();
        let (a, mut b) = UnixStream::pair().unwrap();
        let pieces = [
            SendPiece::Bytes(b"head-"),
            SendPiece::Region {
                region: &region,
                offset: 100,
                len: 6,
            },
            SendPiece::Bytes(b""),
            SendPiece::Bytes(b"-tail"),
        ];
        let send = |pieces: &[SendPiece<'_>]| {
            let mut list = SendPieces::new();
            for p in pieces {
                assert!(list.push(*p)?);
            }
            list.send(a.as_fd())
        };
        assert_eq!(send(&pieces).unwrap(), 16);
        let mut got = [0u8; 16];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"head-middle-tail");
        let bad = [SendPiece::Region {
            region: &region,
            offset: 4000,
            len: 200,
        }];
        let e = send(&bad).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_piece_list_keeps_its_order_and_refuses_a_piece_past_the_last() {
        let bytes: Vec<u8> = (0..=255).collect();
        let region = MmapRegion::anonymous(4096).unwrap();
        region.copy_from(8, b"region").unwrap();
        let mut list = SendPieces::new();
        assert!(list.to_vec().is_empty());
        assert!(list.push(SendPiece::Bytes(b"")).unwrap(), "empty: skipped");
        let piece = SendPiece::Region {
            region: &region,
            offset: 8,
            len: 6,
        };
        assert!(list.push(piece).unwrap());
        let bad = SendPiece::Region {
            region: &region,
            offset: 4090,
            len: 7,
        };
        assert_eq!(
            list.push(bad).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        for i in 1..MAX_SEND_PIECES {
            assert!(!list.is_full());
            assert!(list.push(SendPiece::Bytes(&bytes[i..=i])).unwrap());
        }
        assert!(list.is_full());
        assert!(!list.push(SendPiece::Bytes(&bytes)).unwrap());
        let mut want = b"region".to_vec();
        want.extend(1..u8::try_from(MAX_SEND_PIECES).unwrap());
        assert_eq!(list.to_vec(), want);
    }
}
