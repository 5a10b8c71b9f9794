// SPDX-License-Identifier: Apache-2.0
//! The bdev registry: `bdev_malloc_create`, `bdev_null_create`, their deletes,
//! `bdev_get_bdevs` and `bdev_get_iostat` (SPDK `module/bdev/{malloc,null}`, `lib/bdev`).
//!
//! A bdev used by a namespace is claimed (SPDK's `exclusive_write` claim): no second
//! namespace may use it, and deleting it removes the namespace first. Claims are derived from the subsystems, so they
//! cannot drift from what is attached. As in SPDK, a bdev's UUID is also its alias: every
//! method that names a bdev accepts either.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nvmemu_bdev::fault::IoError;
use nvmemu_bdev::{Bdev, BdevKind, MallocBacking};
use nvmemu_rpc::methods::bdev::{
    BdevGetIostatParams, BdevInfo, BdevIostat, BdevIostatEntry, BdevMallocCreateParams,
    BdevNullCreateParams, SupportedIoTypes,
};
use nvmemu_rpc::{Errno, RpcError};
use serde_json::{Value, json};

use super::{ids, to_value};

mod build;

use build::numa_node;

/// Tick rate of the stats methods: ticks are nanoseconds.
pub(crate) const TICK_RATE: u64 = 1_000_000_000;
/// Longest bdev name accepted (SPDK has no hard limit; this bounds what we store).
const MAX_NAME: usize = 255;

/// One registered bdev.
#[derive(Debug)]
pub(crate) struct BdevEntry {
    pub(crate) bdev: Arc<Bdev>,
    pub(crate) uuid: String,
    /// The bdev a delay or error bdev sits on (which it claims).
    pub(crate) base: Option<String>,
}

/// Every bdev by name.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    map: BTreeMap<String, BdevEntry>,
    /// Names and UUIDs of bdevs being built outside the handler's lock (a large malloc bdev
    /// takes seconds to back): taken, so no other create can claim them meanwhile.
    building: BTreeMap<String, String>,
}

/// Geometry and identity common to both create methods, checked, with the name and UUID
/// reserved in the registry until [`Registry::finish`].
#[must_use = "a reserved name stays taken until Registry::finish"]
pub(crate) struct NewBdev {
    kind: NewKind,
    name: String,
    uuid: String,
    num_blocks: u64,
    block_size: u32,
    /// NUMA node a malloc bdev's memory is bound to.
    numa_node: Option<u32>,
}

/// What the create methods are asked for, before any check.
struct CreateRequest<'a> {
    kind: NewKind,
    name: String,
    uuid: Option<&'a str>,
    num_blocks: u64,
    block_size: u32,
    md_size: u32,
    dif_type: u32,
}

/// Which bdev a create method makes.
#[derive(Debug, Clone, Copy)]
enum NewKind {
    Malloc(MallocBacking),
    Null,
}

