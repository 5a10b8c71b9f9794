// SPDX-License-Identifier: Apache-2.0
//! NVMe-oF methods (SPDK `lib/nvmf/nvmf_rpc.c`) on the target: the VFIOUSER transport,
//! subsystems, their namespaces and listeners.
//!
//! A listener is a controller: `nvmf_subsystem_add_listener` with `traddr` DIR serves
//! `DIR/cntrl` (DIR must exist, as in SPDK). Namespace changes reach every controller of
//! the subsystem at once, so an attached host sees a Namespace Attribute Changed event.

mod connected;
mod faults;
mod hosts;
mod listener;
mod namespace;
mod subsystem;
mod tcp;
mod transport;

use std::collections::{BTreeMap, BTreeSet};

use nvmemu_ctrl::Namespace;
use nvmemu_device::{Admission, ControllerId};
use nvmemu_rpc::RpcError;
use nvmemu_rpc::methods::nvmf::{
    DEFAULT_MAX_NAMESPACES, DEFAULT_MODEL_NUMBER, DEFAULT_SERIAL_NUMBER, ListenAddress,
    NvmfCreateSubsystemParams, NvmfCreateTransportParams,
};
use serde_json::{Value, json};

pub(crate) use connected::{get_controllers, get_listeners, get_qpairs};
pub(crate) use faults::{get_faults as get_ctrl_faults, inject_fatal, inject_not_ready};
pub(crate) use hosts::{add_host, allow_any_host, remove_host};
pub(crate) use listener::{add_listener, remove_listener};
pub(crate) use namespace::{add_ns, remove_namespaces_of, remove_ns};
pub(crate) use subsystem::{create_subsystem, delete_subsystem, get_subsystems};
pub(crate) use tcp::{
    TCP, TcpTransport, add_listener as add_tcp_listener, create_transport as create_tcp_transport,
    is_tcp, remove_listener as remove_tcp_listener, stats as tcp_stats, sync as sync_tcp,
    target as tcp_target,
};
pub(crate) use transport::{create_transport, get_transports};

use super::State;
use listener::listener_info;
use namespace::namespace_info;
use transport::transport_info;

/// The only transport type served.
pub(crate) const VFIOUSER: &str = "VFIOUSER";
/// SPDK's discovery subsystem, always listed by `nvmf_get_subsystems`.
const DISCOVERY_NQN: &str = "nqn.2014-08.org.nvmexpress.discovery";
/// Largest `max_namespaces` accepted (bounds the controller's namespace table).
const MAX_NAMESPACES_LIMIT: u32 = 4096;
/// Longest NQN (NVMe Base 1.4, 7.9: 223 bytes).
const MAX_NQN: usize = 223;

/// The VFIOUSER transport and the options it was created with.
#[derive(Debug)]
pub(crate) struct Transport {
    params: NvmfCreateTransportParams,
    max_queue_entries: u16,
    max_io_queues: u16,
    mdts: u8,
}

/// One NVMe-oF subsystem.
#[derive(Debug)]
pub(crate) struct Subsystem {
    params: NvmfCreateSubsystemParams,
    namespaces: BTreeMap<u32, NsEntry>,
    listeners: Vec<ListenerEntry>,
    /// TCP listeners (served by the TCP transport's poll group, not by a controller each).
    tcp_listeners: Vec<ListenAddress>,
    /// Allowed host NQNs, in the order added.
    hosts: Vec<String>,
    /// Shared by the subsystem's controllers: whether they admit clients
    /// (`allow_any_host`; see `hosts.rs`).
    admission: Admission,
}

#[derive(Debug)]
struct NsEntry {
    bdev_name: String,
    ns: Namespace,
}

#[derive(Debug)]
struct ListenerEntry {
    addr: ListenAddress,
    ctrl: ControllerId,
    cntlid: u16,
}

impl Subsystem {
    fn max_namespaces(&self) -> u32 {
        match self.params.max_namespaces {
            0 => DEFAULT_MAX_NAMESPACES,
            n => n,
        }
    }
}

/// The serial number a subsystem's controllers report (SPDK's default when none was given).
fn serial(p: &NvmfCreateSubsystemParams) -> &str {
    p.serial_number.as_deref().unwrap_or(DEFAULT_SERIAL_NUMBER)
}

