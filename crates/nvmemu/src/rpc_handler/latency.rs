// SPDX-License-Identifier: Apache-2.0
//! `bdev_enable_histogram`, `bdev_get_histogram` and `nvmemu_get_latency_breakdown`: the
//! target-side timing of `nvmemu_ctrl::timing`, switched per bdev on every controller that
//! serves it, over vfio-user (through each controller's poller mailbox) and NVMe/TCP
//! (through the TCP target's poll groups' control channels), and read back as copies taken
//! on each controller's own thread. The same switch times the bdev's operations
//! (`Bdev::set_timed`, `bdev_get_iostat`'s latency ticks).

use std::collections::BTreeMap;
use std::sync::Arc;

use nvmemu_ctrl::ControllerStats;
use nvmemu_ctrl::timing::{Layer, LayerSet, TimingSnapshot};
use nvmemu_device::Target;
use nvmemu_mem::{TscClock, global_clock};
use nvmemu_rpc::methods::histogram::{
    BdevEnableHistogramParams, BdevHistogram, ControllerLatency, LatencyBreakdown, LayerStats,
    NsLatency, PollerLoad, QueueLatency,
};
use nvmemu_rpc::{Errno, RpcError};
use nvmemu_spec::Qid;
use nvmemu_tcp::TcpTarget;
use serde_json::Value;

use super::{State, nvmf, threads, to_value};

const DEFAULT_GRANULARITY: u32 = nvmemu_ctrl::timing::DEFAULT_GRANULARITY;

/// The TCP target, when the TCP transport exists.
fn tcp(st: &State) -> Option<&TcpTarget> {
    st.tcp.as_ref().map(nvmf::tcp_target)
}

/// Apply every enabled histogram to every controller (after a listener, a namespace or the
/// TCP transport was added; enabling an enabled bdev keeps its counts).
pub(crate) fn reapply(st: &State, target: &Target) {
    for (bdev, &g) in &st.histograms {
        if let Some((_, e)) = st.bdevs.get(bdev) {
            e.bdev.set_timed(true);
        }
        set_on_all(target, tcp(st), bdev, true, g);
    }
}

fn no_bdev(name: &str) -> RpcError {
    RpcError::errno_msg(Errno::ENODEV, format!("No such device: bdev {name}"))
}

fn set_on_all(target: &Target, tcp: Option<&TcpTarget>, bdev: &str, enable: bool, g: u32) {
    for (id, _) in target.controllers() {
        let name = bdev.to_owned();
        // A controller that went away meanwhile has nothing to switch.
        let _ = target.on_controller(id, move |c| c.ctrl.set_timing(&name, enable, g));
    }
    // The TCP poll groups also switch the controllers later Connects make.
    if let Some(t) = tcp {
        t.set_timing(bdev, enable, g);
    }
}

pub(crate) fn enable(
    st: &mut State,
    target: &Target,
    p: BdevEnableHistogramParams,
) -> Result<Value, RpcError> {
    let (name, bdev) = st
        .bdevs
        .get(&p.name)
        .map(|(n, e)| (n.to_owned(), Arc::clone(&e.bdev)))
        .ok_or_else(|| no_bdev(&p.name))?;
    let asked = p.granularity.unwrap_or(DEFAULT_GRANULARITY);
    // Re-enabling keeps the granularity the histograms already have, on every controller
    // (one that starts timing later must not bucket differently from the others).
    let g = if p.enable {
        *st.histograms.entry(name.clone()).or_insert(asked)
    } else {
        st.histograms.remove(&name);
        asked
    };
    // The bdev's own operation latencies (bdev_get_iostat's `*_latency_ticks`) follow the
    // same switch: off, no I/O reads the clock.
    bdev.set_timed(p.enable);
    set_on_all(target, tcp(st), &name, p.enable, g);
    Ok(Value::Bool(true))
}

/// Which controller a copy is of.
enum Origin {
    /// A vfio-user controller: its socket directory.
    VfioUser(String),
    /// A TCP controller: its ID, subsystem, host NQN and the host's admin connection.
    Tcp {
        cntlid: u16,
        subnqn: String,
        hostnqn: String,
        peer: String,
    },
}

