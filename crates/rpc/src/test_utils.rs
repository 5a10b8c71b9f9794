// SPDX-License-Identifier: Apache-2.0
//! An in-memory [`Handler`] that keeps a registry of bdevs, transports and subsystems with
//! SPDK's rules and error codes, for tests of the server, the client and the CLI (and the
//! `fake_rpc_server` example that the Python suite runs against).

use std::collections::BTreeMap;
use std::sync::Mutex;

use nvmemu_sockfile::StopHandle;
use serde_json::{Value, json};

use crate::dispatch::Handler;
use crate::error::{Errno, RpcError};
use crate::methods::Request;
use crate::methods::bdev::{
    BdevDeleteParams, BdevGetBdevsParams, BdevInfo, BdevMallocCreateParams, BdevNullCreateParams,
    RateLimits, SupportedIoTypes,
};
use crate::methods::framework::{
    LwThreadInfo, ReactorInfo, ReactorsInfo, VersionFields, VersionInfo,
};
use crate::methods::nvmf::{
    DEFAULT_MODEL_NUMBER, DEFAULT_SERIAL_NUMBER, ListenAddress, ListenerInfo, NamespaceInfo,
    NvmfCreateSubsystemParams, NvmfCreateTransportParams, NvmfGetSubsystemsParams, NvmfStats,
    NvmfSubsystemAddListenerParams, NvmfSubsystemAddNsParams, NvmfSubsystemRemoveListenerParams,
    NvmfSubsystemRemoveNsParams, SubsystemInfo, TransportInfo, VfioUserDefaults,
};

#[derive(Debug, Clone)]
struct FakeBdev {
    product: &'static str,
    block_size: u32,
    num_blocks: u64,
    uuid: String,
    /// Params to replay in `save_config`.
    create: (&'static str, Value),
}

#[derive(Debug, Clone)]
struct FakeSubsystem {
    params: NvmfCreateSubsystemParams,
    namespaces: BTreeMap<u32, String>,
    listeners: Vec<ListenAddress>,
}

#[derive(Debug, Default)]
struct State {
    bdevs: BTreeMap<String, FakeBdev>,
    transports: Vec<String>,
    subsystems: BTreeMap<String, FakeSubsystem>,
    next_malloc: u32,
    next_uuid: u32,
}

/// In-memory test double for the nvmemu target.
#[derive(Debug)]
pub struct FakeHandler {
    state: Mutex<State>,
    stop: Option<StopHandle>,
}

impl FakeHandler {
    /// A fake whose `spdk_kill_instance` stops `stop` (if given).
    pub fn new(stop: Option<StopHandle>) -> Self {
        Self {
            state: Mutex::new(State::default()),
            stop,
        }
    }

    fn claimed(state: &State, bdev: &str) -> bool {
        state
            .subsystems
            .values()
            .any(|s| s.namespaces.values().any(|b| b == bdev))
    }

    fn bdev_info(state: &State, name: &str, b: &FakeBdev) -> BdevInfo {
        let claimed = Self::claimed(state, name);
        BdevInfo {
            name: name.to_owned(),
            aliases: vec![],
            product_name: b.product.to_owned(),
            block_size: b.block_size,
            num_blocks: b.num_blocks,
            uuid: b.uuid.clone(),
            md_size: None,
            md_interleave: None,
            dif_type: None,
            assigned_rate_limits: RateLimits::default(),
            claimed,
            claim_type: claimed.then(|| "exclusive_write".to_owned()),
            zoned: false,
            supported_io_types: SupportedIoTypes::nvmemu(),
            driver_specific: serde_json::Map::new(),
        }
    }

    fn uuid(state: &mut State) -> String {
        state.next_uuid += 1;
        format!("00000000-0000-4000-8000-{:012x}", state.next_uuid)
    }

    fn subsystem_info(nqn: &str, s: &FakeSubsystem) -> SubsystemInfo {
        let p = &s.params;
        SubsystemInfo {
            nqn: nqn.to_owned(),
            subtype: "NVMe".into(),
            listen_addresses: s
                .listeners
                .iter()
                .map(|l| ListenerInfo {
                    trtype: l.trtype.clone(),
                    adrfam: l.adrfam.clone().unwrap_or_else(|| "IPv4".into()),
                    traddr: l.traddr.clone(),
                    trsvcid: l.trsvcid.clone().unwrap_or_default(),
                })
                .collect(),
            allow_any_host: p.allow_any_host,
            hosts: vec![],
            serial_number: Some(
                p.serial_number
                    .clone()
                    .unwrap_or_else(|| DEFAULT_SERIAL_NUMBER.into()),
            ),
            model_number: Some(
                p.model_number
                    .clone()
                    .unwrap_or_else(|| DEFAULT_MODEL_NUMBER.into()),
            ),
            max_namespaces: (p.max_namespaces != 0).then_some(p.max_namespaces),
            min_cntlid: Some(p.min_cntlid),
            max_cntlid: Some(p.max_cntlid),
            namespaces: Some(
                s.namespaces
                    .iter()
                    .map(|(nsid, bdev)| NamespaceInfo {
                        nsid: *nsid,
                        bdev_name: bdev.clone(),
                        name: bdev.clone(),
                        nguid: None,
                        eui64: None,
                        uuid: None,
                    })
                    .collect(),
            ),
        }
    }

