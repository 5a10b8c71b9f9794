// SPDX-License-Identifier: Apache-2.0
//! `IoQpair`: one I/O submission/completion queue pair, owned by one thread.
//!
//! Submitting writes an SQE and nothing else; `ring()` publishes every SQE since the last
//! call with one doorbell write; `poll_completions` reaps by phase tag and acknowledges with
//! one CQ head doorbell write once enough entries are consumed (the CQ is deeper than the SQ:
//! see `Ring::poll`). No locks, no allocation, no syscalls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nvmemu_spec::opcode::IoOpcode;
use nvmemu_spec::{Cqe, Lba, Nsid, Qid, Sqe};

use nvmemu_spec::DsmRange;

use crate::commands;
use crate::dma::DmaBuf;
use crate::error::NvmeError;
use crate::namespace::{self, ActiveNamespace};
use crate::queue::{self, Ring};

/// How long the blocking helpers wait for their completion.
pub const BLOCKING_TIMEOUT: Duration = Duration::from_secs(30);

/// Token used internally by the blocking helpers.
const BLOCKING_TOKEN: u64 = u64::MAX;

/// An I/O queue pair. `Send`, so each thread can own one; not `Sync`, it needs no locks.
#[derive(Debug)]
pub struct IoQpair {
    ring: Ring,
    namespaces: Arc<[ActiveNamespace]>,
    max_transfer: u64,
}

impl IoQpair {
    pub(crate) fn new(ring: Ring, namespaces: Arc<[ActiveNamespace]>, mdts_bytes: u64) -> IoQpair {
        let max_transfer = mdts_bytes.min(ring.list_capacity());
        IoQpair {
            ring,
            namespaces,
            max_transfer,
        }
    }

    /// The queue identifier (SQID = CQID).
    pub fn qid(&self) -> Qid {
        self.ring.qid()
    }

    /// Queue depth (entries per ring).
    pub fn depth(&self) -> u16 {
        self.ring.depth()
    }

    /// How many commands can be in flight at once (`depth - 1`).
    pub fn capacity(&self) -> u16 {
        self.ring.slots()
    }

    /// Commands submitted and not yet reaped.
    pub fn outstanding(&self) -> u16 {
        self.ring.outstanding()
    }

    /// Largest data transfer of one command in bytes (MDTS and PRP list space).
    pub fn max_transfer_bytes(&self) -> u64 {
        self.max_transfer
    }

    /// The namespaces active at attach time.
    pub fn namespaces(&self) -> &[ActiveNamespace] {
        &self.namespaces
    }

    /// The SQE of a Read, Write or Compare and its byte count, after the namespace checks.
    #[inline(always)]
    fn data_sqe(
        &self,
        op: IoOpcode,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
    ) -> Result<(Sqe, u64), NvmeError> {
        let ns = namespace::lookup(&self.namespaces, nsid)?;
        ns.check_range(slba.0, nblocks)?;
        let bytes = ns.bytes(nblocks);
        if bytes > self.max_transfer {
            return Err(NvmeError::TransferTooLarge {
                bytes,
                max: self.max_transfer,
            });
        }
        Ok((commands::rw(op, nsid, slba, nblocks), bytes))
    }

    fn data_cmd(
        &mut self,
        op: IoOpcode,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        buf: &DmaBuf,
        token: u64,
    ) -> Result<(), NvmeError> {
        let (sqe, bytes) = self.data_sqe(op, nsid, slba, nblocks)?;
        self.ring.push(sqe, token, Some((buf, bytes))).map(|_| ())
    }

    #[inline(always)]
    fn data_cmd_fixed(
        &mut self,
        op: IoOpcode,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        index: usize,
        token: u64,
    ) -> Result<(), NvmeError> {
        let (sqe, bytes) = self.data_sqe(op, nsid, slba, nblocks)?;
        self.ring.push_fixed(sqe, token, index, bytes).map(|_| ())
    }

    /// Register `bufs` as this queue pair's fixed buffers (as io_uring's registered
    /// buffers), replacing any earlier set; they stay allocated until replaced or the queue
    /// pair is dropped. `submit_read_fixed` and `submit_write_fixed` name them by index and
    /// skip the per-command buffer hold of `submit_read`. Needs an idle queue pair.
    pub fn register_buffers(&mut self, bufs: Vec<DmaBuf>) -> Result<(), NvmeError> {
        self.ring.register_buffers(bufs)
    }

    /// Fixed buffer `index`, if registered.
    pub fn fixed_buffer(&self, index: usize) -> Option<&DmaBuf> {
        self.ring.fixed_buffer(index)
    }

    /// Queue a Read of `nblocks` blocks at `slba` into fixed buffer `index`.
    pub fn submit_read_fixed(
        &mut self,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        index: usize,
        token: u64,
    ) -> Result<(), NvmeError> {
        self.data_cmd_fixed(IoOpcode::Read, nsid, slba, nblocks, index, token)
    }

