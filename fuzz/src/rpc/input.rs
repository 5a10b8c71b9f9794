// SPDX-License-Identifier: Apache-2.0
//! The fuzz input as JSON-RPC traffic: requests with real method names (or others), params
//! built from real parameter names with values of every JSON type (and of the right type
//! often enough to get past decoding), ids of every kind, batches, and raw text.

use arbitrary::Arbitrary;
use nvmemu_rpc::METHODS;
use serde_json::{Map, Number, Value, json};

/// Parameter names the methods take (and a few they do not).
const KEYS: &[&str] = &[
    "name",
    "num_blocks",
    "block_size",
    "uuid",
    "lazy",
    "hugepages",
    "md_size",
    "dif_type",
    "physical_block_size",
    "nqn",
    "trtype",
    "traddr",
    "trsvcid",
    "adrfam",
    "serial_number",
    "model_number",
    "allow_any_host",
    "max_namespaces",
    "namespace",
    "bdev_name",
    "nsid",
    "listen_address",
    "timeout",
    "sig_name",
    "tgt_name",
    "min_cntlid",
    "max_cntlid",
    "ana_reporting",
    "max_io_qpairs_per_ctrlr",
    "max_queue_depth",
    "include_aliases",
    "subsystem",
    "per_channel",
    "disable_shadow_doorbells",
    "nguid",
    "eui64",
    "hosts",
];

/// Deepest nesting of a generated value (the decoder's own limit is far deeper).
const MAX_DEPTH: u32 = 6;

/// One message on the connection.
#[derive(Arbitrary, Debug)]
pub enum Message {
    Single(Req),
    Batch(Vec<Req>),
    /// More requests than a batch may hold, all notifications but one.
    LongBatch(u8),
    /// Any text, through the framer.
    Text(String),
    /// A JSON value that is not a request.
    Other(Val),
}

/// A request object, with the envelope sometimes wrong.
#[derive(Arbitrary, Debug)]
pub struct Req {
    method: Method,
    params: Option<Val>,
    id: Id,
    jsonrpc: Option<Val>,
    extra: Option<(Key, Val)>,
}

#[derive(Arbitrary, Debug)]
pub enum Method {
    Known(u8),
    Other(String),
    NotAString(Val),
}

#[derive(Arbitrary, Debug)]
pub enum Id {
    Absent,
    Int(i64),
    Str(String),
    Null,
    Other(Val),
}

#[derive(Arbitrary, Debug)]
pub enum Key {
    Known(u8),
    Other(String),
}

/// A JSON value: the shapes the methods expect, then anything.
#[derive(Arbitrary, Debug)]
pub enum Val {
    /// A bdev name out of a few, so creates and deletes meet.
    BdevName(u8),
    Nqn(u8),
    TrType(bool),
    ListenAddress {
        /// VFIOUSER, vfiouser or TCP.
        trtype: u8,
        dir: u8,
        extra: Option<(Key, Box<Val>)>,
    },
    Namespace {
        bdev: u8,
        nsid: Option<u32>,
    },
    Blocks(Size),
    BlockSize(u8),
    Small(u16),
    Bool(bool),
    Null,
    Int(i64),
    U64(u64),
    Float(f64),
    Str(String),
    Array(Vec<Val>),
    Object(Vec<(Key, Val)>),
}

/// A block count: small, or absurdly large (the create must then be refused).
#[derive(Arbitrary, Debug)]
pub enum Size {
    Small(u8),
    Huge(u8),
}

impl Key {
    fn get(&self) -> String {
        match self {
            Key::Known(i) => KEYS[usize::from(*i) % KEYS.len()].to_owned(),
            Key::Other(s) => s.clone(),
        }
    }
}

