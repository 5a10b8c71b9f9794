// SPDX-License-Identifier: Apache-2.0
//! Properties of the JSON-RPC framer over generated streams: values come out whole and in
//! order however the reads split them, and any bytes give the same outcome however they
//! are split (values, then at most one error), without a panic.

use nvmemu_rpc::{FrameError, Framer};
use proptest::prelude::*;
use serde_json::Value;

/// JSON values of every kind, nested a few levels.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Floats that print and parse back exactly (serde_json's default parser may be off
        // by one ulp on long mantissas, which is not the framer's business).
        any::<i32>().prop_map(|i| Value::from(f64::from(i) / 4.0)),
        ".*".prop_map(Value::from),
        // Strings that look like structure: brackets, quotes and escapes inside.
        r#"[\[\]{}"\\,:]{0,12}"#.prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Everything `framer` yields from `bytes` pushed in pieces of the given sizes (cycled):
/// the values, then the error that stopped it, if any.
fn frame(bytes: &[u8], pieces: &[usize]) -> (Vec<Value>, Option<FrameError>) {
    let mut framer = Framer::new(1 << 20);
    let mut out = Vec::new();
    let mut rest = bytes;
    let mut sizes = pieces.iter().cycle();
    while !rest.is_empty() {
        let n = (*sizes.next().unwrap_or(&1)).clamp(1, rest.len());
        let (part, tail) = rest.split_at(n);
        rest = tail;
        framer.push(part);
        loop {
            match framer.next_value() {
                Ok(Some(v)) => out.push(v),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn values_come_out_whole_and_in_order_however_the_reads_split_them(
        values in prop::collection::vec(json(), 1..8),
        pretty in any::<bool>(),
        gaps in prop::collection::vec("[ \t\r\n]{1,3}", 8),
        pieces in prop::collection::vec(1usize..40, 1..8),
    ) {
        let mut text = String::new();
        for (v, gap) in values.iter().zip(gaps.iter().cycle()) {
            let s = if pretty { serde_json::to_string_pretty(v) } else { serde_json::to_string(v) };
            text.push_str(&s.unwrap());
            // A top-level number or literal ends only at the next delimiter.
            text.push_str(gap);
        }
        let (got, err) = frame(text.as_bytes(), &pieces);
        prop_assert_eq!(err, None);
        prop_assert_eq!(got, values);
    }

    #[test]
    fn any_bytes_give_the_same_outcome_however_they_are_split(
        bytes in prop::collection::vec(
            prop_oneof![any::<u8>(), prop::sample::select(b"{}[]\",:\\ 0123tfn".to_vec())],
            0..256,
        ),
        pieces in prop::collection::vec(1usize..16, 1..6),
    ) {
        let whole = frame(&bytes, &[bytes.len().max(1)]);
        let split = frame(&bytes, &pieces);
        prop_assert_eq!(whole.0, split.0);
        prop_assert_eq!(whole.1.is_some(), split.1.is_some());
    }
}
