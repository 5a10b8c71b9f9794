// SPDX-License-Identifier: Apache-2.0
//! The crate's host side ([`nvmemu_tcp::initiator`]) against its target over loopback, and
//! against fake targets that send what the TCP binding forbids.
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use common::{HOSTNQN, NQN, pattern, rw, target};
use nvmemu_spec::{Sqe, Status};
use nvmemu_tcp::TcpOptions;
use nvmemu_tcp::initiator::{
    HostController, HostError, HostIdentity, HostOptions, HostQueue, Transfer,
};

fn host() -> HostIdentity {
    HostIdentity {
        hostnqn: HOSTNQN.into(),
        hostid: [9; 16],
    }
}

fn options(digests: bool) -> HostOptions {
    HostOptions {
        hdgst: digests,
        ddgst: digests,
        ..HostOptions::default()
    }
}

/// Identify Controller's in-capsule data size (IOCCSZ * 16 less the SQE).
fn in_capsule_max(c: &mut HostController) -> u32 {
    let mut id = vec![0u8; 4096];
    let sqe = Sqe {
        cdw0: 0x06,
        cdw10: 1,
        ..Sqe::default()
    };
    let cqe = c.admin_exec(sqe, Transfer::In(&mut id)).unwrap();
    assert_eq!(cqe.status(), Status::SUCCESS);
    assert_eq!(&id[768..768 + NQN.len()], NQN.as_bytes(), "SUBNQN");
    u32::from_le_bytes(id[1792..1796].try_into().unwrap()) * 16 - 64
}

fn io(q: &mut HostQueue, opcode: u8, slba: u64, data: Transfer<'_>, len: usize) {
    let cqe = q
        .exec(rw(opcode, slba, (len / 512) as u32, (0, 0)), data)
        .unwrap();
    assert_eq!(
        cqe.status(),
        Status::SUCCESS,
        "opcode {opcode:#x} at {slba}"
    );
}

fn write_read_verify(digests: bool) {
    let (_t, addr, _) = target(TcpOptions::default());
    let mut c =
        HostController::connect(addr, NQN, host(), Duration::from_secs(10), options(digests))
            .unwrap();
    let icd = in_capsule_max(&mut c);
    let mut q = c.connect_io_queue(1, 32, icd).unwrap();
    // 512 B and 4 KiB go in-capsule; 128 KiB by R2T and H2CData (above MAXH2CDATA too).
    for (slba, len) in [(0u64, 512usize), (8, 4096), (256, 128 * 1024)] {
        let out = pattern(len, slba as u8);
        io(&mut q, 0x01, slba, Transfer::Out(&out), len);
        let mut back = vec![0u8; len];
        io(&mut q, 0x02, slba, Transfer::In(&mut back), len);
        assert_eq!(back, out, "{len} bytes at LBA {slba}");
    }
    HostController::disconnect_queue(q).unwrap();
    c.disconnect().unwrap();
}

#[test]
fn writes_and_reads_back_every_size_without_digests() {
    write_read_verify(false);
}

#[test]
fn writes_and_reads_back_every_size_with_digests() {
    write_read_verify(true);
}

#[test]
fn io_queues_disable_sq_flow_control_so_reads_complete_with_success_in_c2h_data() {
    // With `c2h_success` off the target uses SUCCESS only because the host disabled SQ
    // flow control (`c2h_success.rs` has the rest).
    let opts = TcpOptions {
        c2h_success: false,
        ..TcpOptions::default()
    };
    let (_t, addr, _) = target(opts);
    let mut c = HostController::connect(addr, NQN, host(), Duration::ZERO, options(false)).unwrap();
    let icd = in_capsule_max(&mut c);
    let mut q = c.connect_io_queue(1, 32, icd).unwrap();
    let write = |q: &mut HostQueue| {
        let out = pattern(4096, 3);
        let sqe = rw(0x01, 0, 8, (0, 0));
        q.exec(sqe, Transfer::Out(&out)).unwrap()
    };
    let read = |q: &mut HostQueue| {
        let mut back = vec![0u8; 4096];
        let cqe = q
            .exec(rw(0x02, 0, 8, (0, 0)), Transfer::In(&mut back))
            .unwrap();
        assert_eq!(back, pattern(4096, 3));
        cqe
    };
    // A response capsule carries the SQ head (past the first command, never 0 here); a
    // read completed by C2HData SUCCESS has no CQE of the target's, so none.
    let (w1, w2) = (write(&mut q), write(&mut q));
    assert_eq!(
        (w1.sq_head, w2.sq_head),
        (1, 2),
        "writes get response capsules"
    );
    let r = read(&mut q);
    assert_eq!(r.status(), Status::SUCCESS);
    assert_eq!(r.sq_head, 0, "the read got a response capsule: {r:?}");
    HostController::disconnect_queue(q).unwrap();
    c.disconnect().unwrap();
}

