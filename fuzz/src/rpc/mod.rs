// SPDX-License-Identifier: Apache-2.0
//! The JSON-RPC side: nvmemu's real handler (`nvmemu::rpc_handler`) behind the real
//! dispatch (`nvmemu_rpc::handle_message`) and framer, fed JSON built from the fuzz input.

pub mod check;
pub mod input;
pub mod server;

#[cfg(test)]
mod tests;
