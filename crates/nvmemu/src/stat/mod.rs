// SPDX-License-Identifier: Apache-2.0
//! `nvmemu stat`: live figures of a running `nvmemu serve`, refreshed every `-i` seconds like
//! `iostat -x 1`: per controller IOPS, bandwidth, the queue depth its doorbell looks saw and
//! the target's per-layer mean times; per namespace (bdev) reads and writes; per poller the
//! (vfio-user poller and NVMe/TCP poll group) the busy share; per poll group (`nvmf_get_stats`: the pollers' and the NVMe/TCP poll groups')
//! the commands completed and the queue pairs connected; the injections (`faults.rs`): fault
//! rules, controller fatal statuses and namespaces not ready, with their counters. Each
//! report covers the interval since the previous sample (the first one the first interval).
//! Layer times need `bdev_enable_histogram` on the bdev; without it they read `-`, and the
//! text report says how to turn timing on.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use nvmemu_rpc::Client;
use nvmemu_rpc::methods::bdev::BdevIostat;
use nvmemu_rpc::methods::histogram::{LatencyBreakdown, LayerStats};
use nvmemu_rpc::methods::nvmf::{
    NvmfStats, PollGroupStats, TcpPollGroupCounters, TransportPollGroupStats,
};
use serde::Serialize;
use serde_json::json;

mod faults;

use faults::{FatalRow, FaultRow, FaultSample, NotReadyRow};

/// The layers `stat` shows, in order.
const LAYERS: [&str; 5] = ["total", "queued", "backend", "complete", "interrupt"];

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Tables for a terminal.
    Text,
    /// One JSON object per report and line.
    Json,
}

/// `nvmemu stat` arguments.
#[derive(Debug, Args)]
pub struct StatArgs {
    /// RPC socket of `nvmemu serve`.
    #[arg(short = 's', long = "server", default_value = nvmemu_rpc::DEFAULT_SOCKET)]
    server: PathBuf,
    /// Seconds between reports.
    #[arg(short = 'i', long = "interval", default_value_t = 1.0)]
    interval: f64,
    /// Stop after this many reports (default: until interrupted).
    #[arg(short = 'c', long = "count")]
    count: Option<u64>,
    /// Output format.
    #[arg(long = "output-format", value_enum, default_value_t = Format::Text)]
    output_format: Format,
}

/// One sample: the RPC answers and when they were taken.
struct Sample {
    at: Instant,
    breakdown: LatencyBreakdown,
    iostat: BdevIostat,
    faults: FaultSample,
    nvmf: NvmfStats,
}

fn sample(client: &mut Client) -> anyhow::Result<Sample> {
    let b = client
        .call("nvmemu_get_latency_breakdown", json!({}))
        .context("nvmemu_get_latency_breakdown")?;
    let i = client
        .call("bdev_get_iostat", json!({}))
        .context("bdev_get_iostat")?;
    let faults = faults::sample(client)?;
    let n = client
        .call("nvmf_get_stats", json!({}))
        .context("nvmf_get_stats")?;
    Ok(Sample {
        at: Instant::now(),
        breakdown: serde_json::from_value(b).context("nvmemu_get_latency_breakdown result")?,
        iostat: serde_json::from_value(i).context("bdev_get_iostat result")?,
        faults,
        nvmf: serde_json::from_value(n).context("nvmf_get_stats result")?,
    })
}

/// Mean time of one layer over an interval (None: nothing timed in it).
#[derive(Debug, Clone, Serialize)]
struct LayerMean {
    layer: &'static str,
    commands: u64,
    mean_ns: Option<f64>,
}

#[derive(Debug, Serialize)]
struct CtrlRow {
    traddr: String,
    iops: f64,
    read_mib_s: f64,
    write_mib_s: f64,
    queue_depth: Option<f64>,
    timing: bool,
    layers: Vec<LayerMean>,
    p99_total_ns: Option<u64>,
}

#[derive(Debug, Serialize)]
struct NsRow {
    bdev: String,
    read_iops: f64,
    write_iops: f64,
    read_mib_s: f64,
    write_mib_s: f64,
    layers: Vec<LayerMean>,
}

