// SPDX-License-Identifier: Apache-2.0
//! `nvmemu serve`: run the target and its JSON-RPC control plane until SIGINT, SIGTERM or
//! `spdk_kill_instance`.
//!
//! Controllers come from the command line (`--socket-dir` with `--ns`), from a `save_config`
//! file (`--json`) and from RPCs on the `-r` socket; all three go through the same
//! [`NvmemuHandler`], so `save_config` and `nvmf_get_subsystems` see everything.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use nvmemu_bdev::MallocBacking;
use nvmemu_bdev::model::ModelConfig;
use nvmemu_device::numa::cpu_ranges;
use nvmemu_device::{Backoff, ClientBudget, NumaTopology, Target, TargetConfig};
use nvmemu_mem::ByteSize;
use nvmemu_rpc::methods::bdev::{
    BdevGetBdevsParams, BdevInfo, BdevMallocCreateParams, BdevNullCreateParams,
};
use nvmemu_rpc::methods::delay::NvmemuBdevSetModelParams;
use nvmemu_rpc::methods::fault::NvmemuBdevInjectFaultParams;
use nvmemu_rpc::methods::file_bdev::BdevAioCreateParams;
use nvmemu_rpc::methods::nvmf::{
    ListenAddress, NamespaceParams, NvmfCreateSubsystemParams, NvmfCreateTransportParams,
    NvmfSubsystemAddListenerParams, NvmfSubsystemAddNsParams,
};
use nvmemu_rpc::{Access, DEFAULT_SOCKET, Handler, Limits, Request, RpcSocket, StopHandle};

use crate::fault_spec::FaultSpec;
use crate::ns_spec::{NsKind, NsSpec};
use crate::rpc_handler::{HandlerOptions, LogControl, NvmemuHandler};

/// NQN prefix of the subsystems made from `--socket-dir`.
pub const CLI_NQN_PREFIX: &str = "nqn.2019-07.io.nvmemu:cnode";

