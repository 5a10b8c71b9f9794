// SPDX-License-Identifier: Apache-2.0
//! nvmemu's controller-level faults over RPC: `nvmemu_controller_inject_fatal` (a
//! subsystem's vfio-user controllers enter Controller Fatal Status, now or after N more
//! I/O commands) and `nvmemu_namespace_inject_not_ready` (a namespace's I/O completes with
//! Namespace Not Ready until cleared), and `nvmemu_controller_get_faults`, what both
//! armed and did. What the controller does: `nvmemu_ctrl`'s `ctrl_faults.rs`.

use nvmemu_device::Target;
use nvmemu_rpc::methods::ctrl_faults::{
    ControllerFaults, NamespaceFaults, NvmemuControllerGetFaultsParams,
    NvmemuControllerInjectFatalParams, NvmemuNamespaceInjectNotReadyParams, SubsystemFaults,
};
use nvmemu_rpc::{Errno, RpcError};
use serde_json::Value;

use super::super::State;
use super::{Subsystem, no_subsystem, target_error};

/// `nvmemu_controller_inject_fatal`: every controller of the subsystem, or the one with
/// `cntlid`. A CNTLID the subsystem does not have is ENODEV; failing now a controller no
/// host has enabled is EBUSY (nothing could reset it), and nothing is changed then.
pub(crate) fn inject_fatal(
    st: &State,
    target: &Target,
    p: &NvmemuControllerInjectFatalParams,
) -> Result<Value, RpcError> {
    let sub = st
        .subsystems
        .get(&p.nqn)
        .ok_or_else(|| no_subsystem(&p.nqn))?;
    let chosen: Vec<_> = sub
        .listeners
        .iter()
        .filter(|l| p.cntlid.is_none_or(|c| c == l.cntlid))
        .collect();
    if chosen.is_empty() {
        let which = p.cntlid.map_or_else(
            || "no vfio-user controller".to_owned(),
            |c| format!("no controller with cntlid {c}"),
        );
        return Err(RpcError::errno_msg(
            Errno::ENODEV,
            format!(
                "Subsystem {} has {which} (see nvmf_subsystem_get_listeners)",
                p.nqn
            ),
        ));
    }
    let after = p.after_commands.unwrap_or(0);
    if after == 0 {
        // All or nothing: check every chosen controller is enabled before failing any.
        for l in &chosen {
            let ready = target
                .on_controller(l.ctrl, |c| c.ctrl.is_ready())
                .map_err(|e| target_error("Unable to reach the controller", e))?;
            if !ready {
                return Err(RpcError::errno_msg(
                    Errno::EBUSY,
                    format!(
                        "Controller {} of {} is not enabled (no host is using it): nothing to \
                         fail now; give after_commands to fail it once a host does I/O",
                        l.cntlid, p.nqn
                    ),
                ));
            }
        }
    }
    for l in chosen {
        let done = target
            .on_controller(l.ctrl, move |c| c.ctrl.inject_fatal(after))
            .map_err(|e| target_error("Unable to reach the controller", e))?;
        done.map_err(|e| {
            RpcError::errno_msg(Errno::EBUSY, format!("Controller {}: {e}", l.cntlid))
        })?;
        tracing::info!(nqn = %p.nqn, cntlid = l.cntlid, after_commands = after, "controller fatal status injected");
    }
    Ok(Value::Bool(true))
}

/// `nvmemu_namespace_inject_not_ready`: the namespace's state is shared by every
/// controller it is attached to, so one call covers them all. No such namespace is ENOENT.
pub(crate) fn inject_not_ready(
    st: &State,
    p: &NvmemuNamespaceInjectNotReadyParams,
) -> Result<Value, RpcError> {
    let sub = st
        .subsystems
        .get(&p.nqn)
        .ok_or_else(|| no_subsystem(&p.nqn))?;
    let entry = sub.namespaces.get(&p.nsid).ok_or_else(|| {
        RpcError::errno_msg(
            Errno::ENOENT,
            format!("No namespace with ID {} in {}", p.nsid, p.nqn),
        )
    })?;
    if p.clear {
        entry.ns.set_ready();
        tracing::info!(nqn = %p.nqn, nsid = p.nsid, "namespace ready again");
    } else {
        entry.ns.set_not_ready(p.dnr);
        tracing::info!(nqn = %p.nqn, nsid = p.nsid, dnr = p.dnr, "namespace not ready injected");
    }
    Ok(Value::Bool(true))
}

/// `nvmemu_controller_get_faults`: per subsystem (the one named, or every one), each
/// vfio-user controller's injected fatal status and each namespace's readiness, with
/// their counters. No such subsystem is -32602.
pub(crate) fn get_faults(
    st: &State,
    target: &Target,
    p: &NvmemuControllerGetFaultsParams,
) -> Result<Value, RpcError> {
    if let Some(nqn) = &p.nqn
        && !st.subsystems.contains_key(nqn)
    {
        return Err(no_subsystem(nqn));
    }
    let mut out = Vec::new();
    for (nqn, sub) in &st.subsystems {
        if p.nqn.as_ref().is_some_and(|n| n != nqn) {
            continue;
        }
        out.push(SubsystemFaults {
            nqn: nqn.clone(),
            controllers: controller_faults(sub, target)?,
            namespaces: sub
                .namespaces
                .iter()
                .map(|(nsid, n)| {
                    let status = n.ns.not_ready();
                    NamespaceFaults {
                        nsid: *nsid,
                        bdev_name: n.bdev_name.clone(),
                        not_ready: status.is_some(),
                        dnr: status.is_some_and(|s| s.dnr),
                        not_ready_commands: n.ns.not_ready_commands(),
                    }
                })
                .collect(),
        });
    }
    super::super::to_value(out)
}

fn controller_faults(sub: &Subsystem, target: &Target) -> Result<Vec<ControllerFaults>, RpcError> {
    sub.listeners
        .iter()
        .map(|l| {
            let r = target
                .on_controller(l.ctrl, |c| c.ctrl.fatal_record())
                .map_err(|e| target_error("Unable to reach the controller", e))?;
            Ok(ControllerFaults {
                cntlid: l.cntlid,
                traddr: l.addr.traddr.clone(),
                fatal_armed_after_commands: r.armed_after,
                fatal_injected: r.injected,
                fatal_last_injected_ms: r.last_injected_ms,
                fatal_in_effect: r.in_effect,
                fatal_cleared_by_reset: r.cleared,
            })
        })
        .collect()
}
