// SPDX-License-Identifier: Apache-2.0
//! A connection's two fixed-size byte buffers: what arrived and is not yet parsed, what is
//! to be sent and the socket has not taken. Allocated once per connection; a peer that
//! sends faster than we parse or reads slower than we answer is held back, never buffered
//! without bound.

use std::io::{self, Read, Write};

/// Bytes `start..end` of `buf` are live.
#[derive(Debug)]
pub(crate) struct ByteBuf {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl ByteBuf {
    pub(crate) fn new(capacity: usize) -> ByteBuf {
        ByteBuf {
            buf: vec![0; capacity].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// The live bytes.
    pub(crate) fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    pub(crate) fn capacity(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Drop `n` bytes from the front.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Free bytes, counting what compaction would regain.
    pub(crate) fn room(&self) -> usize {
        self.buf.len() - self.len()
    }

    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// `n` writable bytes after the live ones (compacting first if needed), or None when
    /// there is not that much room; [`ByteBuf::commit`] makes them live.
    #[inline]
    pub(crate) fn reserve(&mut self, n: usize) -> Option<&mut [u8]> {
        // Room at the end, the common case, is one test.
        if self.buf.len() - self.end < n {
            if self.room() < n {
                return None;
            }
            self.compact();
        }
        self.buf.get_mut(self.end..self.end + n)
    }

    #[inline]
    pub(crate) fn commit(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Whether the last [`ByteBuf::fill_from`] filled all the space it read into (the
    /// socket may have more); false means the read came back short.
    pub(crate) fn filled_to_end(&self) -> bool {
        self.end == self.buf.len()
    }

    /// Give the buffer `capacity` bytes, keeping its live bytes (a capacity below them
    /// keeps the buffer as it is).
    pub(crate) fn resize(&mut self, capacity: usize) {
        if capacity < self.len() || capacity == self.capacity() {
            return;
        }
        let mut next = ByteBuf::new(capacity);
        next.buf[..self.len()].copy_from_slice(self.data());
        next.end = self.len();
        *self = next;
    }

    /// The free space after the live bytes (compacted first when none is left at the
    /// end), for a read that [`ByteBuf::commit`] then makes live.
    pub(crate) fn spare(&mut self) -> &mut [u8] {
        if self.buf.len() == self.end {
            self.compact();
        }
        &mut self.buf[self.end..]
    }

    /// Read what the socket has into the free space; Ok(0) at end of stream. A full
    /// buffer reads nothing (Err WouldBlock, so the caller does not mistake it for EOF).
    pub(crate) fn fill_from(&mut self, r: &mut impl Read) -> io::Result<usize> {
        let free = self.spare();
        if free.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = r.read(free)?;
        self.end += n;
        Ok(n)
    }

    /// Write as much as the socket takes; returns the bytes written. `calls` counts the
    /// `write` calls made.
    pub(crate) fn drain_to(&mut self, w: &mut impl Write, calls: &mut u64) -> io::Result<usize> {
        let mut total = 0;
        while !self.is_empty() {
            *calls += 1;
            match w.write(self.data()) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.consume(n);
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_compacts_and_refuses_beyond_capacity() {
        let mut b = ByteBuf::new(8);
        b.reserve(6).unwrap().copy_from_slice(b"abcdef");
        b.commit(6);
        b.consume(4);
        assert!(b.reserve(7).is_none());
        b.reserve(6).unwrap().copy_from_slice(b"ghijkl");
        b.commit(6);
        assert_eq!(b.data(), b"efghijkl");
        assert!(b.reserve(1).is_none());
    }

    #[test]
    fn resize_keeps_the_live_bytes() {
        let mut b = ByteBuf::new(4);
        b.reserve(3).unwrap().copy_from_slice(b"abc");
        b.commit(3);
        b.consume(1);
        b.resize(16);
        assert_eq!((b.data(), b.capacity()), (&b"bc"[..], 16));
        b.resize(1);
        assert_eq!((b.data(), b.capacity()), (&b"bc"[..], 16));
    }

    #[test]
    fn full_buffer_reads_nothing_rather_than_eof() {
        let mut b = ByteBuf::new(2);
        let mut src: &[u8] = b"xyz";
        assert_eq!(b.fill_from(&mut src).unwrap(), 2);
        let e = b.fill_from(&mut src).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }
}