/// Options of `nvmemu serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Directory for a controller's vfio-user socket (`DIR/cntrl`); repeat for several
    /// controllers, each with its own copy of the namespaces. Optional: controllers can also
    /// be created by RPC (`nvmf_subsystem_add_listener`) or by `--json`.
    #[arg(long = "socket-dir", value_name = "DIR")]
    pub socket_dirs: Vec<PathBuf>,
    /// A namespace: `malloc:size=4G,lba=512[,lazy=on|hugepages=on]` or
    /// `null:size=1T,lba=4096`; repeat for more.
    ///
    /// A malloc namespace is backed by memory when created: every page is faulted in (by
    /// several threads, with progress on stderr for long ones; transparent huge pages where
    /// the kernel gives them), so reads cost the same whether or not the blocks were ever
    /// written, and a namespace larger than MemAvailable is refused at once. Options:
    /// `hugepages=on` takes the pages from the hugetlbfs pool (vm.nr_hugepages; refused
    /// when too few are free). `lazy=on` keeps the memory sparse instead: pages are
    /// committed when first written and reads of unwritten blocks come from the kernel's
    /// zero page (faster than real data, so read benchmarks overstate), Deallocate gives
    /// pages back, and nothing is reserved (the OOM killer may strike when it fills).
    #[arg(long = "ns", value_name = "SPEC")]
    pub namespaces: Vec<NsSpec>,
    /// A fault rule on namespace `ns` (default 1) of every subsystem made from `--ns`, in
    /// the names of `nvmemu_bdev_inject_fault`: `ns=1,io-type=read,sct=2,sc=0x81,count=0`
    /// (docs/device-models.md); repeat for more.
    #[arg(long = "fault", value_name = "SPEC")]
    pub faults: Vec<FaultSpec>,
    /// Also serve the subsystems over NVMe/TCP on this address (`127.0.0.1:4420`; a port
    /// alone listens on 127.0.0.1). There is no in-band authentication: an address other
    /// than loopback lets every host that reaches it connect, limited only by each
    /// subsystem's host NQN allow list (see README, "NVMe over TCP"). One NVMe/TCP poll group
    /// runs on each core of `-m`.
    #[arg(long = "tcp", value_name = "ADDR", value_parser = parse_tcp_addr)]
    pub tcp: Option<std::net::SocketAddr>,
    /// Core mask for pollers, SPDK style: `0x2` or `[0,2-3]`; one poller per core, and
    /// with NVMe/TCP one TCP poll group per core (as `nvmf_tgt -m`).
    /// Default: `0x1`, or with `--numa-node` the node's first CPU.
    #[arg(short = 'm', long = "cpumask")]
    pub cpumask: Option<String>,
    /// Keep the pollers and the namespaces' memory on this NUMA node: the cores of `-m`
    /// must be on it, and every malloc namespace's memory is bound to it (an `--ns` with
    /// `numa=N`, or an RPC's `numa_id`, picks another). Without it, on a machine with more
    /// than one node, namespaces follow the pollers when they all sit on one node.
    #[arg(long = "numa-node", value_name = "N")]
    pub numa_node: Option<u32>,
    /// Busy-poll even when idle (lowest latency; burns each core of the mask whose poller
    /// serves a controller).
    #[arg(long)]
    pub busy_poll: bool,
    /// Serial number reported by Identify (controllers from `--socket-dir`).
    #[arg(long, default_value = "NVMEMU0001")]
    pub serial: String,
    /// Model number reported by Identify (controllers from `--socket-dir`).
    #[arg(long, default_value = "nvmemu Virtual NVMe")]
    pub model: String,
    /// Socket file mode (octal).
    #[arg(long, default_value = "600", value_parser = parse_mode)]
    pub socket_mode: u32,
    /// JSON-RPC socket (SPDK's `-r`). Default: /var/tmp/nvmemu.sock. Whoever can connect
    /// to it controls the server (see README, "The JSON-RPC socket"); it is 0600 (owner
    /// only) whatever the umask. A path taken by a live server, another user's socket or
    /// any other file stops start-up.
    #[arg(short = 'r', long = "rpc-socket", value_name = "PATH")]
    pub rpc_socket: Option<PathBuf>,
    /// Also let this group (name or number) use the JSON-RPC socket: it becomes 0660 with
    /// that group.
    #[arg(long = "rpc-group", value_name = "GROUP")]
    pub rpc_group: Option<String>,
    /// Start from a configuration in SPDK's `save_config` format.
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Most DMA regions backed by an fd one client may have mapped at once; past it,
    /// DMA_MAP fails with ENOSPC. Each is a mapping in this process, and all controllers
    /// share `vm.max_map_count`.
    #[arg(long, value_name = "N", default_value_t = ClientBudget::default().max_maps)]
    pub max_client_maps: usize,
    /// Most bytes of such regions one client may have mapped at once (K, M, G, T
    /// suffixes); past it, DMA_MAP fails with ENOMEM. All controllers share the process's
    /// 128 TiB of address space.
    #[arg(long, value_name = "SIZE", default_value = "1T", value_parser = crate::size::parse_size)]
    pub max_client_map_bytes: u64,
}

fn parse_tcp_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse()
        .map_err(|_| format!("'{text}' is not ADDR:PORT (like 127.0.0.1:4420) or a port"))
}

fn parse_mode(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("'{text}' is not an octal file mode like 600"))
}

/// A running target with its RPC handler.
pub struct Served {
    /// The target (shared with the handler).
    pub target: Arc<Target>,
    /// The handler every configuration goes through.
    pub handler: Arc<NvmemuHandler>,
    /// Where the pollers and the namespaces' memory went, for the start-up log.
    pub placement: String,
}

/// Start a target, apply the command line's controllers and the `--json` file; `stop` is
/// what `spdk_kill_instance` fires.
pub fn start(args: &ServeArgs, stop: StopHandle, log: Option<LogControl>) -> Result<Served> {
    // The TCP transport may come later, by RPC; the limit is raised for it now.
    crate::fd_limit::raise_for(nvmemu_tcp::TcpOptions::default().max_connections);
    let topology = NumaTopology::read();
    let cores = topology.poller_cores(args.cpumask.as_deref(), args.numa_node)?;
    let numa_node = topology.namespace_node(args.numa_node, &cores);
    let placement = placement_line(&topology, &cores, numa_node);
    let backoff = if args.busy_poll {
        Backoff::NONE
    } else {
        Backoff::default()
    };
    let target = Arc::new(Target::start(TargetConfig {
        poller_timeout: nvmemu_device::CALL_TIMEOUT,
        client_budget: ClientBudget {
            max_maps: args.max_client_maps,
            max_map_bytes: args.max_client_map_bytes,
        },
        deadlines: nvmemu_device::Deadlines::default(),
        cores: cores.clone(),
        pin: true,
        backoff,
    })?);
    let handler = Arc::new(NvmemuHandler::new(
        Arc::clone(&target),
        stop,
        HandlerOptions {
            socket_mode: args.socket_mode,
            cores,
            log,
            numa_node,
        },
    ));
    apply_command_line(args, handler.as_ref())?;
    if let Some(path) = &args.json {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let doc: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        let report = nvmemu_rpc::load_config(handler.as_ref(), &doc)
            .with_context(|| format!("cannot apply {}", path.display()))?;
        // One line per call left out, at the default log level: an SPDK file's QoS limits or
        // options silently dropped would look applied.
        for method in &report.skipped {
            tracing::warn!(
                "{}: skipped {method}: nvmemu does not implement it",
                path.display()
            );
        }
    }
    Ok(Served {
        target,
        handler,
        placement,
    })
}

