// SPDX-License-Identifier: Apache-2.0
//! What a connection has to send, in order: the bytes of its send buffer (PDU headers,
//! responses) with read data spliced in between them, never copied into the send buffer.
//! The data goes out from where it lies: a Read served in place from the namespace's
//! memory (`nvmemu_ctrl::InPlaceRead`), or otherwise the command's slot in the queue's
//! memory. A slot whose data is spliced stays taken until the socket has taken its last
//! byte.
//!
//! The kernel copies what a `sendmsg` takes before it returns, so a Write that runs after
//! it cannot change those bytes. What a short send leaves of a namespace range is copied
//! into the command's slot by [`SendQueue::settle`], which the poll group calls before its
//! controllers run again: a Write to those blocks, on any of the group's connections,
//! then cannot tear a block that is half sent (NVMe's atomic write unit is at least a
//! block). A Write on another thread (a vfio-user poller serving the same namespace) is
//! not held back: it races a Read as it would race the controller's copy.

use std::collections::VecDeque;
use std::io;

use nvmemu_ctrl::InPlaceRead;
use nvmemu_mem::{MemError, MmapRegion, SendPieces};

use crate::buffers::ByteBuf;

/// Most bytes one `sendmsg` offers when more are queued, ending at a PDU: below the 64 KiB
/// Linux puts into one TCP segment over loopback (its MSS there is 65,483 bytes over IPv4),
/// so each segment the host receives ends where a PDU does. A host that stops reading at a
/// partial PDU (SPDK's initiator reads its socket into a 32,960-byte buffer and stops at
/// one) then finds whole PDUs at the end of what arrived, and drains its socket in one go
/// instead of a buffer at a time. A send that already holds more (a PDU larger than the
/// budget) takes everything after it too: its segments cannot end at PDUs anyway, and a
/// call per large PDU would end each in a short segment of its own.
pub(crate) const SEND_BUDGET: usize = 65_280;

/// A command's data that goes out after `before` more bytes of the send buffer.
#[derive(Debug)]
struct Splice {
    /// Send buffer bytes between the previous splice (or the buffer's front) and this one.
    before: usize,
    slot: u16,
    /// Some: the data lies in the namespace's memory; None: in the queue's memory.
    in_place: Option<InPlaceRead>,
    /// Where the data not yet sent starts in the memory it lies in.
    offset: u64,
    /// How much of the data the socket has not taken yet.
    left: u64,
}

/// The splices of one connection, in stream order. Bounded by the queue's slot count:
/// each holds a taken slot.
#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    splices: VecDeque<Splice>,
    /// Sum of the splices' `before`: send buffer bytes already placed ahead of a splice.
    placed: usize,
    /// Splices whose data is still in a namespace's memory.
    in_place: usize,
}