    /// Queue a Write of `nblocks` blocks at `slba` from fixed buffer `index`.
    pub fn submit_write_fixed(
        &mut self,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        index: usize,
        token: u64,
    ) -> Result<(), NvmeError> {
        self.data_cmd_fixed(IoOpcode::Write, nsid, slba, nblocks, index, token)
    }

    /// Queue a Read of `nblocks` blocks at `slba` into `buf` (rung by `ring()`).
    pub fn submit_read(
        &mut self,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        buf: &DmaBuf,
        token: u64,
    ) -> Result<(), NvmeError> {
        self.data_cmd(IoOpcode::Read, nsid, slba, nblocks, buf, token)
    }

    /// Queue a Write of `nblocks` blocks at `slba` from `buf`.
    pub fn submit_write(
        &mut self,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        buf: &DmaBuf,
        token: u64,
    ) -> Result<(), NvmeError> {
        self.data_cmd(IoOpcode::Write, nsid, slba, nblocks, buf, token)
    }

    /// Queue a Compare of `nblocks` blocks at `slba` against `buf` (a mismatch completes with
    /// `Status::COMPARE_FAILURE`).
    pub fn submit_compare(
        &mut self,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        buf: &DmaBuf,
        token: u64,
    ) -> Result<(), NvmeError> {
        self.data_cmd(IoOpcode::Compare, nsid, slba, nblocks, buf, token)
    }

    /// Queue a Flush of `nsid`.
    pub fn submit_flush(&mut self, nsid: Nsid, token: u64) -> Result<(), NvmeError> {
        namespace::lookup(&self.namespaces, nsid)?;
        self.ring
            .push(commands::flush(nsid), token, None)
            .map(|_| ())
    }

    /// Queue a Write Zeroes of `nblocks` blocks at `slba`.
    pub fn submit_write_zeroes(
        &mut self,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        token: u64,
    ) -> Result<(), NvmeError> {
        let ns = namespace::lookup(&self.namespaces, nsid)?;
        ns.check_range(slba.0, nblocks)?;
        let sqe = commands::rw(IoOpcode::WriteZeroes, nsid, slba, nblocks);
        self.ring.push(sqe, token, None).map(|_| ())
    }

    /// Queue a Dataset Management Deallocate of `ranges` (start, blocks): 1 to 256 ranges,
    /// each inside the namespace. The range list is written into `buf` (16 bytes per range).
    pub fn submit_deallocate(
        &mut self,
        nsid: Nsid,
        ranges: &[(Lba, u32)],
        buf: &DmaBuf,
        token: u64,
    ) -> Result<(), NvmeError> {
        let ns = namespace::lookup(&self.namespaces, nsid)?;
        let nr = ranges.len();
        if nr == 0 || nr > 256 {
            return Err(NvmeError::BadRangeCount(nr));
        }
        let bytes = 16 * nr as u64;
        if buf.len() < bytes {
            return Err(NvmeError::BufferTooSmall {
                needed: bytes,
                len: buf.len(),
            });
        }
        for (i, &(slba, nlb)) in ranges.iter().enumerate() {
            ns.check_range(slba.0, nlb)?;
            let r = DsmRange {
                attributes: 0,
                blocks: nlb,
                slba: slba.0,
            };
            buf.write_obj(16 * i as u64, &r)?;
        }
        let sqe = commands::deallocate(nsid, u32::try_from(nr).unwrap_or(256));
        self.ring.push(sqe, token, Some((buf, bytes))).map(|_| ())
    }

    /// Queue a Dataset Management Deallocate of one range, its range list written into the
    /// start of fixed buffer `index` (16 bytes).
    pub fn submit_deallocate_fixed(
        &mut self,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        index: usize,
        token: u64,
    ) -> Result<(), NvmeError> {
        let ns = namespace::lookup(&self.namespaces, nsid)?;
        ns.check_range(slba.0, nblocks)?;
        let range = DsmRange {
            attributes: 0,
            blocks: nblocks,
            slba: slba.0,
        };
        // An unregistered index fails in push_fixed with its own error.
        if let Some(buf) = self.ring.fixed_buffer(index) {
            buf.write_obj(0, &range)?;
        }
        self.ring
            .push_fixed(commands::deallocate(nsid, 1), token, index, 16)
            .map(|_| ())
    }

    /// Queue `sqe` as given (any opcode, NSID and CDWs: for tests that send hostile
    /// commands). The CID is replaced by a free slot; with `data`, PRPs are built for the
    /// first `bytes` of the buffer, otherwise DPTR is left as given.
    pub fn submit_raw(
        &mut self,
        sqe: Sqe,
        data: Option<(&DmaBuf, u64)>,
        token: u64,
    ) -> Result<(), NvmeError> {
        self.ring.push(sqe, token, data).map(|_| ())
    }

    /// Publish all queued submissions with one SQ tail doorbell write.
    pub fn ring(&mut self) -> Result<(), NvmeError> {
        self.ring.ring()
    }