impl Registry {
    /// The bdev named `name`, or whose UUID (its alias) is `name`, with its name.
    /// Every bdev, in name order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &BdevEntry)> {
        self.map.iter().map(|(n, e)| (n.as_str(), e))
    }

    pub(crate) fn get(&self, name: &str) -> Option<(&str, &BdevEntry)> {
        self.map
            .get_key_value(name)
            .or_else(|| {
                self.map
                    .iter()
                    .find(|(_, e)| e.uuid.eq_ignore_ascii_case(name))
            })
            .map(|(n, e)| (n.as_str(), e))
    }

    /// Checks a `bdev_malloc_create` and reserves its name: build the bdev with
    /// [`NewBdev::build`] (without the handler's lock), then [`Registry::finish`]. Its
    /// memory goes on the `numa_id` node, or `default_node` when that is -1.
    pub(crate) fn malloc_create(
        &mut self,
        p: BdevMallocCreateParams,
        default_node: Option<u32>,
    ) -> Result<NewBdev, RpcError> {
        if p.block_size == 0 || !p.block_size.is_multiple_of(512) {
            return Err(RpcError::errno_msg(
                Errno::EINVAL,
                "Data block size must be 512 bytes aligned",
            ));
        }
        let backing = match (p.lazy, p.hugepages) {
            (false, false) => MallocBacking::Populated,
            (false, true) => MallocBacking::HugePages,
            (true, false) => MallocBacking::Lazy,
            (true, true) => {
                return Err(RpcError::invalid_params(
                    "Invalid parameters: `lazy` and `hugepages` exclude each other \
                     (huge pages are reserved at creation)",
                ));
            }
        };
        let numa_node = numa_node(p.numa_id, default_node)?;
        let name = match p.name {
            Some(n) => n,
            None => (0u32..)
                .map(|i| format!("Malloc{i}"))
                .find(|n| !self.taken(n))
                .ok_or_else(|| RpcError::errno(Errno::ENOSPC))?,
        };
        let mut new = self.reserve(CreateRequest {
            kind: NewKind::Malloc(backing),
            name,
            uuid: p.uuid.as_deref(),
            num_blocks: p.num_blocks,
            block_size: p.block_size,
            md_size: p.md_size,
            dif_type: p.dif_type,
        })?;
        new.numa_node = numa_node;
        Ok(new)
    }

    /// `bdev_null_create`: a null bdev takes no memory, so it is built under the lock.
    pub(crate) fn null_create(&mut self, p: BdevNullCreateParams) -> Result<Value, RpcError> {
        let new = self.reserve(CreateRequest {
            kind: NewKind::Null,
            name: p.name,
            uuid: p.uuid.as_deref(),
            num_blocks: p.num_blocks,
            block_size: p.block_size,
            md_size: p.md_size,
            dif_type: p.dif_type,
        })?;
        let built = new.build();
        self.finish(new, built)
    }

    fn taken(&self, name: &str) -> bool {
        self.map.contains_key(name) || self.building.contains_key(name)
    }

    fn reserve(&mut self, n: CreateRequest<'_>) -> Result<NewBdev, RpcError> {
        check_name(&n.name)?;
        if n.md_size != 0 || n.dif_type != 0 {
            return Err(RpcError::errno_msg(
                Errno::ENOTSUP,
                "Metadata and protection information are not supported",
            ));
        }
        let uuid = self.new_identity(&n.name, n.uuid)?;
        self.building.insert(n.name.clone(), uuid.clone());
        Ok(NewBdev {
            kind: n.kind,
            name: n.name,
            uuid,
            num_blocks: n.num_blocks,
            block_size: n.block_size,
            numa_node: None,
        })
    }

    /// Checks that `name` and the UUID asked (or a new one) are free; the UUID.
    fn new_identity(&self, name: &str, uuid: Option<&str>) -> Result<String, RpcError> {
        let uuid = match uuid {
            Some(u) => {
                let bytes = ids::parse_uuid(u).ok_or_else(|| {
                    RpcError::invalid_params(format!("Invalid parameter `uuid`: {u:?}"))
                })?;
                ids::format_uuid(&bytes)
            }
            None => ids::new_uuid(),
        };
        if self.taken(name) {
            return Err(RpcError::errno_msg(
                Errno::EEXIST,
                format!("Bdev name {name} already exists"),
            ));
        }
        let uuid_taken = |u: &String| *u == uuid;
        if self.map.values().map(|e| &e.uuid).any(uuid_taken)
            || self.building.values().any(uuid_taken)
        {
            return Err(RpcError::errno_msg(
                Errno::EEXIST,
                format!("Bdev UUID {uuid} already exists"),
            ));
        }
        Ok(uuid)
    }

    /// Checks that `name` (and the UUID asked, if any) are free for a new bdev.
    pub(crate) fn check_new(&self, name: &str, uuid: Option<&str>) -> Result<(), RpcError> {
        check_name(name)?;
        self.new_identity(name, uuid).map(drop)
    }

    /// Registers a bdev built by the caller (a file bdev) under its name, with the UUID
    /// asked or a new one; its name.
    pub(crate) fn add_built(&mut self, bdev: Bdev, uuid: Option<&str>) -> Result<String, RpcError> {
        let name = bdev.name().to_owned();
        check_name(&name)?;
        let uuid = self.new_identity(&name, uuid)?;
        tracing::info!(name, kind = bdev.kind().product_name(), "bdev created");
        let entry = BdevEntry {
            bdev: Arc::new(bdev),
            uuid,
            base: None,
        };
        self.map.insert(name.clone(), entry);
        Ok(name)
    }

    /// Registers a delay or error bdev (`kind`) `name` on the registered bdev `base`
    /// (checked by the caller).
    pub(crate) fn add_stacked(
        &mut self,
        kind: BdevKind,
        name: &str,
        uuid: Option<&str>,
        base: &str,
    ) -> Result<&BdevEntry, RpcError> {
        check_name(name)?;
        let uuid = self.new_identity(name, uuid)?;
        let base_bdev = &self
            .map
            .get(base)
            .ok_or_else(|| RpcError::errno(Errno::ENODEV))?
            .bdev;
        let entry = BdevEntry {
            bdev: Arc::new(if kind == BdevKind::Error {
                Bdev::error(name, base_bdev)
            } else {
                Bdev::delay(name, base_bdev)
            }),
            uuid,
            base: Some(base.to_owned()),
        };
        tracing::info!(
            name,
            base,
            kind = kind.product_name(),
            "stacked bdev created"
        );
        Ok(self.map.entry(name.to_owned()).or_insert(entry))
    }

    /// Names of the bdevs a delay or error bdev sits on (they are claimed).
    pub(crate) fn stacked_bases(&self) -> impl Iterator<Item = &str> {
        self.map.values().filter_map(|e| e.base.as_deref())
    }

    /// The delay and error bdevs on `base`, with their kinds.
    pub(crate) fn stacked_on(&self, base: &str) -> Vec<(String, BdevKind)> {
        self.map
            .iter()
            .filter(|(_, e)| e.base.as_deref() == Some(base))
            .map(|(n, e)| (n.clone(), e.bdev.kind()))
            .collect()
    }

    /// Ends a create begun by [`Registry::malloc_create`]: frees the reserved name and, when
    /// the bdev was built, registers it under that name.
    pub(crate) fn finish(
        &mut self,
        new: NewBdev,
        built: Result<Bdev, RpcError>,
    ) -> Result<Value, RpcError> {
        self.building.remove(&new.name);
        let bdev = built?;
        tracing::info!(name = %new.name, kind = ?new.kind, "bdev created");
        self.map.insert(
            new.name.clone(),
            BdevEntry {
                bdev: Arc::new(bdev),
                uuid: new.uuid,
                base: None,
            },
        );
        Ok(Value::String(new.name))
    }

    /// The registered name of the bdev of `kind` called (or aliased) `name`; ENODEV if there
    /// is none of that kind.
    pub(crate) fn name_of(&self, kind: BdevKind, name: &str) -> Result<String, RpcError> {
        match self.get(name) {
            Some((n, e)) if e.bdev.kind() == kind => Ok(n.to_owned()),
            _ => Err(RpcError::errno(Errno::ENODEV)),
        }
    }

    /// Unregisters the bdev `name` (its namespaces already removed).
    pub(crate) fn delete(&mut self, name: &str) -> Result<Value, RpcError> {
        self.map
            .remove(name)
            .ok_or_else(|| RpcError::errno(Errno::ENODEV))?;
        tracing::info!(name, "bdev deleted");
        Ok(Value::Bool(true))
    }

    pub(crate) fn get_bdevs(
        &self,
        name: Option<&str>,
        claims: &BTreeSet<String>,
    ) -> Result<Value, RpcError> {
        let infos: Vec<BdevInfo> = match name {
            Some(n) => {
                let (n, e) = self.get(n).ok_or_else(|| RpcError::errno(Errno::ENODEV))?;
                vec![info(n, e, claims.contains(n))]
            }
            None => self
                .map
                .iter()
                .map(|(n, e)| info(n, e, claims.contains(n)))
                .collect(),
        };
        to_value(infos)
    }

    pub(crate) fn iostat(&self, p: &BdevGetIostatParams, ticks: u64) -> Result<Value, RpcError> {
        let wanted: Option<Vec<&str>> = match (&p.name, &p.names) {
            (Some(_), Some(_)) => {
                return Err(RpcError::invalid_params(
                    "Invalid parameters: `name` and `names` are exclusive",
                ));
            }
            (Some(n), None) => Some(vec![n.as_str()]),
            (None, Some(list)) => Some(list.iter().map(String::as_str).collect()),
            (None, None) => None,
        };
        let wanted: Option<Vec<&str>> = match wanted {
            Some(list) => Some(
                list.into_iter()
                    .map(|n| self.get(n).map(|(name, _)| name))
                    .collect::<Option<_>>()
                    .ok_or_else(|| RpcError::errno(Errno::ENODEV))?,
            ),
            None => None,
        };
        let bdevs = self
            .map
            .iter()
            .filter(|(n, _)| wanted.as_ref().is_none_or(|w| w.contains(&n.as_str())))
            .map(|(n, e)| iostat_entry(n, &e.bdev))
            .collect();
        to_value(BdevIostat {
            tick_rate: TICK_RATE,
            ticks,
            bdevs,
        })
    }

    /// The `bdev` subsystem of `save_config`: one create call per bdev.
    /// Each bdev's creation call, followed by its `bdev_set_qos_limit` when it has limits
    /// (as SPDK writes them).
    pub(crate) fn save_config(&self) -> Vec<Value> {
        // Delay and error bdevs after every other, so each comes after its base.
        let (delays, plain): (Vec<_>, Vec<_>) =
            self.map.iter().partition(|(_, e)| e.base.is_some());
        plain
            .into_iter()
            .chain(delays)
            .flat_map(|(name, e)| {
                let qos = super::qos::config_call(name, &e.bdev);
                let model = super::delay::model_call(name, &e.bdev);
                std::iter::once(Self::create_call(name, e))
                    .chain(qos)
                    .chain(model)
            })
            .collect()
    }

    fn create_call(name: &str, e: &BdevEntry) -> Value {
        let b = &e.bdev;
        match b.kind() {
            BdevKind::Malloc => {
                let mut params = json!({
                    "name": name, "num_blocks": b.num_blocks(),
                    "block_size": b.block_size(),
                    "physical_block_size": b.block_size(), "uuid": e.uuid,
                    "optimal_io_boundary": 0, "md_size": 0, "dif_type": 0,
                    "dif_is_head_of_md": false, "dif_pi_format": 0});
                // nvmemu's own parameters only when set: SPDK refuses unknown ones.
                match b.memory().map(|m| m.backing) {
                    Some(MallocBacking::Lazy) => params["lazy"] = Value::Bool(true),
                    Some(MallocBacking::HugePages) => {
                        params["hugepages"] = Value::Bool(true);
                    }
                    Some(MallocBacking::Populated) | None => {}
                }
                if let Some(node) = b.memory().and_then(|m| m.numa_node) {
                    params["numa_id"] = json!(node);
                }
                json!({"method": "bdev_malloc_create", "params": params})
            }
            BdevKind::Null => json!({"method": "bdev_null_create", "params": {
                "name": name, "num_blocks": b.num_blocks(), "block_size": b.block_size(),
                "physical_block_size": b.block_size(), "uuid": e.uuid, "md_size": 0,
                "dif_type": 0, "dif_is_head_of_md": false, "dif_pi_format": 0}}),
            BdevKind::Delay => super::delay::create_call(name, e),
            BdevKind::Error => super::error_bdev::create_call(e),
            BdevKind::File(engine) => super::file_bdev::create_call(name, e, engine),
        }
    }
}

