// SPDX-License-Identifier: Apache-2.0
//! The UNIX-socket JSON-RPC server: one thread per connection, several requests per
//! connection, replies as compact JSON followed by `\n` (as SPDK's `end_response` does).
//!
//! # Hostile clients
//!
//! Well-formed clients see SPDK's behaviour: any number of requests per connection, and a
//! connection may stay open and idle between requests for as long as it likes (rpc.py
//! `--server`, which SPDK's test scripts keep open for a whole run, does). What a client
//! cannot do is hold the server:
//!
//! * **Half-sent requests**: a request must be complete within [`Limits::request`] of its
//!   first byte; otherwise the client gets `-32700` ("request incomplete") and is closed.
//! * **Size**: a request over [`Limits::max_request_bytes`] gets `-32600` and a close; a
//!   batch holds at most [`MAX_BATCH`](crate::MAX_BATCH) requests. The framer is linear in
//!   the bytes received however they are split.
//! * **Slots**: at most [`Limits::max_connections`] connections are served. When all are
//!   taken, the one that has been quiet longest and is not inside a call is closed to make
//!   room, so idle or trickling clients never lock a new one out. Only when every
//!   connection is inside a call is the newcomer refused, with `-16` ("Too many RPC
//!   connections") and a close. A call that waits (a `bdev_get_bdevs` `timeout`) ends when
//!   its client leaves ([`Caller::is_gone`](crate::Caller::is_gone)), freeing the slot.
//! * **Replies** must be taken off the socket within [`Limits::reply`].
//!
//! Stopping: [`StopHandle`] wakes the accept loop and every idle connection. [`serve_on`]
//! joins its connection threads before returning, so a reply being written when `stop()` is
//! called is still delivered.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nvmemu_sockfile::{Access, BindError, SocketFile};

use crate::conn::serve_slot;
use crate::dispatch::{Handler, error_reply};
use crate::error::{Errno, RpcError};
use crate::stop::{StopHandle, Wake};

/// Default socket path of `nvmemu serve`.
pub const DEFAULT_SOCKET: &str = "/var/tmp/nvmemu.sock";
/// Connections served at once by default (SPDK's `SPDK_JSONRPC_MAX_CONNS`).
pub const MAX_CONNECTIONS: usize = 64;
/// Largest request by default: 1 MiB (the largest real one, `nvmf_subsystem_add_ns` with
/// every option, is under 1 KiB).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// What one client may take of the server (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// From the first byte of a request to its last. Default 5 s.
    pub request: Duration,
    /// For the client to take each reply off the socket. Default 10 s.
    pub reply: Duration,
    /// Largest request, in bytes. Default [`MAX_REQUEST_BYTES`].
    pub max_request_bytes: usize,
    /// Connections served at once. Default [`MAX_CONNECTIONS`].
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request: Duration::from_secs(5),
            reply: Duration::from_secs(10),
            max_request_bytes: MAX_REQUEST_BYTES,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// The server's listening socket. Bound on its own, before serving, so that a path that is
/// taken stops a program's start-up with one clear error.
#[derive(Debug)]
pub struct RpcSocket {
    listener: UnixListener,
    file: SocketFile,
}

impl RpcSocket {
    /// Creates the socket file at `path` with `access` from the start (no chmod after bind).
    /// A stale socket of ours is replaced; a live socket, another user's socket or any other
    /// file is an error and is left alone (see `nvmemu_sockfile::bind`).
    pub fn bind(path: &Path, access: Access) -> Result<Self, BindError> {
        let (listener, file) = nvmemu_sockfile::bind(path, access)?;
        Ok(RpcSocket { listener, file })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

/// Serves JSON-RPC on a new owner-only (0600) socket at `path` until `stop` is stopped,
/// with the default [`Limits`]. The socket file is removed on return.
pub fn serve(
    path: &Path,
    handler: Arc<dyn Handler + Send + Sync>,
    stop: StopHandle,
) -> io::Result<()> {
    let socket = RpcSocket::bind(path, Access::OWNER)?;
    serve_on(socket, handler, stop, &Limits::default())
}

/// Serves JSON-RPC on `socket` until `stop` is stopped. The socket file is removed on return.
pub fn serve_on(
    socket: RpcSocket,
    handler: Arc<dyn Handler + Send + Sync>,
    stop: StopHandle,
    limits: &Limits,
) -> io::Result<()> {
    socket.listener.set_nonblocking(true)?;
    tracing::info!(path = %socket.path().display(), "JSON-RPC server listening");
    let mut pool = Pool {
        conns: Vec::new(),
        refused: VecDeque::new(),
        epoch: Instant::now(),
    };
    let result = accept_loop(&socket.listener, &handler, &stop, limits, &mut pool);
    drop(socket);
    for c in pool.conns {
        let _ = c.thread.join();
    }
    result
}

/// What a connection is doing, as the accept loop sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Activity {
    /// Reading, writing or idle: may be closed to make room.
    Open = 0,
    /// Inside a handler call: kept.
    Calling = 1,
    /// Closed to make room; its thread is leaving.
    Evicted = 2,
}

/// One connection's shared state: its activity and its socket, so that the accept loop can
/// close it to make room.
#[derive(Debug)]
pub(crate) struct Slot {
    activity: AtomicU8,
    /// Last read or finished call, in ms since the pool's epoch.
    last_active: AtomicU64,
    epoch: Instant,
    stream: UnixStream,
}

impl Slot {
    pub(crate) fn new(stream: UnixStream, epoch: Instant) -> Slot {
        let slot = Slot {
            activity: AtomicU8::new(Activity::Open as u8),
            last_active: AtomicU64::new(0),
            epoch,
            stream,
        };
        slot.touch();
        slot
    }

