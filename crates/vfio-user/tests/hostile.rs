// SPDX-License-Identifier: Apache-2.0
//! Hostile and broken clients: unknown commands, lying sizes, truncation, fd floods.
#![allow(
    clippy::unwrap_used,
    clippy::cast_sign_loss,
    clippy::cast_possible_truncation
)]

mod common;

use std::io::Write;
use std::mem::MaybeUninit;
use std::net::Shutdown;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;

use common::{Call, Harness, message, peer_closed, read_message, spdk_version};
use nvmemu_vfio_user::wire::{DmaMapWire, msg_flags};
use nvmemu_vfio_user::{Client, ClientError, ConnectionError, Errno, FrameError, Header};
use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
use zerocopy::IntoBytes;

fn negotiated() -> (UnixStream, Harness) {
    let (mut s, h) = Harness::start();
    s.write_all(&message(0, 1, 0, &spdk_version())).unwrap();
    assert!(!read_message(&mut s).0.is_error());
    (s, h)
}

fn device_info_works(s: &mut UnixStream, id: u16) {
    s.write_all(&message(id, 4, 0, &16u32.to_ne_bytes().repeat(4)))
        .unwrap();
    let (h, p) = read_message(s);
    assert_eq!(
        (h.msg_id, h.command, h.is_error(), p.len()),
        (id, 4, false, 16)
    );
}

fn errno(e: Errno) -> u32 {
    e.raw_os_error() as u32
}

#[test]
fn unknown_command_with_payload_is_drained_and_answered() {
    let (mut s, _h) = negotiated();
    s.write_all(&message(7, 99, 0, &[0x5a; 300])).unwrap();
    let (h, p) = read_message(&mut s);
    assert_eq!(
        (h.msg_id, h.command, h.error),
        (7, 99, errno(Errno::NOTSUP))
    );
    assert!(h.is_error() && p.is_empty());
    device_info_works(&mut s, 8);
    // Known but unsupported commands (REGION_IO_FDS, DMA_READ, WRITE_MULTI, migration) too.
    for cmd in [6u16, 11, 12, 14, 15, 16, 17, 18] {
        s.write_all(&message(cmd, cmd, 0, &[1; 24])).unwrap();
        assert_eq!(
            read_message(&mut s).0.error,
            errno(Errno::NOTSUP),
            "command {cmd}"
        );
    }
    device_info_works(&mut s, 9);
}

#[test]
fn msg_size_below_header_size_is_einval_and_stream_continues() {
    let (mut s, _h) = negotiated();
    let h = Header {
        msg_id: 3,
        command: 4,
        msg_size: 8,
        flags: 0,
        error: 0,
    };
    s.write_all(h.as_bytes()).unwrap();
    let (r, _) = read_message(&mut s);
    assert_eq!((r.msg_id, r.error), (3, errno(Errno::INVAL)));
    device_info_works(&mut s, 4);
}

#[test]
fn oversized_msg_size_is_drained_and_rejected() {
    let (s, _h) = negotiated();
    let mut writer = s.try_clone().unwrap();
    let mut reader = s;
    let junk = 3 << 20;
    let t = std::thread::spawn(move || {
        let h = Header {
            msg_id: 5,
            command: 10,
            msg_size: 16 + junk as u32,
            flags: 0,
            error: 0,
        };
        writer.write_all(h.as_bytes()).unwrap();
        writer.write_all(&vec![0xEE; junk]).unwrap();
        writer
    });
    let (r, _) = read_message(&mut reader);
    assert_eq!((r.msg_id, r.error), (5, errno(Errno::TOOBIG)));
    drop(t.join().unwrap());
    device_info_works(&mut reader, 6);
}

#[test]
fn payload_shorter_than_declared_then_eof_ends_the_connection_cleanly() {
    let (mut s, h) = negotiated();
    let hd = Header {
        msg_id: 1,
        command: 9,
        msg_size: 16 + 100,
        flags: 0,
        error: 0,
    };
    s.write_all(hd.as_bytes()).unwrap();
    s.write_all(&[0; 10]).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let result = h.join_ref();
    assert!(matches!(
        result,
        Err(ConnectionError::Frame(FrameError::Truncated {
            expected: 100,
            received: 10
        }))
    ));
}

#[test]
fn eof_inside_the_header_ends_the_connection() {
    let (mut s, h) = negotiated();
    s.write_all(&[1, 0, 4]).unwrap();
    drop(s);
    assert!(matches!(
        h.join_ref(),
        Err(ConnectionError::Frame(FrameError::Truncated { .. }))
    ));
}

#[test]
fn no_reply_error_is_not_answered() {
    let (mut s, _h) = negotiated();
    // Malformed REGION_WRITE (count 8, 2 data bytes) with NO_REPLY, and an unknown command.
    let mut p = 0u64.to_ne_bytes().to_vec();
    p.extend_from_slice(&0u32.to_ne_bytes());
    p.extend_from_slice(&8u32.to_ne_bytes());
    p.extend_from_slice(&[1, 2]);
    s.write_all(&message(1, 10, msg_flags::NO_REPLY, &p))
        .unwrap();
    s.write_all(&message(2, 77, msg_flags::NO_REPLY, &[]))
        .unwrap();
    // A "reply" sent by the client is ignored too.
    s.write_all(&message(3, 4, msg_flags::TYPE_REPLY, &[]))
        .unwrap();
    device_info_works(&mut s, 4);
}