/// The model number a subsystem's controllers report.
fn model(p: &NvmfCreateSubsystemParams) -> &str {
    p.model_number.as_deref().unwrap_or(DEFAULT_MODEL_NUMBER)
}

/// Names of the bdevs used by a namespace.
pub(crate) fn claims(subsystems: &BTreeMap<String, Subsystem>) -> BTreeSet<String> {
    subsystems
        .values()
        .flat_map(|s| s.namespaces.values().map(|n| n.bdev_name.clone()))
        .collect()
}

/// For each bdev, how many of `ctrls` serve a namespace on it (the poll group's I/O
/// channels to that bdev).
pub(crate) fn bdev_users(st: &State, ctrls: &[ControllerId]) -> BTreeMap<String, u64> {
    let mut users = BTreeMap::new();
    for s in st.subsystems.values() {
        let served = s
            .listeners
            .iter()
            .filter(|l| ctrls.contains(&l.ctrl))
            .count() as u64;
        if served == 0 {
            continue;
        }
        for n in s.namespaces.values() {
            *users.entry(n.bdev_name.clone()).or_insert(0) += served;
        }
    }
    users
}

fn no_subsystem(nqn: &str) -> RpcError {
    RpcError::invalid_params(format!("Unable to find subsystem with NQN {nqn}"))
}

fn subsystem_mut<'a>(st: &'a mut State, nqn: &str) -> Result<&'a mut Subsystem, RpcError> {
    st.subsystems.get_mut(nqn).ok_or_else(|| no_subsystem(nqn))
}

fn target_error(what: &str, e: nvmemu_device::TargetError) -> RpcError {
    // With its causes: "cannot listen on DIR" alone does not say what to fix.
    RpcError::internal(format!("{what}: {}", crate::error_chain(&e)))
}

/// The `nvmf` subsystem of `save_config`: transport, then per subsystem its creation,
/// listeners and namespaces (SPDK's order).
pub(crate) fn save_config(st: &State) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(t) = &st.transport {
        // Every effective option, as SPDK records them: a replay gives the same transport
        // even if the defaults change in between.
        let params = serde_json::to_value(transport_info(t)).unwrap_or_else(|_| json!({}));
        out.push(json!({"method": "nvmf_create_transport", "params": params}));
    }
    if let Some(t) = &st.tcp {
        let params = serde_json::to_value(tcp::transport_info(t)).unwrap_or_else(|_| json!({}));
        out.push(json!({"method": "nvmf_create_transport", "params": params}));
    }
    for (nqn, s) in &st.subsystems {
        let p = &s.params;
        out.push(json!({"method": "nvmf_create_subsystem", "params": {
            "nqn": nqn, "allow_any_host": p.allow_any_host, "serial_number": serial(p),
            "model_number": model(p), "max_namespaces": s.max_namespaces(),
            "min_cntlid": p.min_cntlid, "max_cntlid": p.max_cntlid,
            "ana_reporting": p.ana_reporting}}));
        for host in &s.hosts {
            out.push(json!({"method": "nvmf_subsystem_add_host", "params": {
                "nqn": nqn, "host": host}}));
        }
        for l in &s.listeners {
            let li = listener_info(&l.addr);
            out.push(json!({"method": "nvmf_subsystem_add_listener", "params": {
                "nqn": nqn, "listen_address": li, "secure_channel": false}}));
        }
        for l in &s.tcp_listeners {
            let li = tcp::listener_info(l);
            out.push(json!({"method": "nvmf_subsystem_add_listener", "params": {
                "nqn": nqn, "listen_address": li, "secure_channel": false}}));
        }
        for (nsid, n) in &s.namespaces {
            let info = namespace_info(*nsid, n);
            let mut ns = json!({"nsid": nsid, "bdev_name": n.bdev_name,
                                "no_auto_visible": false});
            for (k, v) in [
                ("nguid", info.nguid),
                ("eui64", info.eui64),
                ("uuid", info.uuid),
            ] {
                if let Some(v) = v {
                    ns[k] = json!(v);
                }
            }
            out.push(json!({"method": "nvmf_subsystem_add_ns", "params": {
                "nqn": nqn, "namespace": ns}}));
        }
    }
    out
}
