// SPDX-License-Identifier: Apache-2.0
//! The verified random I/O phase: reads, writes, Write Zeroes and Deallocate of mixed sizes
//! on several queue pairs at once, each read checked block by block against the shadow.
//!
//! One thread drives every queue pair (the machine has few CPUs and the server polls on
//! one): each pass fills every queue's free slots, rings each doorbell once, then reaps.
//! No two commands in flight touch the same block, so each read's expected content is fixed
//! while it runs.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nvmemu_bench::Rng;
use nvmemu_driver::{DmaBuf, DmaPool, IoQpair, NvmeError};
use nvmemu_spec::{Lba, Nsid};

use crate::shadow::{Mismatch, Shadow, ZEROES};

/// Largest read or write, in blocks (Write Zeroes and Deallocate go up to 4x this).
pub const MAX_DATA_BLOCKS: u32 = 64;

/// Totals of the phase.
#[derive(Debug, Default, Clone, Copy)]
pub struct IoTotals {
    /// Commands completed, by kind.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Write Zeroes completed.
    pub zeroes: u64,
    /// Deallocates completed.
    pub deallocates: u64,
    /// Blocks that read back wrong.
    pub mismatched_blocks: u64,
    /// Commands that completed with an error status.
    pub failed: u64,
    /// The first block that read back wrong.
    pub first_mismatch: Option<Mismatch>,
    /// Wall time of the phase.
    pub elapsed: Duration,
}