/// A poll group over the interval: its commands, its TCP poll group's `recv` and `send`
/// calls (none without one), and its queue pairs at the end.
#[derive(Debug, Serialize)]
struct GroupRow {
    name: String,
    transports: Vec<String>,
    iops: f64,
    socket_reads_per_s: Option<f64>,
    socket_writes_per_s: Option<f64>,
    admin_qpairs: u64,
    io_qpairs: u64,
}

#[derive(Debug, Serialize)]
struct PollerRow {
    name: String,
    trtype: String,
    cpu: Option<usize>,
    busy_pct: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    interval_s: f64,
    controllers: Vec<CtrlRow>,
    namespaces: Vec<NsRow>,
    pollers: Vec<PollerRow>,
    poll_groups: Vec<GroupRow>,
    faults: Vec<FaultRow>,
    controller_faults: Vec<FatalRow>,
    namespace_faults: Vec<NotReadyRow>,
}

fn per_s(delta: u64, secs: f64) -> f64 {
    if secs > 0.0 { delta as f64 / secs } else { 0.0 }
}

fn mib(delta: u64, secs: f64) -> f64 {
    per_s(delta, secs) / f64::from(1u32 << 20)
}

fn find<'a>(layers: &'a [LayerStats], name: &str) -> Option<&'a LayerStats> {
    layers.iter().find(|l| l.layer == name)
}

/// Interval means of `now` against `then` (missing in `then`: counted from zero).
fn layer_means(now: &[LayerStats], then: Option<&[LayerStats]>) -> Vec<LayerMean> {
    LAYERS
        .iter()
        .map(|&name| {
            let n = find(now, name);
            let t = then.and_then(|t| find(t, name));
            let count = n
                .map_or(0, |n| n.count)
                .saturating_sub(t.map_or(0, |t| t.count));
            let sum = n
                .map_or(0, |n| n.sum_ns)
                .saturating_sub(t.map_or(0, |t| t.sum_ns));
            LayerMean {
                layer: name,
                commands: count,
                mean_ns: (count > 0).then(|| sum as f64 / count as f64),
            }
        })
        .collect()
}

fn report(prev: &Sample, now: &Sample) -> Report {
    let secs = now.at.duration_since(prev.at).as_secs_f64();
    let (faults, controller_faults, namespace_faults) = faults::rows(&prev.faults, &now.faults);
    Report {
        interval_s: secs,
        controllers: controller_rows(prev, now, secs),
        namespaces: namespace_rows(prev, now, secs),
        pollers: poller_rows(prev, now),
        poll_groups: group_rows(prev, now, secs),
        faults,
        controller_faults,
        namespace_faults,
    }
}

/// One row per controller: rates over the interval, mean queue depth, layer means.
fn controller_rows(prev: &Sample, now: &Sample, secs: f64) -> Vec<CtrlRow> {
    now.breakdown
        .controllers
        .iter()
        .map(|c| {
            let p = prev
                .breakdown
                .controllers
                .iter()
                .find(|p| p.traddr == c.traddr);
            let d = |f: fn(&nvmemu_rpc::methods::histogram::ControllerLatency) -> u64| {
                f(c).saturating_sub(p.map_or(0, f))
            };
            let (looks, depth) = c.queues.iter().fold((0u64, 0u64), |(l, s), q| {
                let pq = p.and_then(|p| p.queues.iter().find(|x| x.qid == q.qid));
                (
                    l + q
                        .depth_looks
                        .saturating_sub(pq.map_or(0, |x| x.depth_looks)),
                    s + q.depth_sum.saturating_sub(pq.map_or(0, |x| x.depth_sum)),
                )
            });
            CtrlRow {
                traddr: c.traddr.clone(),
                iops: per_s(d(|c| c.io_commands), secs),
                read_mib_s: mib(d(|c| c.bytes_read), secs),
                write_mib_s: mib(d(|c| c.bytes_written), secs),
                queue_depth: (looks > 0).then(|| depth as f64 / looks as f64),
                timing: c.timing,
                layers: layer_means(&c.layers, p.map(|p| p.layers.as_slice())),
                p99_total_ns: find(&c.layers, "total")
                    .filter(|l| l.count > 0)
                    .map(|l| l.p99_ns),
            }
        })
        .collect()
}