    fn save_config(state: &State) -> Value {
        let bdev: Vec<Value> = state
            .bdevs
            .values()
            .map(|b| json!({"method": b.create.0, "params": b.create.1}))
            .collect();
        let mut nvmf: Vec<Value> = state
            .transports
            .iter()
            .map(|t| json!({"method": "nvmf_create_transport", "params": {"trtype": t}}))
            .collect();
        for (nqn, s) in &state.subsystems {
            nvmf.push(json!({"method": "nvmf_create_subsystem", "params": s.params}));
            for l in &s.listeners {
                nvmf.push(json!({"method": "nvmf_subsystem_add_listener",
                                 "params": {"nqn": nqn, "listen_address": l}}));
            }
            for (nsid, b) in &s.namespaces {
                nvmf.push(json!({"method": "nvmf_subsystem_add_ns",
                                 "params": {"nqn": nqn, "namespace": {"nsid": nsid, "bdev_name": b}}}));
            }
        }
        json!({"subsystems": [{"subsystem": "bdev", "config": bdev},
                              {"subsystem": "nvmf", "config": nvmf}]})
    }

    fn to_value<T: serde::Serialize>(v: T) -> Result<Value, RpcError> {
        serde_json::to_value(v).map_err(|e| RpcError::internal(e.to_string()))
    }

    fn no_subsystem(nqn: &str) -> RpcError {
        RpcError::invalid_params(format!("Unable to find subsystem with NQN {nqn}"))
    }
}

impl FakeHandler {
    fn reactors() -> Result<Value, RpcError> {
        Self::to_value(ReactorsInfo {
            tick_rate: 1_000_000_000,
            pid: std::process::id(),
            reactors: vec![ReactorInfo {
                lcore: 0,
                tid: std::process::id(),
                busy: 0,
                idle: 0,
                in_interrupt: false,
                irq: 0,
                sys: 0,
                usr: 0,
                lw_threads: vec![LwThreadInfo {
                    name: "app_thread".into(),
                    id: 1,
                    cpumask: "1".into(),
                    elapsed: 0,
                }],
            }],
        })
    }

    fn malloc_create(st: &mut State, p: BdevMallocCreateParams) -> Result<Value, RpcError> {
        if p.block_size == 0 || !p.block_size.is_multiple_of(512) {
            return Err(RpcError::errno_msg(
                Errno::EINVAL,
                "Data block size must be 512 bytes aligned",
            ));
        }
        if p.num_blocks == 0 {
            return Err(RpcError::errno_msg(
                Errno::EINVAL,
                "Disk num_blocks must be greater than 0",
            ));
        }
        let name = match p.name.clone() {
            Some(n) => n,
            None => {
                let n = format!("Malloc{}", st.next_malloc);
                st.next_malloc += 1;
                n
            }
        };
        if st.bdevs.contains_key(&name) {
            return Err(RpcError::errno(Errno::EEXIST));
        }
        let uuid = p.uuid.clone().unwrap_or_else(|| Self::uuid(st));
        let params = json!({"name": name, "num_blocks": p.num_blocks,
                                "block_size": p.block_size, "uuid": uuid});
        st.bdevs.insert(
            name.clone(),
            FakeBdev {
                product: BdevInfo::MALLOC_PRODUCT,
                block_size: p.block_size,
                num_blocks: p.num_blocks,
                uuid,
                create: ("bdev_malloc_create", params),
            },
        );
        Ok(json!(name))
    }

    fn null_create(st: &mut State, p: BdevNullCreateParams) -> Result<Value, RpcError> {
        if st.bdevs.contains_key(&p.name) {
            return Err(RpcError::errno(Errno::EEXIST));
        }
        if p.block_size == 0 || p.num_blocks == 0 {
            return Err(RpcError::errno(Errno::EINVAL));
        }
        let uuid = p.uuid.clone().unwrap_or_else(|| Self::uuid(st));
        let params = json!({"name": p.name, "num_blocks": p.num_blocks,
                                "block_size": p.block_size, "uuid": uuid});
        st.bdevs.insert(
            p.name.clone(),
            FakeBdev {
                product: BdevInfo::NULL_PRODUCT,
                block_size: p.block_size,
                num_blocks: p.num_blocks,
                uuid,
                create: ("bdev_null_create", params),
            },
        );
        Ok(json!(p.name))
    }