/// Refuses the bdev names SPDK refuses, with SPDK's codes (checked against `nvmf_tgt`
/// v25.05): an empty name (-22) and one with a NUL (-32603, its JSON decoder takes no
/// string with a NUL). Anything else SPDK takes (`../x`, `a/b`, spaces) is taken too: a
/// name is never a path here. Past SPDK, [`MAX_NAME`] bounds what we store.
fn check_name(name: &str) -> Result<(), RpcError> {
    if name.is_empty() {
        return Err(RpcError::errno_msg(
            Errno::EINVAL,
            "Invalid argument: a bdev name must not be empty",
        ));
    }
    if name.contains('\0') {
        return Err(RpcError::internal(
            "spdk_json_decode_object failed: a bdev name must not contain a NUL character",
        ));
    }
    if name.len() > MAX_NAME {
        return Err(RpcError::invalid_params(format!(
            "Invalid parameter `name`: must be 1 to {MAX_NAME} bytes"
        )));
    }
    Ok(())
}

fn info(name: &str, e: &BdevEntry, claimed: bool) -> BdevInfo {
    let b = &e.bdev;
    BdevInfo {
        name: name.to_owned(),
        aliases: vec![e.uuid.clone()],
        product_name: b.kind().product_name().to_owned(),
        block_size: b.block_size(),
        num_blocks: b.num_blocks(),
        uuid: e.uuid.clone(),
        md_size: None,
        md_interleave: None,
        dif_type: None,
        assigned_rate_limits: super::qos::rate_limits(b),
        claimed,
        claim_type: claimed.then(|| "exclusive_write".to_owned()),
        zoned: false,
        supported_io_types: SupportedIoTypes::nvmemu(),
        driver_specific: driver_specific(name, e),
    }
}

