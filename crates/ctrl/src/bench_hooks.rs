// SPDX-License-Identifier: Apache-2.0
//! Entry points for the criterion benches in `benches/`: the data pointer walk, the data
//! copies and completion posting are crate-private, so the benches reach them through
//! these thin wrappers. Built only for `cfg(test)` and the `test-utils` feature; not an API.

use nvmemu_mem::{Access, GuestMemory};
use nvmemu_spec::{Cqe, DataPtr, Status};

use crate::dptr::{self, Chunk};
use crate::queue::{CQE_SIZE, CompletionQueue, RingIdx};

/// Walk `len` bytes described by `dptr` without moving data. `device_writes` is the
/// direction of a Read command (the device fills client memory). Returns the number of
/// contiguous pieces the walk produced.
pub fn walk(
    mem: &GuestMemory,
    dptr: &DataPtr,
    len: u64,
    device_writes: bool,
) -> Result<u32, Status> {
    let access = if device_writes {
        Access::Write
    } else {
        Access::Read
    };
    let mut pieces = 0u32;
    dptr::walk(mem, dptr, len, access, |c: Chunk<'_>| {
        pieces = pieces.saturating_add(1);
        std::hint::black_box(c.len());
        Ok(())
    })?;
    Ok(pieces)
}

/// The walk plus the copy into client memory, as a Read command's completion does.
pub fn copy_to_host(mem: &GuestMemory, dptr: &DataPtr, src: &[u8]) -> Result<(), Status> {
    dptr::copy_to_host(mem, dptr, src, src.len() as u64)
}

/// The walk plus the copy out of client memory, as a Write command does.
pub fn copy_from_host(mem: &GuestMemory, dptr: &DataPtr, dst: &mut [u8]) -> Result<(), Status> {
    dptr::copy_from_host(mem, dptr, dst)
}

/// A completion queue in client memory, posted to as the controller does.
#[derive(Debug)]
pub struct CqPoster {
    cq: CompletionQueue,
}

impl CqPoster {
    /// A queue of `entries` entries at `base`; `None` when the ring is not wholly mapped
    /// and writable or `entries` is below 2.
    pub fn new(mem: &GuestMemory, base: u64, entries: u32) -> Option<CqPoster> {
        if entries < 2 {
            return None;
        }
        let ring =
            crate::queue::Ring::resolve(mem, base, u64::from(entries) * CQE_SIZE, Access::Write)?;
        Some(CqPoster {
            cq: CompletionQueue::new(entries, false, 0, ring),
        })
    }

    /// Post `cqe` at the tail; when the ring is full the host is assumed to have consumed
    /// everything first (the head jumps to the tail), so the bench never stalls.
    pub fn post(&mut self, cqe: Cqe) -> bool {
        if self.cq.looks_full() {
            self.cq.head = self.cq.tail;
        }
        self.cq.post(cqe)
    }

    /// Stage `cqe` as a poll pass does (written with the rest of its line, or by `flush`).
    pub fn stage(&mut self, cqe: Cqe) -> bool {
        if self.cq.looks_full() {
            self.cq.head = self.cq.tail;
        }
        self.cq.stage(cqe)
    }

    /// Write what `stage` left staged, as the end of a batch does.
    pub fn flush(&mut self) -> bool {
        self.cq.flush()
    }

    /// The tail index (entries posted modulo the size).
    pub fn tail(&self) -> u32 {
        self.cq.tail.get()
    }

    /// Consume everything posted so far.
    pub fn consume_all(&mut self) {
        self.cq.head = RingIdx::checked(self.cq.tail.get(), self.cq.size).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_utils::HostMemory;
    use nvmemu_spec::{Cid, Qid};

    #[test]
    fn walk_counts_coalesced_pieces_and_posting_wraps() {
        let host = HostMemory::new(1 << 20);
        let mem = host.guest();
        // Two physically contiguous pages: one piece.
        let dptr = DataPtr::Prp {
            prp1: host.iova(0x1000),
            prp2: host.iova(0x2000),
        };
        assert_eq!(walk(&mem, &dptr, 8192, true), Ok(1));
        // Two pages apart: two pieces.
        let dptr = DataPtr::Prp {
            prp1: host.iova(0x1000),
            prp2: host.iova(0x4000),
        };
        assert_eq!(walk(&mem, &dptr, 8192, true), Ok(2));
        let unmapped = DataPtr::Prp { prp1: 0, prp2: 0 };
        assert_eq!(
            walk(&mem, &unmapped, 512, true),
            Err(Status::DATA_TRANSFER_ERROR)
        );

        let mut cq = CqPoster::new(&mem, host.iova(0x10000), 4).unwrap();
        for i in 0..9u16 {
            let cqe = Cqe::new(Cid(i), Qid(1), 0, Status::SUCCESS, 0, false);
            assert!(cq.post(cqe));
        }
        assert_eq!(cq.tail(), 1);
        let mut raw = [0u8; 16];
        host.read(0x10000, &mut raw);
        // The ninth entry (cid 8) overwrote slot 0 on the third pass: phase 1 again.
        assert_eq!(u16::from_le_bytes([raw[12], raw[13]]), 8);
        assert_eq!(raw[14] & 1, 1);
        assert!(CqPoster::new(&mem, host.iova(0x10000), 1).is_none());
    }
}
