// SPDX-License-Identifier: Apache-2.0
//! `nvmemu`: serve | bench | identify | rpc. Parses arguments and calls the libraries.
#![forbid(unsafe_code)]

mod bench;
mod bind;
mod fault_spec;
mod fd_limit;
mod id_print;
mod identify;
mod identify_tcp;
mod ns_spec;
mod plot_cmd;
mod serve;
mod signals;
mod size;
mod stat;
mod tcp_host;

use nvmemu::rpc_handler;

use clap::{Parser, Subcommand};

/// A software NVMe SSD served over vfio-user.
#[derive(Debug, Parser)]
#[command(name = "nvmemu", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve emulated NVMe controllers over vfio-user.
    Serve(serve::ServeArgs),
    /// Run fio-style jobs through the userspace driver (default: against an in-process target).
    // As fio: an option given twice takes the last value.
    #[command(args_override_self = true)]
    Bench(Box<bench::BenchArgs>),
    /// Draw saved bench JSON reports over each other as one SVG.
    Plot(plot_cmd::PlotArgs),
    /// Print Identify Controller and Namespace data like nvme-cli's id-ctrl and id-ns.
    Identify(identify::IdentifyArgs),
    /// Bind a PCI function to uio_pci_generic or vfio-pci (for bench/identify --device) or
    /// back to nvme, and reserve huge pages.
    Bind(bind::BindArgs),
    /// Send a JSON-RPC call to `nvmemu serve`, with rpc.py's arguments and output.
    Rpc(nvmemu_rpc::RpcArgs),
    /// Live figures of `nvmemu serve`, like `iostat -x 1`: IOPS, bandwidth, queue depth,
    /// poller load and the target's per-layer times.
    Stat(stat::StatArgs),
}

/// Logs to stderr, filtered by `RUST_LOG` (default `warn`); the filter can be replaced
/// later through the returned control (the `log_*` JSON-RPC methods).
fn init_logging() -> rpc_handler::LogControl {
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::{EnvFilter, reload};
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let (filter, handle) = reload::Layer::new(filter);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                // Colour only for a terminal: logs piped to a file or CI stay plain text.
                .with_ansi(rustix::termios::isatty(std::io::stderr())),
        )
        .init();
    rpc_handler::LogControl::new(move |directive| {
        let filter = EnvFilter::try_new(directive).map_err(|e| e.to_string())?;
        handle.reload(filter).map_err(|e| e.to_string())
    })
}

fn main() {
    let log = init_logging();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(&args, Some(log)),
        Command::Bench(args) => bench::run(&args),
        Command::Identify(args) => identify::run(&args),
        Command::Bind(args) => bind::run(&args),
        Command::Plot(args) => plot_cmd::run(&args),
        Command::Rpc(args) => std::process::exit(nvmemu_rpc::cli::run(&args)),
        Command::Stat(args) => stat::run(&args),
    };
    if let Err(e) = result {
        nvmemu::say!("nvmemu: {e:#}");
        let code = if e.downcast_ref::<signals::Interrupted>().is_some() {
            signals::INTERRUPTED_EXIT
        } else {
            1
        };
        std::process::exit(code);
    }
}
