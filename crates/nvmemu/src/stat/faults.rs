// SPDX-License-Identifier: Apache-2.0
//! The injections `nvmemu stat` shows: each bdev's fault rules (`nvmemu_bdev_get_faults`)
//! and the controller-level ones (`nvmemu_controller_get_faults`): a fatal status armed on
//! or set by injection on a controller, and a namespace answering Not Ready. A row is shown
//! once its injection has been armed, and stays with its counters since then.

use std::io::Write;

use anyhow::Context;
use nvmemu_rpc::Client;
use nvmemu_rpc::methods::ctrl_faults::SubsystemFaults;
use nvmemu_rpc::methods::fault::BdevFaults;
use serde::Serialize;
use serde_json::json;

/// Both fault answers of one sample.
pub(super) struct FaultSample {
    rules: Vec<BdevFaults>,
    subsystems: Vec<SubsystemFaults>,
}

pub(super) fn sample(client: &mut Client) -> anyhow::Result<FaultSample> {
    let rules = client
        .call("nvmemu_bdev_get_faults", json!({}))
        .context("nvmemu_bdev_get_faults")?;
    let subsystems = client
        .call("nvmemu_controller_get_faults", json!({}))
        .context("nvmemu_controller_get_faults")?;
    Ok(FaultSample {
        rules: serde_json::from_value(rules).context("nvmemu_bdev_get_faults result")?,
        subsystems: serde_json::from_value(subsystems)
            .context("nvmemu_controller_get_faults result")?,
    })
}

/// A fault rule's counters since it was added.
#[derive(Debug, Serialize)]
pub(super) struct FaultRow {
    pub(super) bdev: String,
    pub(super) id: u32,
    pub(super) action: String,
    pub(super) io_type: String,
    pub(super) matched: u64,
    pub(super) injected: u64,
}

/// A controller's injected fatal status (`nvmemu_controller_inject_fatal`).
#[derive(Debug, Serialize)]
pub(super) struct FatalRow {
    pub(super) nqn: String,
    pub(super) cntlid: u16,
    pub(super) traddr: String,
    /// I/O commands still taken before it fires (None: not armed).
    pub(super) armed_after_commands: Option<u32>,
    /// Times it set CSTS.CFS.
    pub(super) injected: u32,
    /// When it last did, milliseconds since the UNIX epoch.
    pub(super) last_injected_ms: Option<u64>,
    /// CSTS.CFS is still set: no reset since.
    pub(super) in_effect: bool,
    pub(super) cleared_by_reset: u32,
}

/// A namespace made not ready (`nvmemu_namespace_inject_not_ready`).
#[derive(Debug, Serialize)]
pub(super) struct NotReadyRow {
    pub(super) nqn: String,
    pub(super) nsid: u32,
    pub(super) bdev: String,
    pub(super) not_ready: bool,
    pub(super) dnr: bool,
    /// Commands answered Namespace Not Ready since the namespace was added ...
    pub(super) commands: u64,
    /// ... and within the interval.
    pub(super) interval_commands: u64,
}

/// The rows of `now`, with interval counts against `prev`.
pub(super) fn rows(
    prev: &FaultSample,
    now: &FaultSample,
) -> (Vec<FaultRow>, Vec<FatalRow>, Vec<NotReadyRow>) {
    let rules = now
        .rules
        .iter()
        .flat_map(|b| {
            b.faults.iter().map(|r| FaultRow {
                bdev: b.name.clone(),
                id: r.id,
                action: r.action.clone(),
                io_type: r.io_type.clone(),
                matched: r.matched,
                injected: r.injected,
            })
        })
        .collect();
    let mut fatal = Vec::new();
    let mut not_ready = Vec::new();
    for s in &now.subsystems {
        let before = prev.subsystems.iter().find(|p| p.nqn == s.nqn);
        for c in &s.controllers {
            if c.fatal_armed_after_commands.is_none() && c.fatal_injected == 0 {
                continue;
            }
            fatal.push(FatalRow {
                nqn: s.nqn.clone(),
                cntlid: c.cntlid,
                traddr: c.traddr.clone(),
                armed_after_commands: c.fatal_armed_after_commands,
                injected: c.fatal_injected,
                last_injected_ms: c.fatal_last_injected_ms,
                in_effect: c.fatal_in_effect,
                cleared_by_reset: c.fatal_cleared_by_reset,
            });
        }
        for n in &s.namespaces {
            if !n.not_ready && n.not_ready_commands == 0 {
                continue;
            }
            let earlier = before
                .and_then(|b| b.namespaces.iter().find(|p| p.nsid == n.nsid))
                .map_or(0, |p| p.not_ready_commands);
            not_ready.push(NotReadyRow {
                nqn: s.nqn.clone(),
                nsid: n.nsid,
                bdev: n.bdev_name.clone(),
                not_ready: n.not_ready,
                dnr: n.dnr,
                commands: n.not_ready_commands,
                interval_commands: n.not_ready_commands.saturating_sub(earlier),
            });
        }
    }
    (rules, fatal, not_ready)
}

