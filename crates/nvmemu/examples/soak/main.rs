// SPDX-License-Identifier: Apache-2.0
//! Soak and leak check against a running `nvmemu serve`: verified random I/O
//! through nvmemu's own driver, then connect/disconnect cycles and DMA map/unmap cycles with
//! the server's fd count and RSS sampled before and after, then reconnects while former
//! clients scribble the doorbell pages they kept. `scripts/soak.sh` starts the
//! server and runs this; see BENCHMARKS.md for the full run's figures.
//!
//! Exits 0 only when no block read back wrong, no command failed, and the server's fd
//! count came back exactly and its RSS grew by at most the tolerance in each cycle phase.
#![allow(clippy::cast_possible_truncation)]

mod cycles;
mod procstat;
mod random_io;
mod shadow;
mod stale;

use std::path::PathBuf;

use anyhow::{Context, ensure};
use clap::Parser;
use nvmemu_driver::{AttachOptions, AttachedController, IoQpair};
use nvmemu_spec::{Lba, Nsid};

use crate::procstat::Flatness;
use crate::random_io::IoTotals;
use crate::shadow::Shadow;

/// DLFEAT bits 2:0 = 001b: a deallocated block reads as zeroes.
const DLFEAT_READS_ZEROES: u8 = 0b001;

#[derive(Debug, Parser)]
#[command(about = "Verified random I/O, connect and DMA map cycles against nvmemu serve")]
struct Args {
    /// The controller's socket directory (the listener's traddr).
    #[arg(long)]
    socket: PathBuf,
    /// The server's PID, for its fd count and VmRSS.
    #[arg(long)]
    server_pid: u32,
    /// Verified random I/Os (reads, writes, Write Zeroes, Deallocate).
    #[arg(long, default_value_t = 100_000_000)]
    ios: u64,
    /// Stop submitting I/O after this many seconds even if fewer than --ios are done
    /// (the figures then say how many were).
    #[arg(long)]
    runtime: Option<u64>,
    /// I/O queue pairs used at once.
    #[arg(long, default_value_t = 4)]
    queues: u16,
    /// Entries per I/O queue.
    #[arg(long, default_value_t = 32)]
    depth: u16,
    /// Connect/disconnect cycles.
    #[arg(long, default_value_t = 2000)]
    connects: u64,
    /// DMA map/unmap cycles.
    #[arg(long, default_value_t = 1000)]
    maps: u64,
    /// Reconnects while former clients scribble the doorbell pages they kept.
    #[arg(long, default_value_t = 200)]
    reconnects: u64,
    /// Most VmRSS growth allowed over a cycle phase, in KiB.
    #[arg(long, default_value_t = 4096)]
    rss_tolerance_kib: u64,
    /// Seed of the random choices (the same seed gives the same commands).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let pid = args.server_pid;
    let opts = AttachOptions {
        io_queues: args.queues,
        queue_depth: args.depth,
        dma_pool_bytes: u64::from(args.queues) * u64::from(args.depth) * (128 << 10) + (8 << 20),
        ..AttachOptions::default()
    };
    let mut c = AttachedController::attach(&args.socket, opts).context("attach")?;
    let ns = c.namespaces().first().context("no namespace")?.clone();
    let dlfeat = ns.identify.dlfeat & 0b111;
    ensure!(
        dlfeat == DLFEAT_READS_ZEROES,
        "namespace {:?} reports DLFEAT bits 2:0 = {dlfeat:#05b}, not 001b (reads zeroes): \
         the shadow could not say what a deallocated block holds",
        ns.nsid
    );
    let block = ns.lba_size;
    let mut qpairs = c.qpairs();
    ensure!(
        qpairs.len() == usize::from(args.queues),
        "asked for {} I/O queues, got {}",
        args.queues,
        qpairs.len()
    );
    let mut shadow = Shadow::new(ns.nsze, block);
    // Whatever an earlier client left: zeroes everywhere, as the shadow starts.
    zero_namespace(&mut qpairs[0], ns.nsid, ns.nsze)?;
    let before_io = procstat::sample(pid)?;
    let io = random_io::run(
        &mut qpairs,
        c.dma_pool(),
        ns.nsid,
        &mut shadow,
        args.ios,
        args.runtime.map(std::time::Duration::from_secs),
        args.seed,
        block,
    )?;
    drop(qpairs);
    c.shutdown().context("shutdown")?;
    drop(c);
    let after_io = procstat::sample(pid)?;
    print_io(&io, &args, ns.nsze, block, &before_io, &after_io);
    let connects = cycles::connect_cycles(
        &args.socket,
        ns.nsid,
        &shadow,
        block,
        pid,
        args.connects,
        args.seed,
    )?;
    print_flatness(&connects, args.rss_tolerance_kib);
    let maps = cycles::map_cycles(
        &args.socket,
        ns.nsid,
        &mut shadow,
        block,
        pid,
        args.maps,
        args.seed,
    )?;
    print_flatness(&maps, args.rss_tolerance_kib);
    let stale = stale::stale_doorbell_cycles(
        &args.socket,
        ns.nsid,
        &mut shadow,
        block,
        args.reconnects,
        args.seed,
    )?;
    println!(
        "soak: {} reconnects, each leaving a former client with its doorbell page mapped \
         ({} stores into those pages meanwhile): {} blocks read back as last written",
        stale.cycles, stale.scribbles, stale.blocks_checked
    );
    let pass = io.mismatched_blocks == 0
        && io.failed == 0
        && connects.is_flat(args.rss_tolerance_kib)
        && maps.is_flat(args.rss_tolerance_kib);
    println!("soak: {}", if pass { "PASS" } else { "FAIL" });
    if !pass {
        std::process::exit(1);
    }
    Ok(())
}

