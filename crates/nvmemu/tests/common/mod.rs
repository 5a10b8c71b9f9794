// SPDX-License-Identifier: Apache-2.0
//! Shared fixtures: a target serving one controller on a real socket in a temp directory,
//! plus the host-side pieces hostile tests need: a raw vfio-user connection (bytes on the
//! wire), a transport shared between our driver and the test, and a minimal hand-driven host
//! (admin and I/O queues in a memfd) for sequences the driver cannot express.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nvmemu_bdev::Bdev;
use nvmemu_ctrl::{ControllerConfig, Namespace};
use nvmemu_device::{Backoff, ClientBudget, ControllerId, ControllerSpec, Target, TargetConfig};
use nvmemu_driver::{AttachOptions, AttachedController, VfioUserTransport};
use nvmemu_mem::{MmapRegion, Protection};
use nvmemu_spec::opcode::{AdminOpcode, IoOpcode};
use nvmemu_spec::regs::{self, cc, csts};
use nvmemu_spec::{Cqe, Lba, Nsid, Qid, Sqe, Status};
use nvmemu_vfio_user::wire::Header;
use nvmemu_vfio_user::{Client, ClientError, DmaMap, Errno};
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, recvmsg, sendmsg,
};
use zerocopy::{FromBytes, IntoBytes};

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

// ---------------------------------------------------------------------------------------
// Raw bytes on the wire.

/// A reply as received on a raw connection.
#[derive(Debug)]
pub struct RawMsg {
    pub header: Header,
    pub payload: Vec<u8>,
    pub fds: Vec<OwnedFd>,
}

impl RawMsg {
    /// The errno of an error reply (panics if it is not one).
    pub fn errno(&self) -> Errno {
        assert!(
            self.header.is_error(),
            "expected an error reply: {:?}",
            self.header
        );
        Errno::from_raw_os_error(self.header.error as i32)
    }

    /// Asserts a successful reply to `command`.
    pub fn ok(self, command: u16) -> RawMsg {
        assert_eq!(self.header.command, command, "reply to the wrong command");
        assert!(!self.header.is_error(), "error reply {:?}", self.header);
        assert_eq!(self.header.flags & 0xF, 1, "not a reply");
        self
    }
}

/// A vfio-user connection driven byte by byte (no VERSION done for you).
pub struct RawConn {
    pub stream: UnixStream,
    next_id: u16,
}

impl RawConn {
    pub fn connect(t: &TestTarget) -> RawConn {
        let stream = UnixStream::connect(t.socket()).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        RawConn { stream, next_id: 1 }
    }

    /// Connect and negotiate VERSION the way SPDK's client does (minor 1, no JSON).
    pub fn connect_negotiated(t: &TestTarget) -> RawConn {
        let mut c = RawConn::connect(t);
        c.request(1, 0, &[0, 0, 1, 0]).ok(1);
        c
    }

    /// Send a command with a correct header.
    pub fn send(&mut self, command: u16, flags: u32, payload: &[u8], fds: &[BorrowedFd<'_>]) {
        let header = Header {
            msg_id: self.next_id,
            command,
            msg_size: (16 + payload.len()) as u32,
            flags,
            error: 0,
        };
        self.next_id = self.next_id.wrapping_add(1);
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend_from_slice(payload);
        self.send_bytes(&bytes, fds);
    }

    /// Send arbitrary bytes (one sendmsg, fds attached to the first byte).
    pub fn send_bytes(&mut self, bytes: &[u8], fds: &[BorrowedFd<'_>]) {
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(16))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() {
            assert!(control.push(SendAncillaryMessage::ScmRights(fds)));
        }
        let mut sent = sendmsg(
            &self.stream,
            &[IoSlice::new(bytes)],
            &mut control,
            SendFlags::empty(),
        )
        .unwrap();
        if sent < bytes.len() {
            self.stream.write_all(&bytes[sent..]).unwrap();
            sent = bytes.len();
        }
        assert_eq!(sent, bytes.len());
    }

    /// Receive one message: the header with recvmsg (fds come with the first byte of a
    /// reply sent by one sendmsg), then the payload.
    pub fn recv(&mut self) -> RawMsg {
        let mut raw = [0u8; 16];
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(16))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let msg = recvmsg(
            &self.stream,
            &mut [IoSliceMut::new(&mut raw)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC | RecvFlags::WAITALL,
        )
        .expect("reply arrives");
        assert_eq!(msg.bytes, 16, "short header (connection closed?)");
        let mut fds = Vec::new();
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(r) = m {
                fds.extend(r);
            }
        }
        let header = Header::read_from_bytes(&raw).unwrap();
        let mut payload = vec![0u8; header.msg_size as usize - 16];
        self.stream.read_exact(&mut payload).unwrap();
        RawMsg {
            header,
            payload,
            fds,
        }
    }

