// SPDX-License-Identifier: Apache-2.0
//! One connection's place in the server's pool: what it is doing and when it was last
//! active, so that the accept loop can close the quietest idle one to make room.

use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Instant;

/// What a connection is doing, as the accept loop sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Activity {
    /// Reading, writing or idle: may be closed to make room.
    Open = 0,
    /// Inside a handler call: kept.
    Calling = 1,
    /// Closed to make room; its thread is leaving.
    Evicted = 2,
    /// Its thread has finished with it.
    Ended = 3,
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
    pub(crate) fn evict(&self) -> bool {
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

    /// The connection's thread has finished with it: the slot can go.
    pub(crate) fn end(&self) {
        // Release: the thread's last use of the slot happens before the accept loop drops it.
        self.activity
            .store(Activity::Ended as u8, Ordering::Release);
    }

    /// Shuts the socket down in both directions (the peer sees EOF).
    pub(crate) fn shut_down(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// When the connection was last active, in ms since the pool's epoch.
    pub(crate) fn last_active_ms(&self) -> u64 {
        // Relaxed: only a hint for choosing whom to evict.
        self.last_active.load(Ordering::Relaxed)
    }

    pub(crate) fn activity(&self) -> u8 {
        self.activity.load(Ordering::Acquire)
    }
}