    /// Reap up to `max` completions, calling `f(token, result)` for each (`Ok(dw0)` or
    /// `Err(NvmeError::Status)`); one CQ head doorbell write acknowledges them once more than
    /// the CQ's slack are unacknowledged (see `Ring::poll`). Returns how many were reaped.
    /// A completion the device should not have posted (unknown or duplicate CID, wrong
    /// SQID, SQHD out of range) ends the batch with that error.
    pub fn poll_completions(
        &mut self,
        max: usize,
        mut f: impl FnMut(u64, Result<u32, NvmeError>),
    ) -> Result<usize, NvmeError> {
        self.ring
            .poll(max, |token, cqe| f(token, queue::result_of(cqe)))
    }

    /// `poll_completions`, also passing each completion's CID (for per-command tracing such
    /// as `nvmemu bench --lat-breakdown`).
    pub fn poll_completions_cid(
        &mut self,
        max: usize,
        mut f: impl FnMut(u64, u16, Result<u32, NvmeError>),
    ) -> Result<usize, NvmeError> {
        self.ring
            .poll(max, |token, cqe| f(token, cqe.cid, queue::result_of(cqe)))
    }

    /// Submit `sqe` (as `submit_raw`), ring, and wait for its completion, which is returned
    /// whatever its status. Needs an idle queue pair.
    pub fn execute_raw(
        &mut self,
        sqe: Sqe,
        data: Option<(&DmaBuf, u64)>,
    ) -> Result<Cqe, NvmeError> {
        self.require_idle()?;
        self.ring.push(sqe, BLOCKING_TOKEN, data)?;
        self.wait_one()
    }

    fn require_idle(&self) -> Result<(), NvmeError> {
        match self.outstanding() {
            0 => Ok(()),
            n => Err(NvmeError::Busy(n)),
        }
    }

    /// Ring and wait for the single outstanding command.
    fn wait_one(&mut self) -> Result<Cqe, NvmeError> {
        self.ring.ring()?;
        wait_completion(&mut self.ring, BLOCKING_TIMEOUT)
    }

    fn blocking(
        &mut self,
        submit: impl FnOnce(&mut IoQpair) -> Result<(), NvmeError>,
    ) -> Result<u32, NvmeError> {
        self.require_idle()?;
        submit(self)?;
        let cqe = self.wait_one()?;
        queue::result_of(&cqe)
    }

    /// Read `nblocks` blocks at `slba` into `buf` and wait.
    pub fn read_blocking(
        &mut self,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        buf: &DmaBuf,
    ) -> Result<(), NvmeError> {
        self.blocking(|q| q.submit_read(nsid, slba, nblocks, buf, BLOCKING_TOKEN))
            .map(|_| ())
    }

    /// Write `nblocks` blocks at `slba` from `buf` and wait.
    pub fn write_blocking(
        &mut self,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        buf: &DmaBuf,
    ) -> Result<(), NvmeError> {
        self.blocking(|q| q.submit_write(nsid, slba, nblocks, buf, BLOCKING_TOKEN))
            .map(|_| ())
    }

    /// Compare `nblocks` blocks at `slba` with `buf` and wait.
    pub fn compare_blocking(
        &mut self,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
        buf: &DmaBuf,
    ) -> Result<(), NvmeError> {
        self.blocking(|q| q.submit_compare(nsid, slba, nblocks, buf, BLOCKING_TOKEN))
            .map(|_| ())
    }

    /// Flush and wait.
    pub fn flush_blocking(&mut self, nsid: Nsid) -> Result<(), NvmeError> {
        self.blocking(|q| q.submit_flush(nsid, BLOCKING_TOKEN))
            .map(|_| ())
    }

    /// Write Zeroes and wait.
    pub fn write_zeroes_blocking(
        &mut self,
        nsid: Nsid,
        slba: Lba,
        nblocks: u32,
    ) -> Result<(), NvmeError> {
        self.blocking(|q| q.submit_write_zeroes(nsid, slba, nblocks, BLOCKING_TOKEN))
            .map(|_| ())
    }

    /// Deallocate `ranges` (range list written into `buf`) and wait.
    pub fn deallocate_blocking(
        &mut self,
        nsid: Nsid,
        ranges: &[(Lba, u32)],
        buf: &DmaBuf,
    ) -> Result<(), NvmeError> {
        self.blocking(|q| q.submit_deallocate(nsid, ranges, buf, BLOCKING_TOKEN))
            .map(|_| ())
    }
}

/// Poll `ring` until one completion arrives or `timeout` passes. Spins briefly, then yields.
pub(crate) fn wait_completion(ring: &mut Ring, timeout: Duration) -> Result<Cqe, NvmeError> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        let mut got = None;
        ring.poll(1, |_, cqe| got = Some(*cqe))?;
        if let Some(cqe) = got {
            return Ok(cqe);
        }
        spins = spins.saturating_add(1);
        if spins < 1000 {
            std::hint::spin_loop();
        } else {
            if start.elapsed() > timeout {
                return Err(NvmeError::Timeout {
                    qid: ring.qid(),
                    millis: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                });
            }
            std::thread::yield_now();
        }
    }
}