/// `pollers on CPU 2-3 (NUMA node 1); namespace memory bound to node 1; machine: node 0
/// (CPUs 0-1), node 1 (CPUs 2-3)`.
fn placement_line(topology: &NumaTopology, cores: &[usize], numa_node: Option<u32>) -> String {
    let memory = match numa_node {
        Some(n) => format!("namespace memory bound to node {n}"),
        None => "namespace memory: the kernel's default policy".into(),
    };
    format!(
        "pollers on CPU {} (NUMA node {}); {memory}; machine: {}",
        cpu_ranges(cores),
        topology.nodes_of(cores),
        topology.describe()
    )
}

/// `--socket-dir`/`--ns`: per directory, bdevs `ns{c}n{nsid}`, a subsystem
/// `nqn.2019-07.io.nvmemu:cnode{c+1}` with them, and a VFIOUSER listener on the directory.
fn apply_command_line(args: &ServeArgs, h: &dyn Handler) -> Result<()> {
    if args.socket_dirs.is_empty() && args.tcp.is_none() {
        if !args.namespaces.is_empty() {
            bail!("--ns needs --socket-dir or --tcp (or configure namespaces by RPC)");
        }
        return Ok(());
    }
    if let Some(f) = args
        .faults
        .iter()
        .find(|f| f.ns as usize > args.namespaces.len())
    {
        bail!(
            "--fault ns={}: no such --ns namespace (there are {})",
            f.ns,
            args.namespaces.len()
        );
    }
    let call = |req: Request| {
        let method = req.method();
        h.handle(req)
            .map_err(|e| anyhow::anyhow!("{method}: {}", e.message))
    };
    let mut transports = Vec::new();
    if !args.socket_dirs.is_empty() {
        transports.push("VFIOUSER");
    }
    if args.tcp.is_some() {
        transports.push("TCP");
    }
    for trtype in transports {
        call(Request::NvmfCreateTransport(NvmfCreateTransportParams {
            trtype: trtype.into(),
            ..NvmfCreateTransportParams::default()
        }))?;
    }
    for dir in &args.socket_dirs {
        if !dir.is_dir() {
            bail!(
                "socket directory {} does not exist: create it first",
                dir.display()
            );
        }
    }
    // Without --socket-dir, --tcp serves one subsystem.
    let count = args.socket_dirs.len().max(1);
    for c in 0..count {
        let nqn = format!("{CLI_NQN_PREFIX}{}", c + 1);
        let serial = if count > 1 {
            format!("{}{c}", args.serial)
        } else {
            args.serial.clone()
        };
        call(Request::NvmfCreateSubsystem(NvmfCreateSubsystemParams {
            nqn: nqn.clone(),
            serial_number: Some(serial),
            model_number: Some(args.model.clone()),
            allow_any_host: true,
            min_cntlid: u16::try_from(c + 1).unwrap_or(u16::MAX),
            max_cntlid: nvmemu_rpc::methods::nvmf::DEFAULT_MAX_CNTLID,
            ..NvmfCreateSubsystemParams::default()
        }))
        .with_context(|| format!("cannot create subsystem {nqn}"))?;
        for (i, spec) in args.namespaces.iter().enumerate() {
            let nsid = u32::try_from(i + 1).context("too many namespaces")?;
            let name = format!("ns{c}n{nsid}");
            call(match spec.kind {
                NsKind::Malloc => Request::BdevMallocCreate(malloc_params(&name, spec)?),
                NsKind::Null => Request::BdevNullCreate(null_params(&name, spec)?),
                NsKind::File => Request::BdevAioCreate(file_params(&name, spec)),
            })
            .with_context(|| format!("cannot create namespace {name}"))?;
            let faults = args.faults.iter().filter(|f| f.ns == nsid);
            shape_namespace(&call, &name, spec, faults)?;
            call(Request::NvmfSubsystemAddNs(NvmfSubsystemAddNsParams {
                nqn: nqn.clone(),
                namespace: namespace_params(&name, nsid)?,
                tgt_name: None,
            }))?;
        }
        if let Some(dir) = args.socket_dirs.get(c) {
            call(add_listener(
                &nqn,
                "VFIOUSER",
                dir.to_string_lossy().into_owned(),
                "0",
            ))
            .with_context(|| format!("cannot serve {}", dir.display()))?;
        }
        if let Some(addr) = args.tcp {
            let port = addr.port().to_string();
            call(add_listener(&nqn, "TCP", addr.ip().to_string(), &port))
                .with_context(|| format!("cannot serve {nqn} on {addr}"))?;
        }
    }
    Ok(())
}

