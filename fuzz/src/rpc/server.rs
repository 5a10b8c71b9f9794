// SPDX-License-Identifier: Apache-2.0
//! The server of the `rpc_handler` target: one target (poller thread) for the whole fuzz
//! process, a fresh handler per input, the framer and dispatch of a connection, and what
//! the harness will not let a request do to the machine it runs on.

use std::sync::{Arc, OnceLock};

use nvmemu::rpc_handler::{HandlerOptions, NvmemuHandler};
use nvmemu_device::{Backoff, Deadlines, Target, TargetConfig};
use nvmemu_rpc::{Framer, StopHandle, handle_message};
use serde_json::Value;

use super::check;

/// Largest malloc bdev the harness lets through: bigger ones (up to [`ABSURD`]) are shrunk
/// before dispatch, because the handler may rightly create them and they would take real
/// memory from the machine.
pub const MAX_MALLOC_BYTES: u64 = 256 << 10;
/// From this size up a malloc bdev must be refused, lazy or not: more than the 47-bit user
/// address space, let alone memory.
pub const ABSURD: u64 = 1 << 48;
/// The bdev the harness creates after the input to see the handler still works; inputs
/// never name it (see [`confine`]).
pub const CHECK_NAME: &str = "fuzz_check";
/// Longest `timeout` (ms) of `bdev_get_bdevs` sent: the method waits that long on purpose
/// (in 10 ms sleeps), and a fuzzer that waits runs no inputs.
const MAX_TIMEOUT_MS: u64 = 1;

struct Shared {
    target: Arc<Target>,
    /// Listener directories live under here, and only here.
    sandbox: tempfile::TempDir,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| Shared {
        target: Arc::new(
            Target::start(TargetConfig {
                cores: vec![0],
                pin: false,
                backoff: Backoff::default(),
                deadlines: Deadlines::default(),
                poller_timeout: nvmemu_device::CALL_TIMEOUT,
                client_budget: nvmemu_device::ClientBudget::default(),
            })
            .expect("target"),
        ),
        sandbox: {
            let dir = tempfile::tempdir().expect("sandbox");
            // l0..l2 exist (listeners can be made there), l3 does not.
            for n in 0..3 {
                std::fs::create_dir(dir.path().join(format!("l{n}"))).expect("listener dir");
            }
            dir
        },
    })
}

/// The handler of one fuzz input, as `nvmemu serve` builds it.
pub struct Server {
    handler: NvmemuHandler,
    framer: Framer,
    /// The framer met a syntax error or an oversized value: a server closes the
    /// connection there, so nothing after it is read.
    closed: bool,
}

impl Default for Server {
    fn default() -> Self {
        let handler = NvmemuHandler::new(
            shared().target.clone(),
            StopHandle::new().expect("stop handle"),
            HandlerOptions {
                socket_mode: 0o600,
                cores: vec![0],
                log: None,
                numa_node: None,
            },
        );
        Server {
            handler,
            framer: Framer::new(nvmemu_rpc::MAX_REQUEST_BYTES),
            closed: false,
        }
    }
}

/// The directory listeners may be created in.
pub fn sandbox() -> String {
    shared().sandbox.path().display().to_string()
}

impl Server {
    /// Receive `text` as the next bytes of the connection: every complete value is handled
    /// and its reply checked.
    pub fn receive(&mut self, text: &[u8]) {
        if self.closed {
            return;
        }
        self.framer.push(text);
        loop {
            match self.framer.next_value() {
                Ok(Some(mut msg)) => {
                    confine(&mut msg);
                    let reply = handle_message(&self.handler, msg.clone());
                    check::reply(&msg, reply.as_ref());
                }
                Ok(None) => return,
                Err(_) => {
                    self.closed = true;
                    return;
                }
            }
        }
    }

    /// Run one request object, check its reply and return it.
    pub fn call(&self, method: &str, params: Value) -> Value {
        let msg =
            serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1});
        let reply = handle_message(&self.handler, msg.clone());
        check::reply(&msg, reply.as_ref());
        reply.expect("a request with an id is answered")
    }

    /// Remove what the input created outside the handler's own state (controllers and
    /// their sockets live in the shared target).
    pub fn finish(self) {
        let target = &shared().target;
        for (id, _) in target.controllers() {
            target.remove_controller(id).expect("remove controller");
        }
    }
}

/// Keep a request from reaching outside the harness: listener paths go under the sandbox,
/// a TCP listener (an object whose `trtype` is TCP, in any case) binds loopback port 0 only,
/// waits are short, the check's bdev name stays free, and malloc bdevs between [`MAX_MALLOC_BYTES`] and [`ABSURD`] shrink
/// (the handler may create those; they would take the machine's memory).
pub fn confine(v: &mut Value) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(confine),
        Value::Object(m) => {
            if m.get("method").and_then(Value::as_str) == Some("bdev_malloc_create")
                && let Some(Value::Object(p)) = m.get_mut("params")
            {
                let blocks = p.get("num_blocks").and_then(Value::as_u64);
                let size = p.get("block_size").and_then(Value::as_u64);
                if let (Some(n), Some(bs)) = (blocks, size)
                    && let Some(bytes) = n.checked_mul(bs)
                    && bytes > MAX_MALLOC_BYTES
                    && bytes < ABSURD
                {
                    p.insert("num_blocks".into(), Value::from(8));
                }
            }
            for (k, inner) in m.iter_mut() {
                match (k.as_str(), &*inner) {
                    ("traddr", Value::String(s)) => {
                        let n = s.bytes().fold(0u8, |a, b| a.wrapping_add(b)) % 4;
                        *inner = Value::from(format!("{}/l{n}", sandbox()));
                    }
                    ("timeout", Value::Number(n))
                        if n.as_u64().is_some_and(|ms| ms > MAX_TIMEOUT_MS) =>
                    {
                        *inner = Value::from(MAX_TIMEOUT_MS);
                    }
                    _ => confine(inner),
                }
            }
            let tcp = m
                .get("trtype")
                .and_then(Value::as_str)
                .is_some_and(|t| t.eq_ignore_ascii_case("tcp"));
            if tcp {
                m.insert("traddr".into(), Value::from("127.0.0.1"));
                m.insert("trsvcid".into(), Value::from("0"));
            }
        }
        Value::String(s) if s == CHECK_NAME => s.push('_'),
        _ => {}
    }
}
