// SPDX-License-Identifier: Apache-2.0
//! The bench's [`IoQueue`] over one NVMe/TCP I/O queue (one connection): a buffer per
//! slot, allocated once in `setup`, and the slot index as the command's CID, so C2HData
//! and R2Ts find their buffer without a lookup table. Writes that fit the controller's
//! in-capsule size go in the capsule, larger ones when the target asks by R2T.
//!
//! Batched as SPDK's host batches: `submit` queues the capsule, `ring` sends the batch in
//! one `write`; `reap` makes one read, which brings the PDUs of many commands, and parses
//! them from the queue's receive buffer. No allocation per I/O.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use nvmemu_bench::{EngineError, Geometry, IoQueue, Op};
use nvmemu_driver::sqe;
use nvmemu_spec::{Cqe, IoOpcode, Lba, Nsid};
use nvmemu_tcp::initiator::{CommandBuffers, HostError, HostQueue, Received};

use super::stall::StallWatch;

/// Bytes of one Dataset Management range.
const DSM_RANGE: usize = 16;

/// A command done: its slot and result.
type Completion = (usize, Result<(), EngineError>);

/// One slot's command in flight.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    busy: bool,
    read: bool,
    /// Bytes the command moves (0 for Trim).
    len: usize,
    /// C2HData bytes received so far.
    received: usize,
    /// Write data the target may still ask for by R2T (none once sent in-capsule): what
    /// bounds the H2CData queued for one command.
    r2t_left: usize,
}

/// The slots' buffers and commands, found by CID (= slot index).
#[derive(Debug, Default)]
struct Slots {
    bufs: Vec<Vec<u8>>,
    state: Vec<Slot>,
}

impl CommandBuffers for Slots {
    fn buffer(&mut self, cid: u16) -> Option<&mut [u8]> {
        let i = usize::from(cid);
        let s = self.state.get(i).filter(|s| s.busy && s.read)?;
        self.bufs.get_mut(i)?.get_mut(..s.len)
    }
}

/// One bench job's NVMe/TCP I/O queue on one namespace.
#[derive(Debug)]
pub struct TcpQueue {
    q: HostQueue,
    qid: u16,
    nsid: u32,
    geometry: Geometry,
    /// Commands the queue holds (its entries less one).
    capacity: usize,
    /// Largest write data a capsule carries (larger writes wait for R2T).
    icd_max: usize,
    slots: Slots,
    in_flight: usize,
    fatal: Option<EngineError>,
    stall: StallWatch,
}

fn transport(e: &HostError) -> EngineError {
    EngineError::Transport {
        reason: nvmemu::error_chain(e),
    }
}

impl TcpQueue {
    /// `q` (I/O queue `qid`, `capacity` commands deep, in-capsule data up to `icd_max`
    /// bytes) on namespace `nsid` of `geometry`.
    pub fn new(
        mut q: HostQueue,
        (qid, capacity, icd_max): (u16, usize, u32),
        nsid: u32,
        geometry: Geometry,
        stop: Arc<AtomicBool>,
        stall_timeout: Duration,
    ) -> Result<TcpQueue, HostError> {
        q.set_nonblocking(true)?;
        Ok(TcpQueue {
            q,
            qid,
            nsid,
            geometry,
            capacity,
            icd_max: icd_max as usize,
            slots: Slots::default(),
            in_flight: 0,
            fatal: None,
            stall: StallWatch::new(stop, stall_timeout),
        })
    }

    /// The queue is unusable: every command in flight fails with `err`.
    fn fail_all(
        &mut self,
        err: EngineError,
        done: &mut dyn FnMut(usize, Result<(), EngineError>),
    ) -> usize {
        self.fatal = Some(err.clone());
        let mut n = 0;
        for (slot, s) in self.slots.state.iter_mut().enumerate() {
            if std::mem::take(&mut s.busy) {
                done(slot, Err(err.clone()));
                n += 1;
            }
        }
        self.in_flight = 0;
        n
    }

