// SPDX-License-Identifier: Apache-2.0
//! What is connected to a subsystem: `nvmf_subsystem_get_controllers`,
//! `nvmf_subsystem_get_qpairs` and `nvmf_subsystem_get_listeners`.
//!
//! Each listener is one controller; it counts as connected while a host has it enabled (its
//! admin queue exists), and each live submission queue is a queue pair. A vfio-user host
//! presents no host NQN or host ID, so those are empty and zero, as SPDK reports them.

use nvmemu_ctrl::ControllerStats;
use nvmemu_device::Target;
use nvmemu_rpc::RpcError;
use nvmemu_rpc::methods::nvmf::ListenerInfo;
use nvmemu_rpc::methods::nvmf_host::{ControllerInfo, QpairInfo, SubsystemListener};
use serde_json::Value;

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

pub(crate) fn get_controllers(st: &State, target: &Target, nqn: &str) -> Result<Value, RpcError> {
    let list: Vec<ControllerInfo> = connected(st, target, nqn)?
        .into_iter()
        .map(|(l, s)| ControllerInfo {
            cntlid: l.cntlid,
            hostnqn: String::new(),
            hostid: NO_HOST_ID.into(),
            num_io_qpairs: s.current_io_qpairs(),
        })
        .collect();
    to_value(list)
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
