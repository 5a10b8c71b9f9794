// SPDX-License-Identifier: Apache-2.0
//! `nvmf_subsystem_add_ns` and `nvmf_subsystem_remove_ns`: a namespace reaches every
//! controller of its subsystem at once.

use std::sync::Arc;

use nvmemu_ctrl::Namespace;
use nvmemu_device::{ControllerId, Target};
use nvmemu_rpc::methods::nvmf::{NamespaceInfo, NamespaceParams, NvmfSubsystemAddNsParams};
use nvmemu_rpc::{Errno, RpcError};
use nvmemu_spec::Nsid;
use serde_json::{Value, json};

use super::super::{State, ids};
use super::{NsEntry, claims, no_subsystem, subsystem_mut, target_error};

pub(super) fn namespace_info(nsid: u32, n: &NsEntry) -> NamespaceInfo {
    let (uuid, nguid, eui64) = (n.ns.uuid(), n.ns.nguid(), n.ns.eui64());
    NamespaceInfo {
        nsid,
        bdev_name: n.bdev_name.clone(),
        name: n.bdev_name.clone(),
        nguid: (nguid != [0; 16]).then(|| ids::format_hex(&nguid)),
        eui64: (eui64 != [0; 8]).then(|| ids::format_hex(&eui64)),
        uuid: (uuid != [0; 16]).then(|| ids::format_uuid(&uuid)),
    }
}

/// Builds the namespace for `p` as SPDK does: each identifier given in the parameters wins;
/// otherwise the UUID and the NGUID are both the bdev's UUID (random per bdev, so two
/// servers never report the same ones), and there is no EUI-64.
fn make_namespace(
    nsid: u32,
    bdev: Arc<nvmemu_bdev::Bdev>,
    bdev_uuid: &str,
    p: &NamespaceParams,
) -> Result<Namespace, RpcError> {
    let bad = |field: &str, v: &str| {
        RpcError::invalid_params(format!("Invalid parameter `namespace.{field}`: {v:?}"))
    };
    let base = Namespace::new(Nsid(nsid), bdev);
    let bdev_uuid = ids::parse_uuid(bdev_uuid).unwrap_or_else(|| base.uuid());
    let nguid = match &p.nguid {
        Some(v) => ids::parse_hex::<16>(v).ok_or_else(|| bad("nguid", v))?,
        None => bdev_uuid,
    };
    let eui64 = match &p.eui64 {
        Some(v) => ids::parse_hex::<8>(v).ok_or_else(|| bad("eui64", v))?,
        None => [0; 8],
    };
    let uuid = match &p.uuid {
        Some(v) => ids::parse_uuid(v).ok_or_else(|| bad("uuid", v))?,
        None => bdev_uuid,
    };
    Ok(base.with_ids(nguid, eui64, uuid))
}

pub(crate) fn add_ns(
    st: &mut State,
    target: &Target,
    p: NvmfSubsystemAddNsParams,
) -> Result<Value, RpcError> {
    let claimed = claims(&st.subsystems);
    let State {
        bdevs, subsystems, ..
    } = st;
    let sub = subsystems
        .get_mut(&p.nqn)
        .ok_or_else(|| no_subsystem(&p.nqn))?;
    let (bdev_name, entry) = bdevs.get(&p.namespace.bdev_name).ok_or_else(|| {
        let name = &p.namespace.bdev_name;
        RpcError::errno_msg(Errno::ENODEV, format!("No bdev with name {name}"))
    })?;
    if claimed.contains(bdev_name) {
        return Err(RpcError::errno_msg(
            Errno::EBUSY,
            format!("Bdev {bdev_name} is already claimed by a namespace"),
        ));
    }
    if bdevs.stacked_bases().any(|b| b == bdev_name) {
        return Err(RpcError::errno_msg(
            Errno::EBUSY,
            format!("Bdev {bdev_name} is claimed by a delay or error bdev: use that bdev instead"),
        ));
    }
    let max = sub.max_namespaces();
    let nsid = match p.namespace.nsid {
        0 => (1..=max)
            .find(|n| !sub.namespaces.contains_key(n))
            .ok_or_else(|| {
                RpcError::errno_msg(Errno::ENOSPC, format!("All {max} namespaces are in use"))
            })?,
        n if n > max => {
            return Err(RpcError::invalid_params(format!(
                "Invalid parameter `namespace.nsid`: {n} is above max_namespaces {max}"
            )));
        }
        n if sub.namespaces.contains_key(&n) => {
            return Err(RpcError::errno_msg(
                Errno::EEXIST,
                format!("Namespace ID {n} is already in use"),
            ));
        }
        n => n,
    };
    let ns = make_namespace(nsid, Arc::clone(&entry.bdev), &entry.uuid, &p.namespace)?;
    let mut done: Vec<ControllerId> = Vec::new();
    for l in &sub.listeners {
        if let Err(e) = target.attach_namespace(l.ctrl, ns.clone()) {
            for c in done {
                let _ = target.detach_namespace(c, Nsid(nsid));
            }
            return Err(target_error("Unable to add namespace", e));
        }
        done.push(l.ctrl);
    }
    tracing::info!(nqn = %p.nqn, nsid, bdev = %bdev_name, "namespace added");
    sub.namespaces.insert(
        nsid,
        NsEntry {
            bdev_name: bdev_name.to_owned(),
            ns,
        },
    );
    Ok(json!(nsid))
}

pub(crate) fn remove_ns(
    st: &mut State,
    target: &Target,
    nqn: &str,
    nsid: u32,
) -> Result<Value, RpcError> {
    let sub = subsystem_mut(st, nqn)?;
    if sub.namespaces.remove(&nsid).is_none() {
        return Err(RpcError::errno_msg(
            Errno::ENOENT,
            format!("No namespace with ID {nsid} in {nqn}"),
        ));
    }
    for l in &sub.listeners {
        if let Err(e) = target.detach_namespace(l.ctrl, Nsid(nsid)) {
            tracing::warn!(nqn, nsid, "detaching namespace: {e}");
        }
    }
    tracing::info!(nqn, nsid, "namespace removed");
    Ok(Value::Bool(true))
}

/// Hot remove: every namespace backed by bdev `bdev_name`, in every subsystem, detached
/// from its controllers and dropped.
pub(crate) fn remove_namespaces_of(st: &mut State, target: &Target, bdev_name: &str) {
    let doomed: Vec<(String, u32)> = st
        .subsystems
        .iter()
        .flat_map(|(nqn, s)| {
            s.namespaces
                .iter()
                .filter(|(_, n)| n.bdev_name == bdev_name)
                .map(move |(nsid, _)| (nqn.clone(), *nsid))
        })
        .collect();
    for (nqn, nsid) in doomed {
        tracing::info!(
            nqn,
            nsid,
            bdev = bdev_name,
            "bdev deleted: removing its namespace"
        );
        if let Err(e) = remove_ns(st, target, &nqn, nsid) {
            tracing::warn!(nqn, nsid, "hot remove: {}", e.message);
        }
    }
}
