// SPDX-License-Identifier: Apache-2.0
//! One client per controller, the others queued: the control thread serves the attached
//! client while a doorman thread accepts everyone else who connects.
//!
//! As with SPDK's `nvmf_tgt`, a client that connects while another is attached waits,
//! unanswered, until the first leaves, and then runs. The doorman (`doorman.rs`) keeps
//! that queue bounded and never waits on one connection, so silent or hostile local
//! clients cannot keep an honest client from the controller, nor from an answer: once
//! [`MAX_WAITING`](crate::MAX_WAITING) clients wait, the next one's VERSION gets an error
//! reply with errno EBUSY (the protocol has no "busy" message), which our
//! [`Client`](crate::Client) reports as [`ClientError::Busy`](crate::ClientError::Busy).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;

use tracing::info;

use crate::StopHandle;
use crate::device::Device;
use crate::doorman::Doorman;
use crate::listener::Listener;
use crate::server::{Deadlines, serve_connection};

/// Serve the clients of `listener` one at a time against `device` until `stop` is stopped.
/// Clients who connect while one is attached wait their turn (see the module docs).
pub fn serve_clients(
    listener: &Listener,
    device: &mut dyn Device,
    stop: &StopHandle,
    deadlines: &Deadlines,
) {
    let path = listener.path().display();
    // Capacity 1: the doorman sends only while the control thread is free, so it never
    // blocks; `freed` tells it when that is.
    let (handover, clients) = mpsc::sync_channel::<UnixStream>(1);
    let pair = UnixStream::pair().and_then(|(tell, freed)| {
        freed.set_nonblocking(true)?;
        tell.set_nonblocking(true)?;
        Ok((tell, freed))
    });
    let (mut tell_freed, freed) = match pair {
        Ok(pair) => pair,
        Err(e) => {
            tracing::error!("cannot start the doorman of {path}: {e}");
            return;
        }
    };
    std::thread::scope(|s| {
        let doorman = std::thread::Builder::new()
            .name("nvmemu-doorman".into())
            .spawn_scoped(s, move || {
                Doorman::new(listener, stop, deadlines, handover, freed).run();
            });
        if let Err(e) = doorman {
            tracing::error!("cannot start the doorman of {path}: {e}");
            return;
        }
        while let Ok(stream) = clients.recv() {
            info!("client connected to {path}");
            match serve_connection(stream, device, stop, deadlines) {
                Ok(()) => info!("client of {path} disconnected"),
                Err(e) => info!("client of {path} dropped: {}", chain(&e)),
            }
            if stop.is_stopped() {
                break;
            }
            // A full socket buffer means the doorman already has bytes it has not read.
            let _ = tell_freed.write(&[1]);
        }
        // Dropping the receiver ends the doorman at its next hand-over.
        drop(clients);
    });
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
