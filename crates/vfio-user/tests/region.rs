// SPDX-License-Identifier: Apache-2.0
//! DEVICE_GET_INFO, GET_REGION_INFO (QEMU's retry, SPDK's 4064-byte request), REGION_READ/WRITE.
#![allow(
    clippy::unwrap_used,
    clippy::cast_sign_loss,
    clippy::cast_possible_truncation
)]

mod common;

use std::fs::File;
use std::os::unix::fs::FileExt;

use common::{BAR0_MAGIC, Call, Harness};
use nvmemu_vfio_user::wire::{REGION_FLAG_CAPS, RegionAccessWire, RegionInfoWire};
use nvmemu_vfio_user::{Client, ClientError, Command, DeviceInfo, Errno, SparseArea};
use zerocopy::{FromBytes, IntoBytes};

fn client() -> (Client, Harness) {
    let (s, h) = Harness::start();
    (Client::from_stream(s).unwrap(), h)
}

fn fd_starts_with_magic(fd: std::os::fd::OwnedFd) -> bool {
    let mut head = vec![0u8; BAR0_MAGIC.len()];
    // The fd shares the server's file description (and its offset): read at 0.
    File::from(fd).read_exact_at(&mut head, 0).unwrap();
    head == BAR0_MAGIC
}

#[test]
fn device_info_reports_the_device() {
    let (mut c, _h) = client();
    let info = c.device_info().unwrap();
    assert_eq!(
        info,
        DeviceInfo {
            flags: 3,
            num_regions: 9,
            num_irqs: 5
        }
    );
}

