// SPDX-License-Identifier: Apache-2.0
//! The TCP transport of the NVMe-oF methods: `nvmf_create_transport -t TCP` starts the
//! NVMe/TCP target (one poll group thread per poller core, as SPDK has a TCP poll group
//! per reactor), `nvmf_subsystem_add_listener -t TCP` listens on an address, and every
//! subsystem change is mirrored into the TCP target's table, so the same subsystem (same
//! namespaces, same hosts) is reachable over vfio-user and TCP at once.

use std::net::{IpAddr, SocketAddr};

use nvmemu_rpc::methods::nvmf::{
    ListenAddress, ListenerInfo, NvmfCreateTransportParams, TransportInfo,
};
use nvmemu_rpc::{Errno, RpcError};
use nvmemu_tcp::{TcpOptions, TcpSubsystem, TcpTarget};
use serde_json::Value;

use super::super::State;
use super::subsystem_mut;

/// The transport type name, as SPDK spells it.
pub(crate) const TCP: &str = "TCP";

/// The running TCP target and the options it was created with.
#[derive(Debug)]
pub(crate) struct TcpTransport {
    target: TcpTarget,
    params: NvmfCreateTransportParams,
}

pub(crate) fn is_tcp(trtype: &str) -> bool {
    trtype.eq_ignore_ascii_case(TCP)
}

fn option(name: &str, v: Option<u32>, min: u32, default: u32) -> Result<u32, RpcError> {
    match v {
        None => Ok(default),
        Some(v) if v >= min => Ok(v),
        Some(v) => Err(RpcError::invalid_params(format!(
            "Invalid parameter `{name}`: {v} is below {min}"
        ))),
    }
}

fn small(v: u32) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

/// `nvmf_create_transport -t TCP [-u io_unit_size] [-q max_queue_depth]
/// [-m max_io_qpairs_per_ctrlr] [-c in_capsule_data_size] [-i max_io_size] [-a max_aq_depth]
/// [-o (c2h_success off)]`:
/// one poll group pinned to each of `cores` (none: one unpinned group).
pub(crate) fn create_transport(
    st: &mut State,
    cores: &[usize],
    p: NvmfCreateTransportParams,
) -> Result<Value, RpcError> {
    if st.tcp.is_some() {
        return Err(RpcError::invalid_params(format!(
            "Transport type '{TCP}' already exists"
        )));
    }
    let d = TcpOptions::default();
    let opts = TcpOptions {
        max_queue_depth: small(option(
            "max_queue_depth",
            p.max_queue_depth,
            2,
            d.max_queue_depth.into(),
        )?),
        max_io_qpairs: small(option(
            "max_io_qpairs_per_ctrlr",
            p.max_io_qpairs_per_ctrlr,
            1,
            d.max_io_qpairs.into(),
        )?),
        in_capsule_data_size: option(
            "in_capsule_data_size",
            p.in_capsule_data_size,
            1024,
            d.in_capsule_data_size,
        )?
        .min(1 << 20),
        io_unit_size: option("io_unit_size", p.io_unit_size, 4096, d.io_unit_size)?.min(1 << 24),
        max_io_size: option("max_io_size", p.max_io_size, 4096, d.max_io_size)?,
        max_aq_depth: small(option(
            "max_aq_depth",
            p.max_aq_depth,
            2,
            d.max_aq_depth.into(),
        )?),
        c2h_success: p.c2h_success.unwrap_or(d.c2h_success),
        ..d
    };
    let cores: Vec<Option<usize>> = cores.iter().copied().map(Some).collect();
    let target = TcpTarget::start(opts, nvmemu_tcp::Subsystems::default(), &cores)
        .map_err(|e| RpcError::internal(format!("Unable to start the TCP transport: {e}")))?;
    st.tcp = Some(TcpTransport {
        target,
        params: NvmfCreateTransportParams {
            trtype: TCP.to_owned(),
            ..p
        },
    });
    sync(st);
    tracing::info!(poll_groups = cores.len().max(1), "TCP transport created");
    Ok(Value::Bool(true))
}

/// The running target (timing and its controllers' copies: `latency.rs`).
pub(crate) fn target(t: &TcpTransport) -> &TcpTarget {
    &t.target
}

/// Each poll group's counters, for `nvmf_get_stats`.
pub(crate) fn stats(t: &TcpTransport) -> Vec<nvmemu_tcp::TcpStats> {
    t.target.group_stats()
}

/// The `nvmf_get_transports` entry.
pub(crate) fn transport_info(t: &TcpTransport) -> TransportInfo {
    let o = t.target.options();
    TransportInfo {
        trtype: TCP.to_owned(),
        max_queue_depth: o.max_queue_depth.into(),
        max_io_qpairs_per_ctrlr: o.max_io_qpairs.into(),
        in_capsule_data_size: o.in_capsule_data_size,
        max_io_size: o.slot_bytes(),
        io_unit_size: o.io_unit_size,
        max_aq_depth: o.max_aq_depth.into(),
        num_shared_buffers: t.params.num_shared_buffers.unwrap_or(0),
        buf_cache_size: t.params.buf_cache_size.unwrap_or(0),
        dif_insert_or_strip: false,
        zcopy: false,
        abort_timeout_sec: t.params.abort_timeout_sec.unwrap_or(1),
        ack_timeout: 0,
        data_wr_pool_size: 0,
        disable_mappable_bar0: false,
        disable_adaptive_irq: false,
        disable_shadow_doorbells: false,
        c2h_success: Some(o.c2h_success),
    }
}