/// `driver_specific` of `bdev_get_bdevs`: SPDK prints `{}` for malloc and null and
/// `"delay"` for a delay bdev; nvmemu adds what backs a malloc bdev under `"malloc"` and a
/// latency model under `"model"`, so SPDK-shaped parsers still work.
fn driver_specific(name: &str, e: &BdevEntry) -> serde_json::Map<String, Value> {
    let b = &e.bdev;
    let mut map = serde_json::Map::new();
    super::delay::describe(name, e, &mut map);
    super::file_bdev::describe(e, &mut map);
    if let Some(m) = b.memory() {
        let r = m.residency;
        map.insert(
            "malloc".into(),
            json!({
                "lazy": m.backing == MallocBacking::Lazy,
                "hugepages": m.backing == MallocBacking::HugePages,
                "page_size": m.page_size,
                "numa_node": m.numa_node,
                "resident_bytes": r.map(|r| r.resident_bytes),
                "transparent_huge_bytes": r.map(|r| r.transparent_huge_bytes),
            }),
        );
    }
    map
}

/// SPDK's `io_error`: failed commands by bdev I/O status name (`IoError`), the non-zero
/// ones. SPDK v25.05's `bdev_get_iostat` writes the object in every per-bdev entry, `{}`
/// while nothing failed (`lib/bdev/bdev_rpc.c` allocates the error counts for the device
/// stat; `spdk_bdev_dump_io_stat_json` writes a key per non-zero status).
fn io_error(b: &Bdev) -> serde_json::Map<String, Value> {
    let e = b.faults().io_errors();
    IoError::ALL
        .into_iter()
        .filter(|&k| e.get(k) != 0)
        .map(|k| (k.name().to_owned(), Value::from(e.get(k))))
        .collect()
}