    /// Send a command and receive the next message.
    pub fn request(&mut self, command: u16, flags: u32, payload: &[u8]) -> RawMsg {
        self.send(command, flags, payload, &[]);
        self.recv()
    }

    /// True once the server has closed the connection (EOF within the deadline).
    pub fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0))
    }
}

/// DEVICE_GET_INFO payload.
pub fn device_info_payload() -> Vec<u8> {
    let mut p = 16u32.to_le_bytes().to_vec();
    p.extend_from_slice(&[0; 12]);
    p
}

/// REGION_READ / REGION_WRITE prefix.
pub fn access_payload(region: u32, offset: u64, count: u32) -> Vec<u8> {
    let mut p = offset.to_le_bytes().to_vec();
    p.extend_from_slice(&region.to_le_bytes());
    p.extend_from_slice(&count.to_le_bytes());
    p
}

// ---------------------------------------------------------------------------------------
// A transport shared between the driver and the test.

/// Our `VfioUserTransport` behind a mutex, so a test can send its own messages on the
/// driver's connection (DMA maps without fds, unmaps during I/O, SET_IRQS, config writes)
/// while the driver keeps using it for registers.
#[derive(Clone)]
pub struct SharedTransport(pub Arc<Mutex<VfioUserTransport>>);

impl SharedTransport {
    pub fn connect(t: &TestTarget) -> SharedTransport {
        let tr = VfioUserTransport::connect(&t.socket()).unwrap();
        SharedTransport(Arc::new(Mutex::new(tr)))
    }

    pub fn with_client<R>(&self, f: impl FnOnce(&mut Client) -> R) -> R {
        f(self.0.lock().unwrap().client_mut())
    }

    /// CSTS through a REGION_READ on this connection.
    pub fn csts(&self) -> u32 {
        self.with_client(|c| read32(c, regs::CSTS))
    }
}

/// Attach our driver over a shared transport.
pub fn attach_shared(t: &TestTarget, io_queues: u16) -> (AttachedController, SharedTransport) {
    let shared = SharedTransport::connect(t);
    // The driver's transport is the shared one itself (`Arc<Mutex<T>>` is a Transport).
    let c = AttachedController::attach_with(Box::new(shared.0.clone()), opts(io_queues)).unwrap();
    (c, shared)
}

// ---------------------------------------------------------------------------------------
// Host memory and hand-driven queues.

/// A memfd the test owns, mapped here; the device sees it at `iova` once DMA-mapped. Not
/// sealed (like QEMU's and SPDK's memory), so a test can shrink it under the server.
pub struct HostMem {
    pub fd: OwnedFd,
    pub map: MmapRegion,
    pub iova: u64,
}

impl HostMem {
    pub fn new(size: u64, iova: u64) -> HostMem {
        let fd =
            rustix::fs::memfd_create("nvmemu-test-host", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, size).unwrap();
        let map = MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite).unwrap();
        HostMem { fd, map, iova }
    }

    /// A hugetlbfs memfd of `size` bytes (a multiple of 2 MiB), or why there is none: no
    /// hugetlbfs, or too few free huge pages (the mapping reserves them).
    pub fn hugetlb(size: u64, iova: u64) -> Result<HostMem, String> {
        let flags = rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::HUGETLB;
        let fd = rustix::fs::memfd_create("nvmemu-test-huge", flags)
            .map_err(|e| format!("memfd_create(MFD_HUGETLB): {e}"))?;
        rustix::fs::ftruncate(&fd, size).map_err(|e| format!("ftruncate: {e}"))?;
        let map = MmapRegion::map_shared(fd.as_fd(), 0, size, Protection::ReadWrite)
            .map_err(|e| format!("{e} (free huge pages in /proc/meminfo: HugePages_Free)"))?;
        Ok(HostMem { fd, map, iova })
    }

    pub fn size(&self) -> u64 {
        self.map.len()
    }

    /// DMA_MAP the whole memfd through `client`.
    pub fn dma_map(&self, client: &mut Client) -> Result<(), ClientError> {
        let map = DmaMap {
            flags: DmaMap::FLAG_READ | DmaMap::FLAG_WRITE,
            offset: 0,
            iova: self.iova,
            size: self.size(),
        };
        client.dma_map(&map, Some(self.fd.as_fd()))
    }

    pub fn iova_of(&self, offset: u64) -> u64 {
        self.iova + offset
    }
}

