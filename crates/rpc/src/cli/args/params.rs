// SPDX-License-Identifier: Apache-2.0
//! How a method's command-line arguments become the params object rpc.py sends.
//!
//! Each args struct derives `Serialize` next to clap's `Args`, its fields named as the
//! params (or `#[serde(rename)]`d). [`CliParams::params`] serializes it and drops the
//! options not given (`None`, serialized as `null`), as rpc.py's `remove_null(kwargs)` does;
//! `store_true` flags are plain `bool`s, always sent. A struct whose params are computed
//! (sizes in MiB to blocks, nested objects) overrides `params` and starts from
//! [`serialized`]. Shared by every method family.

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

/// A command line rpc.py would reject after parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArgError(pub String);

/// The params object rpc.py sends for a method's arguments.
pub trait CliParams: Serialize {
    /// The params: the struct's fields, options not given left out.
    fn params(&self) -> Result<Value, ArgError> {
        serialized(self).map(Value::Object)
    }
}

/// `args` serialized, `null` members (options not given) removed at every level.
pub(super) fn serialized<T: Serialize + ?Sized>(args: &T) -> Result<Map<String, Value>, ArgError> {
    match serde_json::to_value(args) {
        Ok(Value::Object(map)) => Ok(without_nulls(map)),
        Ok(other) => Err(ArgError(format!("arguments are not an object: {other}"))),
        Err(e) => Err(ArgError(format!("cannot encode the arguments: {e}"))),
    }
}

fn without_nulls(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| match v {
            Value::Object(inner) => (k, Value::Object(without_nulls(inner))),
            other => (k, other),
        })
        .collect()
}

/// Moves `keys` (those present) out of `params` into an object `name` appended at the end:
/// rpc.py's nested `listen_address` built from flat options.
pub(super) fn nest(mut params: Map<String, Value>, name: &str, keys: &[&str]) -> Value {
    let inner: Map<String, Value> = keys
        .iter()
        .filter_map(|k| params.shift_remove(*k).map(|v| ((*k).to_owned(), v)))
        .collect();
    params.insert(name.to_owned(), Value::Object(inner));
    Value::Object(params)
}

/// `skip_serializing_if` for a flag sent only when set (a target older than the option
/// refuses it even as `false`).
pub(super) fn is_false(flag: &bool) -> bool {
    !flag
}

/// `skip_serializing_if` for an option rpc.py sends only when given and not zero or empty
/// (its `if value:` tests).
pub(super) fn unset_or_empty<T: Default + PartialEq>(value: &Option<T>) -> bool {
    value.as_ref().is_none_or(|v| *v == T::default())
}

/// `serialize_with` for a `--disable` flag sent as its opposite (`"enable": !disable`).
pub(super) fn negated<S: Serializer>(flag: &bool, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bool(!flag)
}

/// Arguments of a method that takes none: params `{}`.
#[derive(Debug, Clone, clap::Args, Serialize)]
#[allow(missing_docs)] // A doc comment here would become every such method's help text.
pub struct NoArgs {}

impl CliParams for NoArgs {}
