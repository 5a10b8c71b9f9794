// SPDX-License-Identifier: Apache-2.0
//! The UNIX-socket JSON-RPC server: one thread per connection, several requests per
//! connection, replies as compact JSON followed by `\n` (as SPDK's `end_response` does).
//!
//! Stopping: a [`StopHandle`] owns an eventfd that every poll in this module watches next to
//! its socket, so `stop()` (e.g. from the `spdk_kill_instance` handler) unblocks the accept
//! loop and idle connections at once. [`serve`] joins its connection threads before
//! returning, so a reply being written when `stop()` is called is still delivered.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};

use crate::dispatch::{Handler, error_reply, handle_message};
use crate::error::RpcError;
use crate::framer::{Framer, MAX_MESSAGE_BYTES};

/// Default socket path of `nvmemu serve`.
pub const DEFAULT_SOCKET: &str = "/var/tmp/nvmemu.sock";
/// Connections served at once (SPDK's `SPDK_JSONRPC_MAX_CONNS`); more are closed at accept.
pub const MAX_CONNECTIONS: usize = 64;
/// A peer that does not read its reply for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Signals [`serve`] (and its connections) to stop. Cheap to clone; stopping is permanent.
#[derive(Debug, Clone)]
pub struct StopHandle {
    inner: Arc<StopInner>,
}

#[derive(Debug)]
struct StopInner {
    stopped: AtomicBool,
    /// Written once by `stop()`; never read, so it stays readable and wakes every poller.
    event: OwnedFd,
}

impl StopHandle {
    /// A new, un-stopped handle.
    pub fn new() -> io::Result<Self> {
        let event = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Self {
            inner: Arc::new(StopInner {
                stopped: AtomicBool::new(false),
                event,
            }),
        })
    }

    /// Asks the server to stop; returns at once.
    pub fn stop(&self) {
        // Release pairs with the Acquire load in `is_stopped` on the polling threads.
        self.inner.stopped.store(true, Ordering::Release);
        // A full counter (EAGAIN) already wakes everyone; nothing else can fail here.
        let _ = rustix::io::write(&self.inner.event, &1u64.to_ne_bytes());
    }

    /// Whether `stop()` has been called.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::Acquire)
    }

    /// Waits until `fd` is readable or the handle is stopped; `Ok(false)` means stopped.
    fn wait_readable(&self, fd: impl AsFd) -> io::Result<bool> {
        loop {
            if self.is_stopped() {
                return Ok(false);
            }
            let mut fds = [
                PollFd::new(&fd, PollFlags::IN),
                PollFd::new(&self.inner.event, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            if self.is_stopped() {
                return Ok(false);
            }
            if !fds[0].revents().is_empty() {
                return Ok(true);
            }
        }
    }
}

/// Serves JSON-RPC on a UNIX stream socket at `path` until `stop` is stopped.
///
/// A stale socket file at `path` is removed first (any other kind of file is an error), and
/// the socket file is removed again on return.
pub fn serve(
    path: &Path,
    handler: Arc<dyn Handler + Send + Sync>,
    stop: StopHandle,
) -> io::Result<()> {
    remove_stale_socket(path)?;
    let listener = UnixListener::bind(path)?;
    listener.set_nonblocking(true)?;
    tracing::info!(path = %path.display(), "JSON-RPC server listening");
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    let result = accept_loop(&listener, &handler, &stop, &mut conns);
    drop(listener);
    for c in conns {
        let _ = c.join();
    }
    let _ = std::fs::remove_file(path);
    result
}

fn accept_loop(
    listener: &UnixListener,
    handler: &Arc<dyn Handler + Send + Sync>,
    stop: &StopHandle,
    conns: &mut Vec<JoinHandle<()>>,
) -> io::Result<()> {
    while stop.wait_readable(listener)? {
        loop {
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "accept failed");
                    break;
                }
            };
            conns.retain(|c| !c.is_finished());
            if conns.len() >= MAX_CONNECTIONS {
                tracing::debug!("too many RPC connections; closing new one");
                continue;
            }
            let handler = Arc::clone(handler);
            let stop = stop.clone();
            let spawned = std::thread::Builder::new()
                .name("nvmemu-rpc-conn".into())
                .spawn(move || {
                    if let Err(e) = serve_connection(stream, handler.as_ref(), &stop) {
                        tracing::debug!(error = %e, "RPC connection ended with error");
                    }
                });
            match spawned {
                Ok(h) => conns.push(h),
                Err(e) => tracing::warn!(error = %e, "cannot spawn RPC connection thread"),
            }
        }
    }
    Ok(())
}

fn remove_stale_socket(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Serves one connection until EOF, a parse error, an I/O error or stop.
pub fn serve_connection(
    mut stream: UnixStream,
    handler: &(dyn Handler + Send + Sync),
    stop: &StopHandle,
) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let mut framer = Framer::new(MAX_MESSAGE_BYTES);
    let mut chunk = vec![0u8; 64 * 1024];
    while stop.wait_readable(&stream)? {
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        framer.push(chunk.get(..n).unwrap_or_default());
        loop {
            match framer.next_value() {
                Ok(Some(msg)) => {
                    if let Some(reply) = handle_message(handler, msg) {
                        send(&mut stream, &reply)?;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    // No resync point in a JSON stream: reply and close, like SPDK.
                    tracing::debug!(error = %e, "RPC parse error; closing connection");
                    send(
                        &mut stream,
                        &error_reply(serde_json::Value::Null, &RpcError::parse_error()),
                    )?;
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

fn send(stream: &mut UnixStream, reply: &serde_json::Value) -> io::Result<()> {
    let mut bytes = serde_json::to_vec(reply).map_err(io::Error::other)?;
    bytes.push(b'\n');
    stream.write_all(&bytes)
}
