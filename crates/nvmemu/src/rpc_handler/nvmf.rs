// SPDX-License-Identifier: Apache-2.0
//! NVMe-oF methods (SPDK `lib/nvmf/nvmf_rpc.c`) on the target: the VFIOUSER transport,
//! subsystems, their namespaces and listeners.
//!
//! A listener is a controller: `nvmf_subsystem_add_listener` with `traddr` DIR serves
//! `DIR/cntrl` (DIR must exist, as in SPDK). Namespace changes reach every controller of
//! the subsystem at once, so an attached host sees a Namespace Attribute Changed event.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use nvmemu_ctrl::{ControllerConfig, Namespace};
use nvmemu_device::{ControllerId, ControllerSpec, Target};
use nvmemu_rpc::methods::nvmf::{
    DEFAULT_MAX_NAMESPACES, DEFAULT_MODEL_NUMBER, DEFAULT_SERIAL_NUMBER, HostInfo, ListenAddress,
    ListenerInfo, NamespaceInfo, NamespaceParams, NvmfCreateSubsystemParams,
    NvmfCreateTransportParams, NvmfGetTransportsParams, NvmfSubsystemAddListenerParams,
    NvmfSubsystemAddNsParams, NvmfSubsystemRemoveListenerParams, SubsystemInfo, TransportInfo,
    VfioUserDefaults,
};
use nvmemu_rpc::{Errno, RpcError};
use nvmemu_spec::Nsid;
use serde_json::{Value, json};

use super::{State, ids, to_value};

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
}

#[derive(Debug)]
struct NsEntry {
    bdev_name: String,
    ns: Namespace,
    /// Whether `eui64` was given: SPDK reports an EUI-64 only when one was set, while every
    /// namespace has an NGUID (SPDK's defaults to the bdev's UUID, ours is derived).
    explicit_eui64: bool,
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

/// Names of the bdevs used by a namespace.
pub(crate) fn claims(subsystems: &BTreeMap<String, Subsystem>) -> BTreeSet<String> {
    subsystems
        .values()
        .flat_map(|s| s.namespaces.values().map(|n| n.bdev_name.clone()))
        .collect()
}

fn no_subsystem(nqn: &str) -> RpcError {
    RpcError::invalid_params(format!("Unable to find subsystem with NQN {nqn}"))
}

fn subsystem_mut<'a>(st: &'a mut State, nqn: &str) -> Result<&'a mut Subsystem, RpcError> {
    st.subsystems.get_mut(nqn).ok_or_else(|| no_subsystem(nqn))
}

fn target_error(what: &str, e: nvmemu_device::TargetError) -> RpcError {
    RpcError::internal(format!("{what}: {e}"))
}

fn positive_u16(name: &str, v: Option<u32>, min: u32, default: u16) -> Result<u16, RpcError> {
    match v {
        None => Ok(default),
        Some(v) if v >= min => Ok(u16::try_from(v).unwrap_or(u16::MAX)),
        Some(v) => Err(RpcError::invalid_params(format!(
            "Invalid parameter `{name}`: {v} is below {min}"
        ))),
    }
}

pub(crate) fn create_transport(
    st: &mut State,
    p: NvmfCreateTransportParams,
) -> Result<Value, RpcError> {
    if !p.trtype.eq_ignore_ascii_case(VFIOUSER) {
        return Err(RpcError::invalid_params(format!(
            "Transport type '{}' unavailable.",
            p.trtype
        )));
    }
    if st.transport.is_some() {
        return Err(RpcError::invalid_params(format!(
            "Transport type '{VFIOUSER}' already exists"
        )));
    }
    let d = ControllerConfig::default();
    let max_queue_entries =
        positive_u16("max_queue_depth", p.max_queue_depth, 2, d.max_queue_entries)?;
    let max_io_queues = positive_u16(
        "max_io_qpairs_per_ctrlr",
        p.max_io_qpairs_per_ctrlr,
        1,
        d.max_io_queues,
    )?;
    let mdts = match p.max_io_size {
        None => d.mdts,
        Some(n) if n >= 4096 => {
            // MDTS is a power of two of 4 KiB pages: round down.
            u8::try_from((n / 4096).ilog2()).unwrap_or(u8::MAX)
        }
        Some(n) => {
            return Err(RpcError::invalid_params(format!(
                "Invalid parameter `max_io_size`: {n} is below 4096"
            )));
        }
    };
    st.transport = Some(Transport {
        params: NvmfCreateTransportParams {
            trtype: VFIOUSER.to_owned(),
            ..p
        },
        max_queue_entries,
        max_io_queues,
        mdts,
    });
    tracing::info!("VFIOUSER transport created");
    Ok(Value::Bool(true))
}

