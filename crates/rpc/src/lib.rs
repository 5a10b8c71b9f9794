// SPDX-License-Identifier: Apache-2.0
//! nvmemu-rpc: the SPDK-compatible JSON-RPC 2.0 control plane.
//!
//! **Owns:** the wire protocol as SPDK's server and `scripts/rpc.py` speak it over a UNIX
//! stream socket (one JSON value after another, no delimiter, replies decoded as bytes
//! arrive); the typed [`Request`] enum with SPDK's method names, parameter names, defaults
//! and result shapes, each method declared once in the method table (`table.rs`); the [`Handler`] trait; the server ([`serve`]), a client ([`call`]);
//! rpc.py's command line for `nvmemu rpc` ([`run_cli`]); and SPDK's `save_config` format
//! ([`load_config`] for `nvmemu serve --json`).
//!
//! **Depends on:** `nvmemu-sockfile` only (socket files with their final mode). The `nvmemu` binary implements [`Handler`] on top of
//! the target.
//!
//! **Never:** panics or allocates without bound on client input (requests are capped at
//! [`MAX_REQUEST_BYTES`], batches at [`MAX_BATCH`], connections at [`MAX_CONNECTIONS`]; a
//! client cannot hold the server, see [`serve_on`]); touches target state itself.
//!
//! Error codes: `-32700` parse error, or a request still incomplete at its deadline (then the
//! connection closes), `-32600` invalid request (a request over [`MAX_REQUEST_BYTES`] also
//! closes the connection; a batch over [`MAX_BATCH`] does not), `-32601` unknown method,
//! `-32602` bad parameters (message names the parameter), `-16` for a new connection when
//! every slot is inside a call, and handler state errors in SPDK's `-errno` style
//! ([`RpcError::errno`]).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[macro_use]
mod declare;
pub mod cli;
mod client;
mod config;
mod config_format;
mod conn;
mod dispatch;
mod error;
mod framer;
mod limits;
pub mod methods;
mod server;
mod slot;
mod table;
#[cfg(any(test, feature = "test-utils"))]
pub mod test_utils;

pub use cli::{RpcArgs, run_cli};
pub use client::{Client, ClientError, DEFAULT_TIMEOUT, call};
pub use config::{FormatError, LoadConfigError, LoadReport, load_config};
pub use config_format::{ConfigEntry, SpdkConfig, SubsystemConfig};
pub use conn::serve_connection;
pub use dispatch::{
    Caller, Handler, MAX_BATCH, dispatch, dispatch_for, error_reply, handle_message,
    handle_message_for, result_reply,
};
pub use error::{
    Errno, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, INVALID_STATE, METHOD_NOT_FOUND,
    PARSE_ERROR, RpcError,
};
pub use framer::{FrameError, Framer, MAX_MESSAGE_BYTES};
pub use limits::{Limits, MAX_CONNECTIONS, MAX_REQUEST_BYTES};
pub use methods::{METHODS, Request};
pub use nvmemu_sockfile::{Access, BindError, StopHandle};
pub use server::{DEFAULT_SOCKET, RpcSocket, serve, serve_on};
