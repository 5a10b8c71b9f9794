// SPDX-License-Identifier: Apache-2.0
//! The bench's [`IoQueue`] over the driver's [`IoQpair`]: one queue pair, one
//! namespace, one DMA buffer per in-flight slot (allocated once in `setup`).
//!
//! Per I/O this does what the driver does (one SQE build, PRP entries) plus an
//! in-flight flag per slot; it never allocates. The flags let a fatal queue
//! error (a completion the device should not have posted) fail every command
//! still in flight, so a job never waits for completions that cannot come.

use nvmemu_bench::{EngineError, Geometry, IoQueue, Op};
use nvmemu_driver::{DmaBuf, DmaPool, IoQpair, NvmeError};
use nvmemu_spec::{Lba, Nsid};

/// Why a [`DriverQueue`] cannot be built for a namespace.
#[derive(Debug, thiserror::Error)]
pub enum QueueSetupError {
    /// The namespace was not active when the driver attached.
    #[error("namespace {0} is not active on this controller")]
    NoNamespace(u32),
}

/// One bench job's queue: an [`IoQpair`] bound to one namespace.
#[derive(Debug)]
pub struct DriverQueue {
    qp: IoQpair,
    pool: DmaPool,
    nsid: Nsid,
    geometry: Geometry,
    bufs: Vec<DmaBuf>,
    slot_bytes: usize,
    in_flight: Vec<bool>,
    /// Set once the queue pair is unusable; later calls fail with it.
    fatal: Option<EngineError>,
}

impl DriverQueue {
    /// Binds `qp` to namespace `nsid`; buffers come from `pool` at `setup`.
    pub fn new(qp: IoQpair, pool: DmaPool, nsid: Nsid) -> Result<DriverQueue, QueueSetupError> {
        let ns = qp
            .namespaces()
            .iter()
            .find(|n| n.nsid == nsid)
            .ok_or(QueueSetupError::NoNamespace(nsid.0))?;
        let geometry = Geometry {
            block_size: ns.lba_size,
            num_blocks: ns.nsze,
            max_transfer: u32::try_from(qp.max_transfer_bytes()).unwrap_or(u32::MAX),
        };
        Ok(DriverQueue {
            qp,
            pool,
            nsid,
            geometry,
            bufs: Vec::new(),
            slot_bytes: 0,
            in_flight: Vec::new(),
            fatal: None,
        })
    }

    fn buf(&self, slot: usize) -> Result<&DmaBuf, EngineError> {
        self.bufs.get(slot).ok_or(EngineError::InvalidSlot { slot })
    }
}

/// Maps a driver error to the bench's engine error.
pub fn engine_error(e: NvmeError) -> EngineError {
    match e {
        NvmeError::Status(s) => EngineError::Status {
            sct: s.sct as u8,
            sc: s.sc,
        },
        NvmeError::QueueFull { .. } => EngineError::QueueFull,
        NvmeError::LbaOutOfRange { slba, nblocks, .. } => EngineError::OutOfRange {
            lba: slba,
            blocks: nblocks,
        },
        other => EngineError::Transport {
            reason: other.to_string(),
        },
    }
}

impl IoQueue for DriverQueue {
    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn setup(&mut self, slots: usize, slot_bytes: usize) -> Result<(), EngineError> {
        if self.bufs.len() == slots && self.slot_bytes == slot_bytes {
            return Ok(());
        }
        let capacity = usize::from(self.qp.capacity());
        if slots > capacity {
            return Err(EngineError::Transport {
                reason: format!(
                    "iodepth {slots} exceeds the {capacity} commands queue {} can hold",
                    self.qp.qid().0
                ),
            });
        }
        self.bufs = self
            .pool
            .alloc_slab(slots, slot_bytes as u64)
            .map_err(|e| EngineError::Transport {
                reason: format!("cannot allocate {slots} DMA buffers of {slot_bytes} bytes: {e}"),
            })?;
        self.slot_bytes = slot_bytes;
        self.in_flight = vec![false; slots];
        Ok(())
    }

    fn write_payload(&mut self, slot: usize, src: &[u8]) -> Result<(), EngineError> {
        self.buf(slot)?
            .copy_from(0, src)
            .map_err(|_| EngineError::InvalidSlot { slot })
    }

    fn read_payload(&mut self, slot: usize, dst: &mut [u8]) -> Result<(), EngineError> {
        self.buf(slot)?
            .copy_to(0, dst)
            .map_err(|_| EngineError::InvalidSlot { slot })
    }

    fn submit(&mut self, slot: usize, op: Op, lba: u64, blocks: u32) -> Result<(), EngineError> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        let buf = self
            .bufs
            .get(slot)
            .ok_or(EngineError::InvalidSlot { slot })?;
        let token = slot as u64;
        let r = match op {
            Op::Read => self.qp.submit_read(self.nsid, Lba(lba), blocks, buf, token),
            Op::Write => self
                .qp
                .submit_write(self.nsid, Lba(lba), blocks, buf, token),
        };
        r.map_err(engine_error)?;
        if let Some(f) = self.in_flight.get_mut(slot) {
            *f = true;
        }
        Ok(())
    }

    fn ring(&mut self) -> Result<(), EngineError> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        self.qp.ring().map_err(engine_error)
    }

    fn reap(&mut self, max: usize, done: &mut dyn FnMut(usize, Result<(), EngineError>)) -> usize {
        let in_flight = &mut self.in_flight;
        let polled = self.qp.poll_completions(max, |token, res| {
            let slot = usize::try_from(token).unwrap_or(usize::MAX);
            if let Some(f) = in_flight.get_mut(slot) {
                *f = false;
            }
            done(slot, res.map(|_| ()).map_err(engine_error));
        });
        match polled {
            Ok(n) => n,
            Err(e) => {
                // The queue pair broke: nothing in flight will complete. Fail
                // every outstanding slot once so the job can end.
                let err = EngineError::Transport {
                    reason: e.to_string(),
                };
                self.fatal = Some(err.clone());
                let mut n = 0;
                for (slot, f) in self.in_flight.iter_mut().enumerate() {
                    if std::mem::take(f) {
                        done(slot, Err(err.clone()));
                        n += 1;
                    }
                }
                n
            }
        }
    }
}
