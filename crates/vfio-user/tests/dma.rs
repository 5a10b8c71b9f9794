// SPDX-License-Identifier: Apache-2.0
//! DMA_MAP / DMA_UNMAP, with and without fds.
#![allow(
    clippy::unwrap_used,
    clippy::cast_sign_loss,
    clippy::cast_possible_truncation
)]

mod common;

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;

use common::{Call, Harness, peer_closed};
use nvmemu_vfio_user::wire::{DmaMapWire, DmaUnmapWire};
use nvmemu_vfio_user::{Client, ClientError, DmaMap, DmaUnmap, Errno};
use zerocopy::IntoBytes;

fn client() -> (Client, Harness) {
    let (s, h) = Harness::start();
    (Client::from_stream(s).unwrap(), h)
}

#[test]
fn dma_map_with_fd_hands_the_same_file_to_the_device() {
    let (mut c, h) = client();
    let mut mem = tempfile::tempfile().unwrap();
    mem.write_all(&[0u8; 0x1000]).unwrap();
    mem.write_all(b"guestram").unwrap();
    let map = DmaMap {
        flags: 3,
        offset: 0x1000,
        iova: 0x2000_0000_0000,
        size: 0x20_0000,
    };
    c.dma_map(&map, Some(mem.as_fd())).unwrap();
    let calls = h.take_calls();
    match calls.as_slice() {
        [
            Call::Map {
                map: got,
                fd_head: Some(head),
            },
        ] => {
            assert_eq!(*got, map);
            assert_eq!(head, b"guestram");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn dma_map_without_fd_is_accepted() {
    let (mut c, h) = client();
    let map = DmaMap {
        flags: 1,
        offset: 0,
        iova: 0xfeb0_0000,
        size: 0x4000,
    };
    c.dma_map(&map, None).unwrap();
    assert!(matches!(
        h.take_calls().as_slice(),
        [Call::Map { fd_head: None, .. }]
    ));
}

#[test]
fn dma_map_with_two_fds_is_einval_and_both_are_closed() {
    let (mut c, h) = client();
    let (a1, b1) = UnixStream::pair().unwrap();
    let (a2, b2) = UnixStream::pair().unwrap();
    let w = DmaMapWire {
        argsz: 32,
        flags: 3,
        offset: 0,
        addr: 0x1000,
        size: 0x1000,
    };
    let r = c
        .raw_request(2, 0, w.as_bytes(), &[a1.as_fd(), a2.as_fd()])
        .unwrap();
    assert_eq!(r.header.error, Errno::INVAL.raw_os_error() as u32);
    drop((a1, a2));
    assert!(
        peer_closed(&b1) && peer_closed(&b2),
        "server closed the extra fds"
    );
    assert!(h.take_calls().is_empty());
}

#[test]
fn dma_unmap_with_attached_fd_like_spdk_closes_it_and_echoes_the_struct() {
    let (mut c, h) = client();
    let (a, b) = UnixStream::pair().unwrap();
    let w = DmaUnmapWire {
        argsz: 24,
        flags: 0,
        addr: 0x2000_0000_0000,
        size: 0x20_0000,
    };
    let r = c.raw_request(3, 0, w.as_bytes(), &[a.as_fd()]).unwrap();
    assert!(!r.header.is_error());
    assert_eq!(r.payload, w.as_bytes());
    assert!(r.fds.is_empty());
    drop(a);
    assert!(peer_closed(&b));
    match h.take_calls().as_slice() {
        [Call::Unmap(u)] => assert_eq!(
            *u,
            DmaUnmap {
                flags: 0,
                iova: 0x2000_0000_0000,
                size: 0x20_0000
            }
        ),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn dma_unmap_flag_rules() {
    let (mut c, h) = client();
    c.dma_unmap(&DmaUnmap {
        flags: DmaUnmap::FLAG_ALL,
        iova: 0,
        size: 0,
    })
    .unwrap();
    assert!(matches!(h.take_calls().as_slice(), [Call::Unmap(u)] if u.is_all()));
    let errno = |r: Result<(), ClientError>| match r {
        Err(ClientError::Remote { errno, .. }) => errno,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(
        errno(c.dma_unmap(&DmaUnmap {
            flags: DmaUnmap::FLAG_ALL,
            iova: 0x1000,
            size: 0
        })),
        Errno::INVAL
    );
    assert_eq!(
        errno(c.dma_unmap(&DmaUnmap {
            flags: DmaUnmap::FLAG_GET_DIRTY_BITMAP,
            iova: 0x1000,
            size: 0x1000
        })),
        Errno::NOTSUP
    );
    assert!(h.take_calls().is_empty());
}