/// One row per bdev: counters from bdev_get_iostat, layers from every controller.
fn namespace_rows(prev: &Sample, now: &Sample, secs: f64) -> Vec<NsRow> {
    let ns_layers = |b: &LatencyBreakdown| {
        let mut m: BTreeMap<String, Vec<LayerStats>> = BTreeMap::new();
        for ns in b.controllers.iter().flat_map(|c| &c.namespaces) {
            let e = m.entry(ns.bdev.clone()).or_default();
            for l in &ns.layers {
                match e.iter_mut().find(|x| x.layer == l.layer) {
                    Some(x) => {
                        x.count += l.count;
                        x.sum_ns += l.sum_ns;
                    }
                    None => e.push(l.clone()),
                }
            }
        }
        m
    };
    let (ln, lp) = (ns_layers(&now.breakdown), ns_layers(&prev.breakdown));
    now.iostat
        .bdevs
        .iter()
        .map(|b| {
            let p = prev.iostat.bdevs.iter().find(|p| p.name == b.name);
            let d = |f: fn(&nvmemu_rpc::methods::bdev::BdevIostatEntry) -> u64| {
                f(b).saturating_sub(p.map_or(0, f))
            };
            NsRow {
                bdev: b.name.clone(),
                read_iops: per_s(d(|b| b.num_read_ops), secs),
                write_iops: per_s(d(|b| b.num_write_ops), secs),
                read_mib_s: mib(d(|b| b.bytes_read), secs),
                write_mib_s: mib(d(|b| b.bytes_written), secs),
                layers: layer_means(
                    ln.get(&b.name).map_or(&[][..], |v| v.as_slice()),
                    lp.get(&b.name).map(|v| v.as_slice()),
                ),
            }
        })
        .collect()
}

/// Each poller's busy share of the interval.
fn poller_rows(prev: &Sample, now: &Sample) -> Vec<PollerRow> {
    now.breakdown
        .pollers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let q = prev.breakdown.pollers.get(i);
            let busy = p.busy_ns.saturating_sub(q.map_or(0, |q| q.busy_ns));
            let all = p.elapsed_ns.saturating_sub(q.map_or(0, |q| q.elapsed_ns));
            PollerRow {
                name: p.name.clone(),
                trtype: p.trtype.clone(),
                cpu: p.cpu,
                busy_pct: if all == 0 {
                    0.0
                } else {
                    100.0 * busy as f64 / all as f64
                },
            }
        })
        .collect()
}

/// One row per poll group of `nvmf_get_stats`.
fn group_rows(prev: &Sample, now: &Sample, secs: f64) -> Vec<GroupRow> {
    now.nvmf
        .poll_groups
        .iter()
        .map(|g| {
            let p = prev.nvmf.poll_groups.iter().find(|p| p.name == g.name);
            let done = g
                .completed_nvme_io
                .saturating_sub(p.map_or(0, |p| p.completed_nvme_io));
            let (tcp, tcp_before) = (tcp_counters(g), p.and_then(tcp_counters));
            let rate = |count: fn(&TcpPollGroupCounters) -> Option<u64>| {
                let now = tcp.and_then(count)?;
                let before = tcp_before.and_then(count).unwrap_or(0);
                Some(per_s(now.saturating_sub(before), secs))
            };
            GroupRow {
                name: g.name.clone(),
                transports: g
                    .transports
                    .iter()
                    .map(|t| match t {
                        TransportPollGroupStats::VfioUser(v) => v.trtype.clone(),
                        TransportPollGroupStats::Tcp { trtype, .. } => trtype.clone(),
                    })
                    .collect(),
                iops: per_s(done, secs),
                socket_reads_per_s: rate(|c| c.socket_reads),
                socket_writes_per_s: rate(|c| c.socket_writes),
                admin_qpairs: g.current_admin_qpairs,
                io_qpairs: g.current_io_qpairs,
            }
        })
        .collect()
}

