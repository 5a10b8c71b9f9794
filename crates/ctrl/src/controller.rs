// SPDX-License-Identifier: Apache-2.0
//! The controller: its state, namespaces attached and detached, BAR0 accesses and the
//! register side effects (CC.EN, CC.SHN).

use std::sync::Arc;
use std::time::Instant;

use nvmemu_bdev::Bdev;
use nvmemu_mem::{Access, GuestMemory, MmapRegion};
use nvmemu_spec::log_page::AsyncEvent;
use nvmemu_spec::regs;
use nvmemu_spec::{Nsid, Qid};

use crate::admin::aer::AerState;
use crate::admin::features::Features;
use crate::admin::log_page::{ChangedNsList, ErrorLog};
use crate::config::ControllerConfig;
use crate::doorbell::Doorbells;
use crate::instruments::Instruments;
use crate::latency::LatencyHook;
use crate::metrics::{ControllerStats, CtrlCounters, data_units};
use crate::namespace::Namespace;
use crate::queue::{CQE_SIZE, CompletionQueue, QueueTable, Ring, SQE_SIZE, SubmissionQueue};
use crate::regs::{Cc, RegisterFile, aqa_sizes, word};
use crate::state::{Action, CtrlEvent, CtrlState, transition};

/// Errors of the controller's control-plane calls.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CtrlError {
    /// The NSID is 0, the broadcast value or above the controller's NN.
    #[error("namespace ID {nsid} is outside 1..={max}")]
    InvalidNsid {
        /// The NSID asked for.
        nsid: u32,
        /// The controller's NN.
        max: u32,
    },
    /// A namespace with this NSID is already attached.
    #[error("namespace ID {nsid} is already attached")]
    NsidInUse {
        /// The NSID.
        nsid: u32,
    },
    /// No namespace with this NSID is attached.
    #[error("namespace ID {nsid} is not attached")]
    NoSuchNamespace {
        /// The NSID.
        nsid: u32,
    },
}

/// A BAR0 access the controller cannot perform.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MmioError {
    /// Only 4- and 8-byte accesses exist.
    #[error("{len}-byte register access at {offset:#x}: only 4 and 8 bytes are supported")]
    BadSize {
        /// Offset of the access.
        offset: u64,
        /// Its length.
        len: usize,
    },
    /// The access is not naturally aligned.
    #[error("register access at {offset:#x} is not aligned to its size {len}")]
    Unaligned {
        /// Offset of the access.
        offset: u64,
        /// Its length.
        len: usize,
    },
    /// Past the doorbells.
    #[error("register access at {offset:#x} is outside BAR0")]
    OutOfRange {
        /// Offset of the access.
        offset: u64,
    },
}

/// Where the controller sends MSI-X interrupts. The target implements it with eventfds and
/// decides whether MSI-X is enabled, the vector unmasked and an fd present.
pub trait InterruptSink {
    /// Signal `vector`.
    fn raise(&mut self, vector: u16);
}

