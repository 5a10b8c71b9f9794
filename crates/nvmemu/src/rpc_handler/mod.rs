// SPDX-License-Identifier: Apache-2.0
//! The JSON-RPC [`Handler`] of `nvmemu serve`: SPDK's object model (bdevs, the VFIOUSER
//! transport, NVMe-oF subsystems with namespaces and listeners) mapped onto the target.
//!
//! Mapping: each VFIOUSER listener of a subsystem is one controller (`Target::add_controller`
//! with `socket_dir = traddr`) carrying the subsystem's serial, model, NQN and namespaces;
//! adding or removing a namespace while listeners exist attaches or detaches it on every one
//! of the subsystem's controllers (the controller raises Namespace Attribute Changed to an
//! attached host). A bdev used by a namespace is claimed: it cannot back a second one, and
//! deleting it removes its namespace first (SPDK's hot remove).
//!
//! All state lives behind one mutex: RPCs run one at a time, like on SPDK's app thread.
//! Errors are [`RpcError`] values in SPDK's style; nothing here panics on caller input.

mod bdev;
mod cpu_time;
mod delay;
mod error_bdev;
mod fault;
mod file_bdev;
mod framework;
mod ids;
mod latency;
mod log;
mod nvmf;
mod qos;
mod threads;

pub use log::LogControl;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nvmemu_bdev::BdevKind;
use nvmemu_bdev::FileEngine::{Aio, Uring};
use nvmemu_device::Target;
use nvmemu_rpc::methods::bdev::{BdevMallocCreateParams, BdevNullCreateParams};
use nvmemu_rpc::methods::framework::SpdkKillInstanceParams;
use nvmemu_rpc::{Caller, Errno, Handler, Request, RpcError, StopHandle};
use serde_json::Value;

/// How the handler creates controllers and describes the target.
#[derive(Debug, Clone)]
pub struct HandlerOptions {
    /// File mode of each controller's `cntrl` socket.
    pub socket_mode: u32,
    /// Cores of the pollers, in poller order (for `framework_get_reactors`).
    pub cores: Vec<usize>,
    /// Where the `log_*` methods apply their filter (none: they only keep the settings).
    pub log: Option<LogControl>,
    /// NUMA node for the memory of a malloc bdev that names none (`numa_id` -1): serve's
    /// `--numa-node`, or the pollers' node on a many-node machine; `None`: the kernel's
    /// default policy.
    pub numa_node: Option<u32>,
}

/// Everything the RPCs create.
#[derive(Debug, Default)]
struct State {
    bdevs: bdev::Registry,
    transport: Option<nvmf::Transport>,
    /// The TCP transport, when created.
    tcp: Option<nvmf::TcpTransport>,
    subsystems: BTreeMap<String, nvmf::Subsystem>,
    /// Bdevs with `bdev_enable_histogram` on, and their granularity.
    histograms: BTreeMap<String, u32>,
    /// Log settings and bdev notifications.
    log: log::LogState,
}

/// nvmemu's implementation of [`Handler`].
#[derive(Debug)]
pub struct NvmemuHandler {
    target: Arc<Target>,
    stop: StopHandle,
    opts: HandlerOptions,
    started: Instant,
    state: Mutex<State>,
}

