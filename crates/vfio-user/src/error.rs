// SPDX-License-Identifier: Apache-2.0
//! Error types of the framing layer, the server loop and the client.

use std::io;

use crate::Errno;
use crate::wire::Command;

/// A failure of the byte stream itself; the connection cannot continue.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// A socket call failed.
    #[error("Socket I/O failed")]
    Io(#[from] io::Error),
    /// The peer closed the socket in the middle of a message.
    #[error("Peer closed the socket after {received} of {expected} bytes of a message")]
    Truncated {
        /// Bytes the message should have had (header or payload part).
        expected: usize,
        /// Bytes that arrived.
        received: usize,
    },
    /// A message to send is larger than `msg_size` can describe.
    #[error("Message of {size} bytes is too large to send")]
    TooLarge {
        /// Size of the message.
        size: usize,
    },
    /// More fds were given to send than one message can carry.
    #[error("Cannot send {count} fds in one message")]
    TooManyFds {
        /// Number of fds.
        count: usize,
    },
    /// The peer did not send `what` in time (server read deadlines).
    #[error("Peer did not send a {what} in time")]
    ReadTimedOut {
        /// What was awaited: "message", "whole header", "whole payload".
        what: &'static str,
    },
    /// The peer did not take a reply within `limit` (it does not read its socket).
    #[error("Peer did not read a reply within {limit:?}")]
    SendTimedOut {
        /// The send deadline.
        limit: std::time::Duration,
    },
    /// The server was stopped while a send waited.
    #[error("Server is stopping")]
    Stopped,
}

/// Why [`crate::serve_connection`] dropped a connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// Reading or writing the socket failed, or the client broke the framing.
    #[error("Connection failed")]
    Frame(#[from] FrameError),
    /// The device has failed ([`crate::Device::failed`]) and serves no client.
    #[error("Device has failed and serves no client")]
    DeviceFailed,
    /// The device admits no client now ([`crate::Device::admits_clients`]).
    #[error("Device admits no client (its access policy refused the connection)")]
    NotAdmitted,
}

/// A failed [`crate::Client`] call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting to the socket failed.
    #[error("Cannot connect to the vfio-user socket")]
    Connect(#[source] io::Error),
    /// Reading or writing the socket failed.
    #[error("Connection failed")]
    Frame(#[from] FrameError),
    /// The server did not accept the connection in time (its listen queue stayed full).
    #[error("Server did not accept the connection within {limit:?}")]
    ConnectTimedOut {
        /// How long the client waited.
        limit: std::time::Duration,
    },
    /// The server did not take a request, or did not answer it, in time.
    #[error("Server did not answer {command:?} within {limit:?}")]
    TimedOut {
        /// The unanswered command.
        command: Command,
        /// How long the client waited.
        limit: std::time::Duration,
    },
    /// The socket is served by a user other than root and us (a squatter, perhaps).
    #[error(transparent)]
    Untrusted(#[from] nvmemu_sockfile::UntrustedServer),
    /// The server closed the connection before replying.
    #[error("Server closed the connection")]
    Closed,
    /// The server refused VERSION with EBUSY: its controller is attached to another client
    /// (one client per controller).
    #[error("Controller is in use by another client")]
    Busy,
    /// The server refused VERSION with EACCES: its controller admits no client (an NVMe-oF
    /// subsystem that allows no host: vfio-user clients present no host NQN).
    #[error("Controller refuses clients: its subsystem does not allow any host")]
    Refused,
    /// The server answered with an error reply.
    #[error("Server rejected {command:?} with errno {errno}")]
    Remote {
        /// The rejected command.
        command: Command,
        /// The server's errno.
        errno: Errno,
    },
    /// The server's reply did not follow the protocol.
    #[error("Malformed reply to {command:?}: {reason}")]
    BadReply {
        /// The command that was answered.
        command: Command,
        /// What was wrong.
        reason: &'static str,
    },
    /// A request argument cannot be sent (too large, too many fds).
    #[error("Invalid request: {reason}")]
    InvalidRequest {
        /// What was wrong.
        reason: &'static str,
    },
}
