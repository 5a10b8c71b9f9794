// SPDX-License-Identifier: Apache-2.0
//! An in-memory [`IoQueue`]: a `Vec`-backed fake namespace whose commands
//! complete at the doorbell. Used by the tests and to develop the report
//! without a device; several queues may share one [`MemDevice`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::{EngineError, Geometry, IoQueue, Op};

/// A fake namespace held in memory.
#[derive(Debug)]
pub struct MemDevice {
    geometry: Geometry,
    data: Mutex<Vec<u8>>,
}

impl MemDevice {
    /// A zero-filled namespace of `num_blocks` blocks of `block_size` bytes.
    pub fn new(block_size: u32, num_blocks: u64, max_transfer: u32) -> Arc<MemDevice> {
        let len = usize::try_from(u64::from(block_size).saturating_mul(num_blocks)).unwrap_or(0);
        Arc::new(MemDevice {
            geometry: Geometry {
                block_size,
                num_blocks,
                max_transfer,
            },
            data: Mutex::new(vec![0; len]),
        })
    }

    /// A new queue pair on this device.
    pub fn queue(self: &Arc<Self>) -> MemQueue {
        MemQueue {
            dev: Arc::clone(self),
            slot_bytes: 0,
            bufs: Vec::new(),
            pending: Vec::new(),
            done: VecDeque::new(),
            log: None,
        }
    }