impl NvmemuHandler {
    /// A handler with nothing configured; `spdk_kill_instance` stops `stop`.
    pub fn new(target: Arc<Target>, stop: StopHandle, opts: HandlerOptions) -> NvmemuHandler {
        NvmemuHandler {
            target,
            stop,
            opts,
            started: Instant::now(),
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a bug panicked mid-RPC; the state is still structurally
        // valid (every change is made after its checks), so keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Nanoseconds since the handler was created: the tick counter of the stats methods.
    fn ticks(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// `bdev_get_bdevs` with a `timeout`: wait (without holding the lock) for the bdev, until
    /// the timeout passes (then ETIMEDOUT, as SPDK) or the caller leaves (so a client that
    /// gives up frees its slot).
    fn get_bdevs(
        &self,
        p: nvmemu_rpc::methods::bdev::BdevGetBdevsParams,
        caller: &Caller<'_>,
    ) -> Result<Value, RpcError> {
        let deadline = Instant::now() + bdev_wait(p.timeout);
        loop {
            {
                let st = self.lock();
                let mut claims = nvmf::claims(&st.subsystems);
                claims.extend(st.bdevs.stacked_bases().map(str::to_owned));
                match st.bdevs.get_bdevs(p.name.as_deref(), &claims) {
                    Err(_) if p.timeout > 0 && caller.is_gone() => {
                        return Err(RpcError::errno(Errno::ENODEV));
                    }
                    Err(_) if p.timeout > 0 && Instant::now() >= deadline => {
                        return Err(RpcError::errno(Errno::ETIMEDOUT));
                    }
                    Err(_) if p.timeout > 0 => {}
                    other => return other,
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Longest `bdev_get_bdevs` waits for its bdev, whatever its `timeout` asks: rpc.py's own
/// default timeout, past which its caller has given up anyway. A waiting call holds one of
/// the server's connection slots and its thread.
pub(crate) const MAX_BDEV_WAIT: Duration = Duration::from_secs(60);

/// How long `bdev_get_bdevs` with `timeout_ms` waits: that, at most [`MAX_BDEV_WAIT`].
fn bdev_wait(timeout_ms: u64) -> Duration {
    Duration::from_millis(timeout_ms).min(MAX_BDEV_WAIT)
}

/// `bdev_malloc_delete` / `bdev_null_delete`: as SPDK's hot remove, a namespace the bdev
/// backs is removed from its subsystem first (its hosts get Namespace Attribute Changed and
/// see the NSID inactive), then the bdev goes, with its `bdev_unregister` notification.
fn delete_bdev(
    st: &mut State,
    target: &Target,
    kind: BdevKind,
    name: &str,
) -> Result<Value, RpcError> {
    let name = st.bdevs.name_of(kind, name)?;
    // A delay or error bdev on it goes first, as SPDK's hot remove takes it.
    for (stacked, kind) in st.bdevs.stacked_on(&name) {
        delete_bdev(st, target, kind, &stacked)?;
    }
    nvmf::remove_namespaces_of(st, target, &name);
    let r = st.bdevs.delete(&name);
    if r.is_ok() {
        st.log.notify("bdev_unregister", &name);
    }
    r
}

impl NvmemuHandler {
    /// `bdev_malloc_create` backs all the bdev's memory, which takes seconds for a large one:
    /// done without the lock, so every other method (and `spdk_kill_instance`) goes on.
    fn malloc_create(&self, p: BdevMallocCreateParams) -> Result<Value, RpcError> {
        let new = self.lock().bdevs.malloc_create(p, self.opts.numa_node)?;
        let built = new.build();
        let mut st = self.lock();
        let r = st.bdevs.finish(new, built);
        if let Ok(Value::String(name)) = &r {
            st.log.notify("bdev_register", name);
        }
        r
    }

    /// Runs `f` under the lock: every method but the two that wait (`bdev_get_bdevs` with a
    /// timeout, `bdev_malloc_create`) runs one at a time, as on SPDK's app thread.
    fn locked<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.lock())
    }

    /// `locked` for a method that changes the subsystems: the TCP target keeps its own copy
    /// of them (read on Connect), refreshed after each change that succeeds.
    fn nvmf_locked(
        &self,
        f: impl FnOnce(&mut State) -> Result<Value, RpcError>,
    ) -> Result<Value, RpcError> {
        self.locked(|st| {
            let r = f(st);
            if r.is_ok() {
                nvmf::sync_tcp(st);
            }
            r
        })
    }

    /// `nvmf_locked` for a method that makes controllers (or the TCP transport, whose
    /// poll groups make them) or attaches namespaces: every enabled histogram is applied
    /// again after it.
    fn nvmf_retimed(
        &self,
        f: impl FnOnce(&mut State) -> Result<Value, RpcError>,
    ) -> Result<Value, RpcError> {
        let target = &*self.target;
        self.nvmf_locked(|st| {
            let r = f(st);
            latency::reapply(st, target);
            r
        })
    }

    fn kill(&self, p: &SpdkKillInstanceParams) -> Result<Value, RpcError> {
        tracing::info!(signal = %p.sig_name, "spdk_kill_instance: stopping");
        self.stop.stop();
        Ok(Value::Bool(true))
    }
}

impl Handler for NvmemuHandler {
    fn handle(&self, req: Request) -> Result<Value, RpcError> {
        self.handle_for(req, &Caller::detached())
    }

    // One arm per method of the table in `nvmemu_rpc` (no catch-all), so a method added there
    // does not build until it is routed here; hence the length.
    fn handle_for(&self, req: Request, caller: &Caller<'_>) -> Result<Value, RpcError> {
        use Request as R;
        let (t, log) = (&*self.target, self.opts.log.as_ref());
        match req {
            // Answered by `nvmemu_rpc::dispatch` before a handler sees them.
            R::RpcGetMethods(_) | R::FrameworkGetSubsystems | R::FrameworkGetConfig(_) => {
                Err(RpcError::method_not_found(req.method()))
            }
            R::SpdkGetVersion => self.locked(|_| framework::version()),
            R::FrameworkGetReactors => self.locked(|_| framework::reactors(t, &self.opts.cores)),
            R::SpdkKillInstance(p) => self.locked(|_| self.kill(&p)),
            R::SaveConfig => self.locked(|st| Ok(framework::save_config(st))),
            R::BdevMallocCreate(p) => self.malloc_create(p),
            R::BdevMallocDelete(p) => {
                self.locked(|st| delete_bdev(st, t, BdevKind::Malloc, &p.name))
            }
            R::BdevNullCreate(p) => self.locked(|st| null_create(st, p)),
            R::BdevNullDelete(p) => self.locked(|st| delete_bdev(st, t, BdevKind::Null, &p.name)),
            R::BdevGetBdevs(p) => self.get_bdevs(p, caller),
            R::BdevGetIostat(p) => self.locked(|st| st.bdevs.iostat(&p, self.ticks())),
            R::BdevSetQosLimit(p) => self.locked(|st| qos::set_qos_limit(&st.bdevs, &p)),
            R::BdevDelayCreate(p) => self.locked(|st| delay::create(st, &p)),
            R::BdevDelayDelete(p) => self.locked(|st| delay::delete(st, t, &p.name)),
            R::BdevDelayUpdateLatency(p) => self.locked(|st| delay::update_latency(&st.bdevs, &p)),
            R::BdevErrorCreate(p) => self.locked(|st| error_bdev::create(st, &p)),
            R::BdevErrorDelete(p) => self.locked(|st| error_bdev::delete(st, t, &p.name)),
            R::BdevErrorInjectError(p) => self.locked(|st| error_bdev::inject(&st.bdevs, &p)),
            R::BdevAioCreate(p) => self.locked(|st| file_bdev::aio_create(st, &p)),
            R::BdevAioDelete(p) => self.locked(|st| file_bdev::delete(st, t, Aio, &p.name)),
            R::BdevUringCreate(p) => self.locked(|st| file_bdev::uring_create(st, &p)),
            R::BdevUringDelete(p) => self.locked(|st| file_bdev::delete(st, t, Uring, &p.name)),
            R::NvmemuBdevSetModel(p) => self.locked(|st| delay::set_model(&st.bdevs, &p)),
            R::NvmemuBdevInjectFault(p) => self.locked(|st| fault::inject(&st.bdevs, &p)),
            R::NvmemuBdevClearFaults(p) => self.locked(|st| fault::clear(&st.bdevs, &p)),
            R::NvmemuBdevGetFaults(p) => self.locked(|st| fault::get(&st.bdevs, &p)),
            R::NvmfCreateTransport(p) if nvmf::is_tcp(&p.trtype) => {
                let cores = &self.opts.cores;
                self.nvmf_retimed(|st| nvmf::create_tcp_transport(st, cores, p))
            }
            R::NvmfCreateTransport(p) => self.nvmf_locked(|st| nvmf::create_transport(st, p)),
            R::NvmfGetTransports(p) => self.locked(|st| nvmf::get_transports(st, &p)),
            R::NvmfCreateSubsystem(p) => self.nvmf_locked(|st| nvmf::create_subsystem(st, p)),
            R::NvmfDeleteSubsystem(p) => {
                self.nvmf_locked(|st| nvmf::delete_subsystem(st, t, &p.nqn))
            }
            R::NvmfGetSubsystems(p) => self.locked(|st| nvmf::get_subsystems(st, p.nqn.as_deref())),
            R::NvmfSubsystemAddNs(p) => self.nvmf_retimed(|st| nvmf::add_ns(st, t, p)),
            R::NvmfSubsystemRemoveNs(p) => {
                self.nvmf_locked(|st| nvmf::remove_ns(st, t, &p.nqn, p.nsid))
            }
            R::NvmemuControllerInjectFatal(p) => self.locked(|st| nvmf::inject_fatal(st, t, &p)),
            R::NvmemuNamespaceInjectNotReady(p) => self.locked(|st| nvmf::inject_not_ready(st, &p)),
            R::NvmemuControllerGetFaults(p) => self.locked(|st| nvmf::get_ctrl_faults(st, t, &p)),
            R::NvmfSubsystemAddListener(p) if nvmf::is_tcp(&p.listen_address.trtype) => {
                self.nvmf_locked(|st| nvmf::add_tcp_listener(st, &p.nqn, p.listen_address))
            }
            R::NvmfSubsystemAddListener(p) => {
                let mode = self.opts.socket_mode;
                self.nvmf_retimed(|st| nvmf::add_listener(st, t, mode, p))
            }
            R::NvmfSubsystemRemoveListener(p) if nvmf::is_tcp(&p.listen_address.trtype) => {
                self.nvmf_locked(|st| nvmf::remove_tcp_listener(st, &p.nqn, &p.listen_address))
            }
            R::NvmfSubsystemRemoveListener(p) => {
                self.nvmf_locked(|st| nvmf::remove_listener(st, t, p))
            }
            R::NvmfGetStats(_) => {
                self.locked(|st| framework::nvmf_stats(t, st.tcp.as_ref().map(nvmf::tcp_stats)))
            }
            R::NvmfSubsystemAddHost(p) => self.nvmf_locked(|st| nvmf::add_host(st, p)),
            R::NvmfSubsystemRemoveHost(p) => self.nvmf_locked(|st| nvmf::remove_host(st, &p)),
            R::NvmfSubsystemAllowAnyHost(p) => self.nvmf_locked(|st| nvmf::allow_any_host(st, &p)),
            R::NvmfSubsystemGetControllers(p) => {
                self.locked(|st| nvmf::get_controllers(st, t, &p.nqn))
            }
            R::NvmfSubsystemGetQpairs(p) => self.locked(|st| nvmf::get_qpairs(st, t, &p.nqn)),
            R::NvmfSubsystemGetListeners(p) => self.locked(|st| nvmf::get_listeners(st, &p.nqn)),
            R::BdevEnableHistogram(p) => self.locked(|st| latency::enable(st, t, p)),
            R::BdevGetHistogram(p) => self.locked(|st| latency::get_histogram(st, t, &p.name)),
            R::NvmemuGetLatencyBreakdown => {
                self.locked(|st| latency::breakdown(st, t, &self.opts.cores))
            }
            R::FrameworkWaitInit | R::BdevWaitForExamine => Ok(Value::Bool(true)),
            R::ThreadGetStats => {
                self.locked(|st| threads::stats(st, t, &self.opts.cores, self.ticks()))
            }
            R::ThreadGetPollers => self.locked(|st| threads::pollers(st, t)),
            R::ThreadGetIoChannels => self.locked(|st| threads::io_channels(st, t)),
            R::FrameworkGetScheduler => self.locked(|_| threads::scheduler(&self.opts.cores)),
            R::LogSetFlag(p) => self.locked(|st| st.log.set_flag(log, &p.flag, true)),
            R::LogClearFlag(p) => self.locked(|st| st.log.set_flag(log, &p.flag, false)),
            R::LogGetFlags => self.locked(|st| Ok(st.log.flags())),
            R::LogSetLevel(p) => self.locked(|st| st.log.set_level(&p.level)),
            R::LogGetLevel => self.locked(|st| Ok(st.log.level())),
            R::LogSetPrintLevel(p) => self.locked(|st| st.log.set_print_level(log, &p.level)),
            R::LogGetPrintLevel => self.locked(|st| Ok(st.log.print_level())),
            R::NotifyGetTypes => Ok(serde_json::json!(nvmemu_rpc::methods::log::NOTIFY_TYPES)),
            R::NotifyGetNotifications(p) => self.locked(|st| st.log.notifications(&p)),
        }
    }
}

/// `bdev_null_create`, with its `bdev_register` notification.
fn null_create(st: &mut State, p: BdevNullCreateParams) -> Result<Value, RpcError> {
    let r = st.bdevs.null_create(p);
    if let Ok(Value::String(name)) = &r {
        st.log.notify("bdev_register", name);
    }
    r
}

/// Serialises a result type; a failure here is a bug, reported as an internal error.
fn to_value<T: serde::Serialize>(v: T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::internal(e.to_string()))
}

#[cfg(test)]
mod tests;
