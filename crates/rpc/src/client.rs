// SPDX-License-Identifier: Apache-2.0
//! A blocking JSON-RPC client that talks like rpc.py: one request object per call, no
//! trailing newline, `params` only when non-empty, ids counting from 1, and the reply read by
//! decoding JSON as bytes arrive.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::RpcError;
use crate::framer::{FrameError, Framer, MAX_MESSAGE_BYTES};

/// rpc.py's default timeout, seconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting, sending or receiving failed (including a timeout).
    #[error("RPC socket I/O failed")]
    Io(#[from] io::Error),
    /// The socket is served by a user other than root and us (a squatter, perhaps).
    #[error(transparent)]
    Untrusted(#[from] nvmemu_sockfile::UntrustedServer),
    /// The server closed the connection before a full reply arrived.
    #[error("connection closed before a complete reply")]
    Closed,
    /// The reply is not valid JSON or not a JSON-RPC response.
    #[error("malformed reply: {0}")]
    Protocol(String),
    /// The server answered with a JSON-RPC error.
    #[error("server returned an error")]
    Rpc(#[source] RpcError),
}

/// One connection to a JSON-RPC server.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    framer: Framer,
    next_id: u64,
}

impl Client {
    /// Connects to the socket at `path`; `timeout` bounds each send and receive. A server
    /// that runs as neither root nor us is refused before anything is sent.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Self, ClientError> {
        let stream = UnixStream::connect(path)?;
        nvmemu_sockfile::check_server(&stream, path)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Self {
            stream,
            framer: Framer::new(MAX_MESSAGE_BYTES),
            next_id: 1,
        })
    }

    /// Sends `method` with `params` and waits for its result.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut req = json!({"jsonrpc": "2.0", "method": method, "id": id});
        let has_params = match &params {
            Value::Null => false,
            Value::Object(m) => !m.is_empty(),
            _ => true,
        };
        if let (true, Some(obj)) = (has_params, req.as_object_mut()) {
            obj.insert("params".into(), params);
        }
        let bytes = serde_json::to_vec(&req).map_err(|e| ClientError::Protocol(e.to_string()))?;
        self.stream.write_all(&bytes)?;
        let reply = self.read_reply()?;
        let mut obj = match reply {
            Value::Object(o) => o,
            other => {
                return Err(ClientError::Protocol(format!(
                    "reply is not an object: {other}"
                )));
            }
        };
        if obj.get("id") != Some(&json!(id)) {
            return Err(ClientError::Protocol(format!(
                "reply id does not match request id {id}"
            )));
        }
        if let Some(err) = obj.remove("error") {
            let err: RpcError = serde_json::from_value(err)
                .map_err(|e| ClientError::Protocol(format!("bad error object: {e}")))?;
            return Err(ClientError::Rpc(err));
        }
        obj.remove("result")
            .ok_or_else(|| ClientError::Protocol("reply has neither result nor error".into()))
    }

    fn read_reply(&mut self) -> Result<Value, ClientError> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.framer.next_value() {
                Ok(Some(v)) => return Ok(v),
                Ok(None) => {}
                Err(e @ (FrameError::Syntax(_) | FrameError::TooLong { .. })) => {
                    return Err(ClientError::Protocol(e.to_string()));
                }
            }
            let n = match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ClientError::Closed),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            self.framer.push(chunk.get(..n).unwrap_or_default());
        }
    }
}

/// One-shot call on a fresh connection with [`DEFAULT_TIMEOUT`].
pub fn call(path: &Path, method: &str, params: Value) -> Result<Value, ClientError> {
    Client::connect(path, DEFAULT_TIMEOUT)?.call(method, params)
}
