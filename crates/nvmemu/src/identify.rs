// SPDX-License-Identifier: Apache-2.0
//! `nvmemu identify`: attach to a vfio-user NVMe server with our driver and
//! print Identify Controller and Identify Namespace like `nvme id-ctrl` and
//! `nvme id-ns`.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use nvmemu_driver::{
    AttachOptions, AttachedController, DriverError, IDENTIFY_BYTES, PciAddress, sqe,
};
use nvmemu_spec::Nsid;

use crate::id_print::{Page, ctrl_json, ctrl_text, ns_json, ns_text};
use nvmemu::error_chain;

/// Output formats of `nvmemu identify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IdFormat {
    /// nvme-cli's normal output.
    Normal,
    /// nvme-cli's JSON keys: `{"controller": {...}, "namespaces": [{...}]}`.
    Json,
}

/// Options of `nvmemu identify`.
#[derive(Debug, clap::Args)]
pub struct IdentifyArgs {
    /// The vfio-user NVMe server at DIR/cntrl (nvmemu serve or SPDK).
    #[arg(long, value_name = "DIR", required_unless_present_any = ["device", "tcp"])]
    pub socket: Option<PathBuf>,
    /// The NVMe PCI function at ADDR (e.g. 0000:01:00.0) of this machine, bound to
    /// uio_pci_generic or vfio-pci (see `nvmemu bind`).
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["socket", "tcp"])]
    pub device: Option<nvmemu_driver::PciAddress>,
    /// The NVMe/TCP target to identify (with --subnqn).
    #[command(flatten)]
    pub tcp: crate::tcp_host::TcpHostArgs,
    /// Only this namespace (default: every active namespace).
    #[arg(long)]
    pub nsid: Option<u32>,
    /// How long to wait for the server to accept the connection and for each of its replies.
    #[arg(long = "reply-timeout", value_name = "TIME", default_value = "5s", value_parser = nvmemu_bench::parse_time)]
    pub reply_timeout: std::time::Duration,
    /// Output format.
    #[arg(
        short = 'o',
        long = "output-format",
        value_enum,
        default_value = "normal"
    )]
    pub output_format: IdFormat,
}

/// The raw pages of one controller.
#[derive(Debug, Clone)]
pub struct IdentifyPages {
    /// Identify Controller (CNS 01h).
    pub ctrl: Vec<u8>,
    /// (NSID, Identify Namespace (CNS 00h)) per namespace.
    pub namespaces: Vec<(u32, Vec<u8>)>,
}

/// Issues Identify with `cns` for `nsid` and returns the 4 KiB page.
fn identify_page(
    ctrl: &mut AttachedController,
    cns: u8,
    nsid: u32,
) -> Result<Vec<u8>, DriverError> {
    let buf = ctrl.alloc_dma(IDENTIFY_BYTES as u64)?;
    let cqe = ctrl.admin_raw_with_data(sqe::identify(cns, Nsid(nsid)), Some((&buf, 4096)))?;
    let status = cqe.status();
    if !status.is_success() {
        return Err(nvmemu_driver::NvmeError::Status(status).into());
    }
    let mut page = vec![0u8; IDENTIFY_BYTES];
    buf.copy_to(0, &mut page)?;
    Ok(page)
}

/// Reads the controller page and the pages of `nsid` (or of every active namespace).
pub fn read_pages(ctrl: &mut AttachedController, nsid: Option<u32>) -> Result<IdentifyPages> {
    let page = identify_page(ctrl, sqe::cns::CONTROLLER, 0)
        .map_err(|e| anyhow!("Identify Controller failed: {}", error_chain(&e)))?;
    let nsids = match nsid {
        Some(n) => vec![n],
        None => ctrl
            .active_namespaces()
            .map_err(|e| anyhow!("Identify Active Namespace List failed: {}", error_chain(&e)))?
            .into_iter()
            .map(|n| n.0)
            .collect(),
    };
    let mut namespaces = Vec::with_capacity(nsids.len());
    for n in nsids {
        let p = identify_page(ctrl, sqe::cns::NAMESPACE, n)
            .map_err(|e| anyhow!("Identify Namespace {n} failed: {}", error_chain(&e)))?;
        namespaces.push((n, p));
    }
    Ok(IdentifyPages {
        ctrl: page,
        namespaces,
    })
}

/// Renders the pages in `format`.
pub fn render(pages: &IdentifyPages, format: IdFormat) -> String {
    match format {
        IdFormat::Normal => {
            let mut out = ctrl_text(Page(&pages.ctrl));
            for (n, p) in &pages.namespaces {
                out.push('\n');
                out.push_str(&ns_text(*n, Page(p)));
            }
            out
        }
        IdFormat::Json => {
            let v = serde_json::json!({
                "controller": ctrl_json(Page(&pages.ctrl)),
                "namespaces": pages
                    .namespaces
                    .iter()
                    .map(|(n, p)| ns_json(*n, Page(p)))
                    .collect::<Vec<_>>(),
            });
            let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
            s.push('\n');
            s
        }
    }
}

