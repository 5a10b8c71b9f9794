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

use nvmemu_device::Target;
use nvmemu_rpc::methods::bdev::BdevMallocCreateParams;
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
}

/// Everything the RPCs create.
#[derive(Debug, Default)]
struct State {
    bdevs: bdev::Registry,
    transport: Option<nvmf::Transport>,
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
                claims.extend(st.bdevs.delay_bases().map(str::to_owned));
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
    kind: nvmemu_bdev::BdevKind,
    name: &str,
) -> Result<Value, RpcError> {
    let name = st.bdevs.name_of(kind, name)?;
    // A delay bdev on it goes first, as SPDK's hot remove takes it.
    for delay in st.bdevs.delays_on(&name) {
        delete_bdev(st, target, nvmemu_bdev::BdevKind::Delay, &delay)?;
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
        let new = self.lock().bdevs.malloc_create(p)?;
        let built = new.build();
        self.lock().bdevs.finish(new, built)
    }
}

impl Handler for NvmemuHandler {
    fn handle(&self, req: Request) -> Result<Value, RpcError> {
        self.handle_for(req, &Caller::detached())
    }

    fn handle_for(&self, req: Request, caller: &Caller<'_>) -> Result<Value, RpcError> {
        use Request as R;
        match req {
            R::BdevGetBdevs(p) => return self.get_bdevs(p, caller),
            R::BdevMallocCreate(p) => {
                let r = self.malloc_create(p);
                if let Ok(Value::String(name)) = &r {
                    self.lock().log.notify("bdev_register", name);
                }
                return r;
            }
            _ => {}
        }
        let mut guard = self.lock();
        let st = &mut *guard;
        if let Some(r) = self.handle_app(st, &req) {
            return r;
        }
        match req {
            R::SpdkGetVersion => framework::version(),
            R::FrameworkWaitInit => Ok(Value::Bool(true)),
            R::FrameworkGetReactors => framework::reactors(&self.target, &self.opts.cores),
            R::SpdkKillInstance(p) => {
                tracing::info!(signal = %p.sig_name, "spdk_kill_instance: stopping");
                self.stop.stop();
                Ok(Value::Bool(true))
            }
            R::SaveConfig => Ok(framework::save_config(st)),
            R::BdevNullCreate(p) => {
                let r = st.bdevs.null_create(p);
                if let Ok(Value::String(name)) = &r {
                    st.log.notify("bdev_register", name);
                }
                r
            }
            R::BdevMallocDelete(p) => {
                delete_bdev(st, &self.target, nvmemu_bdev::BdevKind::Malloc, &p.name)
            }
            R::BdevNullDelete(p) => {
                delete_bdev(st, &self.target, nvmemu_bdev::BdevKind::Null, &p.name)
            }
            R::BdevGetIostat(p) => st.bdevs.iostat(&p, self.ticks()),
            R::BdevSetQosLimit(p) => qos::set_qos_limit(&st.bdevs, &p),
            R::BdevDelayCreate(p) => delay::create(st, &p),
            R::BdevDelayDelete(p) => delay::delete(st, &self.target, &p.name),
            R::BdevDelayUpdateLatency(p) => delay::update_latency(&st.bdevs, &p),
            R::NvmemuBdevSetModel(p) => delay::set_model(&st.bdevs, &p),
            R::NvmfCreateTransport(p) => nvmf::create_transport(st, p),
            R::NvmfGetTransports(p) => nvmf::get_transports(st, &p),
            R::NvmfCreateSubsystem(p) => nvmf::create_subsystem(st, p),
            R::NvmfDeleteSubsystem(p) => nvmf::delete_subsystem(st, &self.target, &p.nqn),
            R::NvmfGetSubsystems(p) => nvmf::get_subsystems(st, p.nqn.as_deref()),
            R::NvmfSubsystemAddNs(p) => {
                let r = nvmf::add_ns(st, &self.target, p);
                latency::reapply(st, &self.target);
                r
            }
            R::NvmfSubsystemRemoveNs(p) => nvmf::remove_ns(st, &self.target, &p.nqn, p.nsid),
            R::NvmfSubsystemAddListener(p) => {
                let r = nvmf::add_listener(st, &self.target, self.opts.socket_mode, p);
                latency::reapply(st, &self.target);
                r
            }
            R::NvmfSubsystemRemoveListener(p) => nvmf::remove_listener(st, &self.target, p),
            R::NvmfGetStats(_) => framework::nvmf_stats(&self.target),
            R::NvmfSubsystemAddHost(p) => nvmf::add_host(st, p),
            R::NvmfSubsystemRemoveHost(p) => nvmf::remove_host(st, &p),
            R::NvmfSubsystemAllowAnyHost(p) => nvmf::allow_any_host(st, &p),
            R::NvmfSubsystemGetControllers(p) => nvmf::get_controllers(st, &self.target, &p.nqn),
            R::NvmfSubsystemGetQpairs(p) => nvmf::get_qpairs(st, &self.target, &p.nqn),
            R::NvmfSubsystemGetListeners(p) => nvmf::get_listeners(st, &p.nqn),
            R::BdevEnableHistogram(p) => latency::enable(st, &self.target, p),
            R::BdevGetHistogram(p) => latency::get_histogram(st, &self.target, &p.name),
            R::NvmemuGetLatencyBreakdown => latency::breakdown(&self.target),
            // Answered by `dispatch`, above or by `handle_app`.
            other => Err(RpcError::method_not_found(other.method())),
        }
    }
}

impl NvmemuHandler {
    /// The thread, scheduler, log and notification methods; `None` for any other.
    fn handle_app(&self, st: &mut State, req: &Request) -> Option<Result<Value, RpcError>> {
        use Request as R;
        let log = self.opts.log.as_ref();
        Some(match req {
            R::BdevWaitForExamine => Ok(Value::Bool(true)),
            R::ThreadGetStats => threads::stats(&self.target, &self.opts.cores, self.ticks()),
            R::ThreadGetPollers => threads::pollers(&self.target),
            R::ThreadGetIoChannels => threads::io_channels(st, &self.target),
            R::FrameworkGetScheduler => threads::scheduler(&self.opts.cores),
            R::LogSetFlag(p) => st.log.set_flag(log, &p.flag, true),
            R::LogClearFlag(p) => st.log.set_flag(log, &p.flag, false),
            R::LogGetFlags => Ok(st.log.flags()),
            R::LogSetLevel(p) => st.log.set_level(&p.level),
            R::LogGetLevel => Ok(st.log.level()),
            R::LogSetPrintLevel(p) => st.log.set_print_level(log, &p.level),
            R::LogGetPrintLevel => Ok(st.log.print_level()),
            R::NotifyGetTypes => Ok(serde_json::json!(nvmemu_rpc::methods::log::NOTIFY_TYPES)),
            R::NotifyGetNotifications(p) => st.log.notifications(p),
            _ => return None,
        })
    }
}

/// Serialises a result type; a failure here is a bug, reported as an internal error.
fn to_value<T: serde::Serialize>(v: T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::internal(e.to_string()))
}

#[cfg(test)]
mod tests;