#[test]
fn keep_alive_goes_out_at_half_kato_and_keeps_the_controller() {
    let (_t, addr, _) = target(TcpOptions::default());
    let kato = Duration::from_millis(1000);
    let mut c = HostController::connect(addr, NQN, host(), kato, options(false)).unwrap();
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(300));
        c.keep_alive_due().unwrap();
    }
    // 1.8 s past KATO: alive only because Keep Alive went out.
    let csts = c.property_get(0x1C, false).unwrap();
    assert_eq!(csts & 1, 1, "CSTS.RDY");
}

#[test]
fn a_host_the_subsystem_does_not_allow_gets_the_connect_status() {
    let (_t, addr, _) = target(TcpOptions::default());
    let stranger = HostIdentity {
        hostnqn: "nqn.2014-08.org.nvmexpress:uuid:stranger".into(),
        hostid: [1; 16],
    };
    let e =
        HostController::connect(addr, NQN, stranger, Duration::ZERO, options(false)).unwrap_err();
    assert!(
        matches!(
            e,
            HostError::Status {
                what: "Connect",
                ..
            }
        ),
        "{e}"
    );
}

/// A fake target that answers ICReq with `icresp`, then sends `after` and closes.
fn fake_target(icresp: [u8; 128], after: Vec<u8>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut req = [0u8; 128];
        s.read_exact(&mut req).unwrap();
        s.write_all(&icresp).unwrap();
        let mut capsule = [0u8; 72];
        if s.read_exact(&mut capsule).is_ok() {
            s.write_all(&after).unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
    });
    addr
}

fn icresp(maxh2cdata: u32, digests: u8) -> [u8; 128] {
    let mut r = [0u8; 128];
    r[0] = 0x01;
    r[2] = 128;
    r[4] = 128;
    r[11] = digests;
    r[12..16].copy_from_slice(&maxh2cdata.to_le_bytes());
    r
}

fn bad_icresp_is_refused(r: [u8; 128], why: &str) {
    let addr = fake_target(r, vec![]);
    let e = HostQueue::connect(addr, &options(false)).unwrap_err();
    assert!(matches!(e, HostError::Protocol(_)), "{why}: {e}");
}

#[test]
fn an_icresp_that_breaks_the_binding_is_refused() {
    let mut wrong_type = icresp(4096, 0);
    wrong_type[0] = 0x05;
    bad_icresp_is_refused(wrong_type, "type");
    bad_icresp_is_refused(icresp(100, 0), "MAXH2CDATA below 4096");
    bad_icresp_is_refused(icresp(4096, 1), "a digest not asked for");
}

/// One read command against a fake target whose answer is `after`.
fn read_against(after: Vec<u8>) -> HostError {
    let addr = fake_target(icresp(8192, 0), after);
    let mut q = HostQueue::connect(addr, &options(false)).unwrap();
    let mut buf = [0u8; 512];
    q.exec(rw(0x02, 0, 1, (0, 0)), Transfer::In(&mut buf))
        .unwrap_err()
}

fn c2h_data(cid: u16, offset: u32, data: &[u8]) -> Vec<u8> {
    let mut p = vec![0x07, 0x0C, 24, 24];
    p.extend_from_slice(&(24 + data.len() as u32).to_le_bytes());
    p.extend_from_slice(&cid.to_le_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(&offset.to_le_bytes());
    p.extend_from_slice(&(data.len() as u32).to_le_bytes());
    p.extend_from_slice(&[0; 4]);
    p.extend_from_slice(data);
    p
}

#[test]
fn c2h_data_outside_the_command_is_an_error_not_a_write_out_of_bounds() {
    let beyond = read_against(c2h_data(1, 256, &[0xAA; 512]));
    assert!(
        matches!(beyond, HostError::Protocol(m) if m.contains("beyond")),
        "{beyond}"
    );
    let other_cid = read_against(c2h_data(7, 0, &[0xAA; 512]));
    assert!(
        matches!(other_cid, HostError::Protocol(m) if m.contains("CID")),
        "{other_cid}"
    );
    let short = read_against(c2h_data(1, 0, &[0xAA; 256]));
    assert!(
        matches!(short, HostError::Protocol(m) if m.contains("SUCCESS")),
        "{short}"
    );
}

#[test]
fn a_pdu_type_a_target_never_sends_is_an_error() {
    let mut h2c = c2h_data(1, 0, &[0; 512]);
    h2c[0] = 0x06;
    let e = read_against(h2c);
    assert!(
        matches!(e, HostError::Protocol(m) if m.contains("type")),
        "{e}"
    );
}