    /// Slot `slot` completed with `cqe`'s status (None: C2HData with SUCCESS).
    fn complete(
        &mut self,
        slot: usize,
        cqe: Option<Cqe>,
    ) -> Result<Result<(), EngineError>, HostError> {
        let s = self
            .slots
            .state
            .get_mut(slot)
            .filter(|s| s.busy)
            .ok_or(HostError::Protocol(
                "a completion for a CID not outstanding",
            ))?;
        if cqe.is_none() && s.received != s.len {
            return Err(HostError::Protocol("SUCCESS before all the data"));
        }
        s.busy = false;
        self.in_flight -= 1;
        let status = cqe
            .map(|c| c.status())
            .unwrap_or(nvmemu_spec::Status::SUCCESS);
        Ok(if status.is_success() {
            Ok(())
        } else {
            Err(EngineError::Status {
                sct: status.sct as u8,
                sc: status.sc,
            })
        })
    }

    /// Handle one PDU; `Some(slot, result)` when it completed a command.
    fn handle(&mut self, event: Received) -> Result<Option<Completion>, HostError> {
        match event {
            Received::Response(cqe) => {
                let slot = usize::from(cqe.cid);
                Ok(Some((slot, self.complete(slot, Some(cqe))?)))
            }
            Received::Data {
                cid,
                len,
                last_success,
                ..
            } => {
                let slot = usize::from(cid);
                if let Some(s) = self.slots.state.get_mut(slot) {
                    s.received += len;
                }
                if last_success {
                    return Ok(Some((slot, self.complete(slot, None)?)));
                }
                Ok(None)
            }
            Received::R2t {
                cid,
                ttag,
                offset,
                len,
            } => {
                let slot = usize::from(cid);
                let s = self
                    .slots
                    .state
                    .get_mut(slot)
                    .filter(|s| s.busy && s.r2t_left >= len as usize)
                    .ok_or(HostError::Protocol(
                        "R2T for more write data than the command has outstanding",
                    ))?;
                s.r2t_left -= len as usize;
                let out = self.slots.bufs.get(slot).and_then(|b| b.get(..s.len));
                self.q
                    .send_data(cid, ttag, out.unwrap_or_default(), offset, len)?;
                Ok(None)
            }
        }
    }
}

impl IoQueue for TcpQueue {
    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn setup(&mut self, slots: usize, slot_bytes: usize) -> Result<(), EngineError> {
        if self.slots.state.len() == slots
            && self.slots.bufs.first().map(Vec::len) == Some(slot_bytes)
        {
            return Ok(());
        }
        if slots > self.capacity {
            return Err(EngineError::Transport {
                reason: format!(
                    "iodepth {slots} exceeds the {} commands the NVMe/TCP queue holds",
                    self.capacity
                ),
            });
        }
        self.slots.bufs = (0..slots).map(|_| vec![0u8; slot_bytes]).collect();
        self.slots.state = vec![Slot::default(); slots];
        // A batch of capsules, each with a header, digests and its in-capsule data.
        let capsule = nvmemu_tcp::pdu::CMD_HLEN + 8 + slot_bytes.min(self.icd_max);
        self.q.reserve_send(slots * capsule);
        Ok(())
    }

    fn write_payload(&mut self, slot: usize, src: &[u8]) -> Result<(), EngineError> {
        self.slots
            .bufs
            .get_mut(slot)
            .and_then(|b| b.get_mut(..src.len()))
            .ok_or(EngineError::InvalidSlot { slot })?
            .copy_from_slice(src);
        Ok(())
    }

    fn read_payload(&mut self, slot: usize, dst: &mut [u8]) -> Result<(), EngineError> {
        let src = self
            .slots
            .bufs
            .get(slot)
            .and_then(|b| b.get(..dst.len()))
            .ok_or(EngineError::InvalidSlot { slot })?;
        dst.copy_from_slice(src);
        Ok(())
    }