/// Map the BAR0 doorbell page (sparse area at 0x1000) from a region fd.
pub fn map_doorbells(fd: BorrowedFd<'_>, region_file_offset: u64) -> MmapRegion {
    MmapRegion::map_shared(
        fd,
        region_file_offset + 0x1000,
        0x1000,
        Protection::ReadWrite,
    )
    .unwrap()
}

/// An SQ/CQ pair driven by hand in a [`HostMem`] (CAP.DSTRD = 0).
#[derive(Debug)]
pub struct RawQueue {
    pub qid: u16,
    pub depth: u16,
    pub sq_off: u64,
    pub cq_off: u64,
    tail: u16,
    head: u16,
    phase: bool,
    next_cid: u16,
}

impl RawQueue {
    pub fn new(qid: u16, depth: u16, sq_off: u64, cq_off: u64) -> RawQueue {
        RawQueue {
            qid,
            depth,
            sq_off,
            cq_off,
            tail: 0,
            head: 0,
            phase: true,
            next_cid: 1,
        }
    }

    /// Write `sqe` (with a fresh CID) at the tail and ring the SQ tail doorbell.
    pub fn submit(&mut self, mem: &MmapRegion, db: &MmapRegion, mut sqe: Sqe) -> u16 {
        let cid = self.next_cid;
        self.next_cid = self.next_cid.wrapping_add(1);
        sqe.cdw0 = (sqe.cdw0 & 0xFFFF) | (u32::from(cid) << 16);
        mem.write_obj(self.sq_off + u64::from(self.tail) * 64, &sqe)
            .unwrap();
        self.tail = (self.tail + 1) % self.depth;
        // Release: the SQE is visible before the new tail.
        db.store_release_u32(u64::from(self.qid) * 8, u32::from(self.tail))
            .unwrap();
        cid
    }

    /// Take the next completion if its phase tag says it is new; acknowledges it.
    pub fn try_reap(&mut self, mem: &MmapRegion, db: &MmapRegion) -> Option<Cqe> {
        let at = self.cq_off + u64::from(self.head) * 16;
        let sp = mem.load_acquire_u16(at + 14).unwrap();
        if (sp & 1 != 0) != self.phase {
            return None;
        }
        let cqe: Cqe = mem.read_obj(at).unwrap();
        self.head += 1;
        if self.head == self.depth {
            self.head = 0;
            self.phase = !self.phase;
        }
        db.store_release_u32(u64::from(self.qid) * 8 + 4, u32::from(self.head))
            .unwrap();
        Some(cqe)
    }

    /// Submit one command and wait for its completion.
    pub fn exec(&mut self, mem: &MmapRegion, db: &MmapRegion, sqe: Sqe) -> Cqe {
        let cid = self.submit(mem, db, sqe);
        let cqe = wait_for("a completion", || self.try_reap(mem, db));
        assert_eq!(cqe.cid, cid, "completion for another command");
        assert_eq!(cqe.sq_id, self.qid);
        cqe
    }
}

/// BAR0 register access, so hand-driven bring-up works over any client.
pub trait Bar0 {
    fn read32(&mut self, offset: u64) -> u32;
    fn write32(&mut self, offset: u64, value: u32);
    fn write64(&mut self, offset: u64, value: u64);
}

pub fn read32(c: &mut Client, offset: u64) -> u32 {
    let mut b = [0u8; 4];
    c.region_read(0, offset, &mut b).unwrap();
    u32::from_le_bytes(b)
}

impl Bar0 for Client {
    fn read32(&mut self, offset: u64) -> u32 {
        read32(self, offset)
    }
    fn write32(&mut self, offset: u64, value: u32) {
        self.region_write(0, offset, &value.to_le_bytes()).unwrap();
    }
    fn write64(&mut self, offset: u64, value: u64) {
        self.region_write(0, offset, &value.to_le_bytes()).unwrap();
    }
}

