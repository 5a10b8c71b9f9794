// SPDX-License-Identifier: Apache-2.0
//! Connecting the bench's driver: to a vfio-user socket or (`--device ADDR`) a PCI
//! function of this machine bound to uio_pci_generic or vfio-pci, with one I/O queue
//! pair per job and DMA memory for their buffers; then one [`DriverQueue`] per job.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Result, anyhow};
use nvmemu::error_chain;
use nvmemu_bench::{BenchOptions, IoQueue};
use nvmemu_driver::{AttachOptions, AttachedController, IO_CQ_DEPTH_FACTOR, PciAddress};
use nvmemu_spec::Nsid;

use super::checks::{check_depth, check_queues};
use super::driver_queue::DriverQueue;
use crate::identify::{attach_hint, attach_pci};

/// DMA memory for `numjobs` queues of `depth` entries moving `bs`-byte I/Os: data
/// slots, SQ/CQ rings (the CQ `IO_CQ_DEPTH_FACTOR` times deeper) and PRP list space
/// (at most 16 KiB per slot), plus the admin queue and scratch page.
pub fn dma_pool_bytes(numjobs: u32, depth: u16, bs: u64) -> u64 {
    let page = 4096u64;
    let slot = bs.div_ceil(page).saturating_mul(page);
    let depth = u64::from(depth);
    let per_job = depth
        .saturating_mul(slot)
        .saturating_add(depth * (64 + 16 * u64::from(IO_CQ_DEPTH_FACTOR) + 16 * 1024))
        .saturating_add(64 * 1024);
    let total = u64::from(numjobs)
        .saturating_mul(per_job)
        .saturating_add(2 << 20);
    total.div_ceil(2 << 20).saturating_mul(2 << 20)
}

/// Attaches to `dir`, one I/O queue pair per job, waiting at most `reply_timeout` for
/// each reply; fails before any queue is used if the controller's queues cannot hold
/// `--iodepth` commands.
pub fn attach_socket(
    dir: &Path,
    opts: &BenchOptions,
    hint: bool,
    reply_timeout: Duration,
) -> Result<AttachedController> {
    let io_queues = u16::try_from(opts.numjobs)
        .map_err(|_| anyhow!("numjobs {} is too large", opts.numjobs))?;
    let queue_depth = u16::try_from(opts.iodepth.saturating_add(1)).unwrap_or(u16::MAX);
    let attach = AttachOptions {
        io_queues,
        queue_depth,
        dma_pool_bytes: dma_pool_bytes(opts.numjobs, queue_depth, opts.max_bs()),
        reply_timeout,
    };
    let ctrl = AttachedController::attach(dir, attach).map_err(|e| {
        anyhow!(
            "cannot attach to {}: {}{}",
            dir.join("cntrl").display(),
            error_chain(&e),
            if hint { attach_hint(&e) } else { "" }
        )
    })?;
    check_depth(opts.iodepth, ctrl.cap().max_queue_entries())?;
    Ok(ctrl)
}

/// Huge pages of slack in the DMA pool: with physical addresses every buffer sits inside
/// one huge page, so the pool cannot be packed as tightly as one contiguous range.
const PHYSICAL_SLACK: u64 = 2 * (2 << 20);

/// Attach to `addr` with one I/O queue pair per job and room for `opts`' buffers.
pub fn attach_device(addr: PciAddress, opts: &BenchOptions) -> Result<AttachedController> {
    let io_queues = u16::try_from(opts.numjobs)
        .map_err(|_| anyhow!("numjobs {} is too large", opts.numjobs))?;
    let queue_depth = u16::try_from(opts.iodepth.saturating_add(1)).unwrap_or(u16::MAX);
    let pool =
        dma_pool_bytes(opts.numjobs, queue_depth, opts.max_bs()).saturating_add(PHYSICAL_SLACK);
    let ctrl = attach_pci(addr, io_queues, queue_depth, pool)?;
    check_depth(opts.iodepth, ctrl.cap().max_queue_entries())?;
    Ok(ctrl)
}

/// One [`DriverQueue`] per job on namespace `nsid`; `stop` is the run's stop flag, and
/// a queue on which nothing completes for `stall` is given up.
pub fn make_queues(
    ctrl: &mut AttachedController,
    nsid: u32,
    numjobs: u32,
    stop: &Arc<AtomicBool>,
    stall: Duration,
) -> Result<Vec<Box<dyn IoQueue>>> {
    Ok(make_driver_queues(ctrl, nsid, numjobs, stop, stall)?
        .into_iter()
        .map(|q| Box::new(q) as Box<dyn IoQueue>)
        .collect())
}

/// `make_queues` without the boxing.
pub fn make_driver_queues(
    ctrl: &mut AttachedController,
    nsid: u32,
    numjobs: u32,
    stop: &Arc<AtomicBool>,
    stall: Duration,
) -> Result<Vec<DriverQueue>> {
    let qpairs = ctrl.qpairs();
    check_queues(numjobs, u32::try_from(qpairs.len()).unwrap_or(u32::MAX))?;
    let pool = ctrl.dma_pool().clone();
    qpairs
        .into_iter()
        .map(|qp| {
            DriverQueue::new(qp, pool.clone(), Nsid(nsid), Arc::clone(stop), stall)
                .map_err(anyhow::Error::from)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dma_pool_covers_slots_and_rings() {
        let b = dma_pool_bytes(2, 129, 128 * 1024);
        assert!(b >= 2 * 129 * 128 * 1024);
        assert_eq!(b % (2 << 20), 0);
        assert!(dma_pool_bytes(1, 2, 512) >= 2 << 20);
    }
}