/// Writes zeroes over the whole namespace, 65536 blocks per command.
fn zero_namespace(qpair: &mut IoQpair, nsid: Nsid, nsze: u64) -> anyhow::Result<()> {
    let mut lba = 0;
    while lba < nsze {
        let n = (nsze - lba).min(65536) as u32;
        qpair
            .write_zeroes_blocking(nsid, Lba(lba), n)
            .context("initial Write Zeroes")?;
        lba += u64::from(n);
    }
    Ok(())
}

fn print_io(
    io: &IoTotals,
    args: &Args,
    nsze: u64,
    block: u32,
    before: &procstat::Sample,
    after: &procstat::Sample,
) {
    println!(
        "soak: {} verified I/Os ({} reads, {} writes, {} Write Zeroes, {} Deallocates) on {} \
         queues of {} entries, {} blocks of {} bytes: {} bad blocks, {} failed commands, \
         {:.1} s, {:.0} I/Os per second; server fds {} -> {}, VmRSS {} -> {} KiB",
        io.ios(),
        io.reads,
        io.writes,
        io.zeroes,
        io.deallocates,
        args.queues,
        args.depth,
        nsze,
        block,
        io.mismatched_blocks,
        io.failed,
        io.elapsed.as_secs_f64(),
        io.ios() as f64 / io.elapsed.as_secs_f64(),
        before.fds,
        after.fds,
        before.rss_kib,
        after.rss_kib,
    );
}

fn print_flatness(f: &Flatness, tolerance_kib: u64) {
    println!(
        "soak: {} {} cycles (after {} warm-up): server fds {} -> {}, VmRSS {} -> {} KiB \
         (largest {} KiB; tolerance +{tolerance_kib} KiB): {}",
        f.cycles,
        f.what,
        cycles::WARM_UP,
        f.before.fds,
        f.after.fds,
        f.before.rss_kib,
        f.after.rss_kib,
        f.max_rss_kib,
        if f.is_flat(tolerance_kib) {
            "flat"
        } else {
            "GREW"
        },
    );
}