impl SendQueue {
    /// A queue with room for `slots` splices, allocated once.
    pub(crate) fn with_capacity(slots: usize) -> SendQueue {
        SendQueue {
            splices: VecDeque::with_capacity(slots),
            placed: 0,
            in_place: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.splices.is_empty()
    }

    /// Send slot `slot`'s data after the first `at` bytes of the send buffer (all it
    /// holds, or will once the caller commits what it wrote): `len` bytes at `offset` of
    /// the queue's memory, or where `in_place` says (then `offset` and `len` are its).
    #[inline]
    pub(crate) fn push(
        &mut self,
        at: usize,
        slot: u16,
        (offset, len): (u64, u64),
        in_place: Option<InPlaceRead>,
    ) {
        let before = at.saturating_sub(self.placed);
        self.placed += before;
        let (offset, left) = match &in_place {
            Some(r) => {
                self.in_place += 1;
                (r.offset(), r.len())
            }
            None => (offset, len),
        };
        self.splices.push_back(Splice {
            before,
            slot,
            in_place,
            offset,
            left,
        });
    }

    /// Copy what is left to send of each namespace range into its slot (at `slot_off(slot)`
    /// of `queue`, the queue's memory) and send it from there from now on; `give_back`
    /// gets each record no longer needed (`Controller::give_back_read_in_place`). Called
    /// before the group's controllers run again (see the module's doc); nothing to do
    /// unless a send stopped short or did not happen.
    ///
    /// Both ranges were checked when the command ran, so a copy fails only if a mapping
    /// went bad since. Sending such data in place would no longer be atomic against a
    /// Write (or would send what replaced a lost mapping), so the error is returned and the
    /// caller must close the connection: the host then retries or resets, and sees no
    /// torn data.
    pub(crate) fn settle(
        &mut self,
        queue: &MmapRegion,
        slot_off: impl Fn(u16) -> u64,
        mut give_back: impl FnMut(u16, InPlaceRead),
    ) -> Result<(), MemError> {
        if self.in_place == 0 {
            return Ok(());
        }
        for s in &mut self.splices {
            let Some(r) = s.in_place.take() else {
                continue;
            };
            // The sent part is not copied: the slot gets the data at its own offset.
            let dst = slot_off(s.slot) + (r.len() - s.left);
            if let Err(e) = r.region().copy_to_region(s.offset, queue, dst, s.left) {
                s.in_place = Some(r);
                return Err(e);
            }
            s.offset = dst;
            self.in_place -= 1;
            give_back(s.slot, r);
        }
        Ok(())
    }

    /// Send what the socket takes, `send` being one vectored send of at most
    /// [`SEND_BUDGET`] bytes unless one PDU is larger; `release` gets each slot whose data
    /// is fully sent, with its record if the data was sent in place (to give back to the
    /// controller). Returns the bytes sent; stops when `send` takes less than it was given
    /// (WouldBlock counts as zero) or all is sent.
    pub(crate) fn drain(
        &mut self,
        tx: &mut ByteBuf,
        region: Option<&MmapRegion>,
        mut send: impl FnMut(&SendPieces<'_>) -> io::Result<usize>,
        mut release: impl FnMut(u16, Option<InPlaceRead>),
    ) -> io::Result<usize> {
        let mut total = 0;
        loop {
            let mut pieces = SendPieces::new();
            let (offered, all) = self.pieces(tx.data(), region, &mut pieces)?;
            if offered == 0 {
                return Ok(total);
            }
            let n = match send(&pieces) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n.min(offered),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(total),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.advance(tx, n, &mut release);
            total += n;
            if n < offered || all {
                return Ok(total);
            }
        }
    }

    /// Put the pieces to send next in `out`, in order, until it is full or the next
    /// splice would take the bytes past [`SEND_BUDGET`] from below (a splice's end is a
    /// PDU's); returns their byte count and whether that is all there is. A range out of
    /// its mapping's bounds is `InvalidInput`.
    #[inline]
    fn pieces<'a>(
        &'a self,
        data: &'a [u8],
        region: Option<&'a MmapRegion>,
        out: &mut SendPieces<'a>,
    ) -> io::Result<(usize, bool)> {
        let mut offered: usize = 0;
        let mut at = 0;
        let (a, b) = self.splices.as_slices();
        for s in a.iter().chain(b) {
            let left = usize::try_from(s.left).unwrap_or(usize::MAX);
            if offered > 0
                && offered <= SEND_BUDGET
                && offered.saturating_add(s.before).saturating_add(left) > SEND_BUDGET
            {
                return Ok((offered, false));
            }
            let head = data.get(at..at + s.before).unwrap_or(&[]);
            at += s.before;
            if !out.push_bytes(head) {
                return Ok((offered, false));
            }
            offered += head.len();
            let Some(region) = s.in_place.as_ref().map_or(region, |r| Some(r.region())) else {
                return Ok((offered, false));
            };
            if !out.push_region(region, s.offset, s.left)? {
                return Ok((offered, false));
            }
            offered = offered.saturating_add(left);
        }
        let tail = data.get(at..).unwrap_or(&[]);
        let all = out.push_bytes(tail);
        if all {
            offered += tail.len();
        }
        Ok((offered, all))
    }

    /// Account for `n` bytes sent from the front of the stream.
    #[inline]
    fn advance(
        &mut self,
        tx: &mut ByteBuf,
        mut n: usize,
        release: &mut impl FnMut(u16, Option<InPlaceRead>),
    ) {
        // Send buffer bytes sent, consumed once at the end.
        let mut used = 0;
        while let Some(s) = self.splices.front_mut() {
            let k = n.min(s.before);
            s.before -= k;
            used += k;
            n -= k;
            if n == 0 {
                break;
            }
            let k = u64::try_from(n).unwrap_or(u64::MAX).min(s.left);
            s.offset += k;
            s.left -= k;
            n -= usize::try_from(k).unwrap_or(n);
            if s.left > 0 {
                break;
            }
            if let Some(s) = self.splices.pop_front() {
                self.in_place -= usize::from(s.in_place.is_some());
                release(s.slot, s.in_place);
            }
        }
        self.placed -= used;
        tx.consume(used + n);
    }
}

#[cfg(test)]
#[allow(clippy::cast_possible_truncation, reason = "small test values")]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    /// Two PDUs, each a header in `tx` and data in `region`, then a trailer.
    fn two_spliced(region: &MmapRegion, tx: &mut ByteBuf, q: &mut SendQueue) -> Vec<u8> {
        let mut want = Vec::new();
        for (slot, off) in [(3u16, 0u64), (5, 8192)] {
            let data: Vec<u8> = (0..5000u32)
                .map(|i| (i * 7 + u32::from(slot)) as u8)
                .collect();
            region.copy_from(off, &data).unwrap();
            let head = [b'H', slot as u8, 0, 0, 0, 0, 0, 0];
            tx.reserve(8).unwrap().copy_from_slice(&head);
            tx.commit(8);
            q.push(tx.len(), slot, (off, 5000), None);
            want.extend_from_slice(&head);
            want.extend_from_slice(&data);
        }
        tx.reserve(4).unwrap().copy_from_slice(b"TAIL");
        tx.commit(4);
        want.extend_from_slice(b"TAIL");
        want
    }

