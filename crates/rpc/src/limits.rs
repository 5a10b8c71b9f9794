// SPDX-License-Identifier: Apache-2.0
//! What one JSON-RPC client may take of the server: deadlines, request size, connections
//! (the server's module docs say how each is enforced).

use std::time::Duration;

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
