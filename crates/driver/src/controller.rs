// SPDX-License-Identifier: Apache-2.0
//! `AttachedController`: attach (bring-up per NVMe Base 7.6.1), synchronous admin commands, I/O
//! queue pair creation, and orderly shutdown.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nvmemu_mem::MmapRegion;
use nvmemu_spec::{Cqe, Nsid, Qid, Sqe, regs};

use crate::commands::{self, cns};
use crate::dma::{DmaBuf, DmaPool};
use crate::error::{DriverError, NvmeError};
use crate::identify::{self, IDENTIFY_BYTES, IdentifyController, IdentifyNamespace};
use crate::init::{self, Cap};
use crate::namespace::ActiveNamespace;
use crate::prp;
use crate::qpair::{self, IoQpair};
use crate::queue::{Doorbells, Ring};
use crate::transport::pci::{PciAddress, PciTransport};
use crate::transport::{self, Transport, VfioUserTransport};

/// Admin queue depth (clamped to CAP.MQES + 1).
pub const ADMIN_QUEUE_DEPTH: u16 = 32;
/// An I/O CQ has this many times the entries of its SQ (within CAP.MQES), so the host
/// may leave consumed entries unacknowledged and write the CQ head doorbell about once
/// per `(factor - 1) * depth` completions instead of once per reap (see `Ring::poll`).
pub const IO_CQ_DEPTH_FACTOR: u16 = 4;
/// Largest transfer the driver sets up PRP list space for when MDTS allows more.
pub const MAX_TRANSFER_CAP: u64 = 4 << 20;
/// Largest admin data transfer (Get Log Page).
const ADMIN_MAX_TRANSFER: u64 = 64 * 1024;
/// Token of Asynchronous Event Requests on the admin queue (synchronous commands use 0).
const AER_TOKEN: u64 = u64::MAX;
/// How long a synchronous admin command may take.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What to set up at attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachOptions {
    /// I/O queue pairs to create (>= 1). The controller may grant fewer; see
    /// `AttachedController::io_queue_count`.
    pub io_queues: u16,
    /// Entries per I/O queue (>= 2; clamped to CAP.MQES + 1). A queue pair holds up to
    /// `depth - 1` commands in flight.
    pub queue_depth: u16,
    /// Bytes of DMA memory to allocate: queues, PRP lists, and every I/O buffer the caller
    /// will take with `AttachedController::dma_pool().alloc(..)`.
    pub dma_pool_bytes: u64,
    /// How long [`AttachedController::attach`] waits for the server to accept the connection and
    /// for each vfio-user reply, then and for the controller's life.
    pub reply_timeout: Duration,
}

impl Default for AttachOptions {
    fn default() -> AttachOptions {
        AttachOptions {
            io_queues: 1,
            queue_depth: 128,
            dma_pool_bytes: 64 << 20,
            reply_timeout: nvmemu_vfio_user::DEFAULT_REPLY_TIMEOUT,
        }
    }
}

/// Lifecycle of an attached controller.
#[derive(Debug)]
enum State {
    /// Enabled, queues created.
    Ready,
    /// Shut down (or failed to shut down); only `Drop` remains.
    ShutDown,
}

/// An attached NVMe controller.
#[derive(Debug)]
pub struct AttachedController {
    transport: Box<dyn Transport>,
    cap: Cap,
    pool: DmaPool,
    admin: Ring,
    /// Identify/log page scratch buffer for admin commands.
    scratch: DmaBuf,
    identify: IdentifyController,
    namespaces: Arc<[ActiveNamespace]>,
    io_qids: Vec<Qid>,
    qpairs: Vec<IoQpair>,
    max_transfer: u64,
    state: State,
    /// Asynchronous Event Requests submitted and not yet completed.
    aers_outstanding: u16,
    /// AER completions reaped (while waiting for another admin command) and not yet
    /// returned by `poll_async_events`. At most one per submitted request.
    aer_done: Vec<Cqe>,
}

impl std::fmt::Debug for dyn Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Transport")
    }
}

impl AttachedController {
    /// Attach to the vfio-user NVMe server listening at `<socket_dir>/cntrl` (the SPDK
    /// traddr convention) and bring it up.
    pub fn attach(
        socket_dir: &Path,
        opts: AttachOptions,
    ) -> Result<AttachedController, DriverError> {
        let t = VfioUserTransport::connect_within(&socket_dir.join("cntrl"), opts.reply_timeout)?;
        AttachedController::attach_with(Box::new(t), opts)
    }

