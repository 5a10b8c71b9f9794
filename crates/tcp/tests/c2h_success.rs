// SPDX-License-Identifier: Apache-2.0
//! A successful read's C2HData carries SUCCESS in place of a response capsule: for every
//! host with the transport's `c2h_success` on (SPDK's default), and with it off only for a
//! host that disabled SQ flow control, as NVMe/TCP TP 8000 allows.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;

use common::*;
use nvmemu_spec::Status;
use nvmemu_tcp::TcpOptions;
use nvmemu_tcp::pdu::flags::{LAST_PDU, SUCCESS};

/// Writes 4 KiB at LBA 0 over an I/O queue that keeps SQ flow control on (the test host's
/// Connect leaves CATTR 0), reads it back with CID 7, and returns the PDUs that answer the
/// read up to the write after it, whose own response capsule ends the list.
fn answers_to_a_read(opts: TcpOptions) -> Vec<Pdu> {
    let (_t, addr, _) = target(opts);
    let (_admin, mut io) = pair(addr, false, 32);
    let data = pattern(4096, 9);
    let (c, _) = io.exec(rw(0x01, 0, 8, sgl(0x01, 4096)), &data, &[], 0);
    assert_eq!(c.status(), Status::SUCCESS);
    let read = io.capsule(rw(0x02, 0, 8, sgl(0x5A, 4096)), 7, &[]);
    let write = io.capsule(rw(0x01, 8, 8, sgl(0x01, 4096)), 8, &data);
    io.sock.write_all(&[read, write].concat()).unwrap();
    let mut pdus = Vec::new();
    loop {
        let p = io.recv();
        let done = p.completes() == Some(8);
        pdus.push(p);
        if done {
            break;
        }
    }
    let c2h = &pdus[0];
    assert_eq!((c2h.ty, c2h.data.as_slice()), (0x07, data.as_slice()));
    pdus
}

#[test]
fn by_default_a_read_completes_in_its_c2h_data_even_with_sq_flow_control_on() {
    let pdus = answers_to_a_read(TcpOptions::default());
    assert_eq!(pdus[0].flags & (LAST_PDU | SUCCESS), LAST_PDU | SUCCESS);
    assert_eq!(pdus[0].completes(), Some(7));
    // The write's response capsule comes next: no response capsule for the read.
    assert_eq!(pdus.len(), 2, "{pdus:?}");
}

#[test]
fn with_c2h_success_off_a_host_keeping_sq_flow_control_gets_a_response_with_sq_head() {
    let opts = TcpOptions {
        c2h_success: false,
        ..TcpOptions::default()
    };
    let pdus = answers_to_a_read(opts);
    assert_eq!(pdus[0].flags & (LAST_PDU | SUCCESS), LAST_PDU);
    assert_eq!(pdus.len(), 3, "{pdus:?}");
    let resp = pdus[1].cqe();
    assert_eq!((resp.cid, resp.status()), (7, Status::SUCCESS));
    // The write before the read was the queue's first command, the read its second.
    assert_eq!(resp.sq_head, 2);
}
