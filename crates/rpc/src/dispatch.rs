// SPDX-License-Identifier: Apache-2.0
//! The [`Handler`] trait, request dispatch, and the JSON-RPC 2.0 envelope: turning one
//! decoded JSON value (request object or batch array) into the reply to send, if any.
//!
//! Envelope rules follow SPDK `lib/jsonrpc/jsonrpc_server.c`: `jsonrpc` must be `"2.0"`,
//! `method` a string, `params` (optional) an object or array, `id` (optional) a string,
//! number or null, and no other members. Errors for requests without a usable id carry
//! `"id": null`. A request without `id` is a notification: it runs and gets no reply.
//! A batch (an array of requests) holds at most [`MAX_BATCH`] of them.

use std::os::fd::BorrowedFd;

use nvmemu_sockfile::{StopHandle, peer_gone};
use serde_json::{Map, Value, json};

use crate::config_format::SpdkConfig;
use crate::error::RpcError;
use crate::methods::{METHODS, Request};

/// Most requests in one batch; a longer batch gets one `-32600` error and none of it runs
/// (100,000 requests in 6 MiB would otherwise make a reply of 55 MiB).
pub const MAX_BATCH: usize = 128;

/// What the nvmemu binary implements on top of the target: run one decoded request.
///
/// Results are SPDK-shaped JSON (see the result types in [`crate::methods`]). State errors
/// (name taken, bdev in use, unknown subsystem) are SPDK-style [`RpcError`]s such as
/// `RpcError::errno(Errno::EEXIST)`; a handler never panics on caller input.
///
/// [`dispatch`] answers `rpc_get_methods`, `framework_get_subsystems` and
/// `framework_get_config` itself (the latter two from [`Request::SaveConfig`]), so a handler
/// may return [`RpcError::method_not_found`] for those three.
pub trait Handler {
    /// Runs `req` and returns its JSON result.
    fn handle(&self, req: Request) -> Result<Value, RpcError>;

    /// Runs `req` for `caller`. A handler whose methods wait (e.g. `bdev_get_bdevs` with a
    /// `timeout`) overrides this and stops waiting once [`Caller::is_gone`], so a client that
    /// leaves frees its connection slot. The default ignores the caller.
    fn handle_for(&self, req: Request, caller: &Caller<'_>) -> Result<Value, RpcError> {
        let _ = caller;
        self.handle(req)
    }
}

/// Where a request came from: a connection (whose client may leave while its request
/// waits) or nowhere in particular (a configuration file, a test).
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    socket: Option<BorrowedFd<'a>>,
    stop: Option<&'a StopHandle>,
}

impl<'a> Caller<'a> {
    /// A caller that never leaves.
    pub fn detached() -> Caller<'static> {
        Caller {
            socket: None,
            stop: None,
        }
    }

    /// The client on `socket` of a server stopped by `stop`.
    pub fn connection(socket: BorrowedFd<'a>, stop: &'a StopHandle) -> Self {
        Caller {
            socket: Some(socket),
            stop: Some(stop),
        }
    }

    /// Whether nobody waits for the answer any more: the client closed its connection, or
    /// the server is stopping. One non-blocking `poll`.
    pub fn is_gone(&self) -> bool {
        self.stop.is_some_and(StopHandle::is_stopped) || self.socket.is_some_and(peer_gone)
    }
}

/// Runs one request: the crate-level methods here, everything else through `handler`.
pub fn dispatch(handler: &dyn Handler, req: Request) -> Result<Value, RpcError> {
    dispatch_for(handler, req, &Caller::detached())
}

/// [`dispatch`] on behalf of `caller` (see [`Handler::handle_for`]).
pub fn dispatch_for(
    handler: &dyn Handler,
    req: Request,
    caller: &Caller<'_>,
) -> Result<Value, RpcError> {
    match req {
        Request::RpcGetMethods(_) => Ok(json!(METHODS)),
        Request::FrameworkGetSubsystems => {
            let cfg = load_saved_config(handler)?;
            serde_json::to_value(cfg.subsystem_deps())
                .map_err(|e| RpcError::internal(e.to_string()))
        }
        Request::FrameworkGetConfig(p) => {
            let cfg = load_saved_config(handler)?;
            let sub = cfg.subsystem(&p.name).ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "Invalid parameter `name`: no subsystem {:?}",
                    p.name
                ))
            })?;
            serde_json::to_value(&sub.config).map_err(|e| RpcError::internal(e.to_string()))
        }
        other => handler.handle_for(other, caller),
    }
}

fn load_saved_config(handler: &dyn Handler) -> Result<SpdkConfig, RpcError> {
    let v = handler.handle(Request::SaveConfig)?;
    serde_json::from_value(v)
        .map_err(|e| RpcError::internal(format!("save_config result is malformed: {e}")))
}

