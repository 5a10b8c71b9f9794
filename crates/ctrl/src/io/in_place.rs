// SPDX-License-Identifier: Apache-2.0
//! Reads in place: a transport that copies a Read's data out of the command's buffer anyway
//! (NVMe/TCP, into its socket) can ask an I/O queue to leave the data where it lies. A Read
//! of a memory-backed namespace on such a queue is validated, checked against
//! reservations and counted as any Read, but instead of copying the blocks into the host's
//! buffer the controller records where they lie ([`InPlaceRead`]), for the transport to
//! take with [`Controller::take_read_in_place`] when it reaps the completion.
//!
//! Everything else is copied as usual: Writes, file and null namespaces, a bdev being timed,
//! a controller with a latency model (a held completion would be sent with data newer than
//! the command), a command an injected fault hits (a `corrupt` edits the host's buffer).
//!
//! The record holds the namespace's memory ([`MemoryHold`]): a namespace detached or a bdev
//! deleted while the transport still sends from it leaves the mapping alive. Records are
//! recycled, so a Read costs no reference count change (a locked instruction, which waits
//! for the store buffer to drain): each CID's entry keeps its hold between commands, the
//! transport takes it with the completion and gives it back when the data is sent
//! ([`Controller::give_back_read_in_place`]); a hold is cloned only when a CID first reads
//! a namespace, and dropped when the queue goes or the namespace is detached. The bytes are
//! not frozen: whoever holds a record decides when they are read, and must keep a Write
//! that runs meanwhile from tearing a block (the TCP target copies what a short send leaves
//! behind before its controllers run again).

use std::sync::Arc;

use nvmemu_bdev::MemoryHold;
use nvmemu_mem::MmapRegion;
use nvmemu_spec::{Cid, Qid, ReadWrite, Status};

use super::{active_ns, rw};
use crate::Controller;

/// Where a Read left its data: `len` bytes at `offset` of the namespace's memory.
#[derive(Debug)]
pub struct InPlaceRead {
    memory: Arc<MemoryHold>,
    offset: u64,
    len: u64,
}

impl InPlaceRead {
    /// A record of `len` bytes at `offset` of `memory`; None if they do not lie in it.
    /// The controller makes its own; this one is for a transport's tests.
    pub fn new(memory: &Arc<MemoryHold>, offset: u64, len: u64) -> Option<InPlaceRead> {
        let end = offset.checked_add(len)?;
        (end <= memory.region().len()).then(|| InPlaceRead {
            memory: Arc::clone(memory),
            offset,
            len,
        })
    }

    /// The namespace's memory (kept mapped while this record lives).
    pub fn region(&self) -> &MmapRegion {
        self.memory.region()
    }

    /// Where the data starts in [`InPlaceRead::region`].
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The data's length: the command's transfer.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the transfer is empty (never for a Read, which moves at least one block).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One entry per CID of a queue that takes Reads in place.
#[derive(Debug, Default)]
struct Entry {
    /// The last record of this CID (kept for its hold) or none.
    record: Option<InPlaceRead>,
    /// `record` describes a Read that completed and was not taken yet.
    fresh: bool,
}

/// The records of one SQ, by CID.
#[derive(Debug)]
pub(crate) struct InPlaceTable(Box<[Entry]>);

impl InPlaceTable {
    fn new(entries: usize) -> InPlaceTable {
        InPlaceTable((0..entries).map(|_| Entry::default()).collect())
    }

    /// Drop every hold on `memory` (its namespace was detached).
    pub(crate) fn forget(&mut self, memory: &Arc<MemoryHold>) {
        for e in &mut self.0 {
            if e.record
                .as_ref()
                .is_some_and(|r| Arc::ptr_eq(&r.memory, memory))
            {
                *e = Entry::default();
            }
        }
    }
}

impl Controller {
    /// Let I/O queue `qid` take Reads in place (see the module's doc); false if there is no
    /// such queue. Its record table is allocated here, one entry per queue entry: the
    /// transport's CIDs must be below the queue's size to be served in place.
    pub fn enable_reads_in_place(&mut self, qid: Qid) -> bool {
        if qid == Qid::ADMIN {
            return false;
        }
        let Some(sq) = self.queues.sq_mut(qid) else {
            return false;
        };
        let entries = usize::try_from(sq.size).unwrap_or(0);
        sq.in_place = Some(InPlaceTable::new(entries));
        self.in_place_on = true;
        self.rw_detour = true;
        true
    }

    /// The record of the Read CID `cid` completed on queue `qid`, if it was served in
    /// place; taking it clears it. A transport calls this for every Read completion it
    /// reaps, failed ones too, so no record outlives its command.
    pub fn take_read_in_place(&mut self, qid: Qid, cid: Cid) -> Option<InPlaceRead> {
        let e = self.in_place_entry(qid, cid)?;
        if !std::mem::take(&mut e.fresh) {
            return None;
        }
        e.record.take()
    }

    /// Return a record taken from queue `qid` once its data is sent (or copied), so the
    /// next Read of CID `cid` reuses its hold; dropped if the queue is gone or the entry
    /// holds another.
    pub fn give_back_read_in_place(&mut self, qid: Qid, cid: Cid, record: InPlaceRead) {
        if let Some(e) = self.in_place_entry(qid, cid)
            && e.record.is_none()
        {
            e.record = Some(record);
        }
    }

    fn in_place_entry(&mut self, qid: Qid, cid: Cid) -> Option<&mut Entry> {
        self.queues
            .sq_mut(qid)?
            .in_place
            .as_mut()?
            .0
            .get_mut(usize::from(cid.0))
    }

    /// Serve Read `c` (CID `cid`, from `sqid`) in place; None when it has to be copied.
    pub(super) fn read_in_place(
        &mut self,
        sqid: Qid,
        cid: Cid,
        c: &ReadWrite,
    ) -> Option<Result<u32, Status>> {
        if self.model_on || self.injecting {
            return None;
        }
        let table = self.queues.sq(sqid)?.in_place.as_ref()?;
        if usize::from(cid.0) >= table.0.len() {
            return None;
        }
        let max = self.max_transfer();
        // Errors of the lookup are reported by the copy path.
        let ns = active_ns(&self.namespaces, c.nsid).ok()?;
        // A timed bdev's read latency is a copy's.
        let memory = ns.io().memory().filter(|_| !ns.bdev().is_timed())?;
        let moved = ns
            .reservations()
            .check(false, || self.host())
            .and_then(|()| rw::read_in_place(ns, &self.mem, c, max));
        let (offset, len) = match moved {
            Ok(range) => range,
            Err(s) => return Some(Err(s)),
        };
        if let Some(e) = self
            .queues
            .sq_mut(sqid)
            .and_then(|sq| sq.in_place.as_mut())
            .and_then(|t| t.0.get_mut(usize::from(cid.0)))
        {
            match &mut e.record {
                Some(r) if Arc::ptr_eq(&r.memory, memory) => {
                    (r.offset, r.len) = (offset, len);
                }
                record => {
                    *record = Some(InPlaceRead {
                        memory: Arc::clone(memory),
                        offset,
                        len,
                    });
                }
            }
            e.fresh = true;
        }
        self.counters.host_read_commands += 1;
        self.count_bytes(sqid, len, 0);
        Some(Ok(0))
    }
}