/// An emulated NVMe controller. Plain single-threaded state: one poller thread owns it.
#[derive(Debug)]
pub struct Controller {
    pub(crate) config: ControllerConfig,
    /// `config`'s MDTS in bytes (`max_transfer`), worked out once: every data command asks.
    max_transfer: u64,
    pub(crate) regs: RegisterFile,
    pub(crate) state: CtrlState,
    pub(crate) doorbells: Doorbells,
    pub(crate) mem: Arc<GuestMemory>,
    pub(crate) queues: QueueTable,
    pub(crate) namespaces: Vec<Option<Namespace>>,
    pub(crate) features: Features,
    pub(crate) aer: AerState,
    pub(crate) error_log: ErrorLog,
    pub(crate) changed_ns: ChangedNsList,
    pub(crate) counters: CtrlCounters,
    pub(crate) created: Instant,
    /// Busy time, per-layer timing and the per-command trace (`instruments.rs`).
    pub(crate) instruments: Instruments,
    /// A large Deallocate or Write Zeroes done across passes (`io/zeroing.rs`).
    pub(crate) zeroing: crate::io::zeroing::ZeroingSlot,
    /// Some attached namespace has a QoS limit (refreshed each pass; `qos.rs`).
    pub(crate) qos_on: bool,
    /// Reservation notices from other controllers and this controller's log of them.
    pub(crate) resv: crate::admin::resv_log::ResvNotices,
    /// Some attached namespace has a latency model (refreshed each pass; `model.rs`).
    pub(crate) model_on: bool,
    /// CQEs a model holds until they are due (`hold.rs`).
    pub(crate) held: crate::hold::HeldCompletions,
    /// Some bdev in the process has an injection armed (refreshed each pass; `fault.rs`).
    pub(crate) faults_on: bool,
    /// Keep Alive Timeout in ms (0: no timer); kept across resets (`admin/keep_alive.rs`).
    pub(crate) kato_ms: u32,
    /// Some attached namespace is backed by a file (set on attach and detach).
    pub(crate) file_on: bool,
    /// Some I/O SQ was set to take Reads in place (`io/in_place.rs`).
    pub(crate) in_place_on: bool,
    /// `file_on || in_place_on`: a Read or Write may leave the plain copy path (the one
    /// branch `exec_io` takes for both).
    pub(crate) rw_detour: bool,
    /// An injected fault is being applied: Reads are copied (`io/in_place.rs`).
    pub(crate) injecting: bool,
    /// The io_uring of file namespaces and their commands in flight (`io/file_io.rs`).
    pub(crate) file_io: crate::io::file_io::FileIo,
    /// An injected fatal status waiting for its command count (`ctrl_faults.rs`).
    pub(crate) fatal_countdown: Option<crate::ctrl_faults::FatalCountdown>,
    /// What injected fatal statuses did (`ctrl_faults.rs`).
    pub(crate) fatal_log: crate::ctrl_faults::FatalLog,
}

impl Controller {
    /// A disabled controller. `doorbells` is the shared doorbell page: SQ y tail at byte
    /// offset 8*y, CQ y head at 8*y + 4 (CAP.DSTRD = 0); the client writes it with plain
    /// stores and the controller polls it.
    pub fn new(mut config: ControllerConfig, doorbells: Arc<MmapRegion>) -> Controller {
        config.max_queue_entries = config.max_queue_entries.max(2);
        config.msix_vectors = config.msix_vectors.max(1);
        let pairs = (doorbells.len() / 8).saturating_sub(1);
        let max_qid = config
            .max_io_queues
            .min(u16::try_from(pairs).unwrap_or(u16::MAX));
        config.max_io_queues = max_qid;
        let ns_slots = usize::try_from(config.max_namespaces)
            .unwrap_or(0)
            .min(1 << 16);
        config.max_namespaces = u32::try_from(ns_slots).unwrap_or(0);
        Controller {
            regs: RegisterFile::new(&config),
            state: CtrlState::Disabled,
            doorbells: Doorbells::new(doorbells),
            mem: Arc::new(GuestMemory::new()),
            queues: QueueTable::new(max_qid),
            namespaces: (0..ns_slots).map(|_| None).collect(),
            features: Features::new(&config),
            aer: AerState::default(),
            error_log: ErrorLog::default(),
            changed_ns: ChangedNsList::default(),
            counters: CtrlCounters::default(),
            created: Instant::now(),
            instruments: Instruments::default(),
            zeroing: Default::default(),
            qos_on: false,
            resv: crate::admin::resv_log::ResvNotices::new(config.cntlid),
            model_on: false,
            held: Default::default(),
            faults_on: false,
            kato_ms: 0,
            file_on: false,
            in_place_on: false,
            rw_detour: false,
            injecting: false,
            file_io: Default::default(),
            fatal_countdown: None,
            fatal_log: Default::default(),
            max_transfer: mdts_bytes(config.mdts),
            config,
        }
    }

    /// The configuration in effect (limits clamped to what the doorbell page allows).
    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// The current state.
    pub fn state(&self) -> CtrlState {
        self.state
    }

    /// CSTS.RDY = 1 and queues are processed.
    pub fn is_ready(&self) -> bool {
        self.state.is_ready()
    }

    /// Attach a namespace. While the controller is enabled this records the NSID in the
    /// Changed Namespace List and raises a Namespace Attribute Changed event (if the host
    /// enabled it in Asynchronous Event Configuration).
    pub fn attach_namespace(&mut self, ns: Namespace) -> Result<(), CtrlError> {
        let nsid = ns.nsid().0;
        let inbox = Arc::clone(&self.resv.inbox);
        let slot = self.ns_slot(nsid)?;
        if slot.is_some() {
            return Err(CtrlError::NsidInUse { nsid });
        }
        ns.reservations().subscribe(nsid, &inbox);
        *slot = Some(ns);
        self.refresh_timed_namespaces();
        self.refresh_file_on();
        self.namespace_changed(nsid);
        Ok(())
    }

