// SPDX-License-Identifier: Apache-2.0
//! Reconnects under a scribbling former client: each cycle, a raw client takes BAR0's
//! doorbell fd, maps the page and leaves; a thread keeps storing random tails and heads
//! into every page kept so far, while an honest client attaches and does verified writes
//! and reads. At the end the whole namespace is read back against the shadow: a stale
//! page that still reached the controller shows up as a failed command or a changed block.

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use anyhow::{Context, ensure};
use nvmemu_bench::Rng;
use nvmemu_driver::AttachedController;
use nvmemu_mem::{MmapRegion, Protection};
use nvmemu_spec::{Lba, Nsid};

use crate::cycles::{SMALL, check};
use crate::shadow::Shadow;

/// Doorbell pages of former clients scribbled at once (the oldest is let go beyond this).
const KEPT_PAGES: usize = 8;
/// Verified 4 KiB write-and-read pairs per cycle.
const IOS_PER_CYCLE: u64 = 32;
/// Blocks per read of the final check (128 KiB at 512-byte blocks).
const CHECK_BLOCKS: u32 = 256;

/// What the phase did.
pub struct StaleReport {
    pub cycles: u64,
    pub scribbles: u64,
    pub blocks_checked: u64,
}

/// Connect, take the doorbell page REGION_INFO offers, map it, and leave with it.
fn leave_with_doorbells(socket: &Path) -> anyhow::Result<MmapRegion> {
    let mut c = nvmemu_vfio_user::Client::connect(socket).context("connect")?;
    let (info, fd) = c.region_info(0).context("REGION_INFO BAR0")?;
    let fd = fd.context("BAR0 came without its fd")?;
    // The doorbells start 0x1000 into BAR0 (the sparse area REGION_INFO names).
    let page = MmapRegion::map_shared(
        fd.as_fd(),
        info.file_offset + 0x1000,
        0x1000,
        Protection::ReadWrite,
    )
    .context("map the doorbell page")?;
    Ok(page)
}

/// Store random values into every doorbell of every page received, until `stop`.
fn scribbler(pages: mpsc::Receiver<MmapRegion>, stop: Arc<AtomicBool>, seed: u64) -> u64 {
    let mut rng = Rng::new(seed ^ 0x5c21_bb1e);
    let mut kept: Vec<MmapRegion> = Vec::new();
    let mut stores = 0u64;
    while !stop.load(Ordering::Relaxed) {
        kept.extend(pages.try_iter());
        if kept.len() > KEPT_PAGES {
            kept.drain(..kept.len() - KEPT_PAGES);
        }
        for page in &kept {
            // Admin and the first 15 I/O queue pairs: small values that look valid.
            for offset in (0..128).step_by(4) {
                let _ = page.store_release_u32(offset, rng.below(64) as u32);
                stores += 1;
            }
        }
        std::thread::yield_now();
    }
    stores
}

/// `cycles` reconnects under the scribbler, then the whole namespace checked.
pub fn stale_doorbell_cycles(
    dir: &Path,
    nsid: Nsid,
    shadow: &mut Shadow,
    block: u32,
    cycles: u64,
    seed: u64,
) -> anyhow::Result<StaleReport> {
    let socket = dir.join("cntrl");
    let stop = Arc::new(AtomicBool::new(false));
    let (pages, received) = mpsc::channel();
    let thread = {
        let stop = stop.clone();
        std::thread::spawn(move || scribbler(received, stop, seed))
    };
    let run = (|| {
        let mut rng = Rng::new(seed);
        for i in 0..cycles {
            pages
                .send(leave_with_doorbells(&socket)?)
                .context("scribbler gone")?;
            honest_cycle(dir, nsid, shadow, block, &mut rng)
                .with_context(|| format!("stale doorbells: cycle {i}"))?;
        }
        check_namespace(dir, nsid, shadow, block)
    })();
    stop.store(true, Ordering::Relaxed);
    let scribbles = thread
        .join()
        .map_err(|_| anyhow::anyhow!("scribbler panicked"))?;
    let blocks_checked = run?;
    ensure!(scribbles > 0, "the scribbler never ran");
    Ok(StaleReport {
        cycles,
        scribbles,
        blocks_checked,
    })
}

/// Attach, then verified 4 KiB writes (new patterns) and reads at random LBAs.
fn honest_cycle(
    dir: &Path,
    nsid: Nsid,
    shadow: &mut Shadow,
    block: u32,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let mut c = AttachedController::attach(dir, SMALL).context("attach")?;
    let buf = c.alloc_dma(4096)?;
    let mut q = c.take_qpair().context("no I/O queue")?;
    let blocks = 4096 / block;
    let mut data = vec![0u8; 4096];
    for _ in 0..IOS_PER_CYCLE {
        let lba = rng.below(shadow.blocks() - u64::from(blocks) + 1);
        let stamp = shadow.new_stamp();
        shadow.fill(&mut data, lba, stamp);
        buf.copy_from(0, &data)?;
        q.write_blocking(nsid, Lba(lba), blocks, &buf)?;
        shadow.set(lba, blocks, stamp);
        buf.fill(0, 4096, 0xEE)?;
        q.read_blocking(nsid, Lba(lba), blocks, &buf)?;
        buf.copy_to(0, &mut data)?;
        check(shadow, &data, lba)?;
    }
    drop(q);
    c.shutdown().context("shutdown")?;
    Ok(())
}

/// Read every block and compare it with the shadow; returns the blocks checked.
fn check_namespace(dir: &Path, nsid: Nsid, shadow: &Shadow, block: u32) -> anyhow::Result<u64> {
    let mut c = AttachedController::attach(dir, SMALL).context("attach for the final check")?;
    let bytes = u64::from(CHECK_BLOCKS) * u64::from(block);
    let buf = c.alloc_dma(bytes)?;
    let mut q = c.take_qpair().context("no I/O queue")?;
    let mut data = vec![0u8; bytes as usize];
    let mut lba = 0;
    while lba < shadow.blocks() {
        let n = (shadow.blocks() - lba).min(u64::from(CHECK_BLOCKS)) as u32;
        let len = n as usize * block as usize;
        q.read_blocking(nsid, Lba(lba), n, &buf)?;
        buf.copy_to(0, &mut data[..len])?;
        check(shadow, &data[..len], lba)?;
        lba += u64::from(n);
    }
    drop(q);
    c.shutdown().context("shutdown")?;
    Ok(lba)
}
