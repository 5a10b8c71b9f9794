// SPDX-License-Identifier: Apache-2.0
//! The target under test, and the crate's test initiator.
#![allow(dead_code, clippy::unwrap_used, clippy::cast_possible_truncation)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nvmemu_bdev::{Bdev, MallocBacking};
use nvmemu_ctrl::Namespace;
use nvmemu_spec::{Nsid, Status};
pub use nvmemu_tcp::test_utils::*;
use nvmemu_tcp::{Subsystems, TcpOptions, TcpSubsystem, TcpTarget};

pub const NQN: &str = "nqn.2019-07.io.nvmemu:tcp-test";
pub const HOSTNQN: &str = "nqn.2014-08.org.nvmexpress:uuid:test-host";
pub const BLOCK: u64 = 512;

/// A target on 127.0.0.1 (port picked by the kernel) with one 16 MiB namespace.
pub fn target(opts: TcpOptions) -> (TcpTarget, SocketAddr, Arc<Bdev>) {
    target_groups(opts, 1)
}

/// [`target`] with `groups` poll groups (unpinned).
pub fn target_groups(opts: TcpOptions, groups: usize) -> (TcpTarget, SocketAddr, Arc<Bdev>) {
    let bdev = Arc::new(
        Bdev::malloc_with("tcp0", BLOCK as u32, 1 << 15, MallocBacking::Lazy, &|_| {}).unwrap(),
    );
    let subs = Subsystems::default();
    subs.lock().insert(
        NQN.into(),
        TcpSubsystem {
            serial: "TCP0001".into(),
            model: "nvmemu tcp test".into(),
            allow_any_host: false,
            hosts: vec![HOSTNQN.into()],
            max_namespaces: 32,
            namespaces: vec![Namespace::new(Nsid(1), Arc::clone(&bdev))],
            listeners: vec![],
        },
    );
    let t = TcpTarget::start(opts, subs, &vec![None; groups]).unwrap();
    let addr = t.listen("127.0.0.1:0".parse().unwrap()).unwrap();
    (t, addr, bdev)
}

/// Admin Connect to the test subsystem as the allowed host, enabled; returns CNTLID.
pub fn enable(i: &mut Initiator) -> u16 {
    i.enable(NQN, HOSTNQN)
}

/// Connect as the allowed host to the test subsystem.
pub fn connect(
    i: &mut Initiator,
    qid: u16,
    sqsize: u16,
    cntlid: u16,
    kato: u32,
) -> nvmemu_spec::Cqe {
    i.connect(NQN, qid, sqsize, cntlid, HOSTNQN, kato)
}

/// Admin and I/O queue 1 (`io_entries` entries) on the test subsystem.
pub fn pair(addr: SocketAddr, digests: bool, io_entries: u16) -> (Initiator, Initiator) {
    connect_pair(addr, NQN, HOSTNQN, digests, io_entries)
}

/// An ICReq with the defaults (no digests, HPDA 0, MAXR2T 0).
pub fn icreq() -> [u8; 128] {
    let mut req = [0u8; 128];
    req[2] = 128;
    req[4..8].copy_from_slice(&128u32.to_le_bytes());
    req
}

/// Send a command capsule before any ICReq; returns the first 24 bytes of the answer.
pub fn capsule_before_icreq(addr: SocketAddr) -> [u8; 24] {
    let mut sock = TcpStream::connect(addr).unwrap();
    let mut pdu = vec![0x04, 0, 72, 0];
    pdu.extend_from_slice(&72u32.to_le_bytes());
    pdu.resize(72, 0);
    sock.write_all(&pdu).unwrap();
    let mut head = [0u8; 24];
    sock.read_exact(&mut head).unwrap();
    head
}

/// [`honest_host`] on its own thread; set the flag to stop it.
pub fn spawn_honest(
    addr: SocketAddr,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<(u64, Duration)>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    (stop, std::thread::spawn(move || honest_host(addr, &flag)))
}

/// An honest host beside hostile ones: 8 KiB writes (R2T, two H2CData) and verified reads
/// on its own blocks until `stop`; returns (write+read pairs, the slowest pair).
pub fn honest_host(addr: SocketAddr, stop: &AtomicBool) -> (u64, Duration) {
    let (_admin, mut io) = pair(addr, false, 32);
    let (mut done, mut slowest) = (0u64, Duration::ZERO);
    let mut seed = 0u8;
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        seed = seed.wrapping_add(1);
        let slba = u64::from(seed) * 16;
        let data = pattern(8192, seed);
        let (c, _) = io.exec(rw(0x01, slba, 16, sgl(0x5A, 8192)), &[], &data, 4096);
        assert_eq!(c.status(), Status::SUCCESS, "write");
        let (c, back) = io.exec(rw(0x02, slba, 16, sgl(0x5A, 8192)), &[], &[], 0);
        assert_eq!(c.status(), Status::SUCCESS, "read");
        assert!(back == data, "read {slba} differs from what was written");
        done += 1;
        slowest = slowest.max(t0.elapsed());
    }
    (done, slowest)
}
