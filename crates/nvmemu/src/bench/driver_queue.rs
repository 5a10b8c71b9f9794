// SPDX-License-Identifier: Apache-2.0
//! The bench's [`IoQueue`] over the driver's [`IoQpair`]: one queue pair, one
//! namespace, one DMA buffer per in-flight slot (allocated once in `setup`).
//!
//! Per I/O this does what the driver does (one SQE build, PRP entries) plus an
//! in-flight flag per slot; it never allocates. The flags let a fatal queue
//! error (a completion the device should not have posted) fail every command
//! still in flight, so a job never waits for completions that cannot come.
//! The same happens when the device stops completing: after the queue's stall
//! timeout (`--reply-timeout`) without a completion (or [`super::stall::STOP_STALL_TIMEOUT`] once
//! the run was asked to stop), every command in flight fails with
//! [`EngineError::Stalled`] and the queue is given up. The clock is read only
//! during such a stall, once per [`STALL_CHECK_POLLS`] empty polls.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use nvmemu_bench::{EngineError, Geometry, IoQueue, LatBreakdown, Op};
use nvmemu_ctrl::LatencyTable;
use nvmemu_driver::{DmaBuf, DmaPool, IoQpair, NvmeError};
use nvmemu_mem::TscClock;
use nvmemu_spec::{Lba, Nsid};

use super::stall::StallWatch;

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
    /// Slots set up: the queue pair's fixed buffers `0..slots`, one per slot.
    slots: usize,
    slot_bytes: usize,
    in_flight: Vec<bool>,
    /// Set once the queue pair is unusable; later calls fail with it.
    fatal: Option<EngineError>,
    /// When to give up waiting for completions.
    stall: StallWatch,
    /// Per-command tracing for `--lat-breakdown` (None: no clock read, no table access).
    trace: Option<Box<Trace>>,
}

/// Client-side timestamps of `--lat-breakdown`, joined with the controller's at reap.
#[derive(Debug)]
pub struct Trace {
    table: Arc<LatencyTable>,
    sums: Arc<LatBreakdown>,
    /// Submit and doorbell ticks per slot.
    submit: Vec<[u64; 2]>,
    /// Slots submitted since the last doorbell.
    unrung: Vec<usize>,
}

impl Trace {
    /// Trace against the controller's `table`, summing into `sums`.
    pub fn new(table: Arc<LatencyTable>, sums: Arc<LatBreakdown>) -> Trace {
        Trace {
            table,
            sums,
            submit: Vec::new(),
            unrung: Vec::new(),
        }
    }
}

