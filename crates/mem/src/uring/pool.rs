// SPDX-License-Identifier: Apache-2.0
//! The fallback where io_uring is not allowed (`io_uring_setup` fails with `EPERM` or
//! `ENOSYS` in some containers): a few worker threads run the same operations with
//! blocking system calls (`preadv`, `pwritev`, `fdatasync`, `fallocate`). Jobs go to them
//! through a bounded channel when queued, completions come back through another and are
//! taken without waiting. An [`IoGate`] (tests only) holds the workers back, so a test
//! can show that nothing waits for an operation that has not run.

use std::io;
use std::os::fd::RawFd;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

/// Worker threads of one pool.
pub(super) const WORKERS: usize = 4;

/// One operation, as plain values (the ring's slot keeps what they point at alive).
#[derive(Debug, Clone, Copy)]
pub(super) enum Op {
    /// `preadv` into the `n` iovecs at address `iov`.
    Readv {
        fd: RawFd,
        iov: usize,
        n: u32,
        offset: u64,
    },
    /// `pwritev` of the `n` iovecs at address `iov`.
    Writev {
        fd: RawFd,
        iov: usize,
        n: u32,
        offset: u64,
    },
    /// `fdatasync`.
    Fdatasync { fd: RawFd },
    /// `fallocate(PUNCH_HOLE | KEEP_SIZE)`.
    Punch { fd: RawFd, offset: u64, len: u64 },
}

/// Holds file operations back while closed (tests of what must not wait for file I/O):
/// a pool's workers before each operation, an io_uring's completions before they are
/// reaped (the kernel runs the operation; the ring reports it only once the gate opens).
/// Open when made.
#[derive(Debug, Default)]
pub struct IoGate {
    closed: Mutex<bool>,
    changed: Condvar,
}

impl IoGate {
    /// Hold every operation from now on until [`IoGate::open`].
    pub fn close(&self) {
        *self.closed.lock().unwrap_or_else(PoisonError::into_inner) = true;
    }

    /// Let the workers run what they hold, and everything after.
    pub fn open(&self) {
        *self.closed.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.changed.notify_all();
    }

    /// Whether operations are held now.
    #[cfg(feature = "test-utils")]
    pub(super) fn is_closed(&self) -> bool {
        *self.closed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wait until the gate is open.
    pub(super) fn pass(&self) {
        let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        while *closed {
            closed = self
                .changed
                .wait(closed)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// The workers and their channels.
#[derive(Debug)]
pub(super) struct Pool {
    jobs: Option<SyncSender<(u64, Op)>>,
    done: Receiver<(u64, i32)>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// [`WORKERS`] threads taking at most `bound` queued jobs, each passing `gate` first
    /// if there is one.
    pub(super) fn new(bound: usize, gate: Option<Arc<IoGate>>) -> io::Result<Pool> {
        let (jobs, rx) = sync_channel::<(u64, Op)>(bound);
        let (done_tx, done) = sync_channel(bound);
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..WORKERS)
            .map(|i| {
                let (rx, done_tx, gate) = (Arc::clone(&rx), done_tx.clone(), gate.clone());
                std::thread::Builder::new()
                    .name(format!("nvmemu-file-{i}"))
                    .spawn(move || work(&rx, &done_tx, gate.as_deref()))
            })
            .collect::<io::Result<_>>()?;
        Ok(Pool {
            jobs: Some(jobs),
            done,
            threads,
        })
    }

    /// Hand `op` to a worker (waits while the channel is full).
    pub(super) fn send(&self, user_data: u64, op: Op) -> io::Result<()> {
        let gone = || io::Error::from_raw_os_error(libc::EPIPE);
        self.jobs
            .as_ref()
            .ok_or_else(gone)?
            .send((user_data, op))
            .map_err(|_| gone())
    }

    /// A completion `(user_data, result)`, waiting for one if `wait`.
    pub(super) fn take(&self, wait: bool) -> Option<(u64, i32)> {
        if wait {
            return self.done.recv().ok();
        }
        self.done.try_recv().ok()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // The ring waited for every operation first; closing the channel ends the workers.
        self.jobs = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn work(rx: &Mutex<Receiver<(u64, Op)>>, done: &SyncSender<(u64, i32)>, gate: Option<&IoGate>) {
    loop {
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok((user_data, op)) = job else {
            return;
        };
        if let Some(gate) = gate {
            gate.pass();
        }
        if done.send((user_data, run(op))).is_err() {
            return;
        }
    }
}

/// Runs `op`: bytes moved, or the negated errno (io_uring's convention).
fn run(op: Op) -> i32 {
    let rc: i64 = match op {
        Op::Readv { fd, iov, n, offset } => {
            // SAFETY: `iov` is the address of `n` iovecs in a slot of the ring that queued
            // this job; the ring keeps that array, the mappings its entries point into (by
            // `Arc`) and the fd (by `Arc`) alive and unchanged until this job's completion
            // is taken from the channel. The kernel checks every address itself.
            unsafe { libc::preadv(fd, iov as *const libc::iovec, n as i32, offset as i64) as i64 }
        }
        Op::Writev { fd, iov, n, offset } => {
            // SAFETY: as for `Readv` above; the kernel only reads the buffers.
            unsafe { libc::pwritev(fd, iov as *const libc::iovec, n as i32, offset as i64) as i64 }
        }
        Op::Fdatasync { fd } => {
            // SAFETY: a plain system call on an fd the ring's slot keeps open.
            i64::from(unsafe { libc::fdatasync(fd) })
        }
        Op::Punch { fd, offset, len } => {
            let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
            // SAFETY: a plain system call on an fd the ring's slot keeps open.
            i64::from(unsafe { libc::fallocate(fd, mode, offset as i64, len as i64) })
        }
    };
    if rc < 0 {
        -io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    } else {
        i32::try_from(rc).unwrap_or(i32::MAX)
    }
}
