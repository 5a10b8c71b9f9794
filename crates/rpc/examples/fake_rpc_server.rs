// SPDX-License-Identifier: Apache-2.0
//! Serves the in-memory `FakeHandler` on a UNIX socket, for running tests/rpc/*.py locally:
//! `cargo run -p nvmemu-rpc --features test-utils --example fake_rpc_server -- /tmp/x.sock`.
//! Exits after `spdk_kill_instance`.

use std::path::PathBuf;
use std::sync::Arc;

use nvmemu_rpc::test_utils::FakeHandler;
use nvmemu_rpc::{DEFAULT_SOCKET, StopHandle, serve};

fn main() -> std::io::Result<()> {
    let path = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| DEFAULT_SOCKET.into()),
    );
    let stop = StopHandle::new()?;
    let handler = Arc::new(FakeHandler::new(Some(stop.clone())));
    serve(&path, handler, stop)
}
