// SPDX-License-Identifier: Apache-2.0
//! A vectored socket send whose pieces may lie in a mapping: a transport sends a PDU's
//! header from its own buffer and the data straight from the mapping, in one system call,
//! without first copying the data into a buffer of its own.

use std::io;
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

/// Send `pieces` in order on socket `fd` with one non-blocking `sendmsg` (no SIGPIPE);
/// returns how many bytes the kernel took, which may end inside any piece. A region piece
/// out of the mapping's bounds is `InvalidInput` and nothing is sent. Pieces past
/// [`MAX_SEND_PIECES`] are not sent. The kernel reads the mapping while the call runs:
/// bytes another thread changes meanwhile go out as the kernel finds them.
pub fn send_pieces(fd: BorrowedFd<'_>, pieces: &[SendPiece<'_>]) -> io::Result<usize> {
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_SEND_PIECES];
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
        iov[count] = libc::iovec {
            iov_base: base.cast(),
            iov_len: len,
        };
        count += 1;
    }
    if count == 0 {
        return Ok(0);
    }
    // SAFETY: an all-zero msghdr is valid (no name, no control data); its iovec fields are
    // set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = count;
    loop {
        // SAFETY: `msg` names `count` iovecs, each pointing at bytes that stay valid for the
        // call: a borrowed slice, or an in-bounds range of a live mapping (span checked it,
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
}