    fn submit(&mut self, slot: usize, op: Op, lba: u64, blocks: u32) -> Result<(), EngineError> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        let g = self.geometry;
        if blocks == 0
            || lba
                .checked_add(u64::from(blocks))
                .is_none_or(|end| end > g.num_blocks)
        {
            return Err(EngineError::OutOfRange { lba, blocks });
        }
        if self.slots.state.get(slot).is_none_or(|s| s.busy) {
            return Err(EngineError::InvalidSlot { slot });
        }
        let cid = u16::try_from(slot).map_err(|_| EngineError::InvalidSlot { slot })?;
        let len =
            usize::try_from(u64::from(blocks) * u64::from(g.block_size)).unwrap_or(usize::MAX);
        // A Trim's data is its one Deallocate range (attributes, length, starting LBA).
        let moved = if op == Op::Trim { DSM_RANGE } else { len };
        let buf = self
            .slots
            .bufs
            .get_mut(slot)
            .and_then(|b| b.get_mut(..moved))
            .ok_or(EngineError::InvalidSlot { slot })?;
        let sqe = match op {
            Op::Read => sqe::rw(IoOpcode::Read, Nsid(self.nsid), Lba(lba), blocks),
            Op::Write => sqe::rw(IoOpcode::Write, Nsid(self.nsid), Lba(lba), blocks),
            Op::Trim => {
                buf.fill(0);
                buf[4..8].copy_from_slice(&blocks.to_le_bytes());
                buf[8..16].copy_from_slice(&lba.to_le_bytes());
                sqe::deallocate(Nsid(self.nsid), 1)
            }
        };
        let out = (op != Op::Read).then_some(&*buf);
        let in_capsule = self
            .q
            .submit(cid, sqe, moved, out)
            .map_err(|e| transport(&e))?;
        if let Some(s) = self.slots.state.get_mut(slot) {
            *s = Slot {
                busy: true,
                read: op == Op::Read,
                len: moved,
                received: 0,
                r2t_left: if op == Op::Read || in_capsule {
                    0
                } else {
                    moved
                },
            };
        }
        self.in_flight += 1;
        Ok(())
    }

    fn ring(&mut self) -> Result<(), EngineError> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        if let Err(e) = self.q.flush() {
            let e = transport(&e);
            self.fatal = Some(e.clone());
            return Err(e);
        }
        Ok(())
    }

    /// Handles the PDUs already received, then makes one read and handles what it
    /// brought, up to `max` completions; sends what is left queued (a batch the socket
    /// did not take whole, H2CData answering R2Ts).
    fn reap(&mut self, max: usize, done: &mut dyn FnMut(usize, Result<(), EngineError>)) -> usize {
        if let Some(e) = self.fatal.clone() {
            return self.fail_all(e, done);
        }
        let mut n = 0;
        let mut read = false;
        while n < max {
            let event = match self.q.next_pdu(&mut self.slots) {
                Ok(Some(e)) => e,
                Ok(None) if !read => {
                    read = true;
                    match self.q.receive(&mut self.slots) {
                        Ok(true) => continue,
                        Ok(false) => break,
                        Err(e) => return n + self.fail_all(transport(&e), done),
                    }
                }
                Ok(None) => break,
                Err(e) => return n + self.fail_all(transport(&e), done),
            };
            match self.handle(event) {
                Ok(Some((slot, r))) => {
                    done(slot, r);
                    n += 1;
                }
                Ok(None) => {}
                Err(e) => return n + self.fail_all(transport(&e), done),
            }
        }
        if let Err(e) = self.q.flush() {
            return n + self.fail_all(transport(&e), done);
        }
        if n > 0 {
            self.stall.progress();
        } else if let Some(waited) = self.stall.after_empty_poll(self.in_flight) {
            let err = EngineError::Stalled {
                qid: self.qid,
                waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                in_flight: self.in_flight,
            };
            return self.fail_all(err, done);
        }
        n
    }
}
