// SPDX-License-Identifier: Apache-2.0
//! Framework methods (SPDK `lib/event/app_rpc.c`, `lib/init/subsystem_rpc.c`):
//! `spdk_get_version`, `framework_get_reactors`, `nvmf_get_stats` (both from the pollers'
//! counters) and `save_config`.

use nvmemu_ctrl::ControllerStats;
use nvmemu_device::Target;
use nvmemu_rpc::RpcError;
use nvmemu_rpc::methods::framework::{
    LwThreadInfo, ReactorInfo, ReactorsInfo, VersionFields, VersionInfo,
};
use nvmemu_rpc::methods::nvmf::{
    NvmfStats, PollGroupStats, PollGroupTransportStats, TransportPollGroupStats,
};
use nvmemu_tcp::TcpStats;
use serde_json::{Value, json};

use super::bdev::TICK_RATE;
use super::{State, cpu_time, nvmf, to_value};

pub(crate) fn version() -> Result<Value, RpcError> {
    let v = env!("CARGO_PKG_VERSION");
    let mut parts = v.split(['.', '-']);
    let mut next = || parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let (major, minor, patch) = (next(), next(), next());
    let suffix = v.find('-').map(|i| v[i..].to_owned()).unwrap_or_default();
    to_value(VersionInfo {
        version: format!("nvmemu v{v}"),
        fields: VersionFields {
            major,
            minor,
            patch,
            suffix,
        },
    })
}

/// One reactor per poller: `lcore` from the core mask, `busy`/`idle` in nanoseconds, the
/// poller thread's id and CPU time (see [`cpu_time`]).
pub(crate) fn reactors(target: &Target, cores: &[usize]) -> Result<Value, RpcError> {
    let tids = target.poller_tids();
    let reactors = target
        .poller_stats()
        .into_iter()
        .enumerate()
        .map(|(i, (cpu, s))| {
            let lcore = cores.get(i).copied().or(cpu).unwrap_or(i);
            let tid = tids.get(i).copied().flatten();
            let time = cpu_time::of_thread(tid, lcore);
            let mut lw_threads = Vec::new();
            if i == 0 {
                lw_threads.push(LwThreadInfo {
                    name: "app_thread".into(),
                    id: 1,
                    cpumask: cpumask(lcore),
                    elapsed: s.elapsed_ns,
                });
            }
            lw_threads.push(LwThreadInfo {
                name: format!("nvmf_tgt_poll_group_{i:03}"),
                id: u64::try_from(i).unwrap_or(0).saturating_add(2),
                cpumask: cpumask(lcore),
                elapsed: s.elapsed_ns,
            });
            ReactorInfo {
                lcore: u32::try_from(lcore).unwrap_or(u32::MAX),
                tid: tid.unwrap_or(0),
                busy: s.busy_ns(),
                idle: s.idle_ns,
                in_interrupt: false,
                irq: time.irq,
                sys: time.sys,
                usr: time.usr,
                lw_threads,
            }
        })
        .collect();
    to_value(ReactorsInfo {
        tick_rate: TICK_RATE,
        pid: std::process::id(),
        reactors,
    })
}

pub(super) fn cpumask(core: usize) -> String {
    match u32::try_from(core).ok().and_then(|c| 1u128.checked_shl(c)) {
        Some(m) => format!("{m:x}"),
        None => "0".into(),
    }
}

/// One poll group per poller; `completed_nvme_io` counts the commands it completed, the
/// qpair counts add up its controllers' queues (created so far, and live now) as SPDK counts
/// the qpairs of a poll group. Controllers removed since are no longer counted.
/// With the TCP transport, every poll group lists it (as SPDK's do), and the TCP poll
/// group's qpairs and commands count in the first, whose core its thread shares.
pub(crate) fn nvmf_stats(target: &Target, tcp: Option<TcpStats>) -> Result<Value, RpcError> {
    let controllers = target.controller_stats();
    let mut poll_groups: Vec<PollGroupStats> = target
        .poller_stats()
        .into_iter()
        .enumerate()
        .map(|(i, (_, s))| {
            let mine = || controllers.iter().filter(|(p, _)| *p == i).map(|(_, c)| c);
            PollGroupStats {
                name: format!("nvmf_tgt_poll_group_{i:03}"),
                admin_qpairs: mine().map(|c| c.admin_qpairs_created).sum(),
                io_qpairs: mine().map(|c| c.io_qpairs_created).sum(),
                current_admin_qpairs: mine().map(ControllerStats::current_admin_qpairs).sum(),
                current_io_qpairs: mine().map(ControllerStats::current_io_qpairs).sum(),
                pending_bdev_io: 0,
                completed_nvme_io: s.commands,
                transports: vec![TransportPollGroupStats::VfioUser(PollGroupTransportStats {
                    trtype: nvmf::VFIOUSER.into(),
                    polls: s.passes,
                    poll_reqs: s.commands,
                    ..PollGroupTransportStats::default()
                })],
            }
        })
        .collect();
    if let Some(t) = tcp {
        add_tcp(&mut poll_groups, &t);
    }
    to_value(NvmfStats {
        tick_rate: TICK_RATE,
        poll_groups,
    })
}

/// The TCP transport in every poll group; its counters in the first.
fn add_tcp(poll_groups: &mut [PollGroupStats], t: &TcpStats) {
    for g in poll_groups.iter_mut() {
        g.transports.push(TransportPollGroupStats::Tcp {
            trtype: nvmf::TCP.into(),
        });
    }
    if let Some(g) = poll_groups.first_mut() {
        g.admin_qpairs += t.admin_qpairs;
        g.io_qpairs += t.io_qpairs;
        g.current_admin_qpairs += t.current_admin_qpairs;
        g.current_io_qpairs += t.current_io_qpairs;
        g.completed_nvme_io += t.commands;
    }
}

/// The bdevs' calls, then `bdev_wait_for_examine`, which SPDK's ends with so that a replay
/// waits for the bdevs before the nvmf subsystem uses them.
fn bdev_config(st: &State) -> Vec<Value> {
    let mut calls = st.bdevs.save_config();
    calls.push(json!({"method": "bdev_wait_for_examine"}));
    calls
}

/// The whole configuration in SPDK's `save_config` shape: `bdev` before `nvmf`.
pub(crate) fn save_config(st: &State) -> Value {
    json!({"subsystems": [
        {"subsystem": "bdev", "config": bdev_config(st)},
        {"subsystem": "nvmf", "config": nvmf::save_config(st)},
    ]})
}
