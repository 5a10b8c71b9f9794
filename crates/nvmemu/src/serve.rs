// SPDX-License-Identifier: Apache-2.0
//! `nvmemu serve`: run the target until SIGINT or SIGTERM.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use nvmemu_bdev::Bdev;
use nvmemu_ctrl::{ControllerConfig, Namespace};
use nvmemu_spec::Nsid;
use nvmemu_target::{Backoff, ControllerSpec, Target, TargetConfig, parse_core_mask};

use crate::ns_spec::{NsKind, NsSpec};

/// Options of `nvmemu serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Directory for a controller's vfio-user socket (`DIR/cntrl`); repeat for several
    /// controllers, each with its own copy of the namespaces.
    #[arg(long = "socket-dir", value_name = "DIR", required = true)]
    pub socket_dirs: Vec<PathBuf>,
    /// A namespace: `malloc:size=4G,lba=512` or `null:size=1T,lba=4096`; repeat for more.
    #[arg(long = "ns", value_name = "SPEC")]
    pub namespaces: Vec<NsSpec>,
    /// Core mask for pollers, SPDK style: `0x2` or `[0,2-3]`; one poller per core.
    #[arg(short = 'm', long = "cpumask", default_value = "0x1")]
    pub cpumask: String,
    /// Busy-poll even when idle (lowest latency; burns the cores of the mask).
    #[arg(long)]
    pub busy_poll: bool,
    /// Serial number reported by Identify.
    #[arg(long, default_value = "NVMEMU0001")]
    pub serial: String,
    /// Model number reported by Identify.
    #[arg(long, default_value = "nvmemu Virtual NVMe")]
    pub model: String,
    /// Socket file mode (octal).
    #[arg(long, default_value = "600", value_parser = parse_mode)]
    pub socket_mode: u32,
}

fn parse_mode(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("'{text}' is not an octal file mode like 600"))
}

/// Build a block device for a namespace spec.
pub fn make_bdev(name: &str, spec: &NsSpec) -> Result<Arc<Bdev>> {
    let bdev = match spec.kind {
        NsKind::Malloc => Bdev::malloc(name, spec.lba, spec.num_blocks()),
        NsKind::Null => Bdev::null(name, spec.lba, spec.num_blocks()),
    }
    .with_context(|| format!("cannot create namespace {name}"))?;
    Ok(Arc::new(bdev))
}

/// Start a target serving `args`; the caller decides how long it runs.
pub fn start(args: &ServeArgs) -> Result<Target> {
    let cores = parse_core_mask(&args.cpumask)?;
    let backoff = if args.busy_poll {
        Backoff::NONE
    } else {
        Backoff::default()
    };
    let target = Target::start(TargetConfig {
        cores,
        pin: true,
        backoff,
    })?;
    for (c, dir) in args.socket_dirs.iter().enumerate() {
        if !dir.is_dir() {
            bail!(
                "socket directory {} does not exist: create it first",
                dir.display()
            );
        }
        let mut namespaces = Vec::new();
        for (i, spec) in args.namespaces.iter().enumerate() {
            let nsid = u32::try_from(i + 1).context("too many namespaces")?;
            let bdev = make_bdev(&format!("ns{c}n{nsid}"), spec)?;
            namespaces.push(Namespace::new(Nsid(nsid), bdev));
        }
        let config = ControllerConfig {
            serial: if args.socket_dirs.len() > 1 {
                format!("{}{c}", args.serial)
            } else {
                args.serial.clone()
            },
            model: args.model.clone(),
            cntlid: u16::try_from(c + 1).unwrap_or(u16::MAX),
            ..ControllerConfig::default()
        };
        target
            .add_controller(ControllerSpec {
                socket_dir: dir.clone(),
                socket_mode: args.socket_mode,
                config,
                namespaces,
            })
            .with_context(|| format!("cannot serve {}", dir.display()))?;
    }
    Ok(target)
}

/// Run until SIGINT/SIGTERM, then shut down cleanly (sockets removed, threads joined).
pub fn run(args: &ServeArgs) -> Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("cannot install signal handlers")?;
    let target = start(args)?;
    for dir in &args.socket_dirs {
        eprintln!("nvmemu: serving {}/cntrl", dir.display());
    }
    if let Some(sig) = signals.forever().next() {
        tracing::info!("signal {sig}: shutting down");
    }
    target.shutdown();
    Ok(())
}
