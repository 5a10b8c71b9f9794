// SPDX-License-Identifier: Apache-2.0
//! A vectored socket send whose pieces may lie in a mapping: a transport sends a PDU's
//! header from its own buffer and the data straight from the mapping, in one system call,
//! without first copying the data into a buffer of its own.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::{MmapRegion, us};

/// Most pieces one [`send_pieces`] passes to the kernel; more are left for the next call.
pub const MAX_SEND_PIECES: usize = 64;

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

/// Up to [`MAX_SEND_PIECES`] pieces gathered for one [`send_pieces`], in order. Its storage
/// is left uninitialised until a piece is pushed: a send sends a few pieces, and filling
/// all 64 first (and again for the iovecs) was most of a send's bookkeeping (callgrind).
pub struct SendPieces<'a> {
    /// The first `len` are initialised.
    buf: [MaybeUninit<SendPiece<'a>>; MAX_SEND_PIECES],
    len: usize,
}

impl<'a> SendPieces<'a> {
    /// No pieces.
    #[must_use]
    pub fn new() -> SendPieces<'a> {
        SendPieces {
            buf: [const { MaybeUninit::uninit() }; MAX_SEND_PIECES],
            len: 0,
        }
    }

    /// Add `piece` after the others; false (and nothing added) when the list is full.
    pub fn push(&mut self, piece: SendPiece<'a>) -> bool {
        let Some(slot) = self.buf.get_mut(self.len) else {
            return false;
        };
        slot.write(piece);
        self.len += 1;
        true
    }

    /// Whether [`MAX_SEND_PIECES`] are in the list.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.len == MAX_SEND_PIECES
    }

    /// The pieces pushed, in order.
    #[must_use]
    pub fn as_slice(&self) -> &[SendPiece<'a>] {
        // SAFETY: `len <= MAX_SEND_PIECES` (push checks it), and each of the first `len`
        // elements was written by `push` and never uninitialised again (`SendPiece` is
        // `Copy`, nothing to drop). `MaybeUninit<T>` has `T`'s layout, so the cast slice is
        // properly aligned, and it borrows `self`, so the storage outlives it.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<SendPiece<'a>>(), self.len) }
    }
}

impl Default for SendPieces<'_> {
    fn default() -> Self {
        SendPieces::new()
    }
}

impl std::fmt::Debug for SendPieces<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// Send `pieces` in order on socket `fd` with one non-blocking `sendmsg` (no SIGPIPE);
/// returns how many bytes the kernel took, which may end inside any piece. A region piece
/// out of the mapping's bounds is `InvalidInput` and nothing is sent. Pieces past
/// [`MAX_SEND_PIECES`] are not sent. The kernel reads the mapping while the call runs:
/// bytes another thread changes meanwhile go out as the kernel finds them.
pub fn send_pieces(fd: BorrowedFd<'_>, pieces: &[SendPiece<'_>]) -> io::Result<usize> {
    // Only the first `count` entries are written, and only they are passed on.
    let mut iov = [const { MaybeUninit::<libc::iovec>::uninit() }; MAX_SEND_PIECES];
    let mut count = 0;
    for piece in pieces.iter().take(MAX_SEND_PIECES) {
        let (base, len) = match *piece {
            SendPiece::Bytes(b) => (b.as_ptr().cast_mut(), b.len()),
            SendPiece::Region {
                region,
                offset,
                len,
            } => {
                let p = region
                    .span(offset, len)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                (p, us(len))
            }
        };
        if len == 0 {
            continue;
        }
        let Some(entry) = iov.get_mut(count) else {
            break;
        };
        entry.write(libc::iovec {
            iov_base: base.cast(),
            iov_len: len,
        });
        count += 1;
    }
    if count == 0 {
        return Ok(0);
    }
    // SAFETY: an all-zero msghdr is valid (no name, no control data); its iovec fields are
    // set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr().cast::<libc::iovec>();
    msg.msg_iovlen = count;
    loop {
        // SAFETY: `msg` names `count` iovecs, the ones written above (`MaybeUninit` has
        // the iovec's layout), each pointing at bytes that stay valid for the call: a
        // borrowed slice, or an in-bounds range of a live mapping (span checked it,
        // and `region` is borrowed, so the mapping outlives the call). The kernel only reads
        // them, and no Rust reference into a mapping is made. `fd` is a borrowed open fd.
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
        assert_eq!(send_pieces(a.as_fd(), &pieces).unwrap(), 16);
        let mut got = [0u8; 16];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"head-middle-tail");
        let bad = [SendPiece::Region {
            region: &region,
            offset: 4000,
            len: 200,
        }];
        let e = send_pieces(a.as_fd(), &bad).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_piece_list_keeps_its_order_and_refuses_a_piece_past_the_last() {
        let bytes = [7u8; MAX_SEND_PIECES + 1];
        let mut list = SendPieces::new();
        assert!(list.as_slice().is_empty());
        for i in 0..MAX_SEND_PIECES {
            assert!(!list.is_full());
            assert!(list.push(SendPiece::Bytes(&bytes[..i])));
        }
        assert!(list.is_full());
        assert!(!list.push(SendPiece::Bytes(&bytes)));
        let lens: Vec<usize> = list
            .as_slice()
            .iter()
            .map(|p| match p {
                SendPiece::Bytes(b) => b.len(),
                SendPiece::Region { .. } => usize::MAX,
            })
            .collect();
        assert_eq!(lens, (0..MAX_SEND_PIECES).collect::<Vec<_>>());
    }
}