    /// Open the PCI function at `addr` (bound to `uio_pci_generic` or `vfio-pci`) and bring
    /// it up; `opts.reply_timeout` does not apply.
    pub fn attach_pci(
        addr: PciAddress,
        opts: AttachOptions,
    ) -> Result<AttachedController, DriverError> {
        let t = PciTransport::open(addr)?;
        AttachedController::attach_with(Box::new(t), opts)
    }

    /// Bring up the controller behind `transport`.
    pub fn attach_with(
        mut transport: Box<dyn Transport>,
        opts: AttachOptions,
    ) -> Result<AttachedController, DriverError> {
        if opts.io_queues == 0 || opts.queue_depth < 2 {
            return Err(DriverError::InvalidOption(format!(
                "io_queues {} must be >= 1 and queue_depth {} >= 2",
                opts.io_queues, opts.queue_depth
            )));
        }
        let t = transport.as_mut();
        transport::enable_bus_master(t)?;
        let cap = Cap(t.read_reg64(regs::CAP)?);
        if !cap.supports_nvm() {
            return Err(DriverError::Unsupported(
                "CAP.CSS lacks the NVM command set".into(),
            ));
        }
        if cap.mpsmin() != 0 {
            return Err(DriverError::Unsupported(format!(
                "CAP.MPSMIN {} (only 4 KiB pages are supported)",
                cap.mpsmin()
            )));
        }
        let doorbells = t.map_doorbells()?;
        let pool = t.create_dma_pool(opts.dma_pool_bytes)?;
        // From here on a failure must undo the DMA map: until the controller value exists
        // (whose Drop shuts down and unmaps) that is done by hand.
        let admin_depth = clamp_depth(ADMIN_QUEUE_DEPTH, cap);
        let setup = (|| -> Result<(Ring, DmaBuf), DriverError> {
            init::disable(t, cap)?;
            let admin_db = Doorbells::new(Arc::clone(&doorbells), Qid::ADMIN, cap.dstrd())?;
            let admin = Ring::new(
                &pool,
                Qid::ADMIN,
                admin_depth,
                admin_depth,
                prp::list_bytes_for(ADMIN_MAX_TRANSFER),
                admin_db,
            )?;
            Ok((admin, pool.alloc(ADMIN_MAX_TRANSFER)?))
        })();
        let (admin, scratch) = match setup {
            Ok(v) => v,
            Err(e) => {
                let _ = t.dma_unmap(pool.iova(), pool.size());
                return Err(e);
            }
        };
        let mut ctrl = AttachedController {
            transport,
            cap,
            pool,
            admin,
            scratch,
            identify: IdentifyController::default(),
            namespaces: Arc::from(Vec::new()),
            io_qids: Vec::new(),
            qpairs: Vec::new(),
            max_transfer: 0,
            state: State::Ready,
            aers_outstanding: 0,
            aer_done: Vec::new(),
        };
        let (asq, acq) = (ctrl.admin.sq().iova().0, ctrl.admin.cq().iova().0);
        init::enable(ctrl.transport.as_mut(), cap, admin_depth, asq, acq)?;
        ctrl.identify = ctrl.identify_controller()?;
        ctrl.max_transfer = ctrl
            .identify
            .max_transfer_bytes(cap.mpsmin())
            .unwrap_or(MAX_TRANSFER_CAP)
            .min(MAX_TRANSFER_CAP);
        let mut namespaces = Vec::new();
        for nsid in ctrl.active_namespaces()? {
            let id = ctrl.identify_namespace(nsid)?;
            match id.lba_size() {
                Some(lba_size) => namespaces.push(ActiveNamespace {
                    nsid,
                    nsze: id.nsze,
                    lba_size,
                    identify: id,
                }),
                None => {
                    tracing::debug!(nsid = nsid.0, "skipping namespace with unusable LBA format")
                }
            }
        }
        ctrl.namespaces = Arc::from(namespaces);
        ctrl.create_io_queues(opts, &doorbells)?;
        Ok(ctrl)
    }

