// SPDX-License-Identifier: Apache-2.0
//! `nvmemu bench --tcp ADDR --subnqn NQN`: each stage connects a controller over
//! NVMe/TCP, learns the namespace and the controller's limits from Identify, opens one
//! I/O queue (one connection) per job clone, runs, and disconnects.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use nvmemu::error_chain;
use nvmemu_bench::{BenchOptions, BenchResult, Geometry, IoQueue, NoTarget, run_stage};
use nvmemu_driver::sqe::cns;
use nvmemu_tcp::initiator::HostController;

use super::args::BenchArgs;
use super::checks::{check_depth, check_queues};
use super::jobs::RunPlan;
use super::stages::{stage_jobs, stage_needs};
use super::tcp_queue::TcpQueue;
use crate::identify_tcp::identify_page as identify;

/// Runs every stage against `--subnqn` at `addr`; a stop (Ctrl-C) ends the current stage
/// and skips the rest.
pub fn run_on_tcp(
    lead: &BenchArgs,
    plan: &RunPlan,
    addr: SocketAddr,
    stop: &Arc<AtomicBool>,
) -> Result<BenchResult> {
    let mut runs = Vec::new();
    for stage in &plan.stages {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let needs = stage_needs(stage);
        let (ctrl, queues) = connect_stage(lead, addr, &needs, stop)?;
        let result = run_stage(stage_jobs(stage, queues), &NoTarget, &[], Arc::clone(stop));
        if let Err(e) = ctrl.disconnect() {
            tracing::warn!("controller shutdown: {}", error_chain(&e));
        }
        runs.push(result?);
    }
    BenchResult::merge_stages(runs).ok_or_else(|| anyhow!("stopped before any job ran"))
}

fn le(page: &[u8], at: usize, width: usize) -> u64 {
    page.get(at..at + width)
        .map(|b| b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
        .unwrap_or(0)
}

/// The namespace's geometry and the in-capsule data size, from Identify.
fn geometry(ctrl: &mut HostController, nsid: u32) -> Result<(Geometry, u32)> {
    let id = identify(ctrl, cns::CONTROLLER, 0)
        .map_err(|e| anyhow!("Identify Controller failed: {}", error_chain(&e)))?;
    let icd = u32::try_from(le(&id, 1792, 4) * 16)
        .unwrap_or(u32::MAX)
        .saturating_sub(64);
    let mdts = le(&id, 77, 1);
    let max_transfer = if mdts == 0 || mdts > 19 {
        u32::MAX
    } else {
        4096 << mdts
    };
    let ns = identify(ctrl, cns::NAMESPACE, nsid)
        .map_err(|e| anyhow!("Identify Namespace {nsid} failed: {}", error_chain(&e)))?;
    let num_blocks = le(&ns, 0, 8);
    if num_blocks == 0 {
        bail!("namespace {nsid} is not active on this controller");
    }
    let format = usize::from(ns[26] & 0x0F);
    let lbads = le(&ns, 128 + 4 * format + 2, 1);
    if !(9..=16).contains(&lbads) {
        bail!("namespace {nsid} reports an LBA size of 2^{lbads} bytes");
    }
    let g = Geometry {
        block_size: 1 << lbads,
        num_blocks,
        max_transfer,
    };
    Ok((g, icd))
}

/// A controller with one I/O queue per job clone of `needs`, `--iodepth` deep.
fn connect_stage(
    lead: &BenchArgs,
    addr: SocketAddr,
    needs: &BenchOptions,
    stop: &Arc<AtomicBool>,
) -> Result<(HostController, Vec<Box<dyn IoQueue>>)> {
    let max_bs = usize::try_from(needs.max_bs()).unwrap_or(usize::MAX);
    // No Keep Alive Timeout: the jobs' I/O is the only traffic during a run.
    let mut ctrl = lead
        .tcp
        .connect(addr, lead.reply_timeout, max_bs, Duration::ZERO)?;
    let (g, icd) = geometry(&mut ctrl, lead.nsid)?;
    let cap = ctrl
        .property_get(0, true)
        .map_err(|e| anyhow!("Property Get CAP failed: {}", error_chain(&e)))?;
    check_depth(needs.iodepth, u32::try_from(cap & 0xFFFF).unwrap_or(0) + 1)?;
    check_queues(needs.numjobs, ctrl.io_queue_count())?;
    let entries = u16::try_from(needs.iodepth.saturating_add(1)).unwrap_or(u16::MAX);
    let mut queues: Vec<Box<dyn IoQueue>> = Vec::new();
    for qid in 1..=u16::try_from(needs.numjobs).unwrap_or(u16::MAX) {
        let q = ctrl
            .connect_io_queue(qid, entries, icd)
            .and_then(|q| {
                let depth = usize::from(entries - 1);
                TcpQueue::new(
                    q,
                    (qid, depth, icd),
                    lead.nsid,
                    g,
                    Arc::clone(stop),
                    lead.reply_timeout,
                )
            })
            .map_err(|e| anyhow!("cannot connect I/O queue {qid}: {}", error_chain(&e)))?;
        queues.push(Box::new(q));
    }
    Ok((ctrl, queues))
}
