// SPDX-License-Identifier: Apache-2.0
//! `#[serde(deserialize_with = "object_only")]` for a parameter that is itself an object
//! (`namespace`, `listen_address`): serde's derive would also fill the struct from an array,
//! field by field in declaration order, which SPDK's decoder refuses.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// Deserializes `T` from a JSON object only; anything else is "invalid type: ..., expected
/// an object". The map is handed on as is, so error paths into `T` stay complete.
pub(crate) fn object_only<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    d.deserialize_map(ObjectOnly(PhantomData))
}

struct ObjectOnly<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOnly<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map))
    }
}
