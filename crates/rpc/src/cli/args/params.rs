// SPDX-License-Identifier: Apache-2.0
//! Building a method's params object the way rpc.py does (`remove_null(kwargs)`), and the
//! error for a command line rpc.py rejects after parsing. Shared by every method family.

use serde_json::{Map, Value};

/// A command line rpc.py would reject after parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArgError(pub String);

/// Builds a params object the way `remove_null(kwargs)` does.
#[derive(Default)]
pub(super) struct P(Map<String, Value>);

impl P {
    pub(super) fn set(mut self, k: &str, v: impl Into<Value>) -> Self {
        self.0.insert(k.to_owned(), v.into());
        self
    }
    pub(super) fn opt<T: Into<Value>>(self, k: &str, v: Option<T>) -> Self {
        match v {
            Some(v) => self.set(k, v),
            None => self,
        }
    }
    /// A flag the user set is sent as `true`; one left unset is not sent at all, so a target
    /// that does not know the option (SPDK v25.05 and `enable_nssr`) still accepts the call.
    pub(super) fn flag(self, k: &str, set: bool) -> Self {
        if set { self.set(k, true) } else { self }
    }
    pub(super) fn done(self) -> Value {
        Value::Object(self.0)
    }
}
