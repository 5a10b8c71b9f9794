// SPDX-License-Identifier: Apache-2.0
//! What is connected to a subsystem: `nvmf_subsystem_get_controllers`,
//! `nvmf_subsystem_get_qpairs` and `nvmf_subsystem_get_listeners`.
//!
//! A vfio-user listener is one controller; it counts as connected while a host has it
//! enabled (its admin queue exists), and each live submission queue is a queue pair. A
//! vfio-user host presents no host NQN or host ID, so those are empty and zero, as SPDK
//! reports them. An NVMe/TCP controller exists while its host's admin queue is connected;
//! each of its queues is a connection, listed with the addresses of both ends and the
//! host's NQN and ID from its Connect (one control message per TCP poll group).

use std::net::SocketAddr;

use nvmemu_ctrl::ControllerStats;
use nvmemu_device::Target;
use nvmemu_rpc::RpcError;
use nvmemu_rpc::methods::nvmf::ListenerInfo;
use nvmemu_rpc::methods::nvmf_host::{ControllerInfo, QpairInfo, SubsystemListener};
use nvmemu_tcp::{ControllerReport, TcpTarget};
use serde_json::Value;

use super::super::ids::format_uuid;
use super::super::threads::tcp_group_name;
use super::super::{State, to_value};
use super::listener::listener_info;
use super::{ListenerEntry, no_subsystem};

/// The host ID SPDK reports for a vfio-user controller.
const NO_HOST_ID: &str = "00000000-0000-0000-0000-000000000000";

/// The listeners of `nqn` whose controller a host has enabled, with their counters (one
/// mailbox call each).
fn connected<'a>(
    st: &'a State,
    target: &Target,
    nqn: &str,
) -> Result<Vec<(&'a ListenerEntry, ControllerStats)>, RpcError> {
    let sub = st.subsystems.get(nqn).ok_or_else(|| no_subsystem(nqn))?;
    Ok(sub
        .listeners
        .iter()
        .filter_map(|l| {
            let stats = target.on_controller(l.ctrl, |c| c.ctrl.stats()).ok()?;
            (stats.current_admin_qpairs() > 0).then_some((l, stats))
        })
        .collect())
}

/// The NVMe/TCP controllers of `nqn`, by controller ID.
fn tcp_connected(st: &State, nqn: &str) -> Vec<ControllerReport> {
    let mut list: Vec<ControllerReport> = st
        .tcp
        .as_ref()
        .map(super::tcp_target)
        .map(TcpTarget::controllers)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.subnqn == nqn)
        .collect();
    list.sort_by_key(|r| r.cntlid);
    list
}

pub(crate) fn get_controllers(st: &State, target: &Target, nqn: &str) -> Result<Value, RpcError> {
    let mut list: Vec<ControllerInfo> = connected(st, target, nqn)?
        .into_iter()
        .map(|(l, s)| ControllerInfo {
            cntlid: l.cntlid,
            hostnqn: String::new(),
            hostid: NO_HOST_ID.into(),
            num_io_qpairs: s.current_io_qpairs(),
        })
        .collect();
    list.extend(tcp_connected(st, nqn).into_iter().map(|r| ControllerInfo {
        cntlid: r.cntlid,
        hostid: format_uuid(&r.hostid),
        num_io_qpairs: r.stats.current_io_qpairs(),
        hostnqn: r.hostnqn,
    }));
    to_value(list)
}

/// A TCP connection end as SPDK writes a queue pair's addresses.
fn tcp_address(a: Option<SocketAddr>) -> ListenerInfo {
    ListenerInfo {
        trtype: super::TCP.into(),
        adrfam: match a {
            Some(SocketAddr::V6(_)) => "IPv6",
            _ => "IPv4",
        }
        .into(),
        traddr: a.map(|a| a.ip().to_string()).unwrap_or_default(),
        trsvcid: a.map(|a| a.port().to_string()).unwrap_or_default(),
    }
}

pub(crate) fn get_qpairs(st: &State, target: &Target, nqn: &str) -> Result<Value, RpcError> {
    let pollers = target.controller_pollers();
    let mut list = Vec::new();
    for (l, s) in connected(st, target, nqn)? {
        let poller = pollers
            .iter()
            .find(|(id, _)| *id == l.ctrl)
            .map_or(0, |(_, p)| *p);
        for (qid, _) in &s.queues {
            list.push(QpairInfo {
                cntlid: l.cntlid,
                qid: qid.0,
                state: "enabled".into(),
                thread: format!("nvmf_tgt_poll_group_{poller:03}"),
                hostnqn: String::new(),
                listen_address: listener_info(&l.addr),
                peer_address: ListenerInfo {
                    trtype: String::new(),
                    adrfam: "unknown".into(),
                    traddr: String::new(),
                    trsvcid: String::new(),
                },
            });
        }
    }
    for r in tcp_connected(st, nqn) {
        for q in &r.queues {
            list.push(QpairInfo {
                cntlid: r.cntlid,
                qid: q.qid,
                state: "enabled".into(),
                thread: tcp_group_name(r.group),
                hostnqn: r.hostnqn.clone(),
                listen_address: tcp_address(q.local),
                peer_address: tcp_address(Some(q.peer)),
            });
        }
    }
    to_value(list)
}

pub(crate) fn get_listeners(st: &State, nqn: &str) -> Result<Value, RpcError> {
    let sub = st.subsystems.get(nqn).ok_or_else(|| no_subsystem(nqn))?;
    let list: Vec<SubsystemListener> = sub
        .listeners
        .iter()
        .map(|l| SubsystemListener {
            address: listener_info(&l.addr),
        })
        .chain(sub.tcp_listeners.iter().map(|l| SubsystemListener {
            address: super::tcp::listener_info(l),
        }))
        .collect();
    to_value(list)
}