/// Give the bdev `name` of namespace `spec` its model and its `--fault` rules.
fn shape_namespace<'a>(
    call: &dyn Fn(Request) -> Result<serde_json::Value>,
    name: &str,
    spec: &NsSpec,
    faults: impl Iterator<Item = &'a FaultSpec>,
) -> Result<()> {
    if let Some(m) = &spec.model {
        call(Request::NvmemuBdevSetModel(model_params(name, m)))
            .with_context(|| format!("cannot set the model of namespace {name}"))?;
    }
    for f in faults {
        let params = NvmemuBdevInjectFaultParams {
            name: name.to_owned(),
            ..f.params.clone()
        };
        call(Request::NvmemuBdevInjectFault(params))
            .with_context(|| format!("cannot add a fault rule to namespace {name}"))?;
    }
    Ok(())
}

fn add_listener(nqn: &str, trtype: &str, traddr: String, trsvcid: &str) -> Request {
    Request::NvmfSubsystemAddListener(NvmfSubsystemAddListenerParams {
        nqn: nqn.to_owned(),
        listen_address: ListenAddress {
            trtype: trtype.into(),
            adrfam: (trtype == "TCP").then(|| "IPv4".into()),
            traddr,
            trsvcid: Some(trsvcid.into()),
        },
        tgt_name: None,
        secure_channel: false,
        ana_state: None,
        sock_impl: None,
    })
}

// The parameter structs are built from JSON so that every other field takes its serde
// default, exactly as for a request.
fn malloc_params(name: &str, spec: &NsSpec) -> serde_json::Result<BdevMallocCreateParams> {
    serde_json::from_value(
        serde_json::json!({"name": name, "num_blocks": spec.num_blocks(),
        "block_size": spec.lba, "lazy": spec.backing == MallocBacking::Lazy,
        "hugepages": spec.backing == MallocBacking::HugePages,
        "numa_id": spec.numa_node.map_or(-1, i64::from)}),
    )
}

fn null_params(name: &str, spec: &NsSpec) -> serde_json::Result<BdevNullCreateParams> {
    serde_json::from_value(
        serde_json::json!({"name": name, "num_blocks": spec.num_blocks(),
                                              "block_size": spec.lba}),
    )
}

fn file_params(name: &str, spec: &NsSpec) -> BdevAioCreateParams {
    BdevAioCreateParams {
        filename: spec
            .path
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        name: name.to_owned(),
        block_size: Some(spec.lba),
        ..BdevAioCreateParams::default()
    }
}

/// `nvmemu_bdev_set_model` naming the preset and seed of `m` (from `--ns ...,model=`).
fn model_params(name: &str, m: &ModelConfig) -> NvmemuBdevSetModelParams {
    NvmemuBdevSetModelParams {
        name: name.to_owned(),
        preset: m.preset.map(str::to_owned),
        seed: Some(m.seed),
        ..NvmemuBdevSetModelParams::default()
    }
}

fn namespace_params(bdev: &str, nsid: u32) -> serde_json::Result<NamespaceParams> {
    serde_json::from_value(serde_json::json!({"bdev_name": bdev, "nsid": nsid}))
}

/// One line per bdev: its size and what backs it (`bdev_get_bdevs`' `driver_specific`).
fn backing_lines(h: &dyn Handler) -> Vec<String> {
    let infos = h
        .handle(Request::BdevGetBdevs(BdevGetBdevsParams::default()))
        .ok()
        .and_then(|v| serde_json::from_value::<Vec<BdevInfo>>(v).ok())
        .unwrap_or_default();
    infos.iter().map(backing_line).collect()
}

