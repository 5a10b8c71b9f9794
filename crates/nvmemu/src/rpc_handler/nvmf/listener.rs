// SPDX-License-Identifier: Apache-2.0
//! `nvmf_subsystem_add_listener` and `nvmf_subsystem_remove_listener`: a listener is a
//! controller serving `DIR/cntrl`.

use std::path::Path;

use nvmemu_ctrl::ControllerConfig;
use nvmemu_device::{ControllerSpec, Target};
use nvmemu_rpc::methods::nvmf::{
    ListenAddress, ListenerInfo, NvmfSubsystemAddListenerParams, NvmfSubsystemRemoveListenerParams,
};
use nvmemu_rpc::{Errno, RpcError};
use serde_json::Value;

use super::super::State;
use super::{ListenerEntry, VFIOUSER, model, serial, subsystem_mut, target_error};

pub(super) fn listener_info(a: &ListenAddress) -> ListenerInfo {
    ListenerInfo {
        trtype: VFIOUSER.to_owned(),
        adrfam: a.adrfam.clone().unwrap_or_else(|| "IPv4".into()),
        traddr: a.traddr.clone(),
        trsvcid: a.trsvcid.clone().unwrap_or_default(),
    }
}

fn same_listener(a: &ListenAddress, b: &ListenAddress) -> bool {
    a.trtype.eq_ignore_ascii_case(&b.trtype) && a.traddr == b.traddr
}

pub(crate) fn add_listener(
    st: &mut State,
    target: &Target,
    socket_mode: u32,
    p: NvmfSubsystemAddListenerParams,
) -> Result<Value, RpcError> {
    let addr = p.listen_address;
    if !addr.trtype.eq_ignore_ascii_case(VFIOUSER) {
        return Err(RpcError::invalid_params(format!(
            "Invalid parameter `listen_address.trtype`: {:?} (only VFIOUSER)",
            addr.trtype
        )));
    }
    let Some(transport) = &st.transport else {
        return Err(RpcError::errno_msg(
            Errno::EINVAL,
            "Unable to find VFIOUSER transport: call nvmf_create_transport first",
        ));
    };
    let in_use = st
        .subsystems
        .values()
        .flat_map(|s| s.listeners.iter())
        .any(|l| same_listener(&l.addr, &addr));
    if in_use {
        return Err(RpcError::errno_msg(
            Errno::EEXIST,
            format!("Listener {} already exists", addr.traddr),
        ));
    }
    let dir = Path::new(&addr.traddr);
    if addr.traddr.is_empty() || !dir.is_dir() {
        return Err(RpcError::errno_msg(
            Errno::ENOENT,
            format!(
                "Unable to listen on {}: traddr must be an existing directory",
                addr.traddr
            ),
        ));
    }
    let (max_queue_entries, max_io_queues, mdts) = (
        transport.max_queue_entries,
        transport.max_io_queues,
        transport.mdts,
    );
    let shadow_doorbells = !transport.params.disable_shadow_doorbells;
    let sub = subsystem_mut(st, &p.nqn)?;
    let cntlid = (sub.params.min_cntlid..=sub.params.max_cntlid)
        .find(|c| sub.listeners.iter().all(|l| l.cntlid != *c))
        .ok_or_else(|| RpcError::errno_msg(Errno::ENOSPC, "No controller ID left"))?;
    let config = ControllerConfig {
        serial: serial(&sub.params).to_owned(),
        model: model(&sub.params).to_owned(),
        subnqn: p.nqn.clone(),
        max_io_queues,
        max_queue_entries,
        mdts,
        cntlid,
        max_namespaces: sub.max_namespaces(),
        shadow_doorbells,
        ..ControllerConfig::default()
    };
    let ctrl = target
        .add_controller(ControllerSpec {
            socket_dir: dir.to_path_buf(),
            socket_mode,
            config,
            namespaces: sub.namespaces.values().map(|n| n.ns.clone()).collect(),
            admission: sub.admission.clone(),
        })
        .map_err(|e| match e {
            // The cause says why (a live server holds the socket, say); the target's own
            // message would repeat the path.
            nvmemu_device::TargetError::Listen { source, .. } => {
                RpcError::internal(format!("Unable to listen on {}: {source}", addr.traddr))
            }
            e => target_error(&format!("Unable to listen on {}", addr.traddr), e),
        })?;
    tracing::info!(nqn = %p.nqn, traddr = %addr.traddr, "listener added");
    sub.listeners.push(ListenerEntry {
        addr: ListenAddress {
            trtype: VFIOUSER.to_owned(),
            ..addr
        },
        ctrl,
        cntlid,
    });
    Ok(Value::Bool(true))
}

pub(crate) fn remove_listener(
    st: &mut State,
    target: &Target,
    p: NvmfSubsystemRemoveListenerParams,
) -> Result<Value, RpcError> {
    let sub = subsystem_mut(st, &p.nqn)?;
    let pos = sub
        .listeners
        .iter()
        .position(|l| same_listener(&l.addr, &p.listen_address))
        .ok_or_else(|| {
            RpcError::errno_msg(
                Errno::ENOENT,
                format!("No listener {} on {}", p.listen_address.traddr, p.nqn),
            )
        })?;
    let l = sub.listeners.remove(pos);
    target
        .remove_controller(l.ctrl)
        .map_err(|e| target_error("Unable to remove listener", e))?;
    tracing::info!(nqn = %p.nqn, traddr = %l.addr.traddr, "listener removed");
    Ok(Value::Bool(true))
}