fn transport_info(t: &Transport) -> TransportInfo {
    let p = &t.params;
    let max_io_size = 4096u32.checked_shl(u32::from(t.mdts)).unwrap_or(u32::MAX);
    TransportInfo {
        trtype: VFIOUSER.to_owned(),
        max_queue_depth: u32::from(t.max_queue_entries),
        max_io_qpairs_per_ctrlr: u32::from(t.max_io_queues),
        in_capsule_data_size: p
            .in_capsule_data_size
            .unwrap_or(VfioUserDefaults::IN_CAPSULE_DATA_SIZE),
        max_io_size,
        io_unit_size: p.io_unit_size.unwrap_or(max_io_size),
        max_aq_depth: p.max_aq_depth.unwrap_or(VfioUserDefaults::MAX_AQ_DEPTH),
        num_shared_buffers: p.num_shared_buffers.unwrap_or(0),
        buf_cache_size: p.buf_cache_size.unwrap_or(0),
        dif_insert_or_strip: false,
        zcopy: p.zcopy,
        abort_timeout_sec: p.abort_timeout_sec.unwrap_or(1),
        ack_timeout: 0,
        data_wr_pool_size: 0,
        disable_mappable_bar0: p.disable_mappable_bar0,
        disable_adaptive_irq: p.disable_adaptive_irq,
        disable_shadow_doorbells: p.disable_shadow_doorbells,
    }
}

pub(crate) fn get_transports(st: &State, p: &NvmfGetTransportsParams) -> Result<Value, RpcError> {
    let list: Vec<TransportInfo> = st
        .transport
        .iter()
        .filter(|_| {
            p.trtype
                .as_ref()
                .is_none_or(|t| t.eq_ignore_ascii_case(VFIOUSER))
        })
        .map(transport_info)
        .collect();
    if p.trtype.is_some() && list.is_empty() {
        return Err(RpcError::errno(Errno::ENODEV));
    }
    to_value(list)
}

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
            params: p,
            namespaces: BTreeMap::new(),
            listeners: Vec::new(),
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
    tracing::info!(nqn, "subsystem deleted");
    Ok(Value::Bool(true))
}

fn namespace_info(nsid: u32, n: &NsEntry) -> NamespaceInfo {
    let (uuid, nguid) = (n.ns.uuid(), n.ns.nguid());
    NamespaceInfo {
        nsid,
        bdev_name: n.bdev_name.clone(),
        name: n.bdev_name.clone(),
        nguid: (nguid != [0; 16]).then(|| ids::format_hex(&nguid)),
        eui64: n.explicit_eui64.then(|| ids::format_hex(&n.ns.eui64())),
        uuid: (uuid != [0; 16]).then(|| ids::format_uuid(&uuid)),
    }
}

fn subsystem_info(nqn: &str, s: &Subsystem) -> SubsystemInfo {
    let p = &s.params;
    SubsystemInfo {
        nqn: nqn.to_owned(),
        subtype: "NVMe".into(),
        listen_addresses: s.listeners.iter().map(|l| listener_info(&l.addr)).collect(),
        allow_any_host: p.allow_any_host,
        hosts: Vec::<HostInfo>::new(),
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

fn listener_info(a: &ListenAddress) -> ListenerInfo {
    ListenerInfo {
        trtype: VFIOUSER.to_owned(),
        adrfam: a.adrfam.clone().unwrap_or_else(|| "IPv4".into()),
        traddr: a.traddr.clone(),
        trsvcid: a.trsvcid.clone().unwrap_or_default(),
    }
}

fn serial(p: &NvmfCreateSubsystemParams) -> &str {
    p.serial_number.as_deref().unwrap_or(DEFAULT_SERIAL_NUMBER)
}

fn model(p: &NvmfCreateSubsystemParams) -> &str {
    p.model_number.as_deref().unwrap_or(DEFAULT_MODEL_NUMBER)
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

/// Builds the namespace for `p`: identifiers from the parameters, else the UUID from the
/// bdev (as SPDK does) and NGUID / EUI-64 derived from the bdev name and NSID. The flag
/// says whether the EUI-64 was given.
fn make_namespace(
    nsid: u32,
    bdev: Arc<nvmemu_bdev::Bdev>,
    bdev_uuid: &str,
    p: &NamespaceParams,
) -> Result<(Namespace, bool), RpcError> {
    let bad = |field: &str, v: &str| {
        RpcError::invalid_params(format!("Invalid parameter `namespace.{field}`: {v:?}"))
    };
    let base = Namespace::new(Nsid(nsid), bdev);
    let nguid = match &p.nguid {
        Some(v) => ids::parse_hex::<16>(v).ok_or_else(|| bad("nguid", v))?,
        None => base.nguid(),
    };
    let eui64 = match &p.eui64 {
        Some(v) => ids::parse_hex::<8>(v).ok_or_else(|| bad("eui64", v))?,
        None => base.eui64(),
    };
    let uuid = match &p.uuid {
        Some(v) => ids::parse_uuid(v).ok_or_else(|| bad("uuid", v))?,
        None => ids::parse_uuid(bdev_uuid).unwrap_or_else(|| base.uuid()),
    };
    Ok((base.with_ids(nguid, eui64, uuid), p.eui64.is_some()))
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
    let (ns, explicit_eui64) =
        make_namespace(nsid, Arc::clone(&entry.bdev), &entry.uuid, &p.namespace)?;
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
            explicit_eui64,
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
        })
        .map_err(|e| target_error(&format!("Unable to listen on {}", addr.traddr), e))?;
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
    for (nqn, s) in &st.subsystems {
        let p = &s.params;
        out.push(json!({"method": "nvmf_create_subsystem", "params": {
            "nqn": nqn, "allow_any_host": p.allow_any_host, "serial_number": serial(p),
            "model_number": model(p), "max_namespaces": s.max_namespaces(),
            "min_cntlid": p.min_cntlid, "max_cntlid": p.max_cntlid,
            "ana_reporting": p.ana_reporting}}));
        for l in &s.listeners {
            let li = listener_info(&l.addr);
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
