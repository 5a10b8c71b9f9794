// SPDX-License-Identifier: Apache-2.0
//! Shared by the job-loop tests: one job on a logging [`MemDevice`] queue.
#![allow(clippy::unwrap_used, dead_code)]

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use nvmemu_bench::{
    BenchOptions, BenchResult, CommandLog, IoQueue, MemDevice, NoTarget, Op, run_bench,
};

/// Runs `opts` as one job on `dev`; returns the result and the commands the queue
/// accepted (direction, first LBA) in submission order.
pub fn run_on(dev: &Arc<MemDevice>, opts: &BenchOptions) -> (BenchResult, Vec<(Op, u64)>) {
    let log = CommandLog::default();
    let q = Box::new(dev.queue().with_log(Arc::clone(&log))) as Box<dyn IoQueue>;
    let r = run_bench(
        opts,
        vec![q],
        &NoTarget,
        &[],
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    let log = std::mem::take(&mut *log.lock().unwrap());
    (r, log)
}
