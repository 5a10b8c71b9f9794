// SPDX-License-Identifier: Apache-2.0
//! The controllers the TCP target made: one per admin Connect (a dynamic controller, as
//! NVMe over Fabrics has it), with the doorbell page and DMA table the connections play
//! host through, and the Keep Alive timer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use nvmemu_ctrl::timing::PassMarks;
use nvmemu_ctrl::{Controller, ControllerConfig, FabricsIdentity, InterruptSink};
use nvmemu_mem::{GuestMemory, Iova, MmapRegion};

use crate::config::{TcpOptions, TcpSubsystem};

/// Keep Alive granularity reported in KAS, in 100 ms units (as SPDK's target).
const KAS: u16 = 10;
/// Bytes of an SQE in a command capsule (IOCCSZ counts them).
const SQE_BYTES: u32 = 64;

/// A fabrics host is told of completions in response capsules: no interrupts.
#[derive(Debug)]
pub(crate) struct NoInterrupts;

impl InterruptSink for NoInterrupts {
    fn raise(&mut self, _vector: u16) {}
}

/// One controller and its association.
#[derive(Debug)]
pub(crate) struct FabricsCtrl {
    pub(crate) ctrl: Controller,
    pub(crate) doorbells: Arc<MmapRegion>,
    mem: Arc<GuestMemory>,
    pub(crate) subnqn: String,
    pub(crate) hostnqn: String,
    pub(crate) hostid: [u8; 16],
    /// The host's address on the admin queue's connection.
    pub(crate) peer: Option<SocketAddr>,
    /// log2 of each namespace's block size by NSID - 1 (0: no namespace), for the
    /// transfer length of Read, Write and Compare.
    pub(crate) block_shifts: Vec<u8>,
    /// When the last command arrived (Traffic Based Keep Alive: any command counts).
    last_seen: Instant,
}

impl FabricsCtrl {
    /// A disabled controller for `sub` with CNTLID `cntlid`.
    pub(crate) fn new(
        nqn: &str,
        sub: &TcpSubsystem,
        opts: &TcpOptions,
        cntlid: u16,
    ) -> Result<FabricsCtrl, nvmemu_mem::MemError> {
        let doorbells = Arc::new(MmapRegion::anonymous(4096)?);
        let config = ControllerConfig {
            serial: sub.serial.clone(),
            model: sub.model.clone(),
            subnqn: nqn.to_owned(),
            max_io_queues: opts.max_io_qpairs,
            max_queue_entries: opts.max_queue_depth.max(opts.max_aq_depth),
            mdts: opts.mdts(),
            cntlid,
            max_namespaces: sub.max_namespaces,
            shadow_doorbells: false,
            fabrics: Some(FabricsIdentity {
                ioccsz: (SQE_BYTES + opts.in_capsule_data_size) / 16,
                iorcsz: 1,
                kas: KAS,
            }),
            ..ControllerConfig::default()
        };
        let mut ctrl = Controller::new(config, Arc::clone(&doorbells));
        // The poll group's pass, not the controller's poll, takes commands off the wire
        // and hands completions back to it (`group/timing.rs`).
        ctrl.set_pass_marks(PassMarks::Transport);
        let mut block_shifts = Vec::new();
        for ns in &sub.namespaces {
            let i = usize::try_from(ns.nsid().0.saturating_sub(1)).unwrap_or(usize::MAX);
            if i < 4096 {
                if block_shifts.len() <= i {
                    block_shifts.resize(i + 1, 0);
                }
                block_shifts[i] = u8::try_from(ns.block_shift()).unwrap_or(0);
            }
            if let Err(e) = ctrl.attach_namespace(ns.clone()) {
                tracing::warn!(%nqn, %e, "namespace not attached to a TCP controller");
            }
        }
        Ok(FabricsCtrl {
            ctrl,
            doorbells,
            mem: Arc::new(GuestMemory::new()),
            subnqn: nqn.to_owned(),
            hostnqn: String::new(),
            hostid: [0; 16],
            peer: None,
            block_shifts,
            last_seen: Instant::now(),
        })
    }

    /// A command arrived: the host is alive.
    pub(crate) fn touch(&mut self, now: Instant) {
        self.last_seen = now;
    }

    /// No command came for the Keep Alive Timeout (Connect's KATO or Set Features',
    /// rounded up to the KAS granularity) plus one more KAS unit. Linux sends Keep Alive
    /// every KATO/2 (KATO/4 with TBKAS) and SPDK's target checks only once per KATO, so
    /// a host is never cut off for a Keep Alive that is late by less than a second.
    pub(crate) fn expired(&self, now: Instant) -> bool {
        let (Some(kato), Some(grace)) = (
            self.ctrl.keep_alive_timeout(),
            self.ctrl.keep_alive_granularity(),
        ) else {
            return false;
        };
        now.saturating_duration_since(self.last_seen) > kato + grace
    }

    /// Enter `region` in the DMA table.
    pub(crate) fn map(
        &mut self,
        region: nvmemu_mem::DmaRegion,
    ) -> Result<(), nvmemu_mem::DmaError> {
        let next = self.mem.with_region(region)?;
        self.mem = Arc::new(next);
        self.ctrl.set_guest_memory(Arc::clone(&self.mem));
        Ok(())
    }

    /// Remove the region at `iova` from the DMA table.
    pub(crate) fn unmap(&mut self, iova: u64, size: u64) {
        if let Ok((next, _)) = self.mem.without_range(Iova(iova), size) {
            self.mem = Arc::new(next);
            self.ctrl.set_guest_memory(Arc::clone(&self.mem));
        }
    }
}