    /// Detach a namespace and hand its bdev back.
    pub fn detach_namespace(&mut self, nsid: Nsid) -> Result<Arc<Bdev>, CtrlError> {
        let ns = self
            .ns_slot(nsid.0)?
            .take()
            .ok_or(CtrlError::NoSuchNamespace { nsid: nsid.0 })?;
        ns.reservations().unsubscribe(&self.resv.inbox);
        if let Some(memory) = ns.io().memory() {
            self.queues.forget_in_place(memory);
        }
        self.forget_namespace_timing(nsid.0);
        self.refresh_timed_namespaces();
        self.refresh_file_on();
        self.namespace_changed(nsid.0);
        Ok(Arc::clone(ns.bdev()))
    }

    /// Record the moments of each command in `trace` from now on (None: stop). For a
    /// client in the same process, such as `nvmemu bench --lat-breakdown`; without a trace
    /// nothing is read or written for it.
    pub fn set_trace(&mut self, trace: Option<LatencyHook>) {
        self.instruments.set_trace(trace);
    }

    fn refresh_file_on(&mut self) {
        let on = self.namespaces().any(|ns| ns.bdev().file().is_some());
        self.file_on = on;
        self.rw_detour = on || self.in_place_on;
    }

    /// The attached namespaces, in NSID order.
    pub fn namespaces(&self) -> impl Iterator<Item = &Namespace> {
        self.namespaces.iter().flatten()
    }

    fn ns_slot(&mut self, nsid: u32) -> Result<&mut Option<Namespace>, CtrlError> {
        let max = self.config.max_namespaces;
        let index = nsid.checked_sub(1).and_then(|i| usize::try_from(i).ok());
        index
            .and_then(|i| self.namespaces.get_mut(i))
            .ok_or(CtrlError::InvalidNsid { nsid, max })
    }

    fn namespace_changed(&mut self, nsid: u32) {
        if self.state.is_ready() {
            self.changed_ns.add(nsid);
            self.raise_event(AsyncEvent::NAMESPACE_ATTRIBUTE_CHANGED);
        }
    }

    /// Install a new DMA table (after DMA_MAP/DMA_UNMAP). Queue rings and shadow doorbell
    /// pages are resolved again. A queue whose ring is no longer mapped pauses (it is not
    /// touched) until a later table maps it again; lost shadow doorbell pages are fatal.
    pub fn set_guest_memory(&mut self, mem: Arc<GuestMemory>) {
        // File I/O in flight may point into a region the new table drops.
        self.drain_file_io();
        self.mem = mem;
        let (mut paused, mut resumed) = (0usize, 0usize);
        for ring in self.queues.rings_mut() {
            match ring.re_resolve(&self.mem) {
                Some(r) => {
                    resumed += usize::from(ring.paused);
                    *ring = r;
                }
                None => {
                    // Keep base and size to re-resolve later; the stale mapping is never
                    // touched while paused (SPDK suspends and re-maps queues the same way).
                    paused += usize::from(!ring.paused);
                    ring.paused = true;
                }
            }
        }
        if paused + resumed > 0 {
            tracing::debug!(target: "guest", paused, resumed, "queue memory unmapped or mapped again");
        }
        if let Some(db) = &mut self.doorbells.shadow
            && !db.re_resolve(&self.mem)
        {
            tracing::warn!(target: "guest", "shadow doorbell memory was unmapped; controller fatal");
            self.apply(CtrlEvent::Fault, None);
        }
    }

    /// Controller reset (FLR, vfio-user DEVICE_RESET): like CC.EN 1 -> 0, and every
    /// register back to its power-on value. Namespaces and guest memory stay.
    pub fn reset(&mut self) {
        self.tear_down();
        self.regs = RegisterFile::new(&self.config);
        self.fatal_log
            .on_transition(self.state, CtrlState::Disabled);
        self.state = CtrlState::Disabled;
        self.regs.set(word(regs::CSTS), self.state.csts());
    }