/// CC for enabling: NVM command set, 4 KiB pages, 64/16-byte I/O queue entries.
pub const CC_ENABLE: u32 = cc::EN | (6 << cc::IOSQES_SHIFT) | (4 << cc::IOCQES_SHIFT);

/// Wait for CSTS to satisfy `f`, returning it.
pub fn wait_csts(b: &mut impl Bar0, what: &str, f: impl Fn(u32) -> bool) -> u32 {
    wait_for(what, || {
        let v = b.read32(regs::CSTS);
        f(v).then_some(v)
    })
}

/// NVMe Base 7.6.1: disable, program AQA/ASQ/ACQ, enable, wait for CSTS.RDY.
pub fn enable_controller(b: &mut impl Bar0, depth: u16, asq: u64, acq: u64) {
    b.write32(regs::CC, 0);
    wait_csts(b, "CSTS.RDY = 0", |v| v & csts::RDY == 0);
    let z = u32::from(depth - 1);
    b.write32(regs::AQA, z | (z << 16));
    b.write64(regs::ASQ, asq);
    b.write64(regs::ACQ, acq);
    b.write32(regs::CC, CC_ENABLE);
    let v = wait_csts(b, "CSTS.RDY = 1", |v| v & (csts::RDY | csts::CFS) != 0);
    assert_eq!(v & csts::CFS, 0, "controller fatal on enable");
}

/// A hand-driven host on our vfio-user client: 4 MiB of memfd memory at [`RawHost::IOVA`]
/// holding the admin queue (offset 0 / 0x1000), I/O queue `n` (offset 0x2000 * n and
/// 0x2000 * n + 0x1000, n < 8) and data from [`RawHost::DATA`].
pub struct RawHost {
    pub client: Client,
    pub mem: HostMem,
    pub db: MmapRegion,
    pub admin: RawQueue,
}

impl RawHost {
    pub const IOVA: u64 = 0x10_0000_0000;
    pub const SIZE: u64 = 4 << 20;
    pub const DATA: u64 = 0x10_0000;
    pub const ADMIN_DEPTH: u16 = 16;
    pub const IO_DEPTH: u16 = 32;

    /// Connect, map the doorbells and memory, turn on bus mastering and enable.
    pub fn connect(t: &TestTarget) -> RawHost {
        let mut client = Client::connect(&t.socket()).unwrap();
        let (info, fd) = client.region_info(0).unwrap();
        let db = map_doorbells(fd.as_ref().unwrap().as_fd(), info.file_offset);
        let mem = HostMem::new(Self::SIZE, Self::IOVA);
        mem.dma_map(&mut client).unwrap();
        client.region_write(7, 4, &0x0406u16.to_le_bytes()).unwrap();
        let mut h = RawHost {
            client,
            mem,
            db,
            admin: RawQueue::new(0, Self::ADMIN_DEPTH, 0, 0x1000),
        };
        h.enable();
        h
    }

    /// Fresh admin queue (memory zeroed) and CC.EN 0 -> 1.
    pub fn enable(&mut self) {
        self.mem.map.fill(0, 0x2000, 0).unwrap();
        self.admin = RawQueue::new(0, Self::ADMIN_DEPTH, 0, 0x1000);
        let (asq, acq) = (self.mem.iova_of(0), self.mem.iova_of(0x1000));
        enable_controller(&mut self.client, Self::ADMIN_DEPTH, asq, acq);
    }

    pub fn csts(&mut self) -> u32 {
        read32(&mut self.client, regs::CSTS)
    }

    pub fn admin(&mut self, sqe: Sqe) -> Cqe {
        self.admin.exec(&self.mem.map, &self.db, sqe)
    }

    /// Identify Controller into the data area; returns the 4 KiB page.
    pub fn identify_controller(&mut self) -> Vec<u8> {
        self.mem.map.fill(Self::DATA, 4096, 0).unwrap();
        let cqe = self.admin(Sqe {
            cdw0: u32::from(u8::from(AdminOpcode::Identify)),
            dptr1: self.mem.iova_of(Self::DATA),
            cdw10: 1,
            ..Sqe::default()
        });
        assert_eq!(cqe.status(), Status::SUCCESS);
        let mut page = vec![0u8; 4096];
        self.mem.map.copy_to(Self::DATA, &mut page).unwrap();
        page
    }

