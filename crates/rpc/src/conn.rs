// SPDX-License-Identifier: Apache-2.0
//! One JSON-RPC connection: read, frame, dispatch, reply, with the request deadline and the
//! size bound of [`Limits`].

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::Instant;

use nvmemu_sockfile::{StopHandle, Wake};
use rustix::event::PollFlags;
use serde_json::Value;

use crate::dispatch::{Caller, Handler, error_reply, handle_message_for};
use crate::error::{INVALID_REQUEST, PARSE_ERROR, RpcError};
use crate::framer::{FrameError, Framer};
use crate::limits::Limits;
use crate::slot::Slot;

/// Serves one connection until EOF, an error that closes it, a missed deadline or stop.
pub fn serve_connection(
    stream: UnixStream,
    handler: &(dyn Handler + Send + Sync),
    stop: &StopHandle,
    limits: &Limits,
) -> io::Result<()> {
    let slot = Slot::new(stream.try_clone()?, Instant::now());
    serve_slot(
        stream,
        &slot,
        handler,
        stop,
        limits,
        &mut vec![0u8; READ_CHUNK],
    )
}

/// Bytes read from a connection at a time.
pub(crate) const READ_CHUNK: usize = 64 * 1024;

/// [`serve_connection`] for a connection of the server's pool, reading into `chunk` (the
/// connection thread's own buffer).
pub(crate) fn serve_slot(
    stream: UnixStream,
    slot: &Slot,
    handler: &(dyn Handler + Send + Sync),
    stop: &StopHandle,
    limits: &Limits,
    chunk: &mut [u8],
) -> io::Result<()> {
    let result = run(stream, (slot, chunk), handler, stop, limits);
    // The slot keeps a clone of the socket: close it for the peer now, not when the
    // accept loop next prunes its list.
    slot.shut_down();
    result
}

fn run(
    mut stream: UnixStream,
    (slot, chunk): (&Slot, &mut [u8]),
    handler: &(dyn Handler + Send + Sync),
    stop: &StopHandle,
    limits: &Limits,
) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(limits.reply))?;
    let mut framer = Framer::new(limits.max_request_bytes);
    // When the first byte of the request being received arrived.
    let mut request_started: Option<Instant> = None;
    loop {
        let deadline = request_started.map(|t| t + limits.request);
        match stop.wait(&stream, PollFlags::IN, deadline)? {
            Wake::Stopped => return Ok(()),
            Wake::TimedOut => {
                let ms = limits.request.as_millis();
                tracing::info!("RPC client dropped: request incomplete after {ms} ms");
                let err = RpcError::new(
                    PARSE_ERROR,
                    format!("Parse error: request incomplete after {ms} ms"),
                );
                return close_with(&mut stream, &err);
            }
            Wake::Ready => {}
        }
        let n = match stream.read(chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let arrived = Instant::now();
        slot.touch();
        framer.push(chunk.get(..n).unwrap_or_default());
        loop {
            match framer.next_value() {
                Ok(Some(msg)) => {
                    request_started = None;
                    if !slot.enter_call() {
                        return Ok(()); // closed to make room
                    }
                    let caller = Caller::connection(stream.as_fd(), stop);
                    let reply = handle_message_for(handler, msg, &caller);
                    slot.leave_call();
                    if let Some(reply) = reply {
                        send(&mut stream, &reply)?;
                    }
                }
                Ok(None) => break,
                Err(FrameError::TooLong { limit }) => {
                    tracing::info!("RPC client dropped: request exceeds {limit} bytes");
                    let err = RpcError::new(
                        INVALID_REQUEST,
                        format!("Invalid request: request exceeds {limit} bytes"),
                    );
                    return close_with(&mut stream, &err);
                }
                Err(e @ FrameError::Syntax(_)) => {
                    // No resync point in a JSON stream: reply and close, like SPDK.
                    tracing::debug!(error = %e, "RPC parse error; closing connection");
                    return close_with(&mut stream, &RpcError::parse_error());
                }
            }
        }
        if framer.in_value() && request_started.is_none() {
            request_started = Some(arrived);
        }
    }
}

/// Sends `err` with id null; the connection then closes.
fn close_with(stream: &mut UnixStream, err: &RpcError) -> io::Result<()> {
    send(stream, &error_reply(Value::Null, err))
}

fn send(stream: &mut UnixStream, reply: &Value) -> io::Result<()> {
    let mut bytes = serde_json::to_vec(reply).map_err(io::Error::other)?;
    bytes.push(b'\n');
    stream.write_all(&bytes)
}