impl IoTotals {
    /// Every command completed.
    pub fn ios(&self) -> u64 {
        self.reads + self.writes + self.zeroes + self.deallocates
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Zeroes,
    Deallocate,
}

/// One command slot of one queue pair (its token is its index; its fixed buffer too).
#[derive(Debug, Clone, Copy)]
struct Slot {
    kind: Kind,
    slba: u64,
    blocks: u32,
    stamp: u32,
}

/// Run `total` verified commands over `qpairs` against namespace `nsid` (blocks of
/// `block` bytes), with I/O buffers from `pool`; with `runtime`, submit nothing new once it
/// has passed (and report what was done).
#[allow(clippy::too_many_arguments)]
pub fn run(
    qpairs: &mut [IoQpair],
    pool: &DmaPool,
    nsid: Nsid,
    shadow: &mut Shadow,
    total: u64,
    runtime: Option<Duration>,
    seed: u64,
    block: u32,
) -> anyhow::Result<IoTotals> {
    let mut rng = Rng::new(seed);
    let mut slots: Vec<Vec<Option<Slot>>> = qpairs
        .iter()
        .map(|q| vec![None; usize::from(q.capacity())])
        .collect();
    // One buffer per slot, registered with its queue pair; this side keeps clones to check
    // reads while the queue pair is borrowed by the reaping.
    let mut bufs: Vec<Vec<DmaBuf>> = Vec::new();
    for q in qpairs.iter_mut() {
        let slab = pool
            .alloc_slab(
                usize::from(q.capacity()),
                u64::from(MAX_DATA_BLOCKS * block),
            )
            .context("I/O buffers")?;
        q.register_buffers(slab.clone())
            .context("register buffers")?;
        bufs.push(slab);
    }
    let mut scratch = vec![0u8; (MAX_DATA_BLOCKS * block) as usize];
    let mut t = IoTotals::default();
    let mut submitted = 0u64;
    let start = Instant::now();
    let mut report_at = start + Duration::from_secs(10);
    loop {
        let stop = submitted >= total || runtime.is_some_and(|r| start.elapsed() >= r);
        if stop && t.ios() + t.failed >= submitted {
            break;
        }
        for ((q, qslots), qbufs) in qpairs.iter_mut().zip(slots.iter_mut()).zip(&bufs) {
            let mut queued = 0;
            for (token, slot) in qslots.iter_mut().enumerate() {
                if slot.is_some() || stop || submitted >= total {
                    continue;
                }
                let Some(s) = pick(&mut rng, shadow) else {
                    continue;
                };
                let mut s = s;
                submit(q, nsid, token, &mut s, shadow, &mut scratch, block)?;
                *slot = Some(s);
                submitted += 1;
                queued += 1;
            }
            if queued > 0 {
                q.ring().context("ring")?;
            }
            let mut err = None;
            q.poll_completions(usize::from(q.capacity()), |token, res| {
                let Some(s) = qslots.get_mut(token as usize).and_then(Option::take) else {
                    err = Some(format!("completion for unknown token {token}"));
                    return;
                };
                match res {
                    Err(e) => {
                        eprintln!("soak: {:?} at {} +{}: {e}", s.kind, s.slba, s.blocks);
                        t.failed += 1;
                    }
                    Ok(_) => {
                        let buf = qbufs.get(token as usize);
                        if let Err(e) = complete(buf, s, shadow, &mut t, &mut scratch, block) {
                            err = Some(e);
                        }
                    }
                }
                shadow.release(s.slba, s.blocks);
            })
            .context("poll")?;
            if let Some(e) = err {
                bail!("{e}");
            }
        }
        let now = Instant::now();
        if now >= report_at {
            report_at = now + Duration::from_secs(10);
            eprintln!(
                "soak: {} of {total} I/Os, {:.0} I/Os per second, {} bad blocks",
                t.ios(),
                t.ios() as f64 / start.elapsed().as_secs_f64(),
                t.mismatched_blocks
            );
        }
    }
    t.elapsed = start.elapsed();
    if let Some(m) = t.first_mismatch {
        eprintln!(
            "soak: first bad block: LBA {} should hold stamp {}, first word read {:#018x}",
            m.lba, m.expected, m.found
        );
    }
    Ok(t)
}

/// A random command on blocks no command in flight owns (`None`: try again next pass).
fn pick(rng: &mut Rng, shadow: &mut Shadow) -> Option<Slot> {
    let roll = rng.below(100);
    let kind = match roll {
        0..45 => Kind::Read,
        45..85 => Kind::Write,
        85..93 => Kind::Zeroes,
        _ => Kind::Deallocate,
    };
    // Mostly small, some medium, a few at the largest size.
    let size_roll = rng.below(100);
    let mut blocks = match size_roll {
        0..70 => 1 + rng.below(8),
        70..95 => 9 + rng.below(24),
        _ => 33 + rng.below(u64::from(MAX_DATA_BLOCKS) - 32),
    } as u32;
    if matches!(kind, Kind::Zeroes | Kind::Deallocate) {
        blocks *= 1 + rng.below(4) as u32;
    }
    let blocks = blocks.min(u32::try_from(shadow.blocks()).unwrap_or(u32::MAX));
    let slba = rng.below(shadow.blocks() - u64::from(blocks) + 1);
    shadow.try_claim(slba, blocks).then_some(Slot {
        kind,
        slba,
        blocks,
        stamp: ZEROES,
    })
}

fn submit(
    q: &mut IoQpair,
    nsid: Nsid,
    token: usize,
    s: &mut Slot,
    shadow: &mut Shadow,
    scratch: &mut [u8],
    block: u32,
) -> anyhow::Result<()> {
    let (slba, n, tok) = (Lba(s.slba), s.blocks, token as u64);
    let r: Result<(), NvmeError> = match s.kind {
        Kind::Read => q.submit_read_fixed(nsid, slba, n, token, tok),
        Kind::Write => {
            s.stamp = shadow.new_stamp();
            let data = &mut scratch[..(n * block) as usize];
            shadow.fill(data, s.slba, s.stamp);
            let buf = q.fixed_buffer(token).context("fixed buffer")?;
            buf.copy_from(0, data).context("fill write buffer")?;
            q.submit_write_fixed(nsid, slba, n, token, tok)
        }
        Kind::Zeroes => q.submit_write_zeroes(nsid, slba, n, tok),
        Kind::Deallocate => {
            let buf = q.fixed_buffer(token).context("fixed buffer")?.clone();
            q.submit_deallocate(nsid, &[(slba, n)], &buf, tok)
        }
    };
    r.with_context(|| format!("submit {:?} at {} +{n}", s.kind, s.slba))
}

/// Account for a successful completion: check a read, record what a write, Write Zeroes
/// or Deallocate left in the blocks.
fn complete(
    buf: Option<&DmaBuf>,
    s: Slot,
    shadow: &mut Shadow,
    t: &mut IoTotals,
    scratch: &mut [u8],
    block: u32,
) -> Result<(), String> {
    match s.kind {
        Kind::Read => {
            t.reads += 1;
            let data = &mut scratch[..(s.blocks * block) as usize];
            buf.ok_or("read without a buffer")?
                .copy_to(0, data)
                .map_err(|e| format!("read buffer: {e}"))?;
            let (bad, first) = shadow.check(data, s.slba);
            t.mismatched_blocks += bad;
            if t.first_mismatch.is_none() {
                t.first_mismatch = first;
            }
        }
        Kind::Write => {
            t.writes += 1;
            shadow.set(s.slba, s.blocks, s.stamp);
        }
        Kind::Zeroes => {
            t.zeroes += 1;
            shadow.set(s.slba, s.blocks, ZEROES);
        }
        Kind::Deallocate => {
            t.deallocates += 1;
            shadow.set(s.slba, s.blocks, ZEROES);
        }
    }
    Ok(())
}
