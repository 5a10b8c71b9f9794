// SPDX-License-Identifier: Apache-2.0
//! Hostile vfio-user clients against the real target: malformed and lying messages,
//! interrupt fds that are not eventfds, and clients that do not keep up their side of the
//! socket. Each gets its exact errno (or is dropped), and afterwards the same server serves
//! the next client (fresh attach + verified I/O).
#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use common::{RawConn, access_payload, assert_serves_next_client, device_info_payload, errno_of};
use nvmemu_vfio_user::{Errno, SetIrqs};

const DEVICE_GET_INFO: u16 = 4;
const REGION_READ: u16 = 9;

// ---------------------------------------------------------------------------------------
// Framing and commands.

#[test]
fn truncated_payloads_get_einval_and_the_stream_stays_in_sync() {
    let t = common::start_default();
    let mut c = RawConn::connect_negotiated(&t);
    // Each command's fixed struct cut short.
    for (cmd, len) in [
        (2u16, 31usize),
        (3, 23),
        (4, 15),
        (5, 31),
        (7, 15),
        (8, 19),
        (9, 15),
        (10, 15),
    ] {
        let r = c.request(cmd, 0, &vec![0u8; len]);
        assert_eq!(r.header.command, cmd);
        assert_eq!(r.errno(), Errno::INVAL, "command {cmd} with {len} bytes");
    }
    // argsz smaller than the struct it describes.
    let mut info = device_info_payload();
    info[0] = 8;
    assert_eq!(c.request(DEVICE_GET_INFO, 0, &info).errno(), Errno::INVAL);
    // REGION_WRITE whose data is shorter than its count.
    let mut w = access_payload(7, 0x3C, 4);
    w.push(1);
    assert_eq!(c.request(10, 0, &w).errno(), Errno::INVAL);
    // Still in sync.
    c.request(DEVICE_GET_INFO, 0, &device_info_payload())
        .ok(DEVICE_GET_INFO);
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn message_sizes_that_lie_are_refused() {
    let t = common::start_default();
    // msg_size smaller than the header: rejected with EINVAL.
    let mut c = RawConn::connect_negotiated(&t);
    let mut h = vec![0u8; 16];
    h[2..4].copy_from_slice(&DEVICE_GET_INFO.to_le_bytes());
    h[4..8].copy_from_slice(&8u32.to_le_bytes());
    c.send_bytes(&h, &[]);
    assert_eq!(c.recv().errno(), Errno::INVAL);
    drop(c);
    // A header that promises more than is ever sent, then the client hangs up mid-message.
    let mut c = RawConn::connect_negotiated(&t);
    let mut h = vec![0u8; 16];
    h[2..4].copy_from_slice(&REGION_READ.to_le_bytes());
    h[4..8].copy_from_slice(&4096u32.to_le_bytes());
    h.extend_from_slice(&[0u8; 10]);
    c.send_bytes(&h, &[]);
    drop(c);
    // The server drops that connection and accepts the next.
    assert_serves_next_client(&t);
}

#[test]
fn oversized_messages_are_drained_and_refused_with_e2big() {
    let t = common::start_default();
    let mut c = RawConn::connect_negotiated(&t);
    // 2 MiB of payload, more than max_data_xfer_size + room: drained, not allocated.
    let big = vec![0x41u8; 2 << 20];
    let writer = {
        let mut stream = c.stream.try_clone().unwrap();
        let mut msg = vec![0u8; 16];
        msg[0..2].copy_from_slice(&77u16.to_le_bytes());
        msg[2..4].copy_from_slice(&REGION_READ.to_le_bytes());
        msg[4..8].copy_from_slice(&((16 + big.len()) as u32).to_le_bytes());
        std::thread::spawn(move || {
            use std::io::Write;
            stream.write_all(&msg).unwrap();
            stream.write_all(&big).unwrap();
        })
    };
    let r = c.recv();
    writer.join().unwrap();
    assert_eq!(r.header.msg_id, 77);
    assert_eq!(r.errno(), Errno::TOOBIG);
    // REGION_READ of more than 1 MiB in a well-sized message.
    let r = c.request(REGION_READ, 0, &access_payload(7, 0, (1 << 20) + 1));
    assert_eq!(r.errno(), Errno::TOOBIG);
    c.request(DEVICE_GET_INFO, 0, &device_info_payload())
        .ok(DEVICE_GET_INFO);
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn unknown_and_unsupported_commands_get_enotsup_with_their_payload_drained() {
    let t = common::start_default();
    let mut c = RawConn::connect_negotiated(&t);
    for cmd in [0u16, 6, 11, 12, 14, 15, 16, 17, 18, 19, 999, u16::MAX] {
        // A payload that looks like a header: if it were not drained, it would be parsed.
        let mut payload = vec![0u8; 100];
        payload[2..4].copy_from_slice(&DEVICE_GET_INFO.to_le_bytes());
        payload[4..8].copy_from_slice(&32u32.to_le_bytes());
        let r = c.request(cmd, 0, &payload);
        assert_eq!(r.header.command, cmd);
        assert_eq!(r.errno(), Errno::NOTSUP, "command {cmd}");
    }
    c.request(DEVICE_GET_INFO, 0, &device_info_payload())
        .ok(DEVICE_GET_INFO);
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn commands_before_version_and_a_second_version_are_refused() {
    let t = common::start_default();
    let mut c = RawConn::connect(&t);
    assert_eq!(
        c.request(DEVICE_GET_INFO, 0, &device_info_payload())
            .errno(),
        Errno::INVAL
    );
    // Major 1 is not a version we speak.
    assert_eq!(c.request(1, 0, &[1, 0, 0, 0]).errno(), Errno::INVAL);
    c.request(1, 0, &[0, 0, 1, 0]).ok(1);
    assert_eq!(c.request(1, 0, &[0, 0, 1, 0]).errno(), Errno::INVAL);
    drop(c);
    assert_serves_next_client(&t);
}

#[test]
fn bad_region_indexes_and_accesses_get_einval() {
    let t = common::start_default();
    let mut c = nvmemu_vfio_user::Client::connect(&t.socket()).unwrap();
    let mut b = [0u8; 4];
    for index in [1u32, 2, 3, 6, 8, 9, 100, u32::MAX] {
        assert_eq!(
            errno_of(c.region_read(index, 0, &mut b)),
            Errno::INVAL,
            "region {index}"
        );
        assert_eq!(
            errno_of(c.region_write(index, 0, &b)),
            Errno::INVAL,
            "region {index}"
        );
    }
    // NVMe registers only take 4- and 8-byte aligned accesses.
    let mut two = [0u8; 2];
    assert_eq!(errno_of(c.region_read(0, 0, &mut two)), Errno::INVAL);
    assert_eq!(errno_of(c.region_read(0, 2, &mut b)), Errno::INVAL);
    // A read of zero bytes is not an access.
    assert_eq!(errno_of(c.region_read(7, 0, &mut [])), Errno::INVAL);
    drop(c);
    assert_serves_next_client(&t);
}

// ---------------------------------------------------------------------------------------
// Interrupt fds: only eventfds, never a blocking write.

const MSIX: u32 = 2;
const ERR: u32 = 3;

fn set_irqs_req(index: u32, flags: u32, count: u32) -> SetIrqs {
    SetIrqs {
        flags,
        index,
        start: 0,
        count,
    }
}

#[test]
fn a_pipe_as_interrupt_fd_is_refused_with_einval() {
    let t = common::start_default();
    let mut h = common::RawHost::connect(&t);
    let (_rd, wr) = rustix::pipe::pipe().unwrap();
    let trig = SetIrqs::DATA_EVENTFD | SetIrqs::ACTION_TRIGGER;
    for index in [MSIX, ERR] {
        let r = h
            .client
            .set_irqs(&set_irqs_req(index, trig, 1), &[wr.as_fd()]);
        assert_eq!(errno_of(r), Errno::INVAL, "index {index}");
    }
    // The same client goes on: an eventfd is accepted, I/O works.
    let efd = common::eventfd();
    h.client
        .set_irqs(&set_irqs_req(MSIX, trig, 1), &[efd.as_fd()])
        .unwrap();
    let mut q = h.create_io_pair(1, false, 0);
    h.verified_io(&mut q, 16, &common::pattern(4096, 9));
    drop(h);
    assert_serves_next_client(&t);
}

#[test]
fn a_full_blocking_eventfd_does_not_stall_the_poller_or_the_control_thread() {
    let t = common::start_default();
    let mut h = common::RawHost::connect(&t);
    // Blocking eventfds at their maximum count: one more write would block for ever.
    let full: Vec<_> = (0..3)
        .map(|_| {
            let fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).unwrap();
            rustix::io::write(&fd, &(u64::MAX - 1).to_ne_bytes()).unwrap();
            fd
        })
        .collect();
    let trig = SetIrqs::DATA_EVENTFD | SetIrqs::ACTION_TRIGGER;
    let msix: Vec<_> = full[..2].iter().map(|f| f.as_fd()).collect();
    h.client
        .set_irqs(&set_irqs_req(MSIX, trig, 2), &msix)
        .unwrap();
    h.client
        .set_irqs(&set_irqs_req(ERR, trig, 1), &[full[2].as_fd()])
        .unwrap();
    // MSI-X on; I/O queue 1 interrupts on vector 1: every completion signals a full fd.
    h.client
        .region_write(7, 0x84 + 2, &(1u16 << 15).to_le_bytes())
        .unwrap();
    let mut q = h.create_io_pair(1, true, 1);
    for lba in 0..20 {
        h.verified_io(&mut q, lba * 8, &common::pattern(4096, lba as u8));
    }
    // A loopback trigger of the ERR index (control thread) returns too.
    h.client
        .set_irqs(
            &set_irqs_req(ERR, SetIrqs::DATA_NONE | SetIrqs::ACTION_TRIGGER, 1),
            &[],
        )
        .unwrap();
    drop(h);
    assert_serves_next_client(&t);
}

// ---------------------------------------------------------------------------------------
// Clients that do not keep up their side: deadlines.

fn short_deadlines() -> nvmemu_device::Deadlines {
    nvmemu_device::Deadlines {
        version: Duration::from_millis(2500),
        message: Duration::from_millis(300),
        reply: Duration::from_millis(300),
    }
}

/// Read until the server closes the connection; how long that took.
fn time_to_eof(c: &mut RawConn) -> Duration {
    use std::io::Read;
    let start = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => return start.elapsed(),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return start.elapsed(),
            Err(e) => panic!("no EOF within the deadline: {e}"),
        }
    }
}