    /// Poll `page` for doorbells from now on; returns the page polled until now. A transport
    /// gives each client session a page of its own, so an earlier client that kept a mapping
    /// of its page cannot move this session's queues. A page of another length is refused
    /// and handed back: the queue limits were derived from the first page's length.
    pub fn replace_doorbells(
        &mut self,
        page: Arc<MmapRegion>,
    ) -> Result<Arc<MmapRegion>, Arc<MmapRegion>> {
        self.doorbells.replace_page(page)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ControllerStats {
        let c = &self.counters;
        ControllerStats {
            admin_commands: c.admin_commands,
            io_commands: c.io_commands,
            errors: c.errors,
            media_errors: c.media_errors,
            bytes_read: c.bytes_read,
            bytes_written: c.bytes_written,
            host_read_commands: c.host_read_commands,
            host_write_commands: c.host_write_commands,
            data_units_read: data_units(c.bytes_read),
            data_units_written: data_units(c.bytes_written),
            bad_doorbells: c.bad_doorbells,
            memory_faults: c.memory_faults,
            admin_qpairs_created: c.admin_qpairs_created,
            io_qpairs_created: c.io_qpairs_created,
            queues: self.queues.sqs().map(|(qid, sq)| (qid, sq.stats)).collect(),
        }
    }

    /// A BAR0 read: registers below 0x1000 (4 or 8 bytes, naturally aligned; 64-bit
    /// registers may be read as two dwords) and the doorbells above.
    pub fn mmio_read(&mut self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        check_access(offset, data.len())?;
        let mut pos = 0usize;
        for chunk in data.chunks_exact_mut(4) {
            let at = offset + pos as u64;
            let value = if at < regs::DOORBELL_BASE {
                self.regs.get(word(at))
            } else {
                let off = at - regs::DOORBELL_BASE;
                self.doorbells
                    .page()
                    .load_acquire_u32(off)
                    .map_err(|_| MmioError::OutOfRange { offset: at })?
            };
            chunk.copy_from_slice(&value.to_le_bytes());
            pos += 4;
        }
        Ok(())
    }

    /// A BAR0 write: registers below 0x1000 (see `mmio_read`), doorbells above (stored into
    /// the doorbell page, where the poller picks them up).
    pub fn mmio_write(&mut self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        check_access(offset, data.len())?;
        let mut pos = 0usize;
        for chunk in data.chunks_exact(4) {
            let at = offset + pos as u64;
            let mut bytes = [0u8; 4];
            bytes.copy_from_slice(chunk);
            let value = u32::from_le_bytes(bytes);
            if at < regs::DOORBELL_BASE {
                self.write_register(at, value);
            } else {
                let off = at - regs::DOORBELL_BASE;
                // Pairs with the poller's Acquire load of the same word.
                self.doorbells
                    .page()
                    .store_release_u32(off, value)
                    .map_err(|_| MmioError::OutOfRange { offset: at })?;
            }
            pos += 4;
        }
        Ok(())
    }

    /// The one place a register write has effects.
    fn write_register(&mut self, offset: u64, value: u32) {
        let w = word(offset);
        match offset {
            regs::INTMS | regs::INTMC => {
                // Only meaningful for pin/MSI interrupts; kept so reads return the mask.
                let mask = self.regs.get(word(regs::INTMS));
                let mask = if offset == regs::INTMS {
                    mask | value
                } else {
                    mask & !value
                };
                self.regs.set(word(regs::INTMS), mask);
                self.regs.set(word(regs::INTMC), mask);
            }
            regs::CC => {
                let old = Cc::decode(self.regs.write_masked(w, value));
                let new = Cc::decode(self.regs.cc());
                if old.en && !new.en {
                    self.apply(CtrlEvent::Disable, None);
                } else if !old.en && new.en {
                    match self.admin_queues(&new) {
                        Ok(q) => self.apply(CtrlEvent::Enable, Some(q)),
                        Err(why) => {
                            tracing::debug!(target: "guest", why, "controller enable refused");
                            self.apply(CtrlEvent::EnableRejected, None);
                        }
                    }
                }
                if old.shn == 0 && new.shn != 0 {
                    self.apply(CtrlEvent::Shutdown, None);
                }
            }
            o if (regs::AQA..regs::CMBLOC).contains(&o) => {
                if self.state == CtrlState::Disabled && !Cc::decode(self.regs.cc()).en {
                    self.regs.write_masked(w, value);
                } else {
                    tracing::debug!(target: "guest", offset, "admin queue register write while enabled ignored");
                }
            }
            _ => {
                self.regs.write_masked(w, value);
            }
        }
    }

    /// Validate CC and the admin queue registers for CC.EN 0 -> 1 and build the queues.
    fn admin_queues(&self, cc: &Cc) -> Result<(SubmissionQueue, CompletionQueue), &'static str> {
        if cc.mps != 0 {
            return Err("CC.MPS is not 4 KiB");
        }
        if cc.css != 0 && cc.css != 7 {
            return Err("CC.CSS is not the NVM command set");
        }
        if cc.ams != 0 {
            return Err("CC.AMS is not round robin");
        }
        let (sq_size, cq_size) = aqa_sizes(self.regs.get(word(regs::AQA)));
        let max = self.regs.max_queue_entries();
        if sq_size < 2 || cq_size < 2 || sq_size > max || cq_size > max {
            return Err("AQA queue size out of range");
        }
        let asq = self.regs.get64(regs::ASQ);
        let acq = self.regs.get64(regs::ACQ);
        let sq_ring = Ring::resolve(&self.mem, asq, u64::from(sq_size) * SQE_SIZE, Access::Read)
            .ok_or("admin SQ is not in mapped memory")?;
        let cq_ring = Ring::resolve(&self.mem, acq, u64::from(cq_size) * CQE_SIZE, Access::Write)
            .ok_or("admin CQ is not in mapped memory")?;
        let sq = SubmissionQueue::new(sq_size, Qid::ADMIN, sq_ring);
        Ok((sq, CompletionQueue::new(cq_size, true, 0, cq_ring)))
    }