    fn create_io_queues(
        &mut self,
        opts: AttachOptions,
        doorbells: &Arc<MmapRegion>,
    ) -> Result<(), DriverError> {
        let dw0 = self.admin_checked(commands::set_num_queues(opts.io_queues), None)?;
        let nsqa = (dw0 & 0xFFFF) + 1;
        let ncqa = (dw0 >> 16) + 1;
        let granted = nsqa.min(ncqa);
        let n = u16::try_from(granted.min(u32::from(opts.io_queues))).unwrap_or(opts.io_queues);
        if n < opts.io_queues {
            // Allowed by the spec; the caller sees how many queue pairs it got.
            tracing::debug!(
                requested = opts.io_queues,
                granted,
                "fewer I/O queues than requested"
            );
        }
        let depth = clamp_depth(opts.queue_depth, self.cap);
        let cq_depth = clamp_depth(depth.saturating_mul(IO_CQ_DEPTH_FACTOR), self.cap);
        let list_bytes = prp::list_bytes_for(self.max_transfer);
        for q in 1..=n {
            let qid = Qid(q);
            let db = Doorbells::new(Arc::clone(doorbells), qid, self.cap.dstrd())?;
            let ring = Ring::new(&self.pool, qid, depth, cq_depth, list_bytes, db)?;
            let cq_iova = ring.cq().iova().0;
            self.admin_checked(commands::create_io_cq(qid, ring.cq_depth(), cq_iova), None)?;
            self.io_qids.push(qid);
            if let Err(e) = self.admin_checked(
                commands::create_io_sq(qid, depth, ring.sq().iova().0, qid),
                None,
            ) {
                // The CQ exists without its SQ: delete it so shutdown's bookkeeping holds.
                let _ = self.admin_checked(commands::delete_io_cq(qid), None);
                self.io_qids.pop();
                return Err(e);
            }
            self.qpairs.push(IoQpair::new(
                ring,
                Arc::clone(&self.namespaces),
                self.max_transfer,
            ));
        }
        Ok(())
    }

    fn ensure_ready(&self) -> Result<(), DriverError> {
        match self.state {
            State::Ready => Ok(()),
            State::ShutDown => Err(DriverError::ShutDown),
        }
    }

