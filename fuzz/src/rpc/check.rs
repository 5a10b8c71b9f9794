// SPDX-License-Identifier: Apache-2.0
//! What every reply must look like, whatever was asked.

use nvmemu_rpc::{INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR};
use serde_json::Value;

use super::server::ABSURD;

/// JSON-RPC's own codes, or SPDK's `-errno` (errno values are below 134 on Linux).
fn valid_code(code: i64) -> bool {
    matches!(
        i32::try_from(code),
        Ok(PARSE_ERROR | INVALID_REQUEST | METHOD_NOT_FOUND | INVALID_PARAMS | INTERNAL_ERROR)
    ) || (-133..=-1).contains(&code)
}

/// What one request object or batch item must get back.
#[derive(Debug, PartialEq)]
enum Expect {
    /// Nothing: a notification.
    Nothing,
    /// One response with this id (result or error).
    Id(Value),
    /// One error with id null: the item is not a valid request.
    NullError,
}

/// JSON-RPC 2.0's envelope: `jsonrpc` "2.0", a string method, params absent or structured,
/// no other members.
fn valid_envelope(m: &serde_json::Map<String, Value>) -> bool {
    m.get("jsonrpc") == Some(&Value::from("2.0"))
        && m.get("method").is_some_and(Value::is_string)
        && m.get("params")
            .is_none_or(|p| p.is_object() || p.is_array())
        && m.keys()
            .all(|k| ["jsonrpc", "method", "params", "id"].contains(&k.as_str()))
}

fn expect(item: &Value) -> Expect {
    let Some(m) = item.as_object() else {
        return Expect::NullError;
    };
    match m.get("id") {
        None if valid_envelope(m) => Expect::Nothing,
        None => Expect::NullError,
        Some(id) if id.is_string() || id.is_number() => Expect::Id(id.clone()),
        Some(Value::Null) if valid_envelope(m) => Expect::Id(Value::Null),
        Some(_) => Expect::NullError,
    }
}
/// One response object: `jsonrpc` "2.0", an id, and a result or an error with a valid
/// code and a message, nothing else.
fn response(r: &Value) {
    let m = r
        .as_object()
        .unwrap_or_else(|| panic!("a response is not an object: {r}"));
    assert_eq!(m.get("jsonrpc"), Some(&Value::from("2.0")), "{r}");
    let id = m
        .get("id")
        .unwrap_or_else(|| panic!("a response without id: {r}"));
    assert!(id.is_string() || id.is_number() || id.is_null(), "{r}");
    match (m.get("result"), m.get("error")) {
        (Some(_), None) => {}
        (None, Some(e)) => {
            let code = e["code"]
                .as_i64()
                .unwrap_or_else(|| panic!("no integer code: {r}"));
            assert!(
                valid_code(code),
                "error code {code} is not JSON-RPC's or -errno: {r}"
            );
            assert!(e["message"].is_string(), "{r}");
        }
        _ => panic!("a response needs exactly one of result and error: {r}"),
    }
    assert_eq!(m.len(), 3, "unexpected members: {r}");
}

/// Whether `item` asks for a malloc bdev of at least [`ABSURD`] bytes (or a size that
/// overflows): more than the address space, so it must be refused.
fn absurd_malloc(item: &Value) -> bool {
    let p = &item["params"];
    if item["method"] != "bdev_malloc_create" {
        return false;
    }
    match (p["num_blocks"].as_u64(), p["block_size"].as_u64()) {
        (Some(n), Some(bs)) if n > 0 && bs > 0 => n.checked_mul(bs).is_none_or(|b| b >= ABSURD),
        _ => false,
    }
}

/// `r` answers an item that expected `e`.
fn answers(e: &Expect, r: &Value, item: &Value) {
    response(r);
    assert!(
        !(absurd_malloc(item) && r.get("result").is_some()),
        "an absurdly large malloc bdev was created: {item} got {r}"
    );
    match e {
        Expect::Id(id) => assert_eq!(&r["id"], id, "a reply to another request: {r} for {item}"),
        Expect::NullError => assert!(
            r["id"].is_null() && r.get("error").is_some(),
            "an invalid request {item} got {r}"
        ),
        Expect::Nothing => panic!("a notification {item} got {r}"),
    }
}

/// The reply to one received value: a request, a batch, or anything else.
pub fn reply(msg: &Value, reply: Option<&Value>) {
    match msg {
        Value::Array(items) if !items.is_empty() && items.len() <= nvmemu_rpc::MAX_BATCH => {
            // One response per item that is answered, in order; no reply if none is.
            let expected: Vec<(Expect, &Value)> = items
                .iter()
                .map(|i| (expect(i), i))
                .filter(|(e, _)| *e != Expect::Nothing)
                .collect();
            match reply {
                None => assert!(
                    expected.is_empty(),
                    "no reply to a batch that needs one: {msg}"
                ),
                Some(Value::Array(rs)) => {
                    assert_eq!(rs.len(), expected.len(), "responses to batch {msg}: {rs:?}");
                    for ((e, item), r) in expected.iter().zip(rs) {
                        answers(e, r, item);
                    }
                }
                Some(other) => panic!("a batch answered with a non-array: {other}"),
            }
        }
        Value::Array(_) => {
            // An empty batch or one too long: one error with id null.
            let r = reply.unwrap_or_else(|| panic!("no reply to {msg}"));
            answers(&Expect::NullError, r, msg);
            assert_eq!(r["error"]["code"], INVALID_REQUEST, "{r}");
        }
        _ => match (expect(msg), reply) {
            (Expect::Nothing, None) => {}
            (e, Some(r)) => answers(&e, r, msg),
            (e, None) => panic!("no reply to {msg} (expected {e:?})"),
        },
    }
}
