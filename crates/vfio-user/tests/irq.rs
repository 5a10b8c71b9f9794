// SPDX-License-Identifier: Apache-2.0
//! GET_IRQ_INFO and SET_IRQS with eventfds in SCM_RIGHTS.
#![allow(
    clippy::unwrap_used,
    clippy::cast_sign_loss,
    clippy::cast_possible_truncation
)]

mod common;

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;

use common::{Call, Harness, peer_closed};
use nvmemu_vfio_user::wire::SetIrqsWire;
use nvmemu_vfio_user::{Client, ClientError, Errno, IrqInfo, SetIrqs};
use rustix::event::{EventfdFlags, eventfd};
use zerocopy::IntoBytes;

fn client() -> (Client, Harness) {
    let (s, h) = Harness::start();
    (Client::from_stream(s).unwrap(), h)
}

fn counter(fd: &OwnedFd) -> u64 {
    let mut b = [0u8; 8];
    rustix::io::read(fd, &mut b).unwrap();
    u64::from_ne_bytes(b)
}

const MSIX_TRIGGER: u32 = SetIrqs::DATA_EVENTFD | SetIrqs::ACTION_TRIGGER;

#[test]
fn irq_info_is_reported() {
    let (mut c, _h) = client();
    assert_eq!(c.irq_info(2).unwrap(), IrqInfo { flags: 9, count: 8 });
    // Index 9 is past VFIO_PCI_NUM_IRQS: the device refuses it with EINVAL.
    assert!(matches!(
        c.irq_info(9),
        Err(ClientError::Remote {
            errno: Errno::INVAL,
            ..
        })
    ));
}

#[test]
fn set_irqs_with_three_eventfds_reaches_the_device() {
    let (mut c, h) = client();
    let efds: Vec<OwnedFd> = (0..3)
        .map(|_| eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).unwrap())
        .collect();
    let borrowed: Vec<_> = efds.iter().map(|f| f.as_fd()).collect();
    let req = SetIrqs {
        flags: MSIX_TRIGGER,
        index: 2,
        start: 1,
        count: 3,
    };
    c.set_irqs(&req, &borrowed).unwrap();
    match h.take_calls().as_slice() {
        [
            Call::SetIrqs {
                req: got,
                kind: "eventfd",
                n: 3,
            },
        ] => assert_eq!(*got, req),
        other => panic!("unexpected {other:?}"),
    }
    // The device signalled the fds it received: they are ours.
    for fd in &efds {
        assert_eq!(counter(fd), 1);
    }
}

#[test]
fn set_irqs_deassign_without_fds_and_disable_with_data_none() {
    let (mut c, h) = client();
    c.set_irqs(
        &SetIrqs {
            flags: MSIX_TRIGGER,
            index: 2,
            start: 4,
            count: 4,
        },
        &[],
    )
    .unwrap();
    let none = SetIrqs {
        flags: SetIrqs::DATA_NONE | SetIrqs::ACTION_TRIGGER,
        index: 2,
        start: 0,
        count: 0,
    };
    c.set_irqs(&none, &[]).unwrap();
    let calls = h.take_calls();
    assert!(matches!(
        calls.as_slice(),
        [
            Call::SetIrqs {
                kind: "eventfd",
                n: 0,
                ..
            },
            Call::SetIrqs { kind: "none", .. }
        ]
    ));
}

#[test]
fn set_irqs_bool_data_reaches_the_device() {
    let (mut c, h) = client();
    let w = SetIrqsWire {
        argsz: 22,
        flags: SetIrqs::DATA_BOOL | SetIrqs::ACTION_MASK,
        index: 0,
        start: 0,
        count: 2,
    };
    let mut p = w.as_bytes().to_vec();
    p.extend_from_slice(&[1, 0]);
    let r = c.raw_request(8, 0, &p, &[]).unwrap();
    assert!(!r.header.is_error());
    assert!(matches!(
        h.take_calls().as_slice(),
        [Call::SetIrqs {
            kind: "bool",
            n: 2,
            ..
        }]
    ));
}

#[test]
fn set_irqs_with_wrong_fd_count_is_einval_and_fds_are_closed() {
    let (mut c, h) = client();
    let (a1, b1) = UnixStream::pair().unwrap();
    let (a2, b2) = UnixStream::pair().unwrap();
    let w = SetIrqsWire {
        argsz: 20,
        flags: MSIX_TRIGGER,
        index: 2,
        start: 0,
        count: 3,
    };
    let r = c
        .raw_request(8, 0, w.as_bytes(), &[a1.as_fd(), a2.as_fd()])
        .unwrap();
    assert_eq!(r.header.error, Errno::INVAL.raw_os_error() as u32);
    drop((a1, a2));
    assert!(peer_closed(&b1) && peer_closed(&b2));
    // Fds on a message that takes none (MASK with DATA_NONE) are closed too.
    let (a3, b3) = UnixStream::pair().unwrap();
    let w = SetIrqsWire {
        argsz: 20,
        flags: SetIrqs::DATA_NONE | SetIrqs::ACTION_MASK,
        index: 0,
        start: 0,
        count: 1,
    };
    let r = c.raw_request(8, 0, w.as_bytes(), &[a3.as_fd()]).unwrap();
    assert!(r.header.is_error());
    drop(a3);
    assert!(peer_closed(&b3));
    assert!(h.take_calls().is_empty());
}
