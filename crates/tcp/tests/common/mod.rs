// SPDX-License-Identifier: Apache-2.0
//! The target under test, and the crate's test initiator.
#![allow(dead_code, clippy::unwrap_used, clippy::cast_possible_truncation)]

use std::net::SocketAddr;
use std::sync::Arc;

use nvmemu_bdev::{Bdev, MallocBacking};
use nvmemu_ctrl::Namespace;
use nvmemu_spec::Nsid;
pub use nvmemu_tcp::test_utils::*;
use nvmemu_tcp::{Subsystems, TcpOptions, TcpSubsystem, TcpTarget};

pub const NQN: &str = "nqn.2019-07.io.nvmemu:tcp-test";
pub const HOSTNQN: &str = "nqn.2014-08.org.nvmexpress:uuid:test-host";
pub const BLOCK: u64 = 512;

/// A target on 127.0.0.1 (port picked by the kernel) with one 16 MiB namespace.
pub fn target(opts: TcpOptions) -> (TcpTarget, SocketAddr, Arc<Bdev>) {
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
    let t = TcpTarget::start(opts, subs, None).unwrap();
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