#[test]
fn region_info_argsz_32_is_truncated_then_full_reply_has_caps_and_fd() {
    let (mut c, _h) = client();
    let req = RegionInfoWire {
        argsz: 32,
        index: 0,
        ..Default::default()
    };
    let r = c.raw_request(5, 0, req.as_bytes(), &[]).unwrap();
    assert!(!r.header.is_error());
    assert_eq!(r.payload.len(), 32);
    let (w, _) = RegionInfoWire::read_from_prefix(&r.payload).unwrap();
    assert_eq!((w.argsz, w.index, w.size, w.cap_offset), (64, 0, 0x4000, 0));
    assert_eq!(w.flags & REGION_FLAG_CAPS, 0);
    assert!(r.fds.is_empty(), "no fd with a truncated reply");

    // QEMU's retry: argsz = full size, payload still 32 bytes.
    let req = RegionInfoWire {
        argsz: 64,
        index: 0,
        ..Default::default()
    };
    let mut r = c.raw_request(5, 0, req.as_bytes(), &[]).unwrap();
    assert_eq!(r.payload.len(), 64);
    let (w, caps) = RegionInfoWire::read_from_prefix(&r.payload).unwrap();
    assert_eq!(
        (w.argsz, w.flags, w.cap_offset),
        (64, 7 | REGION_FLAG_CAPS, 32)
    );
    // id 1, version 1, next 0, nr_areas 1, reserved, area {0x1000, 0x1000}
    let mut expect = vec![1u8, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
    expect.extend_from_slice(&0x1000u64.to_ne_bytes());
    expect.extend_from_slice(&0x1000u64.to_ne_bytes());
    assert_eq!(caps, &expect[..]);
    assert_eq!(r.fds.len(), 1);
    assert!(fd_starts_with_magic(r.fds.pop().unwrap()));
}

#[test]
fn client_region_info_follows_caps_and_returns_the_fd() {
    let (mut c, _h) = client();
    let (info, fd) = c.region_info(0).unwrap();
    assert_eq!(info.size, 0x4000);
    assert_eq!(
        info.sparse,
        vec![SparseArea {
            offset: 0x1000,
            size: 0x1000
        }]
    );
    assert!(fd_starts_with_magic(fd.unwrap()));

    // MMAP without sparse areas: the fd comes with the (already full) 32-byte reply.
    let (info, fd) = c.region_info(2).unwrap();
    assert_eq!((info.flags, info.file_offset), (7, 0x2000));
    assert!(info.sparse.is_empty());
    assert!(fd.is_some());

    let (info, fd) = c.region_info(7).unwrap();
    assert_eq!((info.flags, info.size), (3, 4096));
    assert!(fd.is_none());

    match c.region_info(42) {
        Err(ClientError::Remote {
            command: Command::DeviceGetRegionInfo,
            errno,
        }) => {
            assert_eq!(errno, Errno::INVAL)
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn spdk_4064_byte_region_info_request_is_answered_and_stream_stays_in_sync() {
    let (mut c, _h) = client();
    let mut payload = vec![0u8; 4064];
    payload[..32].copy_from_slice(
        RegionInfoWire {
            argsz: 4064,
            index: 0,
            ..Default::default()
        }
        .as_bytes(),
    );
    let r = c.raw_request(5, 0, &payload, &[]).unwrap();
    assert!(!r.header.is_error());
    assert_eq!(r.payload.len(), 64, "min(full, argsz)");
    assert_eq!(r.fds.len(), 1);
    // The next request is parsed from the right place.
    assert_eq!(c.device_info().unwrap().num_regions, 9);
}

#[test]
fn region_write_then_read_round_trips() {
    let (mut c, h) = client();
    c.region_write(0, 0x14, &0x0046_0001u32.to_ne_bytes())
        .unwrap();
    c.region_write(7, 4, &[0x06, 0x04]).unwrap();
    let mut cc = [0u8; 4];
    c.region_read(0, 0x14, &mut cc).unwrap();
    assert_eq!(u32::from_ne_bytes(cc), 0x0046_0001);
    let mut cmd = [0u8; 2];
    c.region_read(7, 4, &mut cmd).unwrap();
    assert_eq!(cmd, [0x06, 0x04]);
    // The whole 4 KiB config space in one read, as QEMU does at realize.
    let mut config = vec![0xffu8; 4096];
    c.region_read(7, 0, &mut config).unwrap();
    assert_eq!(&config[4..6], &[0x06, 0x04]);
    let calls = h.take_calls();
    assert!(
        matches!(&calls[0], Call::Write { index: 0, offset: 0x14, data } if data == &[1, 0, 0x46, 0])
    );
}

#[test]
fn device_errors_are_returned_with_their_errno() {
    let (mut c, _h) = client();
    let mut b = [0u8; 8];
    let e = c.region_read(0, 0xffc, &mut b).unwrap_err();
    assert!(
        matches!(e, ClientError::Remote { command: Command::RegionRead, errno } if errno == Errno::INVAL)
    );
    c.region_read(0, 0xff8, &mut b).unwrap();
}

#[test]
fn region_access_size_rules() {
    let (mut c, _h) = client();
    // count over 1 MiB: E2BIG without reading any data.
    let big = RegionAccessWire {
        offset: 0,
        region: 0,
        count: (1 << 20) + 1,
    };
    let r = c.raw_request(9, 0, big.as_bytes(), &[]).unwrap();
    assert_eq!(r.header.error, Errno::TOOBIG.raw_os_error() as u32);
    // WRITE whose data length disagrees with count: EINVAL, nothing written.
    let mut p = RegionAccessWire {
        offset: 0x20,
        region: 0,
        count: 8,
    }
    .as_bytes()
    .to_vec();
    p.extend_from_slice(&[0xAA; 4]);
    let r = c.raw_request(10, 0, &p, &[]).unwrap();
    assert_eq!(r.header.error, Errno::INVAL.raw_os_error() as u32);
    let mut b = [0u8; 8];
    c.region_read(0, 0x20, &mut b).unwrap();
    assert_eq!(b, [0; 8]);
    // READ reply is the 16-byte prefix plus the data; WRITE reply is the prefix only.
    let w = RegionAccessWire {
        offset: 0x20,
        region: 0,
        count: 4,
    };
    let mut p = w.as_bytes().to_vec();
    p.extend_from_slice(&[1, 2, 3, 4]);
    let r = c.raw_request(10, 0, &p, &[]).unwrap();
    assert_eq!(r.payload, w.as_bytes());
    let r = c.raw_request(9, 0, w.as_bytes(), &[]).unwrap();
    assert_eq!(&r.payload[..16], w.as_bytes());
    assert_eq!(&r.payload[16..], &[1, 2, 3, 4]);
}

#[test]
fn posted_write_gets_no_reply() {
    let (mut c, _h) = client();
    c.region_write_posted(0, 0x24, &[9, 9, 9, 9]).unwrap();
    // A failing posted write is not answered either.
    c.region_write_posted(5, 0, &[1]).unwrap();
    // The next reply read must be this request's (the client checks msg_id).
    let mut b = [0u8; 4];
    c.region_read(0, 0x24, &mut b).unwrap();
    assert_eq!(b, [9, 9, 9, 9]);
}

#[test]
fn reset_reaches_the_device() {
    let (mut c, h) = client();
    c.reset().unwrap();
    assert!(matches!(h.take_calls().as_slice(), [Call::Reset]));
}
