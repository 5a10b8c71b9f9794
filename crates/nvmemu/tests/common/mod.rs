// SPDX-License-Identifier: Apache-2.0
//! Shared fixtures: a target serving one controller on a real socket in a temp directory,
//! plus the host-side pieces hostile tests need: a raw vfio-user connection (bytes on the
//! wire) and a transport shared between our driver and the test (`wire`), and a minimal
//! hand-driven host (admin and I/O queues in a memfd) for sequences the driver cannot
//! express (`host`).
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nvmemu_bdev::Bdev;
use nvmemu_ctrl::{ControllerConfig, Namespace};
use nvmemu_device::{Backoff, ClientBudget, ControllerId, ControllerSpec, Target, TargetConfig};
use nvmemu_driver::{AttachOptions, AttachedController};
use nvmemu_spec::{Lba, Nsid, Qid};
use nvmemu_vfio_user::{ClientError, DmaMap, Errno};

mod host;
pub mod tcp_rpc;
mod wire;

#[allow(unused_imports, reason = "each test binary uses its own part of these")]
pub use host::{
    Bar0, CC_ENABLE, HostMem, RawHost, RawQueue, create_cq_sqe, create_sq_sqe, enable_controller,
    map_doorbells, read32, rw_sqe, wait_csts,
};
#[allow(unused_imports, reason = "each test binary uses its own part of these")]
pub use wire::{
    RawConn, RawMsg, SharedTransport, access_payload, attach_shared, device_info_payload,
};

/// How long any poll loop in these tests waits before failing.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// IOVA of a separately mapped data region (above the driver's pool at 4 GiB).
pub const DATA_IOVA: u64 = 0x20_0000_0000;

/// A read-write DMA_MAP request of `size` bytes of the fd at `offset`, at `iova`.
pub fn map_req(iova: u64, size: u64, offset: u64) -> DmaMap {
    DmaMap {
        flags: DmaMap::FLAG_READ | DmaMap::FLAG_WRITE,
        offset,
        iova,
        size,
    }
}

/// A running target with one controller, removed on drop.
pub struct TestTarget {
    pub target: Target,
    pub id: ControllerId,
    pub dir: tempfile::TempDir,
}

impl TestTarget {
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("cntrl")
    }
}

/// Namespaces: (kind "malloc"/"null", LBA size, blocks).
pub fn start(namespaces: &[(&str, u32, u64)]) -> TestTarget {
    start_with(namespaces, nvmemu_device::Deadlines::default())
}

/// [`start_default`]'s namespace, with these client deadlines (short ones for hostile tests).
pub fn start_with_deadlines(deadlines: nvmemu_device::Deadlines) -> TestTarget {
    start_with(&[("malloc", 512, 1 << 15)], deadlines)
}

/// [`start_default`] with client deadlines of 60 s each: a test that something happens
/// without waiting for a client's deadline can then allow a loaded machine 20 s for it.
pub fn start_patient() -> TestTarget {
    let minute = Duration::from_secs(60);
    start_with_deadlines(nvmemu_device::Deadlines {
        version: minute,
        message: minute,
        reply: minute,
    })
}

/// [`start`] with these client deadlines.
pub fn start_with(
    namespaces: &[(&str, u32, u64)],
    deadlines: nvmemu_device::Deadlines,
) -> TestTarget {
    start_with_budget(namespaces, deadlines, ClientBudget::default())
}

/// [`start`] with these client deadlines and this per-client map budget.
pub fn start_with_budget(
    namespaces: &[(&str, u32, u64)],
    deadlines: nvmemu_device::Deadlines,
    client_budget: ClientBudget,
) -> TestTarget {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = test_target(deadlines, client_budget);
    let namespaces = namespaces
        .iter()
        .enumerate()
        .map(|(i, &(kind, lba, blocks))| {
            let name = format!("ns{}", i + 1);
            let bdev = match kind {
                "malloc" => Bdev::malloc(&name, lba, blocks),
                "null" => Bdev::null(&name, lba, blocks),
                other => panic!("unknown kind {other}"),
            }
            .expect("bdev");
            Namespace::new(Nsid(u32::try_from(i + 1).unwrap()), Arc::new(bdev))
        })
        .collect();
    let config = ControllerConfig {
        serial: "TESTSERIAL01".into(),
        model: "nvmemu test controller".into(),
        ..ControllerConfig::default()
    };
    let id = target
        .add_controller(ControllerSpec {
            socket_dir: dir.path().to_path_buf(),
            socket_mode: 0o600,
            config,
            namespaces,
            admission: nvmemu_device::Admission::default(),
        })
        .expect("controller");
    TestTarget { target, id, dir }
}

/// A target with one poller on core 0, unpinned and backing off (tests run in parallel on
/// 2 cores), and these client deadlines and per-client map budget.
pub fn test_target(deadlines: nvmemu_device::Deadlines, client_budget: ClientBudget) -> Target {
    Target::start(TargetConfig {
        poller_timeout: nvmemu_device::CALL_TIMEOUT,
        client_budget,
        deadlines,
        cores: vec![0],
        pin: false,
        backoff: Backoff::default(),
    })
    .expect("target starts")
}

/// One malloc namespace of 512-byte blocks, big enough for every test here.
pub fn start_default() -> TestTarget {
    start(&[("malloc", 512, 1 << 15)])
}

