// SPDX-License-Identifier: Apache-2.0
//! JSON-RPC error objects with SPDK's codes and messages.
//!
//! SPDK (`include/spdk/jsonrpc.h`, `doc/jsonrpc.md`) uses the JSON-RPC 2.0 codes for protocol
//! errors, `-1` for "method exists but not callable in this state", and for failures inside a
//! method handler the negated errno with `spdk_strerror()` text (e.g. `-17` "File exists" when a
//! bdev name is taken, `-19` "No such device" for an unknown bdev).

use serde::{Deserialize, Serialize};

/// JSON-RPC 2.0 "Parse error": the bytes are not JSON. The connection is closed afterwards.
pub const PARSE_ERROR: i32 = -32700;
/// JSON-RPC 2.0 "Invalid request": not a JSON-RPC 2.0 request object.
pub const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC 2.0 "Method not found".
pub const METHOD_NOT_FOUND: i32 = -32601;
/// JSON-RPC 2.0 "Invalid params": missing, unknown or mistyped parameter.
pub const INVALID_PARAMS: i32 = -32602;
/// JSON-RPC 2.0 "Internal error".
pub const INTERNAL_ERROR: i32 = -32603;
/// SPDK's "Invalid state": the method exists but may not be called now.
pub const INVALID_STATE: i32 = -1;

/// One JSON-RPC error object: `{"code": .., "message": ..}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}")]
pub struct RpcError {
    /// Error code (JSON-RPC 2.0 code, `-1`, or a negated errno).
    pub code: i32,
    /// Human-readable message.
    pub message: String,
}

impl RpcError {
    /// An error with an explicit code and message.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// `-32700 Parse error`.
    pub fn parse_error() -> Self {
        Self::new(PARSE_ERROR, "Parse error")
    }

    /// `-32600 Invalid request`.
    pub fn invalid_request() -> Self {
        Self::new(INVALID_REQUEST, "Invalid request")
    }

    /// `-32601 Method not found`; the message names the method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    /// `-32602` with a message that should name the offending parameter.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// `-32603 Internal error` with a message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    /// SPDK's `-1` invalid-state error.
    pub fn invalid_state(message: impl Into<String>) -> Self {
        Self::new(INVALID_STATE, message)
    }

    /// SPDK's handler-failure style: code `-errno`, message `spdk_strerror(errno)`.
    /// `errno` is the positive value, e.g. [`Errno::EEXIST`].
    pub fn errno(errno: Errno) -> Self {
        Self::new(-errno.0, errno.message())
    }

    /// Like [`RpcError::errno`] but with a custom message (SPDK's `send_error_response_fmt`).
    pub fn errno_msg(errno: Errno, message: impl Into<String>) -> Self {
        Self::new(-errno.0, message)
    }
}

/// A positive Linux errno value, used for SPDK-style `-errno` error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// Operation not permitted.
    pub const EPERM: Errno = Errno(1);
    /// No such file or directory (unknown subsystem, listener, namespace).
    pub const ENOENT: Errno = Errno(2);
    /// Out of memory.
    pub const ENOMEM: Errno = Errno(12);
    /// Device or resource busy (bdev claimed by a namespace).
    pub const EBUSY: Errno = Errno(16);
    /// File exists (bdev or subsystem name taken).
    pub const EEXIST: Errno = Errno(17);
    /// No such device (unknown bdev).
    pub const ENODEV: Errno = Errno(19);
    /// Invalid argument.
    pub const EINVAL: Errno = Errno(22);
    /// No space left on device (namespace table full).
    pub const ENOSPC: Errno = Errno(28);
    /// Operation not supported (unsupported transport type).
    pub const ENOTSUP: Errno = Errno(95);
    /// Timed out (`bdev_get_bdevs` waited its `timeout` for a bdev that never came).
    pub const ETIMEDOUT: Errno = Errno(110);

    /// The glibc `strerror` text SPDK's `spdk_strerror` returns for this errno.
    pub fn message(self) -> String {
        let text = match self.0 {
            1 => "Operation not permitted",
            2 => "No such file or directory",
            12 => "Cannot allocate memory",
            16 => "Device or resource busy",
            17 => "File exists",
            19 => "No such device",
            22 => "Invalid argument",
            28 => "No space left on device",
            95 => "Operation not supported",
            110 => "Connection timed out",
            other => return format!("Unknown error {other}"),
        };
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_errors_are_negated_with_strerror_text() {
        let e = RpcError::errno(Errno::EEXIST);
        assert_eq!(e.code, -17);
        assert_eq!(e.message, "File exists");
        assert_eq!(RpcError::errno(Errno::ENODEV).message, "No such device");
        assert_eq!(Errno(4242).message(), "Unknown error 4242");
    }

    #[test]
    fn protocol_codes_match_json_rpc_2() {
        assert_eq!(RpcError::parse_error().code, -32700);
        assert_eq!(RpcError::invalid_request().code, -32600);
        assert_eq!(RpcError::method_not_found("x").code, -32601);
        assert_eq!(RpcError::invalid_params("x").code, -32602);
        assert_eq!(RpcError::invalid_state("x").code, -1);
    }
}