fn iostat_entry(name: &str, b: &Bdev) -> BdevIostatEntry {
    let s = b.stats().snapshot();
    BdevIostatEntry {
        name: name.to_owned(),
        bytes_read: s.bytes_read,
        num_read_ops: s.num_read_ops,
        bytes_written: s.bytes_written,
        num_write_ops: s.num_write_ops,
        bytes_unmapped: s.bytes_unmapped,
        num_unmap_ops: s.num_unmap_ops,
        // TICK_RATE is 1 GHz: a tick is a nanosecond.
        read_latency_ticks: s.read_latency.sum_ns,
        max_read_latency_ticks: s.read_latency.max_ns,
        min_read_latency_ticks: s.read_latency.min_ns,
        write_latency_ticks: s.write_latency.sum_ns,
        max_write_latency_ticks: s.write_latency.max_ns,
        min_write_latency_ticks: s.write_latency.min_ns,
        unmap_latency_ticks: s.unmap_latency.sum_ns,
        max_unmap_latency_ticks: s.unmap_latency.max_ns,
        min_unmap_latency_ticks: s.unmap_latency.min_ns,
        io_error: io_error(b),
        ..BdevIostatEntry::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmemu_rpc::Request;

    /// `bdev_null_create` and `bdev_malloc_create` of 8 blocks named `name`: the error code,
    /// or 0 when created.
    fn create_codes(name: &str) -> [i32; 2] {
        let params = json!({"name": name, "num_blocks": 8, "block_size": 512});
        let null = match Request::decode("bdev_null_create", Some(params.clone())) {
            Ok(Request::BdevNullCreate(p)) => Registry::default().null_create(p).map(drop),
            other => panic!("{other:?}"),
        };
        let malloc = match Request::decode("bdev_malloc_create", Some(params)) {
            Ok(Request::BdevMallocCreate(p)) => {
                Registry::default().malloc_create(p, None).map(drop)
            }
            other => panic!("{other:?}"),
        };
        [null, malloc].map(|r| r.err().map_or(0, |e| e.code))
    }

    #[test]
    fn names_spdk_refuses_are_refused_with_its_codes_the_rest_taken() {
        assert_eq!(create_codes(""), [-22, -22]);
        assert_eq!(create_codes("a\0b"), [-32603, -32603]);
        assert_eq!(create_codes("\0"), [-32603, -32603]);
        // nvmf_tgt takes these, and a name is never a path here.
        for name in ["../x", "a/b", "a b", "..", "a:b", "é"] {
            assert_eq!(create_codes(name), [0, 0], "{name:?}");
        }
    }
}