/// A UNIX socket at `dir/cntrl` that accepts connections and never answers them (a hung
/// server); `accepted` gets one message per connection it accepted.
pub struct SilentServer {
    pub dir: tempfile::TempDir,
    pub accepted: std::sync::mpsc::Receiver<()>,
}

/// Starts a [`SilentServer`]; its thread holds every connection until the test ends.
pub fn silent_server() -> SilentServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = std::os::unix::net::UnixListener::bind(dir.path().join("cntrl")).expect("bind");
    let (tx, accepted) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(conn) = conn else { break };
            held.push(conn);
            let _ = tx.send(());
        }
    });
    SilentServer { dir, accepted }
}

/// `nvmemu serve -r SOCK -m 0x1 EXTRA...` with the default log filter (no `RUST_LOG`) and
/// stderr captured, for tests that read what the server logs; the caller waits for `SOCK`.
pub fn spawn_logged_serve(sock: &Path, extra: &[&std::ffi::OsStr]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_nvmemu"))
        .arg("serve")
        .arg("-r")
        .arg(sock)
        .args(["-m", "0x1"])
        .args(extra)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("nvmemu serve starts")
}

/// The driver attached to the controller at `dir/cntrl` with one small I/O queue.
pub fn attach_dir(
    dir: &Path,
) -> Result<nvmemu_driver::AttachedController, nvmemu_driver::DriverError> {
    nvmemu_driver::AttachedController::attach(
        dir,
        nvmemu_driver::AttachOptions {
            io_queues: 1,
            queue_depth: 32,
            dma_pool_bytes: 8 << 20,
            ..nvmemu_driver::AttachOptions::default()
        },
    )
}

/// The one stderr line of a command that failed (status 1) before printing anything.
pub fn one_line_failure(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty(), "printed {:?}", out.stdout);
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

/// Attach options used throughout.
pub fn opts(io_queues: u16) -> AttachOptions {
    AttachOptions {
        io_queues,
        queue_depth: 64,
        dma_pool_bytes: 16 << 20,
        ..AttachOptions::default()
    }
}

/// Attach our driver on a fresh connection.
pub fn attach(t: &TestTarget, io_queues: u16) -> AttachedController {
    AttachedController::attach(t.dir(), opts(io_queues)).expect("driver attaches")
}

/// A deterministic byte pattern.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

/// The server keeps serving: a fresh driver attach on a new connection does verified I/O
/// (write a pattern, read it back, compare) and shuts down cleanly.
pub fn assert_serves_next_client(t: &TestTarget) {
    verified_io_on(&mut attach(t, 1));
}

/// Another controller with one malloc namespace on `t`'s target (and so on its only
/// poller), served in its own temporary directory.
pub fn add_controller(t: &TestTarget) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let bdev = Bdev::malloc("second", 512, 1 << 15).expect("bdev");
    t.target
        .add_controller(ControllerSpec {
            socket_dir: dir.path().to_path_buf(),
            socket_mode: 0o600,
            config: ControllerConfig::default(),
            namespaces: vec![Namespace::new(Nsid(1), Arc::new(bdev))],
            admission: nvmemu_device::Admission::default(),
        })
        .expect("second controller");
    dir
}

/// Verified I/O (write a pattern, read it back, compare) on an attached driver, then a
/// clean shutdown.
pub fn verified_io_on(c: &mut AttachedController) {
    let mut q = c.take_qpair().unwrap();
    let len = 64 * 1024;
    let seed = 0x5A;
    let wbuf = c.alloc_dma(len).unwrap();
    let data = pattern(len as usize, seed);
    wbuf.copy_from(0, &data).unwrap();
    q.write_blocking(Nsid(1), Lba(4096), 128, &wbuf).unwrap();
    let rbuf = c.alloc_dma(len).unwrap();
    q.read_blocking(Nsid(1), Lba(4096), 128, &rbuf).unwrap();
    let mut back = vec![0u8; len as usize];
    rbuf.copy_to(0, &mut back).unwrap();
    assert!(back == data, "data read back differs from data written");
    drop(q);
    c.shutdown().expect("clean shutdown");
}

/// Poll `f` until it returns `Some`, failing after [`DEADLINE`].
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        spins += 1;
        if spins < 100 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// The errno of a failed client request.
pub fn errno_of<T: std::fmt::Debug>(r: Result<T, ClientError>) -> Errno {
    match r {
        Err(ClientError::Remote { errno, .. }) => errno,
        other => panic!("expected an error reply, got {other:?}"),
    }
}

/// An eventfd for MSI-X, non-blocking.
pub fn eventfd() -> OwnedFd {
    rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::NONBLOCK | rustix::event::EventfdFlags::CLOEXEC,
    )
    .unwrap()
}

/// The eventfd counter (0 if nothing was signalled); reading resets it.
pub fn eventfd_take(fd: &OwnedFd) -> u64 {
    let mut b = [0u8; 8];
    match rustix::io::read(fd, &mut b) {
        Ok(8) => u64::from_ne_bytes(b),
        Err(Errno::AGAIN) => 0,
        other => panic!("eventfd read: {other:?}"),
    }
}

/// The driver's qpair for QID 1 checked to be idle; re-exported for tests' convenience.
pub fn qid1() -> Qid {
    Qid(1)
}

/// Wait until `nvmemu serve` answers on its RPC socket `sock` (at most 60 s).
pub fn wait_for_rpc_socket(sock: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while nvmemu_rpc::Client::connect(sock, Duration::from_secs(5)).is_err() {
        assert!(Instant::now() < deadline, "nvmemu serve never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}
