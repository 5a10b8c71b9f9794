// SPDX-License-Identifier: Apache-2.0
//! The UNIX-socket JSON-RPC server: a fixed set of connection threads, one connection each
//! at a time, several requests per connection, replies as compact JSON followed by `\n` (as
//! SPDK's `end_response` does).
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
//! * **Threads**: the [`Limits::max_connections`] connection threads start with the server
//!   and serve one connection after another, so answering a client never depends on
//!   starting a thread at that moment (which fails when another client has used up the
//!   process's address space or mappings).
//!
//! Stopping: [`StopHandle`] wakes the accept loop and every idle connection. [`serve_on`]
//! joins its connection threads before returning, so a reply being written when `stop()` is
//! called is still delivered.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender, SyncSender, TrySendError, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use nvmemu_sockfile::{Access, BindError, SocketFile, StopHandle, Wake};
use rustix::event::PollFlags;

use crate::conn::{READ_CHUNK, serve_slot};
use crate::dispatch::{Handler, error_reply};
use crate::error::{Errno, RpcError};
use crate::limits::Limits;
use crate::slot::{Activity, Slot};

/// Default socket path of `nvmemu serve`.
pub const DEFAULT_SOCKET: &str = "/var/tmp/nvmemu.sock";
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
/// Fails at once if the connection threads cannot be started.
pub fn serve_on(
    socket: RpcSocket,
    handler: Arc<dyn Handler + Send + Sync>,
    stop: StopHandle,
    limits: &Limits,
) -> io::Result<()> {
    socket.listener.set_nonblocking(true)?;
    let workers = Workers::start(&handler, &stop, limits)?;
    tracing::info!(path = %socket.path().display(), "JSON-RPC server listening");
    let mut pool = Pool {
        conns: Vec::new(),
        refused: VecDeque::new(),
        epoch: Instant::now(),
    };
    let result = accept_loop(&socket.listener, &workers.jobs, &stop, limits, &mut pool);
    drop(socket);
    workers.join();
    result
}

/// A connection for a connection thread to serve.
type Job = (UnixStream, Arc<Slot>);

/// The connection threads, started with the server.
#[derive(Debug)]
struct Workers {
    jobs: SyncSender<Job>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// One thread per connection slot, each with its read buffer.
    fn start(
        handler: &Arc<dyn Handler + Send + Sync>,
        stop: &StopHandle,
        limits: &Limits,
    ) -> io::Result<Workers> {
        let n = limits.max_connections.max(1);
        // Room for every slot twice: a connection closed to make room may still wait in the
        // queue (its thread has not taken it yet) when its successor is queued behind it.
        let (jobs, queue) = sync_channel::<Job>(2 * n);
        let queue = Arc::new(Mutex::new(queue));
        // Each thread reports once it runs: a spawned thread sets itself up (its signal stack,
        // its read buffer) only when first scheduled, which must not wait for a later moment
        // when the address space may be gone.
        let (ready_tx, ready) = channel::<()>();
        let mut threads = Vec::with_capacity(n);
        for _ in 0..n {
            let (queue, handler) = (Arc::clone(&queue), Arc::clone(handler));
            let (stop, limits, ready_tx) = (stop.clone(), limits.clone(), ready_tx.clone());
            // On failure the threads started so far end when `jobs` is dropped.
            threads.push(
                std::thread::Builder::new()
                    .name("nvmemu-rpc-conn".into())
                    .spawn(move || {
                        serve_jobs(&queue, handler.as_ref(), &stop, &limits, &ready_tx);
                    })?,
            );
        }
        drop(ready_tx);
        for _ in 0..n {
            // An error means a thread ended before reporting: it panicked, and join says so.
            if ready.recv().is_err() {
                break;
            }
        }
        Ok(Workers { jobs, threads })
    }

    /// Ends the threads once their connections have ended.
    fn join(self) {
        drop(self.jobs);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// A connection thread: serves one connection after another until the server stops.
fn serve_jobs(
    queue: &Mutex<Receiver<Job>>,
    handler: &(dyn Handler + Send + Sync),
    stop: &StopHandle,
    limits: &Limits,
    ready: &Sender<()>,
) {
    let mut chunk = vec![0u8; READ_CHUNK];
    let _ = ready.send(());
    loop {
        let job = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok((stream, slot)) = job else {
            return; // the server is stopping
        };
        if let Err(e) = serve_slot(stream, &slot, handler, stop, limits, &mut chunk) {
            tracing::debug!(error = %e, "RPC connection ended with error");
        }
        slot.end();
    }
}

/// The accept loop's view of the connections.
#[derive(Debug)]
struct Pool {
    conns: Vec<Arc<Slot>>,
    /// Refused clients, kept open (not read) for a while so that a client that sends its
    /// request before reading still reads the refusal rather than a broken pipe.
    refused: VecDeque<UnixStream>,
    epoch: Instant,
}

impl Pool {
    /// Makes room for one more connection if needed: true if there is room.
    fn make_room(&mut self, limit: usize) -> bool {
        self.conns.retain(|c| c.activity() != Activity::Ended as u8);
        let live = self
            .conns
            .iter()
            .filter(|c| c.activity() != Activity::Evicted as u8)
            .count();
        if live < limit {
            return true;
        }
        // Each slot's time is read once: connection threads update it while we sort, and a
        // key that changes under the sort breaks its total order (std's sort then panics).
        let mut open: Vec<(u64, &Arc<Slot>)> = self
            .conns
            .iter()
            .filter(|c| c.activity() == Activity::Open as u8)
            .map(|c| (c.last_active_ms(), c))
            .collect();
        open.sort_by_key(|&(last_active, _)| last_active);
        for (_, c) in open {
            if c.evict() {
                tracing::info!(
                    "RPC connection quiet for {} ms closed to make room for a new one",
                    u64::try_from(self.epoch.elapsed().as_millis())
                        .unwrap_or(u64::MAX)
                        .saturating_sub(c.last_active_ms())
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
    jobs: &SyncSender<Job>,
    stop: &StopHandle,
    limits: &Limits,
    pool: &mut Pool,
) -> io::Result<()> {
    while stop.wait(listener, PollFlags::IN, None)? == Wake::Ready {
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
            // A thread is free or about to be (one per slot; an evicted connection's thread
            // is leaving, or its job still waits in the queue and ends as soon as taken).
            match jobs.try_send((stream, Arc::clone(&slot))) {
                Ok(()) => pool.conns.push(slot),
                Err(TrySendError::Full((stream, _))) => {
                    pool.refuse(stream, limits.max_connections);
                }
                Err(TrySendError::Disconnected(_)) => break,
            }
        }
    }
    Ok(())
}