/// One controller's counters and timing, copied on the thread that owns it.
struct CtrlCopy {
    origin: Origin,
    stats: ControllerStats,
    timing: Option<TimingSnapshot>,
}

/// Every controller's copy: vfio-user's (one mailbox call each), then TCP's (one control
/// message per poll group).
fn snapshots(target: &Target, tcp: Option<&TcpTarget>) -> Vec<CtrlCopy> {
    let vfio_user = target.controllers().into_iter().filter_map(|(id, dir)| {
        let (stats, timing) = target
            .on_controller(id, |c| (c.ctrl.stats(), c.ctrl.timing()))
            .ok()?;
        Some(CtrlCopy {
            origin: Origin::VfioUser(dir.display().to_string()),
            stats,
            timing,
        })
    });
    let mut tcp_ctrls = tcp.map(TcpTarget::controllers).unwrap_or_default();
    tcp_ctrls.sort_by_key(|r| r.cntlid);
    let tcp = tcp_ctrls.into_iter().map(|r| CtrlCopy {
        origin: Origin::Tcp {
            cntlid: r.cntlid,
            subnqn: r.subnqn,
            hostnqn: r.hostnqn,
            peer: r.peer.map(|p| p.to_string()).unwrap_or_default(),
        },
        stats: r.stats,
        timing: r.timing,
    });
    vfio_user.chain(tcp).collect()
}

fn tsc_rate() -> u64 {
    let hz = TscClock::ticks_per_us() * 1e6;
    if hz.is_finite() && hz > 0.0 {
        // Rounded: a rate, not a count.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        return hz.round() as u64;
    }
    1_000_000_000
}

pub(crate) fn get_histogram(st: &State, target: &Target, name: &str) -> Result<Value, RpcError> {
    let (bdev, _) = st.bdevs.get(name).ok_or_else(|| no_bdev(name))?;
    // Not enabled: empty buckets of the default granularity, as SPDK v25.05 answers.
    let g = st
        .histograms
        .get(bdev)
        .copied()
        .unwrap_or(DEFAULT_GRANULARITY);
    let mut total = LayerSet::new(g);
    for copy in snapshots(target, tcp(st)) {
        for (_, q, names) in copy.timing.iter().flat_map(|t| &t.queues) {
            for (ns, n) in q.namespaces.iter().zip(names) {
                if n == bdev {
                    total.merge(&ns.layers);
                }
            }
        }
    }
    let h = total.get(Layer::Total);
    let g = h.granularity();
    let encoded = base64_encode(&h.to_le_bytes());
    to_value(BdevHistogram {
        histogram: encoded,
        granularity: g,
        min_range: 0,
        max_range: 64 - g,
        bucket_shift: g,
        tsc_rate: tsc_rate(),
    })
}

/// Standard base64 with padding (RFC 4648 section 4), as SPDK's `spdk_base64_encode`.
fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn ns_of(ticks: u64) -> u64 {
    global_clock().ticks_to_ns(ticks)
}

fn layer_stats(set: &LayerSet) -> Vec<LayerStats> {
    Layer::ALL
        .iter()
        .map(|&l| {
            let h = set.get(l);
            let sum_ticks = u64::try_from(h.sum()).unwrap_or(u64::MAX);
            let sum_ns = ns_of(sum_ticks);
            LayerStats {
                layer: l.name().to_owned(),
                count: h.count(),
                sum_ns,
                mean_ns: if h.count() == 0 {
                    0.0
                } else {
                    sum_ns as f64 / h.count() as f64
                },
                p50_ns: ns_of(h.quantile(0.5)),
                p99_ns: ns_of(h.quantile(0.99)),
                p999_ns: ns_of(h.quantile(0.999)),
                max_ns: ns_of(h.max()),
            }
        })
        .collect()
}

