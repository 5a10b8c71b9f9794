// SPDX-License-Identifier: Apache-2.0
//! The part of the `nvmemu` binary that other build targets drive directly: the JSON-RPC
//! handler, which the `rpc_handler` fuzz target runs in-process, without a socket, and the
//! console output both use.
//! Everything else stays in the binary (`main.rs`).
//!
//! A library target rather than a feature (a binary crate cannot be depended on, whatever
//! its features) or a separate crate (the handler wires every other crate together, which
//! is the binary's job in the crate table).
#![forbid(unsafe_code)]

pub mod console;
pub mod rpc_handler;

/// `e` and its sources on one line, `outer: inner: ...`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
