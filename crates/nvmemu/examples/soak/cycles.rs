// SPDX-License-Identifier: Apache-2.0
//! Connect/disconnect cycles and DMA map/unmap cycles, each doing verified I/O, with the
//! server's fds and RSS sampled around them.

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, bail, ensure};
use nvmemu_bench::Rng;
use nvmemu_driver::{
    AttachOptions, AttachedController, IoQpair, Transport, VfioUserTransport, sqe,
};
use nvmemu_mem::{Iova, MmapRegion, Protection};
use nvmemu_spec::opcode::IoOpcode;
use nvmemu_spec::{Lba, Nsid};

use crate::procstat::{self, Flatness};
use crate::shadow::Shadow;

/// Cycles run before the "before" sample: first-use allocations (thread-locals, allocator
/// arenas, log buffers) are not leaks.
pub const WARM_UP: u64 = 20;
/// Bytes of each map cycle's memfd.
const MAP_BYTES: u64 = 64 << 10;
/// Where map cycles place their memfd (alternating between two IOVAs, so the table's
/// order changes), far from the driver's pool.
const MAP_IOVA: u64 = 0x40_0000_0000;
/// The cycles' controllers: one small queue pair and a 1 MiB pool.
pub const SMALL: AttachOptions = AttachOptions {
    io_queues: 1,
    queue_depth: 8,
    dma_pool_bytes: 1 << 20,
    reply_timeout: nvmemu_vfio_user::DEFAULT_REPLY_TIMEOUT,
};

/// Run `warm-up + cycles` cycles of `cycle`, sampling process `pid` around them.
fn sampled(
    what: &'static str,
    pid: u32,
    cycles: u64,
    mut cycle: impl FnMut(u64) -> anyhow::Result<()>,
) -> anyhow::Result<Flatness> {
    for i in 0..WARM_UP {
        cycle(i).with_context(|| format!("{what}: warm-up cycle {i}"))?;
    }
    // The server lets the last warm-up client's fds go a moment after it left.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = procstat::sample(pid)?;
    let mut max_rss_kib = before.rss_kib;
    for i in 0..cycles {
        cycle(WARM_UP + i).with_context(|| format!("{what}: cycle {i}"))?;
        if i % 50 == 49 {
            max_rss_kib = max_rss_kib.max(procstat::sample(pid)?.rss_kib);
        }
    }
    let after = procstat::settle(pid, before.fds)?;
    Ok(Flatness {
        what,
        cycles,
        before,
        after,
        max_rss_kib: max_rss_kib.max(after.rss_kib),
    })
}

/// `cycles` times: attach to the controller in `dir`, read a random 4 KiB and check it
/// against the shadow, shut the controller down and disconnect.
pub fn connect_cycles(
    dir: &Path,
    nsid: Nsid,
    shadow: &Shadow,
    block: u32,
    pid: u32,
    cycles: u64,
    seed: u64,
) -> anyhow::Result<Flatness> {
    let mut rng = Rng::new(seed);
    let blocks = 4096 / block;
    sampled("connect/disconnect", pid, cycles, |_| {
        let mut c = AttachedController::attach(dir, SMALL).context("attach")?;
        let buf = c.alloc_dma(4096)?;
        let mut q = c.take_qpair().context("no I/O queue")?;
        let lba = rng.below(shadow.blocks() - u64::from(blocks) + 1);
        q.read_blocking(nsid, Lba(lba), blocks, &buf)?;
        let mut data = vec![0u8; 4096];
        buf.copy_to(0, &mut data)?;
        check(shadow, &data, lba)?;
        drop(q);
        c.shutdown().context("shutdown")?;
        Ok(())
    })
}

/// `cycles` times, on one attached controller: DMA_MAP a fresh 64 KiB memfd, read a random
/// 4 KiB of the namespace into it and check it, write a new pattern from it, DMA_UNMAP it.
/// Writes go to the namespace's first `MAP_BYTES`, written once before the warm-up, so the
/// namespace's resident size does not change under the samples.
pub fn map_cycles(
    dir: &Path,
    nsid: Nsid,
    shadow: &mut Shadow,
    block: u32,
    pid: u32,
    cycles: u64,
    seed: u64,
) -> anyhow::Result<Flatness> {
    let mut rng = Rng::new(seed);
    let shared = Arc::new(Mutex::new(
        VfioUserTransport::connect(&dir.join("cntrl")).context("connect")?,
    ));
    let mut c =
        AttachedController::attach_with(Box::new(shared.clone()), SMALL).context("attach")?;
    let mut q = c.take_qpair().context("no I/O queue")?;
    let window = MAP_BYTES / u64::from(block);
    let blocks = 4096 / block;
    {
        let buf = c.alloc_dma(MAP_BYTES)?;
        let stamp = shadow.new_stamp();
        let mut data = vec![0u8; MAP_BYTES as usize];
        shadow.fill(&mut data, 0, stamp);
        buf.copy_from(0, &data)?;
        q.write_blocking(nsid, Lba(0), window as u32, &buf)?;
        shadow.set(0, window as u32, stamp);
    }
    let flat = sampled("DMA map/unmap", pid, cycles, |i| {
        let fd = nvmemu_mem::create_memfd("nvmemu-soak-map", MAP_BYTES, false)?;
        let host = MmapRegion::map_shared(fd.as_fd(), 0, MAP_BYTES, Protection::ReadWrite)?;
        let iova = Iova(MAP_IOVA + (i % 2) * 2 * MAP_BYTES);
        let lock = || shared.lock().unwrap_or_else(PoisonError::into_inner);
        lock()
            .dma_map(fd.as_fd(), 0, iova, MAP_BYTES)
            .context("DMA_MAP")?;
        let lba = rng.below(window - u64::from(blocks) + 1);
        let mut data = vec![0u8; 4096];
        raw_io(&mut q, IoOpcode::Read, nsid, lba, blocks, iova)?;
        host.copy_to(0, &mut data)?;
        check(shadow, &data, lba)?;
        let stamp = shadow.new_stamp();
        shadow.fill(&mut data, lba, stamp);
        host.copy_from(0, &data)?;
        raw_io(&mut q, IoOpcode::Write, nsid, lba, blocks, iova)?;
        shadow.set(lba, blocks, stamp);
        lock().dma_unmap(iova, MAP_BYTES).context("DMA_UNMAP")?;
        Ok(())
    })?;
    drop(q);
    c.shutdown().context("shutdown")?;
    Ok(flat)
}

/// A one-page Read or Write whose PRP1 is `iova` (outside the driver's pool), waited for.
fn raw_io(
    q: &mut IoQpair,
    op: IoOpcode,
    nsid: Nsid,
    lba: u64,
    blocks: u32,
    iova: Iova,
) -> anyhow::Result<()> {
    let mut cmd = sqe::rw(op, nsid, Lba(lba), blocks);
    cmd.dptr1 = iova.0;
    let cqe = q.execute_raw(cmd, None)?;
    ensure!(
        cqe.status().is_success(),
        "{op:?} at {lba} into {:#x}: {}",
        iova.0,
        cqe.status()
    );
    Ok(())
}

/// Compare blocks read at `lba` with what the shadow says they hold.
pub fn check(shadow: &Shadow, data: &[u8], lba: u64) -> anyhow::Result<()> {
    match shadow.check(data, lba) {
        (0, _) => Ok(()),
        (bad, first) => bail!("{bad} bad blocks from LBA {lba}; first: {first:?}"),
    }
}
