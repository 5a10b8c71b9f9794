// SPDX-License-Identifier: Apache-2.0
//! VERSION negotiation as QEMU 10.1 and SPDK's client do it.
#![allow(
    clippy::unwrap_used,
    clippy::cast_sign_loss,
    clippy::cast_possible_truncation
)]

mod common;

use std::io::Write;

use common::{Harness, message, read_message, spdk_version};
use nvmemu_vfio_user::wire::msg_flags;
use nvmemu_vfio_user::{Client, Errno, SERVER_CAPABILITIES};

const QEMU_CAPS: &[u8] = br#"{"capabilities": {"max_msg_fds": 16, "max_data_xfer_size": 1048576, "pgsizes": 4096, "max_dma_maps": 65535, "write_multiple": true, "migration": {"pgsize": 4096, "max_bitmap_size": 268435456}}}"#;

fn qemu_version() -> Vec<u8> {
    let mut p = vec![0, 0, 0, 0];
    p.extend_from_slice(QEMU_CAPS);
    p.push(0);
    p
}

#[test]
fn qemu_version_with_json_gets_0_0_and_nul_terminated_caps() {
    let (mut s, _h) = Harness::start();
    s.write_all(&message(0x1234, 1, 0, &qemu_version()))
        .unwrap();
    let (h, p) = read_message(&mut s);
    assert_eq!(
        (h.msg_id, h.command, h.flags, h.error),
        (0x1234, 1, msg_flags::TYPE_REPLY, 0)
    );
    assert_eq!(&p[..4], &[0, 0, 0, 0], "major 0, minor 0");
    assert_eq!(*p.last().unwrap(), 0, "JSON is NUL-terminated");
    let json = std::str::from_utf8(&p[4..p.len() - 1]).unwrap();
    assert_eq!(json, SERVER_CAPABILITIES);
    assert_eq!(
        json,
        r#"{"capabilities":{"max_msg_fds":16,"max_data_xfer_size":1048576,"pgsizes":4096,"max_dma_maps":65535}}"#
    );
    // The reply must fit in QEMU's receive buffer (sized like its request).
    assert!(p.len() <= qemu_version().len());
}

#[test]
fn spdk_version_without_json_is_accepted() {
    let (mut s, _h) = Harness::start();
    s.write_all(&message(0, 1, 0, &spdk_version())).unwrap();
    let (h, p) = read_message(&mut s);
    assert!(!h.is_error());
    assert_eq!(&p[..4], &[0, 0, 0, 0]);
    // The session works afterwards.
    s.write_all(&message(
        0,
        4,
        0,
        &[16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ))
    .unwrap();
    let (h, p) = read_message(&mut s);
    assert!(!h.is_error());
    assert_eq!(p.len(), 16);
}

#[test]
fn commands_before_version_get_einval_and_the_stream_stays_usable() {
    let (mut s, _h) = Harness::start();
    s.write_all(&message(
        5,
        4,
        0,
        &[16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ))
    .unwrap();
    let (h, p) = read_message(&mut s);
    assert!(h.is_error());
    assert_eq!((h.msg_id, h.command), (5, 4));
    assert_eq!(h.error, Errno::INVAL.raw_os_error() as u32);
    assert!(p.is_empty(), "error replies are header only");
    s.write_all(&message(6, 1, 0, &spdk_version())).unwrap();
    assert!(!read_message(&mut s).0.is_error());
}

#[test]
fn malformed_json_and_repeated_version_are_einval() {
    let (mut s, _h) = Harness::start();
    for bad in [
        &b"\0\0\0\0{\"capabilities\":\0"[..],
        b"\0\0\0\0{}",
        b"\x01\0\0\0",
    ] {
        s.write_all(&message(1, 1, 0, bad)).unwrap();
        let (h, _) = read_message(&mut s);
        assert_eq!(h.error, Errno::INVAL.raw_os_error() as u32, "{bad:?}");
    }
    s.write_all(&message(2, 1, 0, &qemu_version())).unwrap();
    assert!(!read_message(&mut s).0.is_error());
    s.write_all(&message(3, 1, 0, &qemu_version())).unwrap();
    assert_eq!(
        read_message(&mut s).0.error,
        Errno::INVAL.raw_os_error() as u32
    );
}

#[test]
fn client_negotiates_and_reads_server_caps() {
    let (s, _h) = Harness::start();
    let client = Client::from_stream(s).unwrap();
    let caps = client.server_caps();
    assert_eq!(
        (caps.minor, caps.max_msg_fds, caps.max_data_xfer_size),
        (0, 16, 1 << 20)
    );
}