impl DriverQueue {
    /// Binds `qp` to namespace `nsid`; buffers come from `pool` at `setup`. The queue
    /// is given up when nothing completes for `stall_timeout` with commands in flight.
    pub fn new(
        qp: IoQpair,
        pool: DmaPool,
        nsid: Nsid,
        stop: Arc<AtomicBool>,
        stall_timeout: Duration,
    ) -> Result<DriverQueue, QueueSetupError> {
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
            slots: 0,
            slot_bytes: 0,
            in_flight: Vec::new(),
            fatal: None,
            stall: StallWatch::new(stop, stall_timeout),
            trace: None,
        })
    }

    /// Record the six `--lat-breakdown` timestamps of every command.
    pub fn with_trace(mut self, trace: Trace) -> DriverQueue {
        self.trace = Some(Box::new(trace));
        self
    }

    fn buf(&self, slot: usize) -> Result<&DmaBuf, EngineError> {
        self.qp
            .fixed_buffer(slot)
            .ok_or(EngineError::InvalidSlot { slot })
    }

    /// Gives the queue pair up: every command in flight fails with `err`.
    fn fail_all(
        &mut self,
        err: EngineError,
        done: &mut dyn FnMut(usize, Result<(), EngineError>),
    ) -> usize {
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

/// Maps a driver error to the bench's engine error.
pub fn engine_error(e: NvmeError) -> EngineError {
    match e {
        NvmeError::Status(s) => EngineError::Status {
            sct: s.sct as u8,
            sc: s.sc,
        },
        NvmeError::QueueFull { .. } => EngineError::QueueFull,
        NvmeError::NoFixedBuffer { index, .. } => EngineError::InvalidSlot { slot: index },
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
        if self.slots == slots && self.slot_bytes == slot_bytes {
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
        let bufs = self
            .pool
            .alloc_slab(slots, slot_bytes as u64)
            .map_err(|e| EngineError::Transport {
                reason: format!("cannot allocate {slots} DMA buffers of {slot_bytes} bytes: {e}"),
            })?;
        self.qp.register_buffers(bufs).map_err(engine_error)?;
        self.slots = slots;
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
        let token = slot as u64;
        let r = match op {
            Op::Read => self
                .qp
                .submit_read_fixed(self.nsid, Lba(lba), blocks, slot, token),
            Op::Write => self
                .qp
                .submit_write_fixed(self.nsid, Lba(lba), blocks, slot, token),
            Op::Trim => self
                .qp
                .submit_deallocate_fixed(self.nsid, Lba(lba), blocks, slot, token),
        };
        r.map_err(engine_error)?;
        if let Some(f) = self.in_flight.get_mut(slot) {
            *f = true;
        }
        if let Some(t) = &mut self.trace {
            if t.submit.len() <= slot {
                t.submit.resize(slot + 1, [0; 2]);
            }
            if let Some(s) = t.submit.get_mut(slot) {
                *s = [TscClock::ticks(), 0];
            }
            t.unrung.push(slot);
        }
        Ok(())
    }

    fn ring(&mut self) -> Result<(), EngineError> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        self.qp.ring().map_err(engine_error)?;
        if let Some(t) = &mut self.trace {
            let now = TscClock::ticks();
            for slot in t.unrung.drain(..) {
                if let Some(s) = t.submit.get_mut(slot) {
                    s[1] = now;
                }
            }
        }
        Ok(())
    }

    fn reap(&mut self, max: usize, done: &mut dyn FnMut(usize, Result<(), EngineError>)) -> usize {
        let in_flight = &mut self.in_flight;
        let qid = self.qp.qid().0;
        let trace = self.trace.as_deref();
        let polled = self.qp.poll_completions_cid(max, |token, cid, res| {
            let slot = usize::try_from(token).unwrap_or(usize::MAX);
            if let Some(f) = in_flight.get_mut(slot) {
                *f = false;
            }
            if let Some(t) = trace
                && let (Some(c), Some(&[sub, db])) = (t.table.read(qid, cid), t.submit.get(slot))
            {
                t.sums.add([sub, db, c[0], c[1], c[2], TscClock::ticks()]);
            }
            done(slot, res.map(|_| ()).map_err(engine_error));
        });
        match polled {
            Ok(0) => match self
                .stall
                .after_empty_poll(usize::from(self.qp.outstanding()))
            {
                Some(waited) => {
                    let err = EngineError::Stalled {
                        qid: self.qp.qid().0,
                        waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                        in_flight: usize::from(self.qp.outstanding()),
                    };
                    self.fail_all(err, done)
                }
                None => 0,
            },
            Ok(n) => {
                self.stall.progress();
                n
            }
            Err(e) => {
                // The queue pair broke: nothing in flight will complete. Fail
                // every outstanding slot once so the job can end.
                let err = EngineError::Transport {
                    reason: e.to_string(),
                };
                self.fail_all(err, done)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::target::{EmbeddedTarget, TargetPlacement};
    use nvmemu_driver::{AttachOptions, AttachedController};
    use nvmemu_spec::Status;

    fn target() -> EmbeddedTarget {
        let placement = TargetPlacement {
            target_cpus: vec![0],
            job_cpus: Vec::new(),
            busy_poll: false,
            warning: None,
        };
        let ns = "malloc:size=4M,lba=512".parse().unwrap();
        EmbeddedTarget::start(&ns, &placement).unwrap()
    }

    fn queue(ctrl: &mut AttachedController, stop: &Arc<AtomicBool>) -> DriverQueue {
        let qp = ctrl.take_qpair().unwrap();
        DriverQueue::new(
            qp,
            ctrl.dma_pool().clone(),
            Nsid(1),
            Arc::clone(stop),
            Duration::from_secs(5),
        )
        .unwrap()
    }

    fn attach(t: &EmbeddedTarget) -> AttachedController {
        let opts = AttachOptions {
            io_queues: 1,
            queue_depth: 16,
            dma_pool_bytes: 8 << 20,
            ..AttachOptions::default()
        };
        AttachedController::attach(t.dir(), opts).unwrap()
    }

    /// Reaps until `want` completions were reported.
    fn reap_all(q: &mut DriverQueue, want: usize) -> Vec<(usize, Result<(), EngineError>)> {
        let mut got = Vec::new();
        while got.len() < want {
            q.reap(16, &mut |slot, r| got.push((slot, r)));
        }
        got
    }

    #[test]
    fn writes_and_reads_through_slot_buffers() {
        let t = target();
        let mut c = attach(&t);
        let stop = Arc::new(AtomicBool::new(false));
        let mut q = queue(&mut c, &stop);
        assert_eq!(
            q.geometry(),
            Geometry {
                block_size: 512,
                num_blocks: 8192,
                max_transfer: 1 << 20
            }
        );
        q.setup(4, 4096).unwrap();
        let data: Vec<u8> = (0..4096u32).map(|i| (i % 241) as u8).collect();
        q.write_payload(2, &data).unwrap();
        q.submit(2, Op::Write, 64, 8).unwrap();
        q.ring().unwrap();
        assert_eq!(reap_all(&mut q, 1), vec![(2, Ok(()))]);
        q.submit(3, Op::Read, 64, 8).unwrap();
        q.ring().unwrap();
        assert_eq!(reap_all(&mut q, 1), vec![(3, Ok(()))]);
        let mut back = vec![0u8; 4096];
        q.read_payload(3, &mut back).unwrap();
        assert_eq!(back, data);
        // Bad slots and ranges are errors, not panics.
        assert_eq!(
            q.submit(4, Op::Read, 0, 1),
            Err(EngineError::InvalidSlot { slot: 4 })
        );
        assert_eq!(
            q.submit(0, Op::Read, 8190, 8),
            Err(EngineError::OutOfRange {
                lba: 8190,
                blocks: 8
            })
        );
        assert!(q.write_payload(0, &[0; 4097]).is_err());
        // More slots than the queue holds is refused at setup.
        assert!(matches!(
            q.setup(16, 512),
            Err(EngineError::Transport { .. })
        ));
        drop(q);
        c.shutdown().unwrap();
        t.shutdown();
    }

    #[test]
    fn a_stalled_queue_fails_what_is_in_flight_and_gives_up() {
        let t = target();
        let mut c = attach(&t);
        // Stop already requested: the short stall limit applies.
        let stop = Arc::new(AtomicBool::new(true));
        let mut q = queue(&mut c, &stop);
        q.setup(4, 512).unwrap();
        // Queued but never rung: the device cannot complete them.
        q.submit(0, Op::Read, 0, 1).unwrap();
        q.submit(1, Op::Read, 1, 1).unwrap();
        let got = reap_all(&mut q, 2);
        assert_eq!(got.len(), 2);
        for (slot, r) in &got {
            assert!(*slot < 2);
            match r {
                Err(EngineError::Stalled {
                    qid: 1,
                    in_flight: 2,
                    ..
                }) => {}
                other => panic!("{other:?}"),
            }
        }
        // The queue is given up: later calls fail at once.
        assert!(matches!(
            q.submit(2, Op::Read, 0, 1),
            Err(EngineError::Stalled { .. })
        ));
        assert!(q.ring().is_err());
        drop(q);
        c.shutdown().unwrap();
        t.shutdown();
    }

    #[test]
    fn device_statuses_map_to_engine_statuses() {
        assert_eq!(
            engine_error(NvmeError::Status(Status::LBA_OUT_OF_RANGE)),
            EngineError::Status { sct: 0, sc: 0x80 }
        );
        assert_eq!(
            engine_error(NvmeError::Status(Status::COMPARE_FAILURE)),
            EngineError::Status { sct: 2, sc: 0x85 }
        );
        assert!(matches!(
            engine_error(NvmeError::Busy(3)),
            EngineError::Transport { .. }
        ));
    }
}
