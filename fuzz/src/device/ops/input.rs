// SPDX-License-Identifier: Apache-2.0
//! The fuzz input: the steps of a hostile client, as `arbitrary` decodes them.

use arbitrary::Arbitrary;
use nvmemu_vfio_user::wire::msg_flags;

use super::{FUZZ_IOVA, PAGE};
use crate::device::good_host;

/// An IOVA: one of the fuzzed pages (plus an offset), or anything at all.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Iova {
    Page(u8, u16),
    Good(u16),
    Raw(u64),
}

impl Iova {
    pub(super) fn get(self) -> u64 {
        match self {
            Iova::Page(p, off) => FUZZ_IOVA + u64::from(p) * PAGE + u64::from(off % 4096),
            Iova::Good(off) => good_host::IOVA + u64::from(off) % good_host::SIZE,
            Iova::Raw(a) => a,
        }
    }
}

/// Header flags of a request: mostly a plain command, sometimes NO_REPLY or any bits.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Flags {
    Command,
    NoReply,
    Raw(u32),
}

impl Flags {
    pub(super) fn get(self) -> u32 {
        match self {
            Flags::Command => msg_flags::TYPE_COMMAND,
            Flags::NoReply => msg_flags::NO_REPLY,
            Flags::Raw(f) => f,
        }
    }
}

/// The capabilities string of a VERSION request.
#[derive(Arbitrary, Debug)]
pub enum Caps {
    Qemu,
    None,
    Json {
        max_fds: u32,
        xfer: u64,
        pgsizes: u64,
        migration: bool,
    },
    Text(Vec<u8>),
}

/// Fds sent with a message.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Fds {
    None,
    Eventfds(u8),
    /// Not an eventfd: the server must refuse it wherever it wants one.
    Memfd(u8),
    /// The client's own socket.
    Socket,
}

/// One step of the hostile client.
#[derive(Arbitrary, Debug)]
pub enum Op {
    Version {
        major: u16,
        minor: u16,
        caps: Caps,
        flags: Flags,
    },
    NewMemfd {
        pages: u8,
    },
    DmaMap {
        mem: Option<u8>,
        iova: Iova,
        offset: u16,
        pages: u8,
        tail: u16,
        map_flags: u32,
        argsz: Option<u32>,
        flags: Flags,
    },
    DmaUnmap {
        iova: Iova,
        pages: u8,
        unmap_flags: u32,
        flags: Flags,
    },
    /// The client shrinks (or grows) a memfd it mapped.
    Truncate {
        mem: u8,
        bytes: u32,
    },
    /// The client writes its own memory (rings, PRP lists, data) behind the server's back.
    WriteMem {
        mem: u8,
        offset: u16,
        bytes: Vec<u8>,
    },
    RegionInfo {
        index: u32,
        argsz: u32,
        flags: Flags,
    },
    IrqInfo {
        index: u32,
        argsz: u32,
        flags: Flags,
    },
    RegionRead {
        region: u8,
        offset: u16,
        count: u16,
        flags: Flags,
    },
    RegionWrite {
        region: u8,
        offset: u16,
        data: Vec<u8>,
        flags: Flags,
    },
    /// A BAR0 register write (CC, AQA, ASQ, ACQ, ... at any offset below the doorbells).
    Register {
        offset: u16,
        value: u64,
        wide: bool,
    },
    /// A doorbell, by message or through the mapping REGION_INFO handed out.
    Doorbell {
        index: u16,
        value: u32,
        mapped: bool,
    },
    SetIrqs {
        index: u32,
        irq_flags: u32,
        start: u32,
        count: u32,
        fds: Fds,
        data: Vec<u8>,
        flags: Flags,
    },
    Reset {
        flags: Flags,
    },
    /// Any header (type, NO_REPLY, command) with any payload and fds.
    Garbage {
        command: u16,
        flags: u32,
        payload: Vec<u8>,
        fds: Fds,
    },
    /// A header whose `msg_size` is below the header's own size.
    ShortSize {
        command: u16,
        flags: u32,
        msg_size: u8,
    },
    /// A payload larger than the server accepts (drained, then refused).
    Oversized {
        command: u16,
        flags: Flags,
    },
    /// The well-behaved setup, then NVMe commands on its queue.
    BringUp,
    Io {
        write: bool,
        lba: u16,
        prp1: Iova,
        prp2: Iova,
    },
    Poll,
    /// Leave and connect again (VERSION not yet sent), keeping every fd and mapping the
    /// server handed out: the doorbell page becomes a stale one.
    Reconnect,
    /// A store through a doorbell page mapped in an earlier session.
    StaleDoorbell {
        page: u8,
        index: u16,
        value: u32,
    },
}
