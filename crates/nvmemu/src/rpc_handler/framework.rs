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
    NvmfStats, PollGroupStats, PollGroupTransportStats, TcpPollGroupCounters,
    TransportPollGroupStats,
};
use nvmemu_tcp::TcpStats;
use serde_json::{Value, json};

use super::bdev::TICK_RATE;
use super::threads::poll_group_name;
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
/// With the TCP transport, every poll group lists it (as SPDK's do), and each TCP poll
/// group's qpairs and commands count in the poll group of the same index, whose core its
/// thread shares.
pub(crate) fn nvmf_stats(target: &Target, tcp: Option<Vec<TcpStats>>) -> Result<Value, RpcError> {
    let controllers = target.controller_stats();
    let mut poll_groups: Vec<PollGroupStats> = target
        .poller_stats()
        .into_iter()
        .enumerate()
        .map(|(i, (_, s))| {
            let mine = || controllers.iter().filter(|(p, _)| *p == i).map(|(_, c)| c);
            PollGroupStats {
                name: poll_group_name(i),
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

/// The TCP transport in every poll group; TCP poll group `i`'s counters in poll group `i`
/// (a TCP poll group past the pollers gets an entry of its own), its passes and socket
/// calls in that group's TCP entry.
fn add_tcp(poll_groups: &mut Vec<PollGroupStats>, tcp: &[TcpStats]) {
    while poll_groups.len() < tcp.len() {
        poll_groups.push(no_counts(poll_groups.len()));
    }
    for (i, g) in poll_groups.iter_mut().enumerate() {
        let t = tcp.get(i);
        g.transports.push(TransportPollGroupStats::Tcp {
            trtype: nvmf::TCP.into(),
            counters: TcpPollGroupCounters {
                polls: t.map(|t| t.polls),
                socket_reads: t.map(|t| t.socket_reads),
                socket_writes: t.map(|t| t.socket_writes),
            },
        });
        if let Some(t) = t {
            g.admin_qpairs += t.admin_qpairs;
            g.io_qpairs += t.io_qpairs;
            g.current_admin_qpairs += t.current_admin_qpairs;
            g.current_io_qpairs += t.current_io_qpairs;
            g.completed_nvme_io += t.commands;
        }
    }
}

/// Poll group `i`, nothing counted and no transport.
fn no_counts(i: usize) -> PollGroupStats {
    PollGroupStats {
        name: poll_group_name(i),
        admin_qpairs: 0,
        io_qpairs: 0,
        current_admin_qpairs: 0,
        current_io_qpairs: 0,
        pending_bdev_io: 0,
        completed_nvme_io: 0,
        transports: Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn poller_group(i: usize, commands: u64) -> PollGroupStats {
        PollGroupStats {
            completed_nvme_io: commands,
            ..no_counts(i)
        }
    }

    fn tcp(admin: u64, io: u64, commands: u64) -> TcpStats {
        TcpStats {
            admin_qpairs: admin,
            io_qpairs: io,
            current_admin_qpairs: admin,
            current_io_qpairs: io,
            commands,
            polls: 100 + commands,
            socket_reads: 10 + commands,
            socket_writes: 20 + commands,
            ..TcpStats::default()
        }
    }

    /// The TCP entry of poll group `g`.
    fn tcp_entry(g: &PollGroupStats) -> &TransportPollGroupStats {
        let tcp = g
            .transports
            .iter()
            .filter(|t| matches!(t, TransportPollGroupStats::Tcp { .. }));
        let entries: Vec<_> = tcp.collect();
        assert_eq!(entries.len(), 1, "{g:?}");
        entries[0]
    }

    fn counters(polls: u64, reads: u64, writes: u64) -> TransportPollGroupStats {
        TransportPollGroupStats::Tcp {
            trtype: "TCP".into(),
            counters: TcpPollGroupCounters {
                polls: Some(polls),
                socket_reads: Some(reads),
                socket_writes: Some(writes),
            },
        }
    }

    #[test]
    fn each_tcp_poll_group_counts_in_its_own_entry() {
        let mut groups = vec![poller_group(0, 5), poller_group(1, 0)];
        add_tcp(&mut groups, &[tcp(1, 2, 10), tcp(3, 4, 20)]);
        let counts: Vec<_> = groups
            .iter()
            .map(|g| (g.admin_qpairs, g.current_io_qpairs, g.completed_nvme_io))
            .collect();
        assert_eq!(counts, [(1, 2, 15), (3, 4, 20)]);
        assert_eq!(tcp_entry(&groups[0]), &counters(110, 20, 30));
        assert_eq!(tcp_entry(&groups[1]), &counters(120, 30, 40));
    }

    #[test]
    fn a_tcp_poll_group_past_the_pollers_gets_an_entry() {
        let mut groups = vec![poller_group(0, 0)];
        add_tcp(&mut groups, &[tcp(1, 0, 0), tcp(0, 1, 7)]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[1].name, "nvmf_tgt_poll_group_001");
        assert_eq!(
            (groups[1].current_io_qpairs, groups[1].completed_nvme_io),
            (1, 7)
        );
        assert_eq!(tcp_entry(&groups[1]), &counters(107, 17, 27));
    }

    #[test]
    fn a_poller_without_a_tcp_poll_group_lists_tcp_without_counters() {
        let mut groups = vec![poller_group(0, 0), poller_group(1, 3)];
        add_tcp(&mut groups, &[tcp(0, 0, 0)]);
        let bare = TransportPollGroupStats::Tcp {
            trtype: "TCP".into(),
            counters: TcpPollGroupCounters::default(),
        };
        assert_eq!(tcp_entry(&groups[1]), &bare);
        assert_eq!(
            serde_json::to_value(&groups[1].transports).unwrap(),
            json!([{"trtype": "TCP"}])
        );
    }

    #[test]
    fn tcp_entries_read_back_with_their_counters_or_without() {
        // As `nvmemu stat` reads them.
        let entries = json!([
            {"trtype": "TCP", "polls": 5, "socket_reads": 3, "socket_writes": 2},
            {"trtype": "TCP"},
        ]);
        let back: Vec<TransportPollGroupStats> = serde_json::from_value(entries).unwrap();
        let bare = TransportPollGroupStats::Tcp {
            trtype: "TCP".into(),
            counters: TcpPollGroupCounters::default(),
        };
        assert_eq!(back, [counters(5, 3, 2), bare]);
    }
}