    fn delete_bdev(st: &mut State, p: BdevDeleteParams) -> Result<Value, RpcError> {
        if !st.bdevs.contains_key(&p.name) {
            return Err(RpcError::errno(Errno::ENODEV));
        }
        if Self::claimed(st, &p.name) {
            return Err(RpcError::errno(Errno::EBUSY));
        }
        st.bdevs.remove(&p.name);
        Ok(json!(true))
    }

    fn get_bdevs(st: &State, p: BdevGetBdevsParams) -> Result<Value, RpcError> {
        let infos: Vec<BdevInfo> = match &p.name {
            Some(n) => {
                let b = st
                    .bdevs
                    .get(n)
                    .ok_or_else(|| RpcError::errno(Errno::ENODEV))?;
                vec![Self::bdev_info(st, n, b)]
            }
            None => st
                .bdevs
                .iter()
                .map(|(n, b)| Self::bdev_info(st, n, b))
                .collect(),
        };
        Self::to_value(infos)
    }

    fn create_transport(st: &mut State, p: NvmfCreateTransportParams) -> Result<Value, RpcError> {
        let t = p.trtype.to_ascii_uppercase();
        if t != "VFIOUSER" {
            return Err(RpcError::invalid_params(format!(
                "Transport type '{}' unavailable.",
                p.trtype
            )));
        }
        if st.transports.contains(&t) {
            return Err(RpcError::invalid_params(format!(
                "Transport type '{t}' already exists"
            )));
        }
        st.transports.push(t);
        Ok(json!(true))
    }

    fn get_transports(st: &State) -> Result<Value, RpcError> {
        Self::to_value(
            st.transports
                .iter()
                .map(|t| TransportInfo {
                    trtype: t.clone(),
                    max_queue_depth: VfioUserDefaults::MAX_QUEUE_DEPTH,
                    max_io_qpairs_per_ctrlr: VfioUserDefaults::MAX_IO_QPAIRS_PER_CTRLR,
                    in_capsule_data_size: VfioUserDefaults::IN_CAPSULE_DATA_SIZE,
                    max_io_size: VfioUserDefaults::MAX_IO_SIZE,
                    io_unit_size: VfioUserDefaults::IO_UNIT_SIZE,
                    max_aq_depth: VfioUserDefaults::MAX_AQ_DEPTH,
                    num_shared_buffers: 0,
                    buf_cache_size: 0,
                    dif_insert_or_strip: false,
                    zcopy: false,
                    abort_timeout_sec: 1,
                    ack_timeout: 0,
                    data_wr_pool_size: 0,
                    disable_mappable_bar0: false,
                    disable_adaptive_irq: false,
                    disable_shadow_doorbells: false,
                    c2h_success: None,
                })
                .collect::<Vec<_>>(),
        )
    }

    fn create_subsystem(st: &mut State, p: NvmfCreateSubsystemParams) -> Result<Value, RpcError> {
        if st.subsystems.contains_key(&p.nqn) {
            return Err(RpcError::internal(format!(
                "Unable to create subsystem {}",
                p.nqn
            )));
        }
        st.subsystems.insert(
            p.nqn.clone(),
            FakeSubsystem {
                params: p,
                namespaces: BTreeMap::new(),
                listeners: vec![],
            },
        );
        Ok(json!(true))
    }

    fn get_subsystems(st: &State, p: NvmfGetSubsystemsParams) -> Result<Value, RpcError> {
        let list: Vec<SubsystemInfo> = st
            .subsystems
            .iter()
            .filter(|(nqn, _)| p.nqn.as_ref().is_none_or(|want| want == *nqn))
            .map(|(nqn, s)| Self::subsystem_info(nqn, s))
            .collect();
        if p.nqn.is_some() && list.is_empty() {
            return Err(RpcError::errno(Errno::ENODEV));
        }
        Self::to_value(list)
    }

    fn add_ns(st: &mut State, p: NvmfSubsystemAddNsParams) -> Result<Value, RpcError> {
        if !st.bdevs.contains_key(&p.namespace.bdev_name)
            || Self::claimed(st, &p.namespace.bdev_name)
        {
            return Err(RpcError::invalid_params("Invalid parameters"));
        }
        let sub = st
            .subsystems
            .get_mut(&p.nqn)
            .ok_or_else(|| Self::no_subsystem(&p.nqn))?;
        let nsid = if p.namespace.nsid != 0 {
            p.namespace.nsid
        } else {
            (1..=u32::MAX)
                .find(|n| !sub.namespaces.contains_key(n))
                .unwrap_or(0)
        };
        if nsid == 0 || sub.namespaces.contains_key(&nsid) {
            return Err(RpcError::invalid_params("Invalid parameters"));
        }
        sub.namespaces.insert(nsid, p.namespace.bdev_name);
        Ok(json!(nsid))
    }