    #[test]
    fn partial_sends_keep_the_order_and_release_a_slot_after_its_last_byte() {
        let region = MmapRegion::anonymous(16384).unwrap();
        let (mut tx, mut q) = (ByteBuf::new(64), SendQueue::with_capacity(4));
        let want = two_spliced(&region, &mut tx, &mut q);
        let got = std::cell::RefCell::new(Vec::new());
        let mut released = Vec::new();
        // A socket that takes 777 bytes a call, then refuses until the next drain.
        while !q.is_empty() || !tx.is_empty() {
            let mut budget = 3;
            let sent_before = got.borrow().len();
            q.drain(
                &mut tx,
                Some(&region),
                |pieces| {
                    if budget == 0 {
                        return Err(io::ErrorKind::WouldBlock.into());
                    }
                    budget -= 1;
                    let all = pieces.to_vec();
                    let n = all.len().min(777);
                    got.borrow_mut().extend_from_slice(&all[..n]);
                    Ok(n)
                },
                |slot, _| released.push((slot, got.borrow().len())),
            )
            .unwrap();
            assert!(got.borrow().len() > sent_before);
        }
        assert_eq!(got.into_inner(), want);
        // Slot 3's data ends at 8 + 5000, slot 5's at 2 * 5008: neither is released before.
        assert_eq!(released.len(), 2);
        assert_eq!(released[0].0, 3);
        assert!(released[0].1 >= 5008, "{released:?}");
        assert_eq!(released[1].0, 5);
        assert!(released[1].1 >= 2 * 5008, "{released:?}");
    }

    #[test]
    fn data_that_cannot_be_settled_is_an_error_not_sent_in_place() {
        let bdev = std::sync::Arc::new(nvmemu_bdev::Bdev::malloc("m", 512, 64).unwrap());
        let channel = bdev.channel();
        let memory = channel.memory().expect("a malloc bdev has memory");
        let record = InPlaceRead::new(memory, 4096, 4096).unwrap();
        assert!(InPlaceRead::new(memory, 4096, 64 * 512).is_none());
        let (mut tx, mut q) = (ByteBuf::new(64), SendQueue::with_capacity(4));
        tx.reserve(8).unwrap().copy_from_slice(b"HEADER..");
        tx.commit(8);
        q.push(tx.len(), 2, (0, 0), Some(record));
        // The slot lies beyond the queue's memory: the copy fails and settle says so.
        let queue = MmapRegion::anonymous(4096).unwrap();
        let mut given = Vec::new();
        assert!(
            q.settle(&queue, |_| 8192, |slot, _| given.push(slot))
                .is_err()
        );
        assert!(given.is_empty(), "nothing was settled");
        // A slot that fits takes the data, which is then sent from the queue's memory.
        memory.region().copy_from(4096, &[0x5a; 4096]).unwrap();
        let queue = MmapRegion::anonymous(8192).unwrap();
        q.settle(&queue, |_| 4096, |slot, _| given.push(slot))
            .unwrap();
        assert_eq!(given, [2]);
        memory.region().copy_from(4096, &[0; 4096]).unwrap();
        let mut sent = Vec::new();
        q.drain(
            &mut tx,
            Some(&queue),
            |pieces| {
                let all = pieces.to_vec();
                sent.extend_from_slice(&all);
                Ok(all.len())
            },
            |_, _| {},
        )
        .unwrap();
        assert_eq!(&sent[..8], b"HEADER..");
        assert_eq!(
            &sent[8..],
            [0x5a; 4096],
            "the settled copy, not the namespace's new bytes"
        );
    }

