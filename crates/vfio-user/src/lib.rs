// SPDX-License-Identifier: Apache-2.0
//! The vfio-user protocol (QEMU `docs/interop/vfio-user.rst`): message framing with fd
//! passing, the wire structs, a per-connection server that hands typed requests to a
//! [`Device`], and a blocking [`Client`].
//!
//! Owns: everything that crosses the vfio-user UNIX socket. May depend on: `nvmemu-sockfile`
//! (the listening socket file and its waits).
//! Must never: know about NVMe, touch client memory, use `unsafe`, or panic on client input.
//!
//! # Model
//!
//! A client (QEMU's `vfio-user-pci`, SPDK's NVMe driver, our own [`Client`]) connects to
//! `<dir>/cntrl` ([`Listener`]), negotiates VERSION, maps its memory with DMA_MAP (an fd per
//! region), asks for device/region/irq info, accesses registers with REGION_READ/WRITE and
//! hands over interrupt eventfds with SET_IRQS. [`serve_connection`] runs that conversation
//! for one client against a [`Device`].
//!
//! # Hostile input
//!
//! * Framing: a message is `msg_size` bytes (16-byte header plus payload, at most 1 MiB +
//!   4 KiB of payload) and is always consumed completely, even when rejected; larger payloads
//!   are drained without being allocated. Up to 16 fds are accepted per message; more, or a
//!   truncated control message, gets EINVAL. EOF inside a message ends the connection.
//! * Commands before VERSION, and a second VERSION, get EINVAL.
//! * Each command's fixed struct must be present and its `argsz` at least that size; trailing
//!   bytes are ignored except where their length means something (REGION_WRITE data,
//!   SET_IRQS bools). Fds are accepted only by DMA_MAP (0 or 1) and SET_IRQS with eventfds (0
//!   or `count`); all other fds are closed.
//! * Error replies carry a non-zero errno; NO_REPLY requests are never answered, not even
//!   with an error. A message of an unknown type (not command, not reply) gets EINVAL; a
//!   reply from the client (we send no requests) is dropped. Unsupported commands (REGION_IO_FDS, DMA_READ/WRITE, DIRTY_PAGES,
//!   REGION_WRITE_MULTI, migration, unknown) get ENOTSUP.
//! * Protocol errors are logged at `debug` with target `guest`.
//! * Time ([`Deadlines`]): VERSION must be complete within a few seconds of connecting, every
//!   message within a few seconds of its first byte, and every reply taken off the socket
//!   within a few seconds; a client that misses one is dropped. Sends never block past
//!   their deadline, and a stop interrupts them.
//! * The client side waits for nothing for ever either: connecting, each request and each
//!   reply have a limit ([`DEFAULT_REPLY_TIMEOUT`], or [`Client::connect_within`]).
//! * One client per controller ([`serve_clients`]): later clients wait their turn, told
//!   nothing, as SPDK's `nvmf_tgt` makes them wait; at most [`MAX_PENDING`] connections
//!   without a complete VERSION and [`MAX_WAITING`] waiting clients, beyond which the next
//!   VERSION gets an EBUSY error reply. No connection delays another's handshake.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::indexing_slicing)]

#[cfg(not(all(target_endian = "little", target_pointer_width = "64")))]
compile_error!("nvmemu supports little-endian 64-bit targets only");

mod client;
mod device;
mod doorman;
mod error;
mod frame;
mod fuzz;
mod listener;
mod serve;
mod server;
mod types;
pub mod wire;

pub use nvmemu_sockfile::StopHandle;
pub use rustix::io::Errno;

pub use client::{Client, DEFAULT_REPLY_TIMEOUT, RawReply, ServerCaps};
pub use device::Device;
pub use doorman::{MAX_PENDING, MAX_WAITING};
pub use error::{ClientError, ConnectionError, FrameError};
pub use fuzz::fuzz_server_input;
pub use listener::{DEFAULT_SOCKET_MODE, Listener, SOCKET_NAME};
pub use serve::serve_clients;
pub use server::{Deadlines, serve_connection};
pub use types::{
    DeviceInfo, DmaMap, DmaUnmap, IrqAction, IrqData, IrqDataType, IrqInfo, OwnedRegionInfo,
    RegionInfo, SetIrqs, SparseArea,
};
pub use wire::{Command, Header};

/// The capabilities JSON the server sends in its VERSION reply (followed by a NUL).
pub use server::SERVER_CAPABILITIES;