    /// Records activity now.
    pub(crate) fn touch(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        // Relaxed: only a hint for choosing whom to evict.
        self.last_active.store(ms, Ordering::Relaxed);
    }

    /// Open -> Calling; false if the connection was evicted (its client then gets no reply).
    pub(crate) fn enter_call(&self) -> bool {
        // AcqRel: this and `evict`'s exchange decide, once, whether the call or the eviction
        // happens; whoever loses sees the other's state.
        self.activity
            .compare_exchange(
                Activity::Open as u8,
                Activity::Calling as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Calling -> Open.
    pub(crate) fn leave_call(&self) {
        self.touch();
        // Release pairs with the Acquire of `evict`'s exchange.
        self.activity.store(Activity::Open as u8, Ordering::Release);
    }

    /// Open -> Evicted, and shuts the socket down so that the connection's thread wakes and
    /// leaves. False if the connection is inside a call (or already evicted).
    fn evict(&self) -> bool {
        let won = self
            .activity
            .compare_exchange(
                Activity::Open as u8,
                Activity::Evicted as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if won {
            self.shut_down();
        }
        won
    }

    /// Shuts the socket down in both directions (the peer sees EOF).
    pub(crate) fn shut_down(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    fn activity(&self) -> u8 {
        self.activity.load(Ordering::Acquire)
    }
}

#[derive(Debug)]
struct Conn {
    thread: JoinHandle<()>,
    slot: Arc<Slot>,
}

/// The accept loop's view of the connections.
#[derive(Debug)]
struct Pool {
    conns: Vec<Conn>,
    /// Refused clients, kept open (not read) for a while so that a client that sends its
    /// request before reading still reads the refusal rather than a broken pipe.
    refused: VecDeque<UnixStream>,
    epoch: Instant,
}

impl Pool {
    /// Makes room for one more connection if needed: true if there is room.
    fn make_room(&mut self, limit: usize) -> bool {
        self.conns.retain(|c| !c.thread.is_finished());
        let live = self
            .conns
            .iter()
            .filter(|c| c.slot.activity() != Activity::Evicted as u8)
            .count();
        if live < limit {
            return true;
        }
        let mut open: Vec<&Conn> = self
            .conns
            .iter()
            .filter(|c| c.slot.activity() == Activity::Open as u8)
            .collect();
        open.sort_by_key(|c| c.slot.last_active.load(Ordering::Relaxed));
        for c in open {
            if c.slot.evict() {
                tracing::info!(
                    "RPC connection quiet for {} ms closed to make room for a new one",
                    u64::try_from(self.epoch.elapsed().as_millis())
                        .unwrap_or(u64::MAX)
                        .saturating_sub(c.slot.last_active.load(Ordering::Relaxed))
                );
                return true;
            }
        }
        false
    }

    /// Answers a client there is no room for with `-16` and keeps its socket for a while.
    fn refuse(&mut self, stream: UnixStream, limit: usize) {
        tracing::info!("RPC connection refused: all {limit} connections are inside calls");
        let err = RpcError::errno_msg(
            Errno::EBUSY,
            format!("Too many RPC connections: all {limit} are inside calls; try again"),
        );
        if let Ok(mut bytes) = serde_json::to_vec(&error_reply(serde_json::Value::Null, &err)) {
            bytes.push(b'\n');
            // A new socket's buffer takes this small reply at once; never block on it.
            let _ = stream.set_nonblocking(true);
            let _ = (&stream).write_all(&bytes);
        }
        let _ = stream.shutdown(Shutdown::Write);
        if self.refused.len() >= limit.max(1) {
            self.refused.pop_front();
        }
        self.refused.push_back(stream);
    }
}

fn accept_loop(
    listener: &UnixListener,
    handler: &Arc<dyn Handler + Send + Sync>,
    stop: &StopHandle,
    limits: &Limits,
    pool: &mut Pool,
) -> io::Result<()> {
    while stop.wait(listener, None)? == Wake::Readable {
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
            if !pool.make_room(limits.max_connections) {
                pool.refuse(stream, limits.max_connections);
                continue;
            }
            let slot = match stream.try_clone() {
                Ok(clone) => Arc::new(Slot::new(clone, pool.epoch)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot serve an RPC connection");
                    continue;
                }
            };
            let handler = Arc::clone(handler);
            let (stop, limits, thread_slot) = (stop.clone(), limits.clone(), Arc::clone(&slot));
            let spawned = std::thread::Builder::new()
                .name("nvmemu-rpc-conn".into())
                .spawn(move || {
                    if let Err(e) =
                        serve_slot(stream, &thread_slot, handler.as_ref(), &stop, &limits)
                    {
                        tracing::debug!(error = %e, "RPC connection ended with error");
                    }
                });
            match spawned {
                Ok(thread) => pool.conns.push(Conn { thread, slot }),
                Err(e) => tracing::warn!(error = %e, "cannot spawn RPC connection thread"),
            }
        }
    }
    Ok(())
}
