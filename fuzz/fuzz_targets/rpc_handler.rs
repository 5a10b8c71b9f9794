// SPDX-License-Identifier: Apache-2.0
//! Random JSON-RPC traffic through the real framer, dispatch and nvmemu handler (bdevs,
//! transport, subsystems, namespaces, listeners that create real controllers in a sandbox
//! directory): requests with real method names and params of every type, ids of every
//! kind, batches (long ones too), non-requests and raw text, delivered in pieces.
//!
//! Invariants, beyond "no panic" and libFuzzer's memory limit: every received value gets
//! exactly the responses JSON-RPC 2.0 prescribes (one per request with an id, carrying it;
//! an error with id null for an invalid one; nothing for a notification), each well formed
//! with a JSON-RPC code or SPDK's -errno; a malloc bdev of 2^48 bytes or more is refused
//! (sizes from 256 KiB up to that are shrunk before dispatch: they may rightly succeed, and
//! would take the machine's memory); afterwards a fresh request creates a bdev, a second
//! create of its name is refused with EEXIST, and it is deleted exactly once.
#![no_main]

use arbitrary::Arbitrary;
use nvmemu_fuzz::rpc::input::Message;
use nvmemu_fuzz::rpc::server::{CHECK_NAME, Server, sandbox};
use serde_json::json;

/// Most messages per input.
const MAX_MESSAGES: usize = 32;

#[derive(Arbitrary, Debug)]
struct Input {
    messages: Vec<Message>,
    /// Bytes per read the server gets (0: everything at once).
    piece: u8,
}

libfuzzer_sys::fuzz_target!(|input: Input| {
    let mut server = Server::default();
    let sandbox = sandbox();
    for m in input.messages.iter().take(MAX_MESSAGES) {
        let text = m.text(&sandbox);
        let piece = if input.piece == 0 {
            text.len().max(1)
        } else {
            usize::from(input.piece)
        };
        for part in text.as_bytes().chunks(piece) {
            server.receive(part);
        }
    }

    // A fresh request still works, and the registry is coherent: the bdev exists (a second
    // create is refused), is deleted once, and is gone.
    let bdev = json!({"name": CHECK_NAME, "num_blocks": 16, "block_size": 512});
    let created = server.call("bdev_malloc_create", bdev.clone());
    assert_eq!(
        created["result"], CHECK_NAME,
        "a good create fails afterwards: {created}"
    );
    let again = server.call("bdev_malloc_create", bdev);
    assert_eq!(
        again["error"]["code"], -17,
        "a second create with the name: {again}"
    );
    let name = json!({"name": CHECK_NAME});
    assert_eq!(
        server.call("bdev_malloc_delete", name.clone())["result"],
        true
    );
    assert_eq!(
        server.call("bdev_malloc_delete", name)["error"]["code"],
        -19
    );
    server.finish();
});