impl Val {
    /// The JSON value; `traddr` values name directories under `sandbox` only.
    pub fn json(&self, sandbox: &str, depth: u32) -> Value {
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        let d = depth + 1;
        match self {
            Val::BdevName(i) => {
                json!(["Malloc0", "Malloc1", "Null0", "M", "n"][usize::from(*i) % 5])
            }
            Val::Nqn(i) => json!(format!("nqn.2016-06.io.spdk:cnode{}", i % 3)),
            Val::TrType(v) => json!(if *v { "VFIOUSER" } else { "TCP" }),
            Val::ListenAddress { trtype, dir, extra } => {
                let mut m = Map::new();
                let t = ["VFIOUSER", "vfiouser", "TCP"][usize::from(*trtype) % 3];
                m.insert("trtype".into(), json!(t));
                m.insert("traddr".into(), json!(format!("{sandbox}/l{}", dir % 4)));
                if let Some((k, v)) = extra {
                    m.insert(k.get(), v.json(sandbox, d));
                }
                Value::Object(m)
            }
            Val::Namespace { bdev, nsid } => {
                let mut m = Map::new();
                m.insert("bdev_name".into(), Val::BdevName(*bdev).json(sandbox, d));
                if let Some(n) = nsid {
                    m.insert("nsid".into(), json!(n % 40));
                }
                Value::Object(m)
            }
            Val::Blocks(Size::Small(n)) => json!(u64::from(*n) + 1),
            // 2^40 blocks and up: at least 512 TiB, more than any machine's memory.
            Val::Blocks(Size::Huge(n)) => json!(1u64 << (40 + n % 24)),
            Val::BlockSize(i) => json!([512, 4096, 0, 520, 1 << 20, 1024][usize::from(*i) % 6]),
            Val::Small(n) => json!(n),
            Val::Bool(b) => json!(b),
            Val::Null => Value::Null,
            Val::Int(i) => json!(i),
            Val::U64(u) => json!(u),
            Val::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Val::Str(s) => json!(s),
            Val::Array(items) => {
                Value::Array(items.iter().take(8).map(|v| v.json(sandbox, d)).collect())
            }
            Val::Object(items) => Value::Object(
                items
                    .iter()
                    .take(8)
                    .map(|(k, v)| (k.get(), v.json(sandbox, d)))
                    .collect(),
            ),
        }
    }
}

impl Req {
    /// The request object.
    pub fn json(&self, sandbox: &str) -> Value {
        let mut m = Map::new();
        match &self.jsonrpc {
            None => {
                m.insert("jsonrpc".into(), json!("2.0"));
            }
            Some(Val::Null) => {}
            Some(v) => {
                m.insert("jsonrpc".into(), v.json(sandbox, 0));
            }
        }
        let method = match &self.method {
            Method::Known(i) => json!(METHODS[usize::from(*i) % METHODS.len()]),
            Method::Other(s) => json!(s),
            Method::NotAString(v) => v.json(sandbox, 0),
        };
        m.insert("method".into(), method);
        if let Some(p) = &self.params {
            m.insert("params".into(), p.json(sandbox, 0));
        }
        let id = match &self.id {
            Id::Absent => None,
            Id::Int(i) => Some(json!(i)),
            Id::Str(s) => Some(json!(s)),
            Id::Null => Some(Value::Null),
            Id::Other(v) => Some(v.json(sandbox, 0)),
        };
        if let Some(id) = id {
            m.insert("id".into(), id);
        }
        if let Some((k, v)) = &self.extra {
            m.insert(k.get(), v.json(sandbox, 0));
        }
        Value::Object(m)
    }
}

impl Message {
    /// The message as the bytes a client would send.
    pub fn text(&self, sandbox: &str) -> String {
        let value = match self {
            Message::Single(r) => r.json(sandbox),
            Message::Batch(reqs) => {
                Value::Array(reqs.iter().take(16).map(|r| r.json(sandbox)).collect())
            }
            Message::LongBatch(extra) => {
                let n = nvmemu_rpc::MAX_BATCH + 1 + usize::from(*extra);
                let mut items = vec![json!({"jsonrpc": "2.0", "method": "spdk_get_version"}); n];
                items[0] = json!({"jsonrpc": "2.0", "method": "spdk_get_version", "id": 1});
                Value::Array(items)
            }
            Message::Text(t) => return t.clone(),
            Message::Other(v) => v.json(sandbox, 0),
        };
        value.to_string()
    }
}
