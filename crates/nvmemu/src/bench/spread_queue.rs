// SPDX-License-Identifier: Apache-2.0
//! `--controllers N`: one job's [`IoQueue`] over the queue pairs of several controllers.

use nvmemu_bench::{EngineError, Geometry, IoQueue, Op};

use super::driver_queue::DriverQueue;

/// One job's queue spread over queue pairs of several controllers (`--controllers N`):
/// slot `s` lives on queue `s % N` as its local slot `s / N`, so one job keeps the same
/// total depth while every controller on the poller gets an equal share of it.
#[derive(Debug)]
pub struct SpreadQueue {
    queues: Vec<DriverQueue>,
    rung: Vec<bool>,
    /// The queue the next reap starts at: with a cap on completions per reap, a fixed
    /// start would leave the last queues' completions waiting.
    next_reap: usize,
}

impl SpreadQueue {
    /// Spread over `queues` (at least one; all on the same namespace geometry).
    pub fn new(queues: Vec<DriverQueue>) -> SpreadQueue {
        let rung = vec![false; queues.len()];
        SpreadQueue {
            queues,
            rung,
            next_reap: 0,
        }
    }

    fn at(&mut self, slot: usize) -> Result<(&mut DriverQueue, usize, usize), EngineError> {
        let n = self.queues.len().max(1);
        let q = slot % n;
        self.queues
            .get_mut(q)
            .map(|d| (d, q, slot / n))
            .ok_or(EngineError::InvalidSlot { slot })
    }
}

impl IoQueue for SpreadQueue {
    fn geometry(&self) -> Geometry {
        self.queues.first().map_or(
            Geometry {
                block_size: 512,
                num_blocks: 0,
                max_transfer: 0,
            },
            IoQueue::geometry,
        )
    }

    fn setup(&mut self, slots: usize, slot_bytes: usize) -> Result<(), EngineError> {
        let n = self.queues.len().max(1);
        for q in &mut self.queues {
            q.setup(slots.div_ceil(n), slot_bytes)?;
        }
        Ok(())
    }

    fn write_payload(&mut self, slot: usize, src: &[u8]) -> Result<(), EngineError> {
        let (q, _, local) = self.at(slot)?;
        q.write_payload(local, src)
    }

    fn read_payload(&mut self, slot: usize, dst: &mut [u8]) -> Result<(), EngineError> {
        let (q, _, local) = self.at(slot)?;
        q.read_payload(local, dst)
    }

    fn submit(&mut self, slot: usize, op: Op, lba: u64, blocks: u32) -> Result<(), EngineError> {
        let (q, i, local) = self.at(slot)?;
        q.submit(local, op, lba, blocks)?;
        if let Some(r) = self.rung.get_mut(i) {
            *r = true;
        }
        Ok(())
    }

    fn ring(&mut self) -> Result<(), EngineError> {
        for (q, r) in self.queues.iter_mut().zip(self.rung.iter_mut()) {
            if std::mem::take(r) {
                q.ring()?;
            }
        }
        Ok(())
    }

    fn reap(&mut self, max: usize, done: &mut dyn FnMut(usize, Result<(), EngineError>)) -> usize {
        let n = self.queues.len().max(1);
        let mut total = 0;
        for k in 0..n {
            let i = (self.next_reap + k) % n;
            if total >= max {
                // Resume at the first queue this call did not get to.
                self.next_reap = i;
                return total;
            }
            if let Some(q) = self.queues.get_mut(i) {
                total += q.reap(max - total, &mut |local, r| done(local * n + i, r));
            }
        }
        total
    }
}