/// Builds a success reply.
pub fn result_reply(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// Builds an error reply.
pub fn error_reply(id: Value, err: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": err.code, "message": err.message}})
}

/// Handles one complete JSON value received on a connection. Returns the reply to send,
/// or `None` when nothing is due (a notification, or a batch of notifications).
pub fn handle_message(handler: &dyn Handler, msg: Value) -> Option<Value> {
    handle_message_for(handler, msg, &Caller::detached())
}

/// [`handle_message`] on behalf of `caller` (see [`Handler::handle_for`]).
pub fn handle_message_for(handler: &dyn Handler, msg: Value, caller: &Caller<'_>) -> Option<Value> {
    match msg {
        Value::Object(obj) => handle_single(handler, obj, caller),
        Value::Array(items) => {
            if items.is_empty() {
                return Some(error_reply(Value::Null, &RpcError::invalid_request()));
            }
            if items.len() > MAX_BATCH {
                tracing::debug!(len = items.len(), "RPC batch too long; refused");
                return Some(error_reply(
                    Value::Null,
                    &RpcError::new(
                        crate::error::INVALID_REQUEST,
                        format!(
                            "Invalid request: a batch of {} requests exceeds {MAX_BATCH}",
                            items.len()
                        ),
                    ),
                ));
            }
            let replies: Vec<Value> = items
                .into_iter()
                .filter_map(|item| match item {
                    Value::Object(obj) => handle_single(handler, obj, caller),
                    _ => Some(error_reply(Value::Null, &RpcError::invalid_request())),
                })
                .collect();
            if replies.is_empty() {
                None
            } else {
                Some(Value::Array(replies))
            }
        }
        _ => Some(error_reply(Value::Null, &RpcError::invalid_request())),
    }
}

/// The envelope fields of a valid request.
struct Envelope {
    method: String,
    params: Option<Value>,
    /// `None` for a notification.
    id: Option<Value>,
}

fn parse_envelope(mut obj: Map<String, Value>) -> Result<Envelope, (Value, RpcError)> {
    // The id is read first so that an otherwise invalid request is answered with it.
    let id = obj.remove("id");
    let reply_id = match &id {
        Some(v @ (Value::String(_) | Value::Number(_))) => v.clone(),
        _ => Value::Null,
    };
    let invalid = |id: &Value| (id.clone(), RpcError::invalid_request());
    if !matches!(
        &id,
        None | Some(Value::String(_) | Value::Number(_) | Value::Null)
    ) {
        return Err(invalid(&Value::Null));
    }
    match obj.remove("jsonrpc") {
        Some(Value::String(v)) if v == "2.0" => {}
        _ => return Err(invalid(&reply_id)),
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        _ => return Err(invalid(&reply_id)),
    };
    let params = obj.remove("params");
    if !matches!(&params, None | Some(Value::Object(_) | Value::Array(_))) {
        return Err(invalid(&reply_id));
    }
    if !obj.is_empty() {
        return Err(invalid(&reply_id));
    }
    Ok(Envelope { method, params, id })
}

fn handle_single(
    handler: &dyn Handler,
    obj: Map<String, Value>,
    caller: &Caller<'_>,
) -> Option<Value> {
    let env = match parse_envelope(obj) {
        Ok(env) => env,
        Err((id, err)) => return Some(error_reply(id, &err)),
    };
    tracing::debug!(method = %env.method, "rpc request");
    let outcome =
        Request::decode(&env.method, env.params).and_then(|req| dispatch_for(handler, req, caller));
    let id = env.id?;
    Some(match outcome {
        Ok(result) => result_reply(id, result),
        Err(err) => error_reply(id, &err),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};

    struct Echo;
    impl Handler for Echo {
        fn handle(&self, req: Request) -> Result<Value, RpcError> {
            match req {
                Request::SaveConfig => Ok(json!({"subsystems": [
                    {"subsystem": "bdev", "config": [{"method": "bdev_malloc_create",
                        "params": {"name": "M", "num_blocks": 8, "block_size": 512}}]},
                    {"subsystem": "nvmf", "config": []}
                ]})),
                other => Ok(json!(other.method())),
            }
        }
    }

    fn call(msg: Value) -> Option<Value> {
        handle_message(&Echo, msg)
    }

    #[test]
    fn request_gets_result_with_same_id() {
        let r = call(json!({"jsonrpc": "2.0", "method": "spdk_get_version", "id": "abc"}));
        assert_eq!(
            r,
            Some(json!({"jsonrpc": "2.0", "id": "abc", "result": "spdk_get_version"}))
        );
        let r = call(json!({"jsonrpc": "2.0", "method": "spdk_get_version", "id": 7}));
        assert_eq!(r.unwrap()["id"], json!(7));
    }

    #[test]
    fn notification_gets_no_reply_even_on_error() {
        assert_eq!(
            call(json!({"jsonrpc": "2.0", "method": "spdk_get_version"})),
            None
        );
        assert_eq!(call(json!({"jsonrpc": "2.0", "method": "nope"})), None);
    }

    #[test]
    fn envelope_errors_are_invalid_request() {
        for bad in [
            json!({"method": "spdk_get_version", "id": 1}),
            json!({"jsonrpc": "1.0", "method": "spdk_get_version", "id": 1}),
            json!({"jsonrpc": "2.0", "method": 5, "id": 1}),
            json!({"jsonrpc": "2.0", "method": "x", "params": 3, "id": 1}),
            json!({"jsonrpc": "2.0", "method": "x", "id": 1, "extra": true}),
            json!(42),
            json!([]),
        ] {
            let r = call(bad.clone()).unwrap();
            assert_eq!(r["error"]["code"], json!(INVALID_REQUEST), "{bad}");
        }
        let r = call(json!({"jsonrpc": "2.0", "method": "x", "id": [1]})).unwrap();
        assert_eq!(r["id"], Value::Null);
    }

    #[test]
    fn method_and_param_errors_carry_codes() {
        let r = call(json!({"jsonrpc": "2.0", "method": "nope", "id": 1})).unwrap();
        assert_eq!(r["error"]["code"], json!(METHOD_NOT_FOUND));
        let r = call(
            json!({"jsonrpc": "2.0", "method": "bdev_malloc_delete", "id": 1,
                            "params": {}}),
        )
        .unwrap();
        assert_eq!(r["error"]["code"], json!(INVALID_PARAMS));
        assert!(r["error"]["message"].as_str().unwrap().contains("name"));
    }

    #[test]
    fn batch_replies_in_order_without_notifications() {
        let r = call(json!([
            {"jsonrpc": "2.0", "method": "spdk_get_version", "id": 1},
            {"jsonrpc": "2.0", "method": "spdk_get_version"},
            {"jsonrpc": "2.0", "method": "nope", "id": 2},
            7
        ]))
        .unwrap();
        let arr = r.as_array().unwrap();
        assert_eq!(arr.len(), 3);
        assert_eq!(arr[0]["id"], json!(1));
        assert_eq!(arr[1]["error"]["code"], json!(METHOD_NOT_FOUND));
        assert_eq!(arr[2]["error"]["code"], json!(INVALID_REQUEST));
    }

    #[test]
    fn batch_longer_than_the_cap_is_one_error_and_runs_nothing() {
        struct Count(std::sync::atomic::AtomicUsize);
        impl Handler for Count {
            fn handle(&self, _: Request) -> Result<Value, RpcError> {
                self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(Value::Bool(true))
            }
        }
        let one = json!({"jsonrpc": "2.0", "method": "spdk_get_version", "id": 1});
        let h = Count(Default::default());
        let r = handle_message(&h, Value::Array(vec![one.clone(); MAX_BATCH + 1])).unwrap();
        assert_eq!(
            r,
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": INVALID_REQUEST,
                "message": "Invalid request: a batch of 129 requests exceeds 128"}})
        );
        assert_eq!(h.0.load(std::sync::atomic::Ordering::Relaxed), 0);
        let r = handle_message(&h, Value::Array(vec![one; MAX_BATCH])).unwrap();
        assert_eq!(r.as_array().unwrap().len(), MAX_BATCH);
    }

    #[test]
    fn framework_config_methods_derive_from_save_config() {
        let r = dispatch(&Echo, Request::FrameworkGetSubsystems).unwrap();
        assert_eq!(
            r,
            json!([{"subsystem": "bdev", "depends_on": []},
                   {"subsystem": "nvmf", "depends_on": ["bdev"]}])
        );
        let r = dispatch(
            &Echo,
            Request::FrameworkGetConfig(crate::methods::framework::FrameworkGetConfigParams {
                name: "bdev".into(),
            }),
        )
        .unwrap();
        assert_eq!(r[0]["method"], json!("bdev_malloc_create"));
        let e = dispatch(
            &Echo,
            Request::FrameworkGetConfig(crate::methods::framework::FrameworkGetConfigParams {
                name: "iscsi".into(),
            }),
        )
        .unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        let m = dispatch(&Echo, Request::RpcGetMethods(Default::default())).unwrap();
        assert!(
            m.as_array()
                .unwrap()
                .contains(&json!("nvmf_subsystem_add_listener"))
        );
    }
}