/// The counters of a poll group's TCP entry, if it lists TCP.
fn tcp_counters(g: &PollGroupStats) -> Option<&TcpPollGroupCounters> {
    g.transports.iter().find_map(|t| match t {
        TransportPollGroupStats::Tcp { counters, .. } => Some(counters),
        TransportPollGroupStats::VfioUser(_) => None,
    })
}

/// A rate, or `-` where there is none.
fn rate_cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |r| format!("{r:.0}"))
}

fn print_groups(groups: &[GroupRow], out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<32} {:>10} {:>10} {:>10} {:>9} {:>9}  transports",
        "poll group", "IOPS", "recv/s", "send/s", "admin qp", "I/O qp"
    )?;
    for g in groups {
        writeln!(
            out,
            "{:<32} {:>10.0} {:>10} {:>10} {:>9} {:>9}  {}",
            g.name,
            g.iops,
            rate_cell(g.socket_reads_per_s),
            rate_cell(g.socket_writes_per_s),
            g.admin_qpairs,
            g.io_qpairs,
            g.transports.join(",")
        )?;
    }
    Ok(())
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |ns| format!("{:.2}", ns / 1000.0))
}

/// The layer columns of one row.
fn layer_cells(layers: &[LayerMean]) -> String {
    layers
        .iter()
        .map(|l| format!(" {:>10}", us(l.mean_ns)))
        .collect()
}

/// Printed under the tables while a controller's timing is off (its layer columns read `-`).
const TIMING_OFF_HINT: &str = "layer times read - while timing is off: turn it on per bdev with \
     `nvmemu rpc bdev_enable_histogram BDEV` (docs/latency.md)";

fn print_text(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let layer_head: String = LAYERS
        .iter()
        .map(|l| format!(" {:>10}", format!("{l}us")))
        .collect();
    writeln!(
        out,
        "{:<32} {:>10} {:>9} {:>9} {:>6}{layer_head} {:>9}",
        "controller", "IOPS", "rMiB/s", "wMiB/s", "qd", "p99us"
    )?;
    for c in &r.controllers {
        let layers = layer_cells(&c.layers);
        writeln!(
            out,
            "{:<32} {:>10.0} {:>9.2} {:>9.2} {:>6}{layers} {:>9}",
            c.traddr,
            c.iops,
            c.read_mib_s,
            c.write_mib_s,
            c.queue_depth
                .map_or_else(|| "-".into(), |q| format!("{q:.1}")),
            us(c.p99_total_ns.map(|v| v as f64)),
        )?;
    }
    writeln!(
        out,
        "{:<32} {:>10} {:>9} {:>9} {:>6}{layer_head}",
        "bdev", "r/s", "w/s", "rMiB/s", "wMiB/s"
    )?;
    for n in &r.namespaces {
        let layers = layer_cells(&n.layers);
        writeln!(
            out,
            "{:<32} {:>10.0} {:>9.0} {:>9.2} {:>6.1}{layers}",
            n.bdev, n.read_iops, n.write_iops, n.read_mib_s, n.write_mib_s
        )?;
    }
    print_groups(&r.poll_groups, out)?;
    if r.controllers.iter().any(|c| !c.timing) {
        writeln!(out, "{TIMING_OFF_HINT}")?;
    }
    faults::print_text(&r.faults, &r.controller_faults, &r.namespace_faults, out)?;
    let pollers: Vec<String> = r
        .pollers
        .iter()
        .map(|p| {
            // A TCP poll group says so; a vfio-user poller is named by its CPU alone.
            let what = if p.trtype == "TCP" { "tcp " } else { "" };
            match p.cpu {
                Some(c) => format!("{what}cpu{c} {:.1}%", p.busy_pct),
                None => format!("{what}unpinned {:.1}%", p.busy_pct),
            }
        })
        .collect();
    writeln!(out, "pollers busy: {}\n", pollers.join(", "))
}