    fn remove_ns(st: &mut State, p: NvmfSubsystemRemoveNsParams) -> Result<Value, RpcError> {
        let sub = st
            .subsystems
            .get_mut(&p.nqn)
            .ok_or_else(|| Self::no_subsystem(&p.nqn))?;
        match sub.namespaces.remove(&p.nsid) {
            Some(_) => Ok(json!(true)),
            None => Err(RpcError::invalid_params("Invalid parameters")),
        }
    }

    fn add_listener(st: &mut State, p: NvmfSubsystemAddListenerParams) -> Result<Value, RpcError> {
        if !st
            .transports
            .contains(&p.listen_address.trtype.to_ascii_uppercase())
        {
            return Err(RpcError::invalid_params("Invalid parameters"));
        }
        let sub = st
            .subsystems
            .get_mut(&p.nqn)
            .ok_or_else(|| Self::no_subsystem(&p.nqn))?;
        if sub
            .listeners
            .iter()
            .any(|l| l.traddr == p.listen_address.traddr)
        {
            return Err(RpcError::invalid_params("Invalid parameters"));
        }
        sub.listeners.push(p.listen_address);
        Ok(json!(true))
    }

    fn remove_listener(
        st: &mut State,
        p: NvmfSubsystemRemoveListenerParams,
    ) -> Result<Value, RpcError> {
        let sub = st
            .subsystems
            .get_mut(&p.nqn)
            .ok_or_else(|| Self::no_subsystem(&p.nqn))?;
        let before = sub.listeners.len();
        sub.listeners
            .retain(|l| l.traddr != p.listen_address.traddr);
        if sub.listeners.len() == before {
            return Err(RpcError::invalid_params("Invalid parameters"));
        }
        Ok(json!(true))
    }
}

impl Handler for FakeHandler {
    fn handle(&self, req: Request) -> Result<Value, RpcError> {
        let mut guard = self
            .state
            .lock()
            .map_err(|_| RpcError::internal("state lock poisoned"))?;
        let st = &mut *guard;
        match req {
            Request::SpdkGetVersion => Self::to_value(VersionInfo {
                version: "nvmemu v0.1.0".into(),
                fields: VersionFields {
                    major: 0,
                    minor: 1,
                    patch: 0,
                    suffix: String::new(),
                },
            }),
            Request::FrameworkWaitInit => Ok(json!(true)),
            Request::FrameworkGetReactors => Self::reactors(),
            Request::SpdkKillInstance(_) => {
                if let Some(stop) = &self.stop {
                    stop.stop();
                }
                Ok(json!(true))
            }
            Request::SaveConfig => Ok(Self::save_config(st)),
            Request::BdevMallocCreate(p) => Self::malloc_create(st, p),
            Request::BdevNullCreate(p) => Self::null_create(st, p),
            Request::BdevMallocDelete(p) | Request::BdevNullDelete(p) => Self::delete_bdev(st, p),
            Request::BdevGetBdevs(p) => Self::get_bdevs(st, p),
            Request::BdevGetIostat(_) => Ok(json!({"tick_rate": 1_000_000_000u64, "ticks": 0,
                "bdevs": st.bdevs.keys().map(|n| json!({"name": n, "bytes_read": 0,
                    "num_read_ops": 0, "bytes_written": 0, "num_write_ops": 0})).collect::<Vec<_>>()})),
            Request::NvmfCreateTransport(p) => Self::create_transport(st, p),
            Request::NvmfGetTransports(_) => Self::get_transports(st),
            Request::NvmfCreateSubsystem(p) => Self::create_subsystem(st, p),
            Request::NvmfDeleteSubsystem(p) => match st.subsystems.remove(&p.nqn) {
                Some(_) => Ok(json!(true)),
                None => Err(Self::no_subsystem(&p.nqn)),
            },
            Request::NvmfGetSubsystems(p) => Self::get_subsystems(st, p),
            Request::NvmfSubsystemAddNs(p) => Self::add_ns(st, p),
            Request::NvmfSubsystemRemoveNs(p) => Self::remove_ns(st, p),
            Request::NvmfSubsystemAddListener(p) => Self::add_listener(st, p),
            Request::NvmfSubsystemRemoveListener(p) => Self::remove_listener(st, p),
            Request::NvmfGetStats(_) => Self::to_value(NvmfStats {
                tick_rate: 1_000_000_000,
                poll_groups: vec![],
            }),
            // The fake models only the set-up script's methods and their queries.
            other => Err(RpcError::method_not_found(other.method())),
        }
    }
}