    /// Run one state transition and its action.
    pub(crate) fn apply(
        &mut self,
        event: CtrlEvent,
        admin: Option<(SubmissionQueue, CompletionQueue)>,
    ) {
        let (next, action) = transition(self.state, event);
        match action {
            Action::None => {}
            Action::TearDown => self.tear_down(),
            Action::CreateAdminQueues => {
                if let Some((sq, cq)) = admin {
                    // The host zeroes its CQ memory too; doing it here guards against stale
                    // phase tags from an earlier incarnation.
                    cq.ring.clear();
                    self.queues.insert_cq(Qid::ADMIN, cq);
                    self.queues.insert_sq(Qid::ADMIN, sq);
                    self.counters.admin_qpairs_created += 1;
                }
            }
        }
        if next != self.state {
            tracing::debug!(from = ?self.state, to = ?next, ?event, "controller state");
        }
        self.fatal_log.on_transition(self.state, next);
        self.state = next;
        self.regs.set(word(regs::CSTS), next.csts());
    }

    /// Controller level reset of the queue side: queues, AERs, shadow doorbells, features,
    /// and the doorbell registers themselves (NVMe Base 1.4, 7.3.2: every register but
    /// AQA/ASQ/ACQ returns to its default, and a doorbell's default is 0). A stale SQ tail
    /// left in the page would otherwise be taken as new work by the next admin queue.
    fn tear_down(&mut self) {
        self.queues.clear();
        self.zeroing.busy = false;
        self.held.clear();
        self.file_io.orphan_all();
        self.drain_file_io();
        self.aer.reset();
        self.features = Features::new(&self.config);
        for ns in self.namespaces.iter_mut().flatten() {
            ns.notice_mask = 0;
        }
        let host = self.host();
        self.resv.reset(host);
        self.doorbells.clear();
    }

    /// The largest transfer a command may ask for, in bytes.
    #[inline(always)]
    pub(crate) fn max_transfer(&self) -> u64 {
        self.max_transfer
    }
}

/// MDTS (a power of two in units of the minimum page size, 0 = no limit) in bytes.
fn mdts_bytes(mdts: u8) -> u64 {
    match mdts {
        0 => u64::MAX,
        m => nvmemu_spec::PAGE_SIZE
            .checked_shl(u32::from(m))
            .unwrap_or(u64::MAX),
    }
}

fn check_access(offset: u64, len: usize) -> Result<(), MmioError> {
    if len != 4 && len != 8 {
        return Err(MmioError::BadSize { offset, len });
    }
    if !offset.is_multiple_of(len as u64) {
        return Err(MmioError::Unaligned { offset, len });
    }
    Ok(())
}