/// The vfio-user client error somewhere in `e`'s chain, if any.
fn client_error<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a nvmemu_vfio_user::ClientError> {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(ce) = c.downcast_ref::<nvmemu_vfio_user::ClientError>() {
            return Some(ce);
        }
        cur = c.source();
    }
    None
}

/// Whether attaching failed because the server serves another client (EBUSY to VERSION).
pub fn is_busy(e: &(dyn std::error::Error + 'static)) -> bool {
    matches!(client_error(e), Some(nvmemu_vfio_user::ClientError::Busy))
}

/// What to suggest after a failed attach: a server that did not answer VERSION in time
/// may be serving another client, one that did not answer later is hung (or slow);
/// anything else suggests none is running.
pub fn attach_hint(e: &(dyn std::error::Error + 'static)) -> &'static str {
    use nvmemu_vfio_user::ClientError;
    match client_error(e) {
        // The server makes a client wait, unanswered, while another is attached.
        Some(ClientError::TimedOut {
            command: nvmemu_vfio_user::Command::Version,
            ..
        }) => {
            " (another client may be attached: later ones wait until it leaves; \
             or the server is hung; raise --reply-timeout to wait longer)"
        }
        Some(ClientError::TimedOut { .. } | ClientError::ConnectTimedOut { .. }) => {
            " (the server is hung or slow; raise --reply-timeout for a slow one)"
        }
        Some(ClientError::Busy) => " (another client is attached to it; stop that one first)",
        Some(ClientError::Untrusted(_)) => "",
        Some(ClientError::Refused) => {
            " (its subsystem allows no host: nvmemu rpc nvmf_subsystem_allow_any_host -e NQN)"
        }
        _ => " (is nvmemu serve running?)",
    }
}

/// Attaches to the PCI function `addr` with the given queues and DMA pool size.
pub fn attach_pci(
    addr: PciAddress,
    io_queues: u16,
    queue_depth: u16,
    dma_pool_bytes: u64,
) -> Result<AttachedController> {
    let opts = AttachOptions {
        io_queues,
        queue_depth,
        dma_pool_bytes,
        ..AttachOptions::default()
    };
    AttachedController::attach_pci(addr, opts)
        .map_err(|e| anyhow!("cannot attach to {addr}: {}", error_chain(&e)))
}

/// `nvmemu identify`.
pub fn run(args: &IdentifyArgs) -> Result<()> {
    if args.nsid == Some(0) {
        bail!("--nsid must be 1 or more");
    }
    if let Some(addr) = args.tcp.tcp {
        let mut ctrl = args.tcp.connect(
            addr,
            args.reply_timeout,
            IDENTIFY_BYTES,
            crate::tcp_host::KATO,
        )?;
        let pages = crate::identify_tcp::read_pages(&mut ctrl, args.nsid);
        if let Err(e) = ctrl.disconnect() {
            tracing::warn!("controller shutdown: {}", error_chain(&e));
        }
        return nvmemu::console::print(&render(&pages?, args.output_format));
    }
    let mut ctrl = match (args.device, &args.socket) {
        (Some(addr), _) => attach_pci(addr, 1, 2, 8 << 20)?,
        (None, Some(socket)) => attach_socket(socket, args.reply_timeout)?,
        (None, None) => bail!("give --socket DIR, --device ADDR or --tcp ADDR --subnqn NQN"),
    };
    let pages = read_pages(&mut ctrl, args.nsid);
    if let Err(e) = ctrl.shutdown() {
        tracing::warn!("controller shutdown: {}", error_chain(&e));
    }
    nvmemu::console::print(&render(&pages?, args.output_format))
}

/// Attach to the vfio-user server at `socket`/cntrl for identify.
fn attach_socket(socket: &Path, reply_timeout: std::time::Duration) -> Result<AttachedController> {
    AttachedController::attach(
        socket,
        AttachOptions {
            io_queues: 1,
            queue_depth: 2,
            dma_pool_bytes: 4 << 20,
            reply_timeout,
        },
    )
    .map_err(|e| {
        if is_busy(&e) {
            return anyhow!(
                "controller {} is in use by another client: stop that client first",
                socket.display()
            );
        }
        anyhow!(
            "cannot attach to {}: {}{}",
            socket.join("cntrl").display(),
            error_chain(&e),
            attach_hint(&e)
        )
    })
}
