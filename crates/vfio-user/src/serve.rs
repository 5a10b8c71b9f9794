// SPDX-License-Identifier: Apache-2.0
//! One client per controller, said clearly: the control thread serves the attached client
//! while a doorman thread answers anyone else who connects.
//!
//! The vfio-user protocol has no "busy" message, so a second client gets an error reply to
//! its VERSION request with errno EBUSY, and the socket is closed. QEMU reports an error
//! reply to VERSION as a failed device realize; our [`Client`](crate::Client) turns it into
//! [`ClientError::Busy`](crate::ClientError::Busy). Without this, a second client would wait
//! in the listen queue, unanswered, for as long as the first stays.

use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tracing::info;

use crate::Errno;
use crate::StopHandle;
use crate::device::Device;
use crate::frame::{Channel, Incoming, Limits};
use crate::listener::Listener;
use crate::server::{Deadlines, serve_connection};
use crate::wire::{Command, Header, msg_flags};

/// Longest wait for a refused client's VERSION, so a silent one cannot keep the doorman
/// from handing the next client over once the controller is free.
const REFUSAL_WAIT: Duration = Duration::from_secs(1);
/// Largest VERSION payload read from a refused client (more is drained, not allocated).
const REFUSAL_MAX_PAYLOAD: usize = 4096;

/// How long a new client may wait for the attached one to finish leaving before it is
/// refused: a client that disconnects and reconnects at once must not be told "busy"
/// because the control thread has not yet seen its old connection close.
const HANDOVER_GRACE: Duration = Duration::from_secs(1);

/// Serve the clients of `listener` one at a time against `device` until `stop` is stopped.
/// Clients who connect while one is attached are refused with EBUSY (see the module docs).
pub fn serve_clients(
    listener: &Listener,
    device: &mut dyn Device,
    stop: &StopHandle,
    deadlines: &Deadlines,
) {
    // Rendezvous: a hand-over succeeds only while this thread waits in `recv`, i.e. while
    // no client is attached.
    let (handover, clients) = mpsc::sync_channel::<UnixStream>(0);
    std::thread::scope(|s| {
        let doorman = std::thread::Builder::new()
            .name("nvmemu-doorman".into())
            .spawn_scoped(s, move || doorman(listener, handover, stop, deadlines));
        if let Err(e) = doorman {
            tracing::error!(
                "cannot start the doorman of {}: {e}",
                listener.path().display()
            );
            return;
        }
        while let Ok(stream) = clients.recv() {
            info!("client connected to {}", listener.path().display());
            match serve_connection(stream, device, stop, deadlines) {
                Ok(()) => info!("client of {} disconnected", listener.path().display()),
                Err(e) => info!(
                    "client of {} dropped: {}",
                    listener.path().display(),
                    chain(&e)
                ),
            }
            if stop.is_stopped() {
                break;
            }
        }
        // Dropping the receiver ends a doorman waiting to hand a client over.
        drop(clients);
    });
}

/// Accept clients until `stop` is stopped: hand each to the control thread once it is free
/// (waiting at most [`HANDOVER_GRACE`]), refuse it otherwise.
fn doorman(
    listener: &Listener,
    handover: mpsc::SyncSender<UnixStream>,
    stop: &StopHandle,
    deadlines: &Deadlines,
) {
    loop {
        let mut stream = match listener.accept(stop) {
            Ok(Some(stream)) => stream,
            Ok(None) => return,
            Err(e) => {
                tracing::error!("accept on {} failed: {e}", listener.path().display());
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let since = Instant::now();
        loop {
            match handover.try_send(stream) {
                Ok(()) => break,
                Err(mpsc::TrySendError::Disconnected(_)) => return,
                Err(mpsc::TrySendError::Full(back)) => stream = back,
            }
            if stop.is_stopped() {
                return;
            }
            if since.elapsed() >= HANDOVER_GRACE {
                info!(
                    "second client on {} refused: the controller is in use by another client",
                    listener.path().display()
                );
                refuse(stream, stop, deadlines);
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Answer the refused client's VERSION (if it sends one soon) with EBUSY, then close.
fn refuse(stream: UnixStream, stop: &StopHandle, deadlines: &Deadlines) {
    let wait = deadlines.version.min(REFUSAL_WAIT);
    let mut channel = Channel::new(stream, REFUSAL_MAX_PAYLOAD).with_limits(Limits {
        idle_deadline: Some(Instant::now() + wait),
        message: Some(wait),
        send: Some((wait, stop.clone())),
    });
    let header = match channel.recv(Some(stop)) {
        Ok(Incoming::Frame(f)) => f.header,
        Ok(Incoming::Rejected { header, .. }) => header,
        Ok(Incoming::Eof | Incoming::Stopped) | Err(_) => return,
    };
    if header.msg_type() != msg_flags::TYPE_COMMAND || header.no_reply() {
        return;
    }
    let reply = Header {
        msg_id: header.msg_id,
        command: header.command,
        msg_size: 0,
        flags: msg_flags::TYPE_REPLY | msg_flags::ERROR,
        error: Errno::BUSY.raw_os_error().unsigned_abs(),
    };
    if header.command() != Command::Version {
        tracing::debug!(target: "guest", command = ?header.command(), "refused client's first message is not VERSION");
    }
    let _ = channel.send(reply, &[], &[]);
}

/// An error and its sources, "a: b: c".
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}