    /// The namespace geometry.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn lock(&self) -> Result<MutexGuard<'_, Vec<u8>>, EngineError> {
        self.data.lock().map_err(|_| EngineError::Transport {
            reason: "fake device lock poisoned".into(),
        })
    }

    fn byte_range(&self, lba: u64, blocks: u32) -> Result<std::ops::Range<usize>, EngineError> {
        let bad = EngineError::OutOfRange { lba, blocks };
        let end_lba = lba.checked_add(u64::from(blocks)).ok_or(bad.clone())?;
        if end_lba > self.geometry.num_blocks {
            return Err(bad);
        }
        let bs = u64::from(self.geometry.block_size);
        let start = usize::try_from(lba * bs).map_err(|_| bad.clone())?;
        let end = usize::try_from(end_lba * bs).map_err(|_| bad)?;
        Ok(start..end)
    }

    /// Copies `blocks` blocks starting at `lba` out of the namespace (test helper).
    pub fn read_blocks(&self, lba: u64, blocks: u32) -> Result<Vec<u8>, EngineError> {
        let range = self.byte_range(lba, blocks)?;
        let data = self.lock()?;
        Ok(data.get(range).map(<[u8]>::to_vec).unwrap_or_default())
    }

    /// Overwrites the namespace at `lba` with `src` (test helper for corruption).
    pub fn write_bytes(&self, lba: u64, offset: usize, src: &[u8]) -> Result<(), EngineError> {
        let range = self.byte_range(lba, 0)?;
        let mut data = self.lock()?;
        let start = range.start + offset;
        let dst = data
            .get_mut(start..start + src.len())
            .ok_or(EngineError::OutOfRange { lba, blocks: 0 })?;
        dst.copy_from_slice(src);
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct Cmd {
    slot: usize,
    op: Op,
    lba: u64,
    blocks: u32,
}

/// Every command a queue accepted, in submission order: direction and first LBA.
pub type CommandLog = Arc<Mutex<Vec<(Op, u64)>>>;

/// One queue pair on a [`MemDevice`]; completes every command at [`IoQueue::ring`].
#[derive(Debug)]
pub struct MemQueue {
    dev: Arc<MemDevice>,
    slot_bytes: usize,
    bufs: Vec<Vec<u8>>,
    pending: Vec<Cmd>,
    done: VecDeque<(usize, Result<(), EngineError>)>,
    log: Option<CommandLog>,
}

impl MemQueue {
    /// The same queue, recording each accepted command in `log` (tests of offsets).
    pub fn with_log(mut self, log: CommandLog) -> MemQueue {
        self.log = Some(log);
        self
    }

    fn buf(&mut self, slot: usize) -> Result<&mut Vec<u8>, EngineError> {
        self.bufs
            .get_mut(slot)
            .ok_or(EngineError::InvalidSlot { slot })
    }

    fn execute(&mut self, cmd: Cmd) -> Result<(), EngineError> {
        let range = self.dev.byte_range(cmd.lba, cmd.blocks)?;
        let len = range.len();
        if cmd.op == Op::Trim {
            // Deallocated blocks read back as zeroes, as the emulated device's DLFEAT says.
            let mut data = self.dev.lock()?;
            if let Some(disk) = data.get_mut(range) {
                disk.fill(0);
            }
            return Ok(());
        }
        if len > self.slot_bytes {
            return Err(EngineError::OutOfRange {
                lba: cmd.lba,
                blocks: cmd.blocks,
            });
        }
        let dev = Arc::clone(&self.dev);
        let mut data = dev.lock()?;
        let buf = self.buf(cmd.slot)?;
        let (Some(disk), Some(mem)) = (data.get_mut(range), buf.get_mut(..len)) else {
            return Err(EngineError::OutOfRange {
                lba: cmd.lba,
                blocks: cmd.blocks,
            });
        };
        match cmd.op {
            Op::Read => mem.copy_from_slice(disk),
            Op::Write => disk.copy_from_slice(mem),
            Op::Trim => {}
        }
        Ok(())
    }
}

impl IoQueue for MemQueue {
    fn geometry(&self) -> Geometry {
        self.dev.geometry
    }

    fn setup(&mut self, slots: usize, slot_bytes: usize) -> Result<(), EngineError> {
        self.slot_bytes = slot_bytes;
        self.bufs = (0..slots).map(|_| vec![0; slot_bytes]).collect();
        self.pending = Vec::with_capacity(slots);
        self.done = VecDeque::with_capacity(slots);
        Ok(())
    }

    fn write_payload(&mut self, slot: usize, src: &[u8]) -> Result<(), EngineError> {
        let buf = self.buf(slot)?;
        let dst = buf
            .get_mut(..src.len())
            .ok_or(EngineError::InvalidSlot { slot })?;
        dst.copy_from_slice(src);
        Ok(())
    }

    fn read_payload(&mut self, slot: usize, dst: &mut [u8]) -> Result<(), EngineError> {
        let buf = self.buf(slot)?;
        let src = buf
            .get(..dst.len())
            .ok_or(EngineError::InvalidSlot { slot })?;
        dst.copy_from_slice(src);
        Ok(())
    }

    fn submit(&mut self, slot: usize, op: Op, lba: u64, blocks: u32) -> Result<(), EngineError> {
        if slot >= self.bufs.len() {
            return Err(EngineError::InvalidSlot { slot });
        }
        if self.pending.len() >= self.bufs.len() {
            return Err(EngineError::QueueFull);
        }
        self.pending.push(Cmd {
            slot,
            op,
            lba,
            blocks,
        });
        if let Some(log) = &self.log {
            log.lock()
                .map_err(|_| EngineError::Transport {
                    reason: "command log lock poisoned".into(),
                })?
                .push((op, lba));
        }
        Ok(())
    }

    fn ring(&mut self) -> Result<(), EngineError> {
        for i in 0..self.pending.len() {
            let Some(&cmd) = self.pending.get(i) else {
                break;
            };
            let result = self.execute(cmd);
            self.done.push_back((cmd.slot, result));
        }
        self.pending.clear();
        Ok(())
    }

    fn reap(&mut self, max: usize, done: &mut dyn FnMut(usize, Result<(), EngineError>)) -> usize {
        let mut n = 0;
        while n < max {
            let Some((slot, result)) = self.done.pop_front() else {
                break;
            };
            done(slot, result);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_read_round_trips_through_the_device() {
        let dev = MemDevice::new(512, 16, 4096);
        let mut q = dev.queue();
        q.setup(2, 1024).unwrap();
        q.write_payload(0, &[7u8; 1024]).unwrap();
        q.submit(0, Op::Write, 3, 2).unwrap();
        q.ring().unwrap();
        let mut seen = Vec::new();
        assert_eq!(q.reap(8, &mut |s, r| seen.push((s, r))), 1);
        assert_eq!(seen, vec![(0, Ok(()))]);
        q.submit(1, Op::Read, 3, 2).unwrap();
        q.ring().unwrap();
        q.reap(8, &mut |_, r| r.unwrap());
        let mut out = [0u8; 1024];
        q.read_payload(1, &mut out).unwrap();
        assert_eq!(out, [7u8; 1024]);
        assert_eq!(dev.read_blocks(2, 1).unwrap(), vec![0u8; 512]);
    }

    #[test]
    fn out_of_range_command_completes_with_error() {
        let dev = MemDevice::new(512, 4, 4096);
        let mut q = dev.queue();
        q.setup(1, 1024).unwrap();
        q.submit(0, Op::Read, 3, 2).unwrap();
        q.ring().unwrap();
        let mut res = None;
        q.reap(1, &mut |_, r| res = Some(r));
        assert_eq!(
            res,
            Some(Err(EngineError::OutOfRange { lba: 3, blocks: 2 }))
        );
    }
}
