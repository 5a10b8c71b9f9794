// SPDX-License-Identifier: Apache-2.0
//! `nvmf_create_subsystem`, `nvmf_delete_subsystem` and `nvmf_get_subsystems`.

use std::collections::BTreeMap;

use nvmemu_device::{Admission, Target};
use nvmemu_rpc::methods::nvmf::{HostInfo, NvmfCreateSubsystemParams, SubsystemInfo};
use nvmemu_rpc::{Errno, RpcError};
use serde_json::Value;

use super::super::{State, to_value};
use super::listener::listener_info;
use super::namespace::namespace_info;
use super::{DISCOVERY_NQN, MAX_NAMESPACES_LIMIT, MAX_NQN, Subsystem, model, no_subsystem, serial};

fn check_text(param: &str, text: &str, max: usize) -> Result<(), RpcError> {
    if text.len() > max || !text.bytes().all(|b| (0x20..0x7F).contains(&b)) {
        return Err(RpcError::invalid_params(format!(
            "Invalid parameter `{param}`: at most {max} printable ASCII characters"
        )));
    }
    Ok(())
}

pub(crate) fn create_subsystem(
    st: &mut State,
    p: NvmfCreateSubsystemParams,
) -> Result<Value, RpcError> {
    if !p.nqn.starts_with("nqn.") || p.nqn.len() > MAX_NQN || p.nqn.chars().any(char::is_control) {
        return Err(RpcError::invalid_params(format!(
            "Invalid parameter `nqn`: {:?} is not an NQN (\"nqn.\" prefix, at most {MAX_NQN} bytes)",
            p.nqn
        )));
    }
    if p.nqn == DISCOVERY_NQN || st.subsystems.contains_key(&p.nqn) {
        return Err(RpcError::errno_msg(
            Errno::EEXIST,
            format!("Unable to create subsystem {}: it already exists", p.nqn),
        ));
    }
    if let Some(s) = &p.serial_number {
        check_text("serial_number", s, 20)?;
    }
    if let Some(m) = &p.model_number {
        check_text("model_number", m, 40)?;
    }
    if p.max_namespaces > MAX_NAMESPACES_LIMIT {
        return Err(RpcError::invalid_params(format!(
            "Invalid parameter `max_namespaces`: at most {MAX_NAMESPACES_LIMIT}"
        )));
    }
    if p.min_cntlid == 0 || p.max_cntlid > 0xFFEF || p.min_cntlid > p.max_cntlid {
        return Err(RpcError::invalid_params(
            "Invalid parameter `min_cntlid`/`max_cntlid`: need 1 <= min_cntlid <= max_cntlid <= 65519",
        ));
    }
    tracing::info!(nqn = %p.nqn, "subsystem created");
    st.subsystems.insert(
        p.nqn.clone(),
        Subsystem {
            admission: Admission::new(p.allow_any_host),
            params: p,
            namespaces: BTreeMap::new(),
            listeners: Vec::new(),
            tcp_listeners: Vec::new(),
            hosts: Vec::new(),
        },
    );
    Ok(Value::Bool(true))
}

pub(crate) fn delete_subsystem(
    st: &mut State,
    target: &Target,
    nqn: &str,
) -> Result<Value, RpcError> {
    let sub = st.subsystems.remove(nqn).ok_or_else(|| no_subsystem(nqn))?;
    for l in &sub.listeners {
        if let Err(e) = target.remove_controller(l.ctrl) {
            tracing::warn!(nqn, "removing controller of deleted subsystem: {e}");
        }
    }
    super::tcp::subsystem_deleted(st, &sub.tcp_listeners);
    tracing::info!(nqn, "subsystem deleted");
    Ok(Value::Bool(true))
}

fn subsystem_info(nqn: &str, s: &Subsystem) -> SubsystemInfo {
    let p = &s.params;
    SubsystemInfo {
        nqn: nqn.to_owned(),
        subtype: "NVMe".into(),
        listen_addresses: s.listeners.iter().map(|l| listener_info(&l.addr)).collect(),
        allow_any_host: p.allow_any_host,
        hosts: s
            .hosts
            .iter()
            .map(|h| HostInfo { nqn: h.clone() })
            .collect(),
        serial_number: Some(serial(p).to_owned()),
        model_number: Some(model(p).to_owned()),
        max_namespaces: Some(s.max_namespaces()),
        min_cntlid: Some(p.min_cntlid),
        max_cntlid: Some(p.max_cntlid),
        namespaces: Some(
            s.namespaces
                .iter()
                .map(|(nsid, n)| namespace_info(*nsid, n))
                .collect(),
        ),
    }
}

pub(crate) fn get_subsystems(st: &State, nqn: Option<&str>) -> Result<Value, RpcError> {
    let discovery = SubsystemInfo {
        nqn: DISCOVERY_NQN.into(),
        subtype: "Discovery".into(),
        listen_addresses: vec![],
        allow_any_host: true,
        hosts: vec![],
        serial_number: None,
        model_number: None,
        max_namespaces: None,
        min_cntlid: None,
        max_cntlid: None,
        namespaces: None,
    };
    let list: Vec<SubsystemInfo> = std::iter::once(discovery)
        .chain(st.subsystems.iter().map(|(n, s)| subsystem_info(n, s)))
        .filter(|s| nqn.is_none_or(|want| want == s.nqn))
        .collect();
    if nqn.is_some() && list.is_empty() {
        return Err(RpcError::errno(Errno::ENODEV));
    }
    to_value(list)
}