    #[test]
    fn a_short_send_leaves_the_rest_settled_at_its_place_in_the_slot() {
        let bdev = std::sync::Arc::new(nvmemu_bdev::Bdev::malloc("m", 512, 64).unwrap());
        let channel = bdev.channel();
        let memory = channel.memory().expect("a malloc bdev has memory");
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 13) as u8).collect();
        memory.region().copy_from(8192, &data).unwrap();
        let (mut tx, mut q) = (ByteBuf::new(64), SendQueue::with_capacity(4));
        tx.reserve(8).unwrap().copy_from_slice(b"HEADER..");
        tx.commit(8);
        let record = InPlaceRead::new(memory, 8192, 4096).unwrap();
        q.push(tx.len(), 1, (0, 0), Some(record));
        tx.reserve(4).unwrap().copy_from_slice(b"RESP");
        tx.commit(4);
        let mut sent = Vec::new();
        let mut given = Vec::new();
        let mut take = |pieces: &SendPieces<'_>, max: usize| {
            let all = pieces.to_vec();
            let n = all.len().min(max);
            sent.extend_from_slice(&all[..n]);
            Ok(n)
        };
        q.drain(
            &mut tx,
            None,
            |p| take(p, 8 + 1000),
            |_, _| panic!("not sent"),
        )
        .unwrap();
        let queue = MmapRegion::anonymous(16384).unwrap();
        q.settle(
            &queue,
            |slot| u64::from(slot) * 4096,
            |slot, _| given.push(slot),
        )
        .unwrap();
        assert_eq!(given, [1]);
        // A Write after the settle does not reach what is still to be sent.
        memory.region().copy_from(8192, &[0; 4096]).unwrap();
        let mut released = Vec::new();
        q.drain(
            &mut tx,
            Some(&queue),
            |p| take(p, usize::MAX),
            |slot, record| released.push((slot, record.is_some())),
        )
        .unwrap();
        assert_eq!(released, [(1, false)]);
        assert!(q.is_empty() && tx.is_empty());
        assert_eq!(&sent[..8], b"HEADER..");
        assert_eq!(&sent[8..8 + 4096], &data[..]);
        assert_eq!(&sent[8 + 4096..], b"RESP");
    }

    #[test]
    fn each_send_ends_at_a_pdu_within_the_budget_unless_one_pdu_is_larger() {
        // Twenty 4 KiB reads (a 24-byte header before each), one of 100 KiB, two of 4 KiB.
        let sizes: Vec<u64> = [4096; 20]
            .into_iter()
            .chain([100 * 1024, 4096, 4096])
            .collect();
        let region = MmapRegion::anonymous(23 * 100 * 1024).unwrap();
        let (mut tx, mut q) = (ByteBuf::new(1024), SendQueue::with_capacity(32));
        let mut want = Vec::new();
        let mut ends = vec![0];
        for (slot, &len) in (0u16..).zip(&sizes) {
            let off = u64::from(slot) * 100 * 1024;
            let data: Vec<u8> = (0..len).map(|i| (i as u8) ^ (slot as u8)).collect();
            region.copy_from(off, &data).unwrap();
            tx.reserve(24).unwrap().fill(slot as u8);
            tx.commit(24);
            q.push(tx.len(), slot, (off, len), None);
            want.extend_from_slice(&[slot as u8; 24]);
            want.extend_from_slice(&data);
            ends.push(want.len());
        }
        let mut sent = Vec::new();
        let mut calls = Vec::new();
        let mut released = 0;
        q.drain(
            &mut tx,
            Some(&region),
            |pieces| {
                let all = pieces.to_vec();
                calls.push(all.len());
                sent.extend_from_slice(&all);
                Ok(all.len())
            },
            |_, _| released += 1,
        )
        .unwrap();
        assert_eq!(sent, want);
        assert_eq!(released, sizes.len());
        // 15 reads of 4,120 bytes fit the budget, the other 5 follow, then the large one
        // with what comes after it.
        assert_eq!(calls, [15 * 4120, 5 * 4120, 24 + 100 * 1024 + 2 * 4120]);
        let mut at = 0;
        for n in calls {
            at += n;
            assert!(ends.contains(&at), "a send ended inside a PDU, at {at}");
        }
    }

    #[test]
    fn a_small_socket_buffer_gets_every_byte_in_order() {
        let region = MmapRegion::anonymous(16384).unwrap();
        let (mut tx, mut q) = (ByteBuf::new(64), SendQueue::with_capacity(4));
        let want = two_spliced(&region, &mut tx, &mut q);
        let (a, mut b) = UnixStream::pair().unwrap();
        rustix::net::sockopt::set_socket_send_buffer_size(&a, 1024).unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            b.read_to_end(&mut all).unwrap();
            all
        });
        let mut released = Vec::new();
        let mut calls = 0;
        while !q.is_empty() || !tx.is_empty() {
            q.drain(
                &mut tx,
                Some(&region),
                |p| {
                    calls += 1;
                    p.send(a.as_fd())
                },
                |slot, record| {
                    assert!(record.is_none());
                    released.push(slot);
                },
            )
            .unwrap();
            std::thread::yield_now();
        }
        drop(a);
        assert_eq!(reader.join().unwrap(), want);
        assert_eq!(released, [3, 5]);
        assert!(
            calls > 2,
            "the small buffer took everything in {calls} sends"
        );
    }
}