/// `HH:MM:SS.mmm UTC` of a time in milliseconds since the UNIX epoch.
fn utc_time(ms: u64) -> String {
    let (secs, milli) = (ms / 1000, ms % 1000);
    let day = secs % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{milli:03} UTC",
        day / 3600,
        day / 60 % 60,
        day % 60
    )
}

pub(super) fn print_text(
    rules: &[FaultRow],
    fatal: &[FatalRow],
    not_ready: &[NotReadyRow],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for f in rules {
        writeln!(
            out,
            "fault {} #{}: {} on {}, matched {}, injected {}",
            f.bdev, f.id, f.action, f.io_type, f.matched, f.injected
        )?;
    }
    for f in fatal {
        write!(out, "fatal {} cntlid {} ({}):", f.nqn, f.cntlid, f.traddr)?;
        if let Some(n) = f.armed_after_commands {
            write!(out, " armed, fires after {n} more I/O commands;")?;
        }
        write!(out, " CSTS.CFS set {} times", f.injected)?;
        if let Some(ms) = f.last_injected_ms {
            write!(out, ", last at {}", utc_time(ms))?;
        }
        let state = if f.in_effect {
            "set until the host resets the controller"
        } else {
            "not set"
        };
        writeln!(
            out,
            "; now {state}; cleared by reset {} times",
            f.cleared_by_reset
        )?;
    }
    for n in not_ready {
        let state = match (n.not_ready, n.dnr) {
            (true, true) => "not ready (DNR)",
            (true, false) => "not ready",
            (false, _) => "ready again",
        };
        writeln!(
            out,
            "not ready {} nsid {} ({}): {state}, {} commands answered Not Ready ({} in this interval)",
            n.nqn, n.nsid, n.bdev, n.commands, n.interval_commands
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(rules: &[FaultRow], fatal: &[FatalRow], not_ready: &[NotReadyRow]) -> String {
        let mut out = Vec::new();
        print_text(rules, fatal, not_ready, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn fault_rules_show_with_their_counters() {
        let rule = FaultRow {
            bdev: "Malloc0".into(),
            id: 2,
            action: "status".into(),
            io_type: "read".into(),
            matched: 7,
            injected: 3,
        };
        let t = text(&[rule], &[], &[]);
        assert_eq!(
            t,
            "fault Malloc0 #2: status on read, matched 7, injected 3\n"
        );
    }

    #[test]
    fn controller_faults_say_what_was_armed_fired_and_cleared() {
        let fatal = FatalRow {
            nqn: "nqn.a".into(),
            cntlid: 1,
            traddr: "/tmp/d".into(),
            armed_after_commands: Some(5),
            injected: 1,
            // 2026-11-26 17:45:02.250 UTC
            last_injected_ms: Some(1_795_715_102_250),
            in_effect: false,
            cleared_by_reset: 1,
        };
        let ns = NotReadyRow {
            nqn: "nqn.a".into(),
            nsid: 1,
            bdev: "Malloc0".into(),
            not_ready: true,
            dnr: true,
            commands: 9,
            interval_commands: 4,
        };
        let t = text(&[], &[fatal], &[ns]);
        assert_eq!(
            t,
            "fatal nqn.a cntlid 1 (/tmp/d): armed, fires after 5 more I/O commands; CSTS.CFS \
             set 1 times, last at 17:45:02.250 UTC; now not set; cleared by reset 1 times\n\
             not ready nqn.a nsid 1 (Malloc0): not ready (DNR), 9 commands answered Not Ready \
             (4 in this interval)\n"
        );
    }
}