    /// Submit an admin command and wait for its completion, returned whatever its status.
    /// With `data`, PRPs are built for the first `bytes` of the buffer (at most 64 KiB);
    /// otherwise DPTR is left as given. For tests that need to send hostile commands.
    pub fn admin_raw_with_data(
        &mut self,
        sqe: Sqe,
        data: Option<(&DmaBuf, u64)>,
    ) -> Result<Cqe, DriverError> {
        self.ensure_ready()?;
        let busy = self
            .admin
            .outstanding()
            .saturating_sub(self.aers_outstanding);
        if busy != 0 {
            return Err(NvmeError::Busy(busy).into());
        }
        self.admin.push(sqe, 0, data)?;
        self.admin.ring()?;
        if self.aers_outstanding == 0 {
            return Ok(qpair::wait_completion(&mut self.admin, ADMIN_TIMEOUT)?);
        }
        // Asynchronous events may complete first: keep them for `poll_async_events`.
        let start = Instant::now();
        loop {
            if let Some(cqe) = self.reap_admin()? {
                return Ok(cqe);
            }
            if start.elapsed() > ADMIN_TIMEOUT {
                return Err(NvmeError::Timeout {
                    qid: Qid::ADMIN,
                    millis: u64::try_from(ADMIN_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
                }
                .into());
            }
            std::thread::yield_now();
        }
    }

    /// Reaps admin completions: AERs go to `aer_done`, the synchronous command's is returned.
    fn reap_admin(&mut self) -> Result<Option<Cqe>, DriverError> {
        let mut sync = None;
        let mut aers = Vec::new();
        self.admin
            .poll(usize::from(self.admin.slots()), |token, cqe| {
                if token == AER_TOKEN {
                    aers.push(*cqe);
                } else {
                    sync = Some(*cqe);
                }
            })?;
        let n = u16::try_from(aers.len()).unwrap_or(u16::MAX);
        self.aers_outstanding = self.aers_outstanding.saturating_sub(n);
        self.aer_done.extend(aers);
        Ok(sync)
    }

    /// Submit an Asynchronous Event Request and return without waiting: it completes when
    /// the controller reports an event (enable the event types with Set Features 0Bh).
    /// At most AERL + 1 may be outstanding; synchronous admin commands still work meanwhile.
    pub fn submit_async_event_request(&mut self) -> Result<(), DriverError> {
        self.ensure_ready()?;
        let limit = u16::from(self.identify.aerl) + 1;
        let busy = self
            .admin
            .outstanding()
            .saturating_sub(self.aers_outstanding);
        if busy != 0 || self.aers_outstanding >= limit {
            return Err(NvmeError::Busy(self.admin.outstanding()).into());
        }
        self.admin
            .push(commands::async_event_request(), AER_TOKEN, None)?;
        self.admin.ring()?;
        self.aers_outstanding += 1;
        Ok(())
    }

    /// Completed Asynchronous Event Requests, oldest first, without blocking (DW0 holds the
    /// event: type in bits 2:0, information in 15:8, log page in 23:16).
    pub fn poll_async_events(&mut self) -> Result<Vec<Cqe>, DriverError> {
        self.ensure_ready()?;
        if self.aers_outstanding > 0 {
            // No synchronous command is in flight between calls, so only AERs can complete.
            self.reap_admin()?;
        }
        Ok(std::mem::take(&mut self.aer_done))
    }

    /// Asynchronous Event Requests submitted and not yet completed.
    pub fn async_events_outstanding(&self) -> u16 {
        self.aers_outstanding
    }

    /// CSTS, read now. A host reads it when a command does not complete: CFS set means
    /// the controller needs a reset ([`AttachedController::shutdown`] does one, then
    /// attach again).
    pub fn csts(&mut self) -> Result<u32, DriverError> {
        Ok(self.transport.read_reg32(regs::CSTS)?)
    }

    /// Submit `sqe` on the admin queue as given (CID replaced) and return its completion.
    pub fn admin_raw(&mut self, sqe: Sqe) -> Result<Cqe, DriverError> {
        self.admin_raw_with_data(sqe, None)
    }

    /// Run an admin command; a non-success status becomes `NvmeError::Status`.
    fn admin_checked(
        &mut self,
        sqe: Sqe,
        data: Option<(&DmaBuf, u64)>,
    ) -> Result<u32, DriverError> {
        let cqe = self.admin_raw_with_data(sqe, data)?;
        Ok(crate::queue::result_of(&cqe)?)
    }

    /// Run an admin command that reads `bytes` into the scratch buffer, and copy them out.
    fn admin_read(&mut self, sqe: Sqe, bytes: usize) -> Result<Vec<u8>, DriverError> {
        let scratch = self.scratch.clone();
        scratch.fill(0, bytes as u64, 0)?;
        self.admin_checked(sqe, Some((&scratch, bytes as u64)))?;
        let mut out = vec![0u8; bytes];
        scratch.copy_to(0, &mut out)?;
        Ok(out)
    }

    /// Identify Controller (CNS 01h), issued now.
    pub fn identify_controller(&mut self) -> Result<IdentifyController, DriverError> {
        let page = self.admin_read(commands::identify(cns::CONTROLLER, Nsid(0)), IDENTIFY_BYTES)?;
        Ok(IdentifyController::parse(&page))
    }

    /// Identify Namespace (CNS 00h) for `nsid`, issued now.
    pub fn identify_namespace(&mut self, nsid: Nsid) -> Result<IdentifyNamespace, DriverError> {
        let page = self.admin_read(commands::identify(cns::NAMESPACE, nsid), IDENTIFY_BYTES)?;
        Ok(IdentifyNamespace::parse(&page))
    }

    /// Active Namespace ID list (CNS 02h) from NSID 1, issued now.
    pub fn active_namespaces(&mut self) -> Result<Vec<Nsid>, DriverError> {
        let page = self.admin_read(
            commands::identify(cns::ACTIVE_NS_LIST, Nsid(0)),
            IDENTIFY_BYTES,
        )?;
        Ok(identify::parse_ns_list(&page)
            .into_iter()
            .map(Nsid)
            .collect())
    }

    /// Get Log Page `lid` for `nsid`: `bytes` bytes (a multiple of 4, at most 64 KiB) from
    /// byte `offset` of the page.
    pub fn get_log_page(
        &mut self,
        lid: u8,
        nsid: Nsid,
        bytes: u32,
        offset: u64,
    ) -> Result<Vec<u8>, DriverError> {
        if bytes == 0 || !bytes.is_multiple_of(4) || u64::from(bytes) > ADMIN_MAX_TRANSFER {
            return Err(DriverError::InvalidOption(format!(
                "log page length {bytes} must be a non-zero multiple of 4 up to 64 KiB"
            )));
        }
        let sqe = commands::get_log_page(lid, nsid, bytes, offset);
        self.admin_read(sqe, usize::try_from(bytes).unwrap_or(0))
    }

    /// Get Features `fid` (current value): completion DW0.
    pub fn get_features(&mut self, fid: u8) -> Result<u32, DriverError> {
        self.admin_checked(commands::get_features(fid), None)
    }

    /// Set Features `fid` with CDW11 `value`: completion DW0.
    pub fn set_features(&mut self, fid: u8, value: u32) -> Result<u32, DriverError> {
        self.admin_checked(commands::set_features(fid, value), None)
    }

    /// Identify Controller data read at attach.
    pub fn info(&self) -> &IdentifyController {
        &self.identify
    }

    /// Namespaces active at attach with a usable LBA format.
    pub fn namespaces(&self) -> &[ActiveNamespace] {
        &self.namespaces
    }

    /// Controller Capabilities read at attach.
    pub fn cap(&self) -> Cap {
        self.cap
    }

    /// Largest transfer of one I/O command in bytes (MDTS, capped at `MAX_TRANSFER_CAP`).
    pub fn max_transfer_bytes(&self) -> u64 {
        self.max_transfer
    }

    /// Number of I/O queue pairs created (taken or not).
    pub fn io_queue_count(&self) -> usize {
        self.io_qids.len()
    }

    /// The DMA pool: allocate I/O buffers here (once, before the I/O loop).
    pub fn dma_pool(&self) -> &DmaPool {
        &self.pool
    }

    /// Allocate a zeroed, page-aligned DMA buffer of `len` bytes.
    pub fn alloc_dma(&self, len: u64) -> Result<DmaBuf, DriverError> {
        Ok(self.pool.alloc(len)?)
    }

    /// Take one I/O queue pair not yet handed out (lowest QID first).
    pub fn take_qpair(&mut self) -> Option<IoQpair> {
        if self.qpairs.is_empty() {
            None
        } else {
            Some(self.qpairs.remove(0))
        }
    }

    /// Take every I/O queue pair not yet handed out, one per thread.
    pub fn qpairs(&mut self) -> Vec<IoQpair> {
        std::mem::take(&mut self.qpairs)
    }

    /// Gives the controller up without a word to the device: no queue deletion, no
    /// shutdown notification, no unmap. For a device that stopped answering, where each
    /// of those steps would wait out its timeout. Dropping the controller then closes
    /// the connection, which the server handles as a vanished client.
    pub fn abandon(&mut self) {
        self.io_qids.clear();
        self.state = State::ShutDown;
    }

    /// Delete the I/O queues, notify shutdown (CC.SHN = 01b, wait CSTS.SHST = 10b) and undo
    /// the DMA map. Stop using every `IoQpair` first: their queues no longer exist after this.
    /// Idempotent; also attempted by `Drop`.
    pub fn shutdown(&mut self) -> Result<(), DriverError> {
        if matches!(self.state, State::ShutDown) {
            return Ok(());
        }
        let mut first_err = None;
        let qids = std::mem::take(&mut self.io_qids);
        // A device that no longer answers a register read (its socket closed) completes no
        // admin command either, and neither does one in Controller Fatal Status: skip the
        // queue deletions rather than wait ADMIN_TIMEOUT each.
        let csts_now = self.transport.read_reg32(regs::CSTS);
        let fatal = csts_now.as_ref().is_ok_and(|v| v & regs::csts::CFS != 0);
        let reachable = csts_now.is_ok() && !fatal;
        for &qid in qids.iter().rev().filter(|_| reachable) {
            if let Err(e) = self.admin_checked(commands::delete_io_sq(qid), None) {
                first_err.get_or_insert(e);
            }
            if let Err(e) = self.admin_checked(commands::delete_io_cq(qid), None) {
                first_err.get_or_insert(e);
            }
        }
        self.state = State::ShutDown;
        let t = self.transport.as_mut();
        // A fatal controller never reports shutdown complete: reset it instead (NVMe Base
        // 1.4, 10.5: the host resets a controller that reports CFS).
        let stopped = if fatal {
            init::disable(t, self.cap)
        } else {
            init::shutdown(t, self.cap)
        };
        if let Err(e) = stopped {
            first_err.get_or_insert(e);
        }
        if let Err(e) = t.dma_unmap(self.pool.iova(), self.pool.size()) {
            first_err.get_or_insert(e.into());
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for AttachedController {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::debug!(error = %e, "best-effort shutdown on drop failed");
        }
    }
}

fn clamp_depth(want: u16, cap: Cap) -> u16 {
    let max = u16::try_from(cap.max_queue_entries()).unwrap_or(u16::MAX);
    want.min(max).max(2)
}