/// Queue `n` 4 KiB config-space reads without reading a reply (from a thread, since the
/// client's own sends block once the server stops reading).
fn flood_without_reading(c: &RawConn, n: usize) -> std::thread::JoinHandle<()> {
    let mut stream = c.stream.try_clone().unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    std::thread::spawn(move || {
        use std::io::Write;
        let payload = access_payload(7, 0, 4096);
        for id in 0..n {
            let mut msg = vec![0u8; 16];
            msg[0..2].copy_from_slice(&(id as u16).to_le_bytes());
            msg[2..4].copy_from_slice(&REGION_READ.to_le_bytes());
            msg[4..8].copy_from_slice(&((16 + payload.len()) as u32).to_le_bytes());
            msg.extend_from_slice(&payload);
            if stream.write_all(&msg).is_err() {
                return;
            }
        }
    })
}

#[test]
fn a_client_that_never_reads_its_replies_is_dropped() {
    let t = common::start_with_deadlines(short_deadlines());
    let mut c = RawConn::connect_negotiated(&t);
    // 2000 replies of 4 KiB are far more than the socket buffers hold.
    let writer = flood_without_reading(&c, 2000);
    // Let the server block on a full socket, then start reading: by then it has given up.
    std::thread::sleep(Duration::from_millis(1000));
    let waited = time_to_eof(&mut c);
    writer.join().unwrap();
    assert!(waited < Duration::from_secs(5), "EOF after {waited:?}");
    // Its control thread is free: the mailbox answers and the next client is served.
    t.target.on_controller(t.id, |_| ()).unwrap();
    assert_serves_next_client(&t);
}