/// Run `nvmemu stat`.
pub fn run(args: &StatArgs) -> anyhow::Result<()> {
    if !(args.interval.is_finite() && args.interval > 0.0 && args.interval <= 86_400.0) {
        bail!(
            "--interval must be a number of seconds in (0, 86400], not {}",
            args.interval
        );
    }
    if args.count == Some(0) {
        bail!("--count must be at least 1");
    }
    let interval = Duration::from_secs_f64(args.interval);
    let mut client = Client::connect(&args.server, Duration::from_secs(10))
        .with_context(|| format!("cannot connect to {}", args.server.display()))?;
    let mut prev = sample(&mut client)?;
    let mut out = std::io::stdout().lock();
    let mut shown = 0u64;
    while args.count.is_none_or(|n| shown < n) {
        std::thread::sleep(interval);
        let now = sample(&mut client)?;
        let r = report(&prev, &now);
        match args.output_format {
            Format::Json => {
                serde_json::to_writer(&mut out, &r)?;
                writeln!(out)?;
            }
            Format::Text => print_text(&r, &mut out)?,
        }
        out.flush()?;
        prev = now;
        shown += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(timing: bool) -> Report {
        Report {
            interval_s: 1.0,
            controllers: vec![CtrlRow {
                traddr: "/tmp/ctrl0".into(),
                iops: 10.0,
                read_mib_s: 0.0,
                write_mib_s: 0.0,
                queue_depth: Some(1.0),
                timing,
                layers: layer_means(&[], None),
                p99_total_ns: None,
            }],
            namespaces: Vec::new(),
            pollers: Vec::new(),
            poll_groups: Vec::new(),
            faults: Vec::new(),
            controller_faults: Vec::new(),
            namespace_faults: Vec::new(),
        }
    }

    fn text(r: &Report) -> String {
        let mut out = Vec::new();
        print_text(r, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn dashes_for_layer_times_come_with_the_way_to_turn_timing_on() {
        let off = text(&report(false));
        assert!(off.contains(" -"), "{off}");
        assert!(
            off.contains("nvmemu rpc bdev_enable_histogram BDEV"),
            "{off}"
        );
        assert!(!text(&report(true)).contains("bdev_enable_histogram"));
    }

    #[test]
    fn each_poll_group_shows_its_commands_and_queue_pairs() {
        let mut r = report(true);
        r.poll_groups.push(GroupRow {
            name: "nvmf_tgt_poll_group_001".into(),
            transports: vec!["VFIOUSER".into(), "TCP".into()],
            iops: 1234.0,
            socket_reads_per_s: Some(800.4),
            socket_writes_per_s: Some(600.0),
            admin_qpairs: 1,
            io_qpairs: 4,
        });
        r.poll_groups.push(GroupRow {
            name: "nvmf_tgt_poll_group_002".into(),
            transports: vec!["VFIOUSER".into(), "TCP".into()],
            iops: 0.0,
            socket_reads_per_s: None,
            socket_writes_per_s: None,
            admin_qpairs: 0,
            io_qpairs: 0,
        });
        let t = text(&r);
        let row = t
            .lines()
            .find(|l| l.starts_with("nvmf_tgt_poll_group_001"))
            .unwrap_or_else(|| panic!("no poll group row: {t}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "nvmf_tgt_poll_group_001",
                "1234",
                "800",
                "600",
                "1",
                "4",
                "VFIOUSER,TCP"
            ]
        );
        // A poll group without a TCP poll group has no socket calls to show.
        let row = t
            .lines()
            .find(|l| l.starts_with("nvmf_tgt_poll_group_002"))
            .unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[2..4], ["-", "-"]);
    }

    #[test]
    fn tcp_poll_groups_are_listed_with_the_pollers() {
        let mut r = report(true);
        for (name, trtype, busy_pct) in [
            ("nvmf_tgt_poll_group_000", "VFIOUSER", 1.5),
            ("nvmf_tgt_poll_group_tcp", "TCP", 97.25),
        ] {
            r.pollers.push(PollerRow {
                name: name.into(),
                trtype: trtype.into(),
                cpu: Some(1),
                busy_pct,
            });
        }
        let t = text(&r);
        assert!(t.contains("pollers busy: cpu1 1.5%, tcp cpu1 97.2%"), "{t}");
    }
}