fn controller_view(copy: CtrlCopy) -> ControllerLatency {
    let (stats, timing) = (&copy.stats, copy.timing.as_ref());
    let g = timing.map_or(DEFAULT_GRANULARITY, |t| t.granularity);
    let mut all = LayerSet::new(g);
    let mut per_ns: BTreeMap<u32, (String, LayerSet)> = BTreeMap::new();
    let mut queues = Vec::new();
    // Queues that exist now, and queues deleted since they were timed (a client that left).
    let mut qids: Vec<Qid> = stats.queues.iter().map(|(q, _)| *q).collect();
    qids.extend(
        timing
            .iter()
            .flat_map(|t| t.queues.iter().map(|(q, ..)| *q)),
    );
    qids.retain(|q| q.0 != 0);
    qids.sort_unstable_by_key(|q| q.0);
    qids.dedup();
    for qid in &qids {
        let commands = stats
            .queues
            .iter()
            .find(|(q, _)| q == qid)
            .map_or(0, |(_, c)| c.commands);
        let t = timing.and_then(|t| t.queues.iter().find(|(q, ..)| q == qid));
        let mut q_all = LayerSet::new(g);
        let mut namespaces = Vec::new();
        let (mut looks, mut depth) = (0, 0);
        if let Some((_, q, names)) = t {
            (looks, depth) = (q.looks, q.depth_sum);
            for (ns, name) in q.namespaces.iter().zip(names) {
                q_all.merge(&ns.layers);
                per_ns
                    .entry(ns.nsid)
                    .or_insert_with(|| (name.clone(), LayerSet::new(g)))
                    .1
                    .merge(&ns.layers);
                namespaces.push(NsLatency {
                    nsid: ns.nsid,
                    bdev: name.clone(),
                    layers: layer_stats(&ns.layers),
                });
            }
        }
        all.merge(&q_all);
        queues.push(QueueLatency {
            qid: qid.0,
            commands,
            depth_looks: looks,
            depth_sum: depth,
            depth_mean: if looks == 0 {
                0.0
            } else {
                depth as f64 / looks as f64
            },
            layers: layer_stats(&q_all),
            namespaces,
        });
    }
    let (trtype, traddr, cntlid, subnqn, hostnqn) = match copy.origin {
        Origin::VfioUser(dir) => ("VFIOUSER", dir, None, None, None),
        Origin::Tcp {
            cntlid,
            subnqn,
            hostnqn,
            peer,
        } => (nvmf::TCP, peer, Some(cntlid), Some(subnqn), Some(hostnqn)),
    };
    ControllerLatency {
        trtype: trtype.to_owned(),
        traddr,
        cntlid,
        subnqn,
        hostnqn,
        timing: timing.is_some(),
        io_commands: stats.io_commands,
        bytes_read: stats.bytes_read,
        bytes_written: stats.bytes_written,
        untimed: timing.map_or(0, |t| t.dropped),
        layers: layer_stats(&all),
        queues,
        namespaces: per_ns
            .into_iter()
            .map(|(nsid, (bdev, set))| NsLatency {
                nsid,
                bdev,
                layers: layer_stats(&set),
            })
            .collect(),
    }
}

pub(crate) fn breakdown(st: &State, target: &Target, cores: &[usize]) -> Result<Value, RpcError> {
    let controllers = snapshots(target, tcp(st))
        .into_iter()
        .map(controller_view)
        .collect();
    let mut pollers: Vec<PollerLoad> = target
        .poller_stats()
        .into_iter()
        .enumerate()
        .map(|(i, (cpu, s))| PollerLoad {
            name: threads::poll_group_name(i),
            trtype: nvmf::VFIOUSER.into(),
            cpu,
            commands: s.commands,
            busy_ns: s.busy_ns(),
            elapsed_ns: s.elapsed_ns,
        })
        .collect();
    // The TCP poll groups, on the cores `thread_get_stats` gives them: over NVMe/TCP they
    // do the work the vfio-user pollers do.
    if let Some(t) = &st.tcp {
        pollers.extend(
            nvmf::tcp_stats(t)
                .into_iter()
                .enumerate()
                .map(|(i, g)| PollerLoad {
                    name: threads::tcp_group_name(i),
                    trtype: nvmf::TCP.into(),
                    cpu: Some(threads::core_of(cores, i)),
                    commands: g.commands,
                    busy_ns: g.busy_ns,
                    elapsed_ns: g.busy_ns.saturating_add(g.idle_ns),
                }),
        );
    }
    to_value(LatencyBreakdown {
        tsc_rate: tsc_rate(),
        pollers,
        controllers,
    })
}