#[test]
fn removing_a_controller_does_not_wait_for_a_client_that_never_reads() {
    // 60 s deadlines: removal must not wait for them to pass.
    let t = common::start_patient();
    let c = RawConn::connect_negotiated(&t);
    let writer = flood_without_reading(&c, 2000);
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    t.target.remove_controller(t.id).unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(20), "removal took {took:?}");
    drop(c);
    writer.join().unwrap();
}

#[test]
fn a_client_that_sends_a_byte_at_a_time_is_dropped() {
    let t = common::start_with_deadlines(short_deadlines());
    let mut c = RawConn::connect_negotiated(&t);
    let mut msg = vec![0u8; 16];
    msg[2..4].copy_from_slice(&DEVICE_GET_INFO.to_le_bytes());
    msg[4..8].copy_from_slice(&32u32.to_le_bytes());
    msg.extend_from_slice(&device_info_payload());
    let start = Instant::now();
    let mut dropped = false;
    for b in &msg {
        use std::io::Write;
        if c.stream.write_all(std::slice::from_ref(b)).is_err() {
            dropped = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // 32 bytes at 10 per second would take 3.2 s; the message deadline is 0.3 s.
    if !dropped {
        assert!(
            c.closed_by_server(),
            "a whole message, slowly, was answered"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(4));
    assert_serves_next_client(&t);
}

#[test]
fn a_half_closed_client_is_noticed() {
    let t = common::start_with_deadlines(short_deadlines());
    let mut c = RawConn::connect_negotiated(&t);
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(c.closed_by_server());
    assert_serves_next_client(&t);
}