#[test]
fn unknown_message_types_get_einval_and_the_stream_continues() {
    let (mut s, _h) = negotiated();
    // Types 2..=15 are not defined: each gets an error reply (type reply, ERROR, EINVAL)
    // carrying its id and command, even with a payload; NO_REPLY is still honoured.
    for ty in 2u32..=15 {
        let id = 100 + ty as u16;
        s.write_all(&message(id, 4, ty, &[0xab; 40])).unwrap();
        let (h, p) = read_message(&mut s);
        assert_eq!(
            (h.msg_id, h.command, h.msg_type(), h.is_error(), h.error),
            (id, 4, msg_flags::TYPE_REPLY, true, errno(Errno::INVAL)),
            "type {ty}"
        );
        assert!(p.is_empty());
    }
    s.write_all(&message(1, 4, 7 | msg_flags::NO_REPLY, &[]))
        .unwrap();
    // Before VERSION too: a fresh client sending an unknown type first is answered.
    let (mut fresh, _h2) = Harness::start();
    fresh.write_all(&message(9, 1, 3, &spdk_version())).unwrap();
    let (h, _) = read_message(&mut fresh);
    assert_eq!((h.msg_id, h.error), (9, errno(Errno::INVAL)));
    device_info_works(&mut s, 2);
}

/// Sends `fds` with one sendmsg, bypassing the client's 16-fd limit.
fn send_with_fds(s: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) {
    let mut space = vec![MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    assert!(control.push(SendAncillaryMessage::ScmRights(fds)));
    let n = sendmsg(
        s,
        &[std::io::IoSlice::new(bytes)],
        &mut control,
        SendFlags::empty(),
    )
    .unwrap();
    assert_eq!(n, bytes.len());
}

#[test]
fn more_than_sixteen_fds_are_all_closed_and_rejected() {
    let (mut s, h) = negotiated();
    let pairs: Vec<(UnixStream, UnixStream)> =
        (0..20).map(|_| UnixStream::pair().unwrap()).collect();
    let fds: Vec<_> = pairs.iter().map(|(a, _)| a.as_fd()).collect();
    let w = DmaMapWire {
        argsz: 32,
        flags: 3,
        offset: 0,
        addr: 0x1000,
        size: 0x1000,
    };
    send_with_fds(&s, &message(9, 2, 0, w.as_bytes()), &fds);
    let (r, _) = read_message(&mut s);
    assert_eq!((r.msg_id, r.error), (9, errno(Errno::INVAL)));
    for (a, b) in pairs {
        drop(a);
        assert!(peer_closed(&b));
    }
    assert!(h.take_calls().is_empty(), "the device never saw the map");
    device_info_works(&mut s, 10);
}

#[test]
fn fds_on_commands_that_take_none_are_closed() {
    let (mut s, _h) = negotiated();
    let (a, b) = UnixStream::pair().unwrap();
    send_with_fds(
        &s,
        &message(2, 4, 0, &16u32.to_ne_bytes().repeat(4)),
        &[a.as_fd()],
    );
    let (r, p) = read_message(&mut s);
    assert!(!r.is_error());
    assert_eq!(p.len(), 16);
    drop(a);
    assert!(peer_closed(&b));
}

#[test]
fn client_rejects_fd_floods_before_sending() {
    let (s, _h) = Harness::start();
    let mut c = Client::from_stream(s).unwrap();
    let pairs: Vec<(UnixStream, UnixStream)> =
        (0..17).map(|_| UnixStream::pair().unwrap()).collect();
    let fds: Vec<_> = pairs.iter().map(|(a, _)| a.as_fd()).collect();
    assert!(matches!(
        c.raw_request(2, 0, &[0; 32], &fds),
        Err(ClientError::Frame(FrameError::TooManyFds { count: 17 }))
    ));
    assert!(c.device_info().is_ok());
}

#[test]
fn stream_desync_attempt_with_short_region_info_request() {
    let (mut s, _h) = negotiated();
    // 8 bytes of region-info request: too short for the struct, drained, EINVAL.
    s.write_all(&message(1, 5, 0, &[32, 0, 0, 0, 0, 0, 0, 0]))
        .unwrap();
    assert_eq!(read_message(&mut s).0.error, errno(Errno::INVAL));
    device_info_works(&mut s, 2);
}

#[test]
fn disconnected_is_called_once_on_eof() {
    let (s, h) = negotiated();
    drop(s);
    let calls = h.calls.clone();
    assert!(h.join_ref().is_ok());
    let calls = calls.lock().unwrap();
    assert_eq!(
        calls
            .iter()
            .filter(|c| matches!(c, Call::Disconnected))
            .count(),
        1
    );
}
