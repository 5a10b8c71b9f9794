// SPDX-License-Identifier: Apache-2.0
//! `thread_get_stats`, `thread_get_pollers`, `thread_get_io_channels` and
//! `framework_get_scheduler`, in SPDK's terms: the RPC side is SPDK's `app_thread`, each
//! poller is a poll group thread `nvmf_tgt_poll_group_NNN` (the names
//! `framework_get_reactors` uses) running one active poller, `nvmf_VFIOUSER`, that polls its
//! controllers. With the TCP transport, its poll group threads follow them, one per core of
//! the mask: `nvmf_tgt_poll_group_tcp` (the first), `nvmf_tgt_poll_group_tcp_001` and so
//! on, each running `nvmf_TCP`. Ticks are nanoseconds.
//!
//! Busy time: the TCP poll group charges each pass that did work to busy and each other
//! pass to idle, as SPDK charges a thread's iterations; a vfio-user poller counts its idle
//! stretches from the end of their first empty pass (`nvmemu_device`'s `IdleTimer`).
//!
//! Differences, by design: a poller counts passes and completed commands, not passes that
//! found work, so `busy_count` is the commands it completed (taken, for TCP); the app
//! thread's busy time is 0 (RPCs run on the server's threads, not timed); the scheduler is
//! always `static`.

use nvmemu_device::Target;
use nvmemu_rpc::RpcError;
use nvmemu_rpc::methods::threads::{
    IoChannelInfo, PollerInfo, SchedulerInfo, ThreadChannels, ThreadIoChannels, ThreadPollerList,
    ThreadPollers, ThreadStat, ThreadStats,
};
use nvmemu_tcp::TcpStats;
use serde_json::Value;

use super::bdev::TICK_RATE;
use super::framework::cpumask;
use super::{State, nvmf, to_value};

const APP_THREAD: &str = "app_thread";

/// TCP poll group `i`'s thread: the first keeps the name a lone group has.
pub(super) fn tcp_group_name(i: usize) -> String {
    match i {
        0 => "nvmf_tgt_poll_group_tcp".into(),
        _ => format!("nvmf_tgt_poll_group_tcp_{i:03}"),
    }
}

pub(super) fn poll_group_name(i: usize) -> String {
    format!("nvmf_tgt_poll_group_{i:03}")
}

fn poll_group_id(i: usize) -> u64 {
    u64::try_from(i).unwrap_or(0).saturating_add(2)
}

/// The core of poller `i` (the mask's order), for its `cpumask`.
pub(super) fn core_of(cores: &[usize], i: usize) -> usize {
    cores.get(i).copied().unwrap_or(i)
}

/// Each TCP poll group's counters (none without the transport).
fn tcp(st: &State) -> Vec<TcpStats> {
    st.tcp.as_ref().map(nvmf::tcp_stats).unwrap_or_default()
}

pub(crate) fn stats(
    st: &State,
    target: &Target,
    cores: &[usize],
    ticks: u64,
) -> Result<Value, RpcError> {
    let mut threads = vec![ThreadStat {
        name: APP_THREAD.into(),
        id: 1,
        cpumask: cpumask(core_of(cores, 0)),
        busy: 0,
        idle: ticks,
        active_pollers_count: 0,
        timed_pollers_count: 0,
        paused_pollers_count: 0,
    }];
    for (i, (_, s)) in target.poller_stats().into_iter().enumerate() {
        threads.push(ThreadStat {
            name: poll_group_name(i),
            id: poll_group_id(i),
            cpumask: cpumask(core_of(cores, i)),
            busy: s.busy_ns(),
            idle: s.idle_ns,
            active_pollers_count: 1,
            timed_pollers_count: 0,
            paused_pollers_count: 0,
        });
    }
    for (i, t) in tcp(st).into_iter().enumerate() {
        threads.push(ThreadStat {
            name: tcp_group_name(i),
            // The ids after the app thread's and the pollers'.
            id: poll_group_id(threads.len() - 1),
            cpumask: cpumask(core_of(cores, i)),
            busy: t.busy_ns,
            idle: t.idle_ns,
            active_pollers_count: 1,
            timed_pollers_count: 0,
            paused_pollers_count: 0,
        });
    }
    to_value(ThreadStats {
        tick_rate: TICK_RATE,
        threads,
    })
}

pub(crate) fn pollers(st: &State, target: &Target) -> Result<Value, RpcError> {
    let mut threads = vec![ThreadPollerList {
        name: APP_THREAD.into(),
        id: 1,
        active_pollers: vec![],
        timed_pollers: vec![],
        paused_pollers: vec![],
    }];
    for (i, (_, s)) in target.poller_stats().into_iter().enumerate() {
        threads.push(ThreadPollerList {
            name: poll_group_name(i),
            id: poll_group_id(i),
            active_pollers: vec![PollerInfo {
                name: "nvmf_VFIOUSER".into(),
                id: 1,
                state: "waiting".into(),
                run_count: s.passes,
                busy_count: s.commands,
                period_ticks: None,
            }],
            timed_pollers: vec![],
            paused_pollers: vec![],
        });
    }
    for (i, t) in tcp(st).into_iter().enumerate() {
        threads.push(ThreadPollerList {
            name: tcp_group_name(i),
            // The ids after the app thread's and the pollers'.
            id: poll_group_id(threads.len() - 1),
            active_pollers: vec![PollerInfo {
                name: "nvmf_TCP".into(),
                id: 1,
                state: "waiting".into(),
                run_count: t.polls,
                busy_count: t.commands,
                period_ticks: None,
            }],
            timed_pollers: vec![],
            paused_pollers: vec![],
        });
    }
    to_value(ThreadPollers {
        tick_rate: TICK_RATE,
        threads,
    })
}

/// Per poll group: `nvmf_tgt` held once per controller on it, and `bdev_NAME` once per
/// controller on it whose subsystem has a namespace on that bdev.
pub(crate) fn io_channels(st: &State, target: &Target) -> Result<Value, RpcError> {
    let pollers = target.controller_pollers();
    let mut threads = vec![ThreadChannels {
        name: APP_THREAD.into(),
        io_channels: vec![],
    }];
    for i in 0..target.poller_stats().len() {
        let mine: Vec<_> = pollers
            .iter()
            .filter(|(_, p)| *p == i)
            .map(|(id, _)| *id)
            .collect();
        let mut io_channels = Vec::new();
        if !mine.is_empty() {
            io_channels.push(IoChannelInfo {
                name: "nvmf_tgt".into(),
                refs: mine.len() as u64,
            });
        }
        for (bdev, refs) in nvmf::bdev_users(st, &mine) {
            io_channels.push(IoChannelInfo {
                name: format!("bdev_{bdev}"),
                refs,
            });
        }
        threads.push(ThreadChannels {
            name: poll_group_name(i),
            io_channels,
        });
    }
    to_value(ThreadIoChannels {
        tick_rate: TICK_RATE,
        threads,
    })
}

pub(crate) fn scheduler(cores: &[usize]) -> Result<Value, RpcError> {
    to_value(SchedulerInfo {
        scheduler_name: "static".into(),
        scheduler_period: 0,
        isolated_core_mask: "0".into(),
        scheduling_core: core_of(cores, 0) as u64,
    })
}