fn backing_line(b: &BdevInfo) -> String {
    let size = ByteSize(u64::from(b.block_size).saturating_mul(b.num_blocks));
    let Some(m) = b.driver_specific.get("malloc") else {
        return format!("bdev {}: {} {size}, no memory", b.name, b.product_name);
    };
    let num = |k: &str| m.get(k).and_then(serde_json::Value::as_u64);
    let flag = |k: &str| m.get(k).and_then(serde_json::Value::as_bool) == Some(true);
    let resident = num("resident_bytes").map_or("? B".into(), |r| ByteSize(r).to_string());
    let page = ByteSize(num("page_size").unwrap_or(0));
    let name = &b.name;
    let node = num("numa_node").map_or(String::new(), |n| format!(", bound to NUMA node {n}"));
    if flag("lazy") {
        return format!(
            "bdev {name}: malloc {size}, lazy=on, {resident} resident \
             (unwritten blocks read from the kernel's zero page){node}"
        );
    }
    let how = if flag("hugepages") {
        format!("in {page} hugetlbfs pages")
    } else {
        let thp = ByteSize(num("transparent_huge_bytes").unwrap_or(0));
        format!("in {page} pages ({thp} of it in transparent huge pages)")
    };
    format!("bdev {name}: malloc {size}, {resident} resident {how}{node}")
}

const RPC_SOCKET_ERROR: &str = "cannot serve JSON-RPC (-r picks another socket)";

/// Who may use the JSON-RPC socket: the owner, and `group` if given.
fn rpc_access(group: Option<&str>) -> Result<Access> {
    Ok(match group {
        None => Access::OWNER,
        Some(name) => Access {
            mode: 0o660,
            gid: Some(group_id(name)?),
        },
    })
}

/// A group's id: a number as is, a name from /etc/group.
fn group_id(name: &str) -> Result<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    let text = std::fs::read_to_string("/etc/group").context("cannot read /etc/group")?;
    text.lines()
        .find_map(|line| {
            let mut fields = line.split(':');
            (fields.next()? == name).then(|| fields.nth(1)?.parse().ok())?
        })
        .with_context(|| format!("--rpc-group: no group {name:?} in /etc/group"))
}

/// Run until SIGINT/SIGTERM or `spdk_kill_instance`, then shut down cleanly (RPC socket
/// and controller sockets removed, threads joined).
pub fn run(args: &ServeArgs, log: Option<LogControl>) -> Result<()> {
    // A taken RPC path stops start-up with one line, before any controller or namespace is
    // made; the socket itself appears once the target is ready (callers wait for it).
    let rpc_path = args
        .rpc_socket
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET));
    let rpc_access = rpc_access(args.rpc_group.as_deref())?;
    nvmemu_sockfile::check(&rpc_path).context(RPC_SOCKET_ERROR)?;
    let stop = StopHandle::new().context("cannot create the stop event")?;
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("cannot install signal handlers")?;
    let signal_handle = signals.handle();
    let signal_thread = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("nvmemu-signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    tracing::info!("signal {sig}: shutting down");
                }
                stop.stop();
            })
            .context("cannot start the signal thread")?
    };
    let result = start(args, stop.clone(), log).and_then(|served| {
        nvmemu::say!("nvmemu: {}", served.placement);
        for dir in &args.socket_dirs {
            nvmemu::say!("nvmemu: serving {}/cntrl", dir.display());
        }
        if let Some(addr) = args.tcp {
            nvmemu::say!("nvmemu: serving NVMe/TCP on {addr}");
        }
        for line in backing_lines(served.handler.as_ref()) {
            nvmemu::say!("nvmemu: {line}");
        }
        let rpc_socket = match RpcSocket::bind(&rpc_path, rpc_access) {
            Ok(socket) => socket,
            Err(e) => {
                drop(served.handler);
                shut_down(served.target);
                return Err(anyhow::Error::new(e).context(RPC_SOCKET_ERROR));
            }
        };
        nvmemu::say!("nvmemu: JSON-RPC on {}", rpc_path.display());
        let handler: Arc<dyn Handler + Send + Sync> = served.handler.clone();
        let rpc = nvmemu_rpc::serve_on(rpc_socket, handler, stop.clone(), &Limits::default());
        drop(served.handler);
        shut_down(served.target);
        rpc.with_context(|| format!("JSON-RPC server on {} failed", rpc_path.display()))
    });
    signal_handle.close();
    let _ = signal_thread.join();
    result
}

fn shut_down(target: Arc<Target>) {
    match Arc::try_unwrap(target) {
        Ok(t) => t.shutdown(),
        // Someone still holds it: its Drop stops everything when the last one goes.
        Err(shared) => drop(shared),
    }
}