fn socket_addr(a: &ListenAddress) -> Result<SocketAddr, RpcError> {
    let ip: IpAddr = a.traddr.parse().map_err(|_| {
        RpcError::invalid_params(format!(
            "Invalid parameter `listen_address.traddr`: {:?} is not an IP address",
            a.traddr
        ))
    })?;
    let port: u16 = a
        .trsvcid
        .as_deref()
        .unwrap_or("4420")
        .parse()
        .map_err(|_| {
            RpcError::invalid_params("Invalid parameter `listen_address.trsvcid`: not a port")
        })?;
    Ok(SocketAddr::new(ip, port))
}

/// The listener as SPDK shows it (`adrfam` IPv4 or IPv6 from the address).
pub(crate) fn listener_info(a: &ListenAddress) -> ListenerInfo {
    let v6 = a.traddr.contains(':');
    ListenerInfo {
        trtype: TCP.to_owned(),
        adrfam: if v6 { "IPv6" } else { "IPv4" }.to_owned(),
        traddr: a.traddr.clone(),
        trsvcid: a.trsvcid.clone().unwrap_or_else(|| "4420".into()),
    }
}

fn listeners_at(st: &State, addr: SocketAddr) -> usize {
    st.subsystems
        .values()
        .flat_map(|s| s.tcp_listeners.iter())
        .filter(|l| socket_addr(l).ok() == Some(addr))
        .count()
}

/// `nvmf_subsystem_add_listener NQN -t TCP -a ADDR -s PORT`: one socket per address,
/// shared by every subsystem listening there (Connect names the subsystem).
pub(crate) fn add_listener(st: &mut State, nqn: &str, a: ListenAddress) -> Result<Value, RpcError> {
    let addr = socket_addr(&a)?;
    subsystem_mut(st, nqn)?;
    let Some(t) = &st.tcp else {
        return Err(RpcError::errno_msg(
            Errno::EINVAL,
            "Unable to find TCP transport: call nvmf_create_transport -t TCP first",
        ));
    };
    let sub = st
        .subsystems
        .get(nqn)
        .ok_or_else(|| super::no_subsystem(nqn))?;
    if sub
        .tcp_listeners
        .iter()
        .any(|l| socket_addr(l).ok() == Some(addr))
    {
        return Err(RpcError::errno_msg(
            Errno::EEXIST,
            format!("Listener {addr} already exists"),
        ));
    }
    // Port 0 binds a port the kernel picks; the listener records it.
    let mut trsvcid = a.trsvcid.clone();
    if addr.port() == 0 || listeners_at(st, addr) == 0 {
        let bound = t
            .target
            .listen(addr)
            .map_err(|e| RpcError::internal(format!("Unable to listen on {addr}: {e}")))?;
        trsvcid = Some(bound.port().to_string());
    }
    let entry = ListenAddress {
        trtype: TCP.to_owned(),
        trsvcid,
        ..a
    };
    subsystem_mut(st, nqn)?.tcp_listeners.push(entry);
    sync(st);
    tracing::info!(%nqn, %addr, "TCP listener added");
    Ok(Value::Bool(true))
}

/// `nvmf_subsystem_remove_listener -t TCP`; the socket closes with its last subsystem.
pub(crate) fn remove_listener(
    st: &mut State,
    nqn: &str,
    a: &ListenAddress,
) -> Result<Value, RpcError> {
    let addr = socket_addr(a)?;
    let sub = subsystem_mut(st, nqn)?;
    let pos = sub
        .tcp_listeners
        .iter()
        .position(|l| socket_addr(l).ok() == Some(addr))
        .ok_or_else(|| {
            RpcError::errno_msg(Errno::ENOENT, format!("No listener {addr} on {nqn}"))
        })?;
    sub.tcp_listeners.remove(pos);
    if listeners_at(st, addr) == 0
        && let Some(t) = &st.tcp
    {
        t.target.unlisten(addr);
    }
    sync(st);
    Ok(Value::Bool(true))
}

/// After a subsystem is deleted: close the sockets of its `listeners` that no remaining
/// subsystem listens on (its entry leaves the TCP target's table with the caller's sync).
pub(crate) fn subsystem_deleted(st: &State, listeners: &[ListenAddress]) {
    let Some(t) = &st.tcp else { return };
    for addr in listeners.iter().filter_map(|l| socket_addr(l).ok()) {
        if listeners_at(st, addr) == 0 {
            t.target.unlisten(addr);
        }
    }
}

/// Mirror the subsystems (hosts, namespaces, listeners) into the TCP target's table; new
/// Connects see the change, controllers already made keep their namespaces.
pub(crate) fn sync(st: &State) {
    let Some(t) = &st.tcp else { return };
    let table = st
        .subsystems
        .iter()
        .map(|(nqn, s)| {
            let sub = TcpSubsystem {
                serial: super::serial(&s.params).to_owned(),
                model: super::model(&s.params).to_owned(),
                allow_any_host: s.params.allow_any_host,
                hosts: s.hosts.clone(),
                max_namespaces: s.max_namespaces(),
                namespaces: s.namespaces.values().map(|n| n.ns.clone()).collect(),
                listeners: s
                    .tcp_listeners
                    .iter()
                    .filter_map(|l| socket_addr(l).ok())
                    .collect(),
            };
            (nqn.clone(), sub)
        })
        .collect();
    *t.target.subsystems().lock() = table;
}