    /// Set Features Number of Queues, then create I/O CQ and SQ `qid` (IEN and IV as given).
    pub fn create_io_pair(&mut self, qid: u16, ien: bool, iv: u16) -> RawQueue {
        assert!((1..8).contains(&qid));
        let cqe = self.admin(Sqe {
            cdw0: u32::from(u8::from(AdminOpcode::SetFeatures)),
            cdw10: 0x07,
            cdw11: 7 | (7 << 16),
            ..Sqe::default()
        });
        // Only the first Set Features before queue creation succeeds; later ones are a
        // Command Sequence Error (queues exist), which is fine here.
        assert!(
            cqe.status() == Status::SUCCESS || cqe.status() == Status::COMMAND_SEQUENCE_ERROR,
            "{:?}",
            cqe.status()
        );
        let (sq_off, cq_off) = (0x2000 * u64::from(qid), 0x2000 * u64::from(qid) + 0x1000);
        self.mem.map.fill(sq_off, 0x2000, 0).unwrap();
        let cqe = self.admin(create_cq_sqe(
            qid,
            Self::IO_DEPTH,
            self.mem.iova_of(cq_off),
            ien,
            iv,
        ));
        assert_eq!(cqe.status(), Status::SUCCESS, "Create I/O CQ {qid}");
        let cqe = self.admin(create_sq_sqe(
            qid,
            Self::IO_DEPTH,
            self.mem.iova_of(sq_off),
            qid,
        ));
        assert_eq!(cqe.status(), Status::SUCCESS, "Create I/O SQ {qid}");
        RawQueue::new(qid, Self::IO_DEPTH, sq_off, cq_off)
    }

    pub fn io(&mut self, q: &mut RawQueue, sqe: Sqe) -> Cqe {
        q.exec(&self.mem.map, &self.db, sqe)
    }

    /// Write `data` (a multiple of 512 bytes, at most 4 KiB) at `lba` of NSID 1 from the data
    /// area, read it back into a second buffer, and compare.
    pub fn verified_io(&mut self, q: &mut RawQueue, lba: u64, data: &[u8]) {
        assert!(data.len() <= 4096 && data.len().is_multiple_of(512));
        let (wr, rd) = (Self::DATA, Self::DATA + 0x1000);
        self.mem.map.copy_from(wr, data).unwrap();
        self.mem.map.fill(rd, 4096, 0xEE).unwrap();
        let n = (data.len() / 512) as u32;
        let w = rw_sqe(IoOpcode::Write, lba, n, self.mem.iova_of(wr));
        assert_eq!(self.io(q, w).status(), Status::SUCCESS, "write");
        let r = rw_sqe(IoOpcode::Read, lba, n, self.mem.iova_of(rd));
        assert_eq!(self.io(q, r).status(), Status::SUCCESS, "read");
        let mut back = vec![0u8; data.len()];
        self.mem.map.copy_to(rd, &mut back).unwrap();
        assert!(back == data, "read back differs");
    }
}

/// Create I/O Completion Queue, PC = 1.
pub fn create_cq_sqe(qid: u16, entries: u16, iova: u64, ien: bool, iv: u16) -> Sqe {
    Sqe {
        cdw0: u32::from(u8::from(AdminOpcode::CreateIoCq)),
        dptr1: iova,
        cdw10: u32::from(qid) | (u32::from(entries.wrapping_sub(1)) << 16),
        cdw11: 1 | (u32::from(ien) << 1) | (u32::from(iv) << 16),
        ..Sqe::default()
    }
}

/// Create I/O Submission Queue, PC = 1.
pub fn create_sq_sqe(qid: u16, entries: u16, iova: u64, cqid: u16) -> Sqe {
    Sqe {
        cdw0: u32::from(u8::from(AdminOpcode::CreateIoSq)),
        dptr1: iova,
        cdw10: u32::from(qid) | (u32::from(entries.wrapping_sub(1)) << 16),
        cdw11: 1 | (u32::from(cqid) << 16),
        ..Sqe::default()
    }
}

/// Read or Write of `nblocks` at `slba` of NSID 1 with PRP1 = `prp1` (PRP2 left 0: the
/// transfer must fit in PRP1's page).
pub fn rw_sqe(op: IoOpcode, slba: u64, nblocks: u32, prp1: u64) -> Sqe {
    Sqe {
        cdw0: u32::from(u8::from(op)),
        nsid: 1,
        dptr1: prp1,
        cdw10: slba as u32,
        cdw11: (slba >> 32) as u32,
        cdw12: nblocks - 1,
        ..Sqe::default()
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
