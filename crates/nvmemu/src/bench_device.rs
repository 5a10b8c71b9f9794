// SPDX-License-Identifier: Apache-2.0
//! `nvmemu bench --device ADDR` and `identify --device ADDR`: attach our driver to a PCI
//! function of this machine (bound to uio_pci_generic or vfio-pci) instead of a socket.

use anyhow::{Result, anyhow};
use nvmemu_bench::BenchOptions;
use nvmemu_driver::{AttachOptions, Controller, PciAddress};

use crate::bench_checks::check_depth;
use crate::bench_cmd::{dma_pool_bytes, error_chain};

/// Huge pages of slack in the DMA pool: with physical addresses every buffer sits inside
/// one huge page, so the pool cannot be packed as tightly as one contiguous range.
const PHYSICAL_SLACK: u64 = 2 * (2 << 20);

/// Attach to `addr` with one I/O queue pair per job and room for `opts`' buffers.
pub fn attach(addr: PciAddress, opts: &BenchOptions) -> Result<Controller> {
    let io_queues = u16::try_from(opts.numjobs)
        .map_err(|_| anyhow!("numjobs {} is too large", opts.numjobs))?;
    let queue_depth = u16::try_from(opts.iodepth.saturating_add(1)).unwrap_or(u16::MAX);
    let pool =
        dma_pool_bytes(opts.numjobs, queue_depth, opts.max_bs()).saturating_add(PHYSICAL_SLACK);
    let ctrl = attach_with(addr, io_queues, queue_depth, pool)?;
    check_depth(opts.iodepth, ctrl.cap().max_queue_entries())?;
    Ok(ctrl)
}

/// Attach to `addr` with the given queues and DMA pool size.
pub fn attach_with(
    addr: PciAddress,
    io_queues: u16,
    queue_depth: u16,
    dma_pool_bytes: u64,
) -> Result<Controller> {
    let opts = AttachOptions {
        io_queues,
        queue_depth,
        dma_pool_bytes,
        ..AttachOptions::default()
    };
    Controller::attach_pci(addr, opts)
        .map_err(|e| anyhow!("cannot attach to {addr}: {}", error_chain(&e)))
}
