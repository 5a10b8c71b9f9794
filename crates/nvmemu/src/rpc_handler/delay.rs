// SPDX-License-Identifier: Apache-2.0
//! Latency models over RPC: SPDK's delay bdev (`bdev_delay_create`,
//! `bdev_delay_update_latency`, `bdev_delay_delete`) and nvmemu's `nvmemu_bdev_set_model`
//! for the rest (presets, tails, units, transfer rate, seed) on any bdev; how a model shows
//! in `bdev_get_bdevs` and `save_config`. The pollers apply it (`nvmemu_ctrl`'s `hold.rs`).
//!
//! A delay bdev shares its base's blocks under a new name and claims the base (no namespace
//! may use it), as SPDK's does; deleting the base deletes the delay bdev first.

use nvmemu_bdev::model::{ModelConfig, ServiceTime, Tail, preset};
use nvmemu_bdev::{Bdev, BdevKind};
use nvmemu_device::Target;
use nvmemu_rpc::methods::delay::{
    BdevDelayCreateParams, BdevDelayUpdateLatencyParams, NvmemuBdevSetModelParams,
};
use nvmemu_rpc::{Errno, RpcError};
use serde_json::{Value, json};

use super::State;
use super::bdev::{BdevEntry, Registry};

/// `bdev_delay_create`, with SPDK's checks: p99 below the average is EINVAL, a base that
/// is already claimed EPERM. Unlike SPDK, a base that does not exist yet is ENODEV, not a
/// creation deferred until it appears (`save_config` writes bases first).
pub(crate) fn create(st: &mut State, p: &BdevDelayCreateParams) -> Result<Value, RpcError> {
    let read = ServiceTime {
        avg_us: p.avg_read_latency,
        p99_us: p.p99_read_latency,
    };
    let write = ServiceTime {
        avg_us: p.avg_write_latency,
        p99_us: p.p99_write_latency,
    };
    let model = ModelConfig::spdk(read, write);
    model.check().map_err(|why| {
        RpcError::errno_msg(
            Errno::EINVAL,
            format!("Cannot create delay bdev {}: {why}", p.name),
        )
    })?;
    let (base, _) = st.bdevs.get(&p.base_bdev_name).ok_or_else(|| {
        RpcError::errno_msg(
            Errno::ENODEV,
            format!(
                "Cannot create delay bdev {}: no bdev {} (create the base bdev first)",
                p.name, p.base_bdev_name
            ),
        )
    })?;
    let base = base.to_owned();
    if is_claimed(st, &base) {
        return Err(RpcError::errno_msg(
            Errno::EPERM,
            format!(
                "Cannot create delay bdev {}: bdev {base} is already claimed",
                p.name
            ),
        ));
    }
    let e = st
        .bdevs
        .add_stacked(BdevKind::Delay, &p.name, p.uuid.as_deref(), &base)?;
    e.bdev.model().set(Some(model));
    st.log.notify("bdev_register", &p.name);
    Ok(Value::String(p.name.clone()))
}

/// Whether a namespace or a delay or error bdev uses `name`.
pub(crate) fn is_claimed(st: &State, name: &str) -> bool {
    super::nvmf::claims(&st.subsystems).contains(name)
        || st.bdevs.stacked_bases().any(|b| b == name)
}

/// `bdev_delay_update_latency`: SPDK's answers (-32602 for no such bdev, -32600 for one
/// that is not a delay bdev), and the new value is taken as given (p99 below the average
/// makes that class take the average every time until it is raised).
pub(crate) fn update_latency(
    reg: &Registry,
    p: &BdevDelayUpdateLatencyParams,
) -> Result<Value, RpcError> {
    let (name, e) = reg
        .get(&p.delay_bdev_name)
        .ok_or_else(|| RpcError::invalid_params("The requested bdev does not exist."))?;
    if e.bdev.kind() != BdevKind::Delay {
        return Err(RpcError::new(
            nvmemu_rpc::INVALID_REQUEST,
            "The requested bdev is not a delay bdev.",
        ));
    }
    let mut m = e.bdev.model().get().unwrap_or_default();
    let us = p.latency_us;
    match p.latency_type.as_str() {
        "avg_read" => m.read.avg_us = us,
        "p99_read" => m.read.p99_us = us,
        "avg_write" => m.write.avg_us = us,
        "p99_write" => m.write.p99_us = us,
        _ => {
            return Err(RpcError::invalid_params(
                "Please specify a valid latency type.",
            ));
        }
    }
    e.bdev.model().set(Some(m));
    tracing::info!(name, latency_type = %p.latency_type, us, "delay bdev latency updated");
    Ok(Value::Bool(true))
}

/// `nvmemu_bdev_set_model`: from the preset or the model now, the fields given replaced.
pub(crate) fn set_model(reg: &Registry, p: &NvmemuBdevSetModelParams) -> Result<Value, RpcError> {
    let (name, e) = reg
        .get(&p.name)
        .ok_or_else(|| RpcError::errno(Errno::ENODEV))?;
    if p.remove {
        if *p
            != (NvmemuBdevSetModelParams {
                name: p.name.clone(),
                remove: true,
                ..Default::default()
            })
        {
            return Err(RpcError::invalid_params(
                "Invalid parameters: `remove` takes no other model field",
            ));
        }
        e.bdev.model().set(None);
        tracing::info!(name, "latency model removed");
        return Ok(Value::Bool(true));
    }
    let seed = p.seed.unwrap_or(0);
    let mut m = match &p.preset {
        Some(n) => preset(n, seed).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "Invalid parameter `preset`: {n:?} (use {})",
                preset_names()
            ))
        })?,
        None => e.bdev.model().get().unwrap_or_default(),
    };
    apply(&mut m, p)?;
    m.check().map_err(|why| {
        RpcError::errno_msg(
            Errno::EINVAL,
            format!("Invalid model for bdev {name}: {why}"),
        )
    })?;
    tracing::info!(name, ?m, "latency model set");
    e.bdev.model().set(Some(m));
    Ok(Value::Bool(true))
}

fn preset_names() -> String {
    let names: Vec<_> = nvmemu_bdev::model::PRESETS.iter().map(|p| p.name).collect();
    names.join(", ")
}

/// Replace the fields of `m` that `p` gives.
fn apply(m: &mut ModelConfig, p: &NvmemuBdevSetModelParams) -> Result<(), RpcError> {
    for (field, value) in [
        (&mut m.read.avg_us, p.avg_read_latency),
        (&mut m.read.p99_us, p.p99_read_latency),
        (&mut m.write.avg_us, p.avg_write_latency),
        (&mut m.write.p99_us, p.p99_write_latency),
        (&mut m.flush.avg_us, p.avg_flush_latency),
        (&mut m.flush.p99_us, p.p99_flush_latency),
        (&mut m.trim.avg_us, p.avg_trim_latency),
        (&mut m.trim.p99_us, p.p99_trim_latency),
        (&mut m.unit_mib_per_sec, p.unit_mib_per_sec),
        (&mut m.seed, p.seed),
    ] {
        if let Some(v) = value {
            *field = v;
        }
    }
    if let Some(t) = &p.tail {
        m.tail = Tail::from_name(t).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "Invalid parameter `tail`: {t:?} (use spdk or lognormal)"
            ))
        })?;
    }
    if let Some(u) = p.units {
        m.units = u;
    }
    Ok(())
}

/// `driver_specific` entries: `"delay"` as SPDK shows a delay bdev, `"model"` for any bdev
/// with a model (nvmemu's).
pub(crate) fn describe(name: &str, e: &BdevEntry, map: &mut serde_json::Map<String, Value>) {
    let model = e.bdev.model().get();
    if let Some(base) = e.base.as_ref().filter(|_| e.bdev.kind() == BdevKind::Delay) {
        map.insert("delay".into(), delay_params(name, base, model.as_ref()));
    }
    if let Some(m) = model {
        map.insert("model".into(), model_json(&m));
    }
}

/// SPDK's `bdev_delay_create` parameters for a delay bdev (also its `"delay"` info).
fn delay_params(name: &str, base: &str, m: Option<&ModelConfig>) -> Value {
    let m = m.cloned().unwrap_or_default();
    json!({
        "name": name, "base_bdev_name": base,
        "avg_read_latency": m.read.avg_us, "p99_read_latency": m.read.p99_us,
        "avg_write_latency": m.write.avg_us, "p99_write_latency": m.write.p99_us,
    })
}

fn model_json(m: &ModelConfig) -> Value {
    let t = |s: ServiceTime| json!({"avg_us": s.avg_us, "p99_us": s.p99_us});
    json!({
        "preset": m.preset, "tail": m.tail.name(), "units": m.units,
        "unit_mib_per_sec": m.unit_mib_per_sec, "seed": m.seed,
        "read": t(m.read), "write": t(m.write), "flush": t(m.flush), "trim": t(m.trim),
    })
}

/// The `save_config` call that creates the delay bdev `name`.
pub(crate) fn create_call(name: &str, e: &BdevEntry) -> Value {
    let base = e.base.as_deref().unwrap_or_default();
    let mut params = delay_params(name, base, e.bdev.model().get().as_ref());
    params["uuid"] = json!(e.uuid);
    json!({"method": "bdev_delay_create", "params": params})
}

/// The `nvmemu_bdev_set_model` call restoring what `bdev_delay_create` cannot say: any
/// model on a bdev that is not a delay bdev, and on one that is, a model beyond SPDK's.
pub(crate) fn model_call(name: &str, b: &Bdev) -> Option<Value> {
    let m = b.model().get()?;
    let spdk_only = ModelConfig::spdk(m.read, m.write);
    if b.kind() == BdevKind::Delay && m == spdk_only {
        return None;
    }
    let mut params = json!({
        "name": name, "tail": m.tail.name(), "units": m.units,
        "unit_mib_per_sec": m.unit_mib_per_sec, "seed": m.seed,
    });
    for (key, v) in [
        ("avg_read_latency", m.read.avg_us),
        ("p99_read_latency", m.read.p99_us),
        ("avg_write_latency", m.write.avg_us),
        ("p99_write_latency", m.write.p99_us),
        ("avg_flush_latency", m.flush.avg_us),
        ("p99_flush_latency", m.flush.p99_us),
        ("avg_trim_latency", m.trim.avg_us),
        ("p99_trim_latency", m.trim.p99_us),
    ] {
        params[key] = json!(v);
    }
    if let Some(p) = m.preset {
        params["preset"] = json!(p);
    }
    Some(json!({"method": "nvmemu_bdev_set_model", "params": params}))
}

/// `bdev_delay_delete`: as any bdev delete (its namespaces go first). As SPDK, a bdev that
/// exists but is not a delay bdev answers `false`, and none at all ENODEV.
pub(crate) fn delete(st: &mut State, target: &Target, name: &str) -> Result<Value, RpcError> {
    match st.bdevs.get(name) {
        Some((_, e)) if e.bdev.kind() != BdevKind::Delay => Ok(Value::Bool(false)),
        _ => super::delete_bdev(st, target, BdevKind::Delay, name),
    }
}

#[cfg(test)]
mod tests {
    use nvmemu_rpc::load_config;
    use serde_json::{Value, json};

    use super::super::tests::{bdev, call, code, handler, null, saved_bdev_methods};

    fn delay(base: &str, name: &str, read: (u64, u64), write: (u64, u64)) -> Value {
        json!({"base_bdev_name": base, "name": name,
               "avg_read_latency": read.0, "p99_read_latency": read.1,
               "avg_write_latency": write.0, "p99_write_latency": write.1})
    }

    #[test]
    fn delay_bdevs_are_created_shown_updated_and_deleted_as_spdk_does() {
        let (h, _stop) = handler();
        let missing = call(&h, "bdev_delay_create", delay("b0", "d0", (10, 20), (5, 6)));
        assert_eq!(code(missing), -19);
        null(&h, "b0");
        let low_p99 = call(&h, "bdev_delay_create", delay("b0", "d0", (30, 20), (5, 6)));
        assert_eq!(code(low_p99), -22);
        let made = call(&h, "bdev_delay_create", delay("b0", "d0", (10, 20), (5, 6)));
        assert_eq!(made, Ok(json!("d0")));
        let again = call(&h, "bdev_delay_create", delay("b0", "d1", (1, 1), (1, 1)));
        assert_eq!(code(again), -1, "the base is claimed");
        let taken = call(&h, "bdev_delay_create", delay("d0", "b0", (1, 1), (1, 1)));
        assert_eq!(code(taken), -17, "the name exists");
        let d = bdev(&h, "d0");
        assert_eq!(d["product_name"], json!("delay"));
        assert_eq!(
            (d["block_size"].clone(), d["num_blocks"].clone()),
            (json!(512), json!(64))
        );
        assert_eq!(
            d["driver_specific"]["delay"],
            json!({"name": "d0", "base_bdev_name": "b0",
                   "avg_read_latency": 10, "p99_read_latency": 20,
                   "avg_write_latency": 5, "p99_write_latency": 6})
        );
        assert_eq!(bdev(&h, "b0")["claimed"], json!(true));
        // The base cannot back a namespace while the delay bdev claims it.
        call(&h, "nvmf_create_subsystem", json!({"nqn": "nqn.a"})).unwrap();
        let ns = json!({"nqn": "nqn.a", "namespace": {"bdev_name": "b0"}});
        assert_eq!(code(call(&h, "nvmf_subsystem_add_ns", ns)), -16);

        let update = |t: &str, us: u64| {
            call(
                &h,
                "bdev_delay_update_latency",
                json!({"delay_bdev_name": "d0", "latency_type": t, "latency_us": us}),
            )
        };
        assert_eq!(update("p99_write", 900), Ok(json!(true)));
        assert_eq!(update("avg_read", 15), Ok(json!(true)));
        assert_eq!(code(update("median_read", 1)), -32602);
        let info = bdev(&h, "d0")["driver_specific"]["delay"].clone();
        assert_eq!(
            (
                info["avg_read_latency"].clone(),
                info["p99_write_latency"].clone()
            ),
            (json!(15), json!(900))
        );
        let not_delay =
            json!({"delay_bdev_name": "b0", "latency_type": "avg_read", "latency_us": 1});
        assert_eq!(
            code(call(&h, "bdev_delay_update_latency", not_delay)),
            -32600
        );
        let nobody = json!({"delay_bdev_name": "x", "latency_type": "avg_read", "latency_us": 1});
        assert_eq!(code(call(&h, "bdev_delay_update_latency", nobody)), -32602);

        // As SPDK: a bdev that is not a delay bdev answers false, none at all ENODEV.
        let not_delay = call(&h, "bdev_delay_delete", json!({"name": "b0"}));
        assert_eq!(not_delay, Ok(json!(false)));
        assert_eq!(
            code(call(&h, "bdev_delay_delete", json!({"name": "x"}))),
            -19
        );
        assert_eq!(
            call(&h, "bdev_delay_delete", json!({"name": "d0"})),
            Ok(json!(true))
        );
        assert_eq!(bdev(&h, "b0")["claimed"], json!(false));
    }

    #[test]
    fn deleting_the_base_deletes_its_delay_bdev() {
        let (h, _stop) = handler();
        null(&h, "b0");
        call(&h, "bdev_delay_create", delay("b0", "d0", (1, 2), (1, 2))).unwrap();
        call(&h, "bdev_null_delete", json!({"name": "b0"})).unwrap();
        assert_eq!(code(call(&h, "bdev_get_bdevs", json!({"name": "d0"}))), -19);
    }

    #[test]
    fn set_model_takes_presets_and_fields_and_refuses_what_cannot_be() {
        let (h, _stop) = handler();
        null(&h, "b0");
        let set = |p: Value| call(&h, "nvmemu_bdev_set_model", p);
        assert_eq!(code(set(json!({"name": "nope", "preset": "tlc"}))), -19);
        assert_eq!(code(set(json!({"name": "b0", "preset": "hdd"}))), -32602);
        assert_eq!(code(set(json!({"name": "b0", "tail": "pareto"}))), -32602);
        let set_tlc = json!({"name": "b0", "preset": "tlc", "seed": 9, "units": 8});
        assert_eq!(set(set_tlc), Ok(json!(true)));
        let m = bdev(&h, "b0")["driver_specific"]["model"].clone();
        assert_eq!(
            (
                m["preset"].clone(),
                m["units"].clone(),
                m["seed"].clone(),
                m["tail"].clone()
            ),
            (json!("tlc"), json!(8), json!(9), json!("lognormal"))
        );
        assert_eq!(m["read"], json!({"avg_us": 80, "p99_us": 250}));
        // Fields change the model now; a log-normal p99 beyond 14.9 x the mean is refused.
        let wide = json!({"name": "b0", "avg_read_latency": 10, "p99_read_latency": 1000});
        assert_eq!(code(set(wide)), -22);
        let spdk_tail =
            json!({"name": "b0", "avg_read_latency": 10, "p99_read_latency": 1000, "tail": "spdk"});
        assert_eq!(set(spdk_tail), Ok(json!(true)));
        let m = bdev(&h, "b0")["driver_specific"]["model"].clone();
        assert_eq!(
            (m["read"]["p99_us"].clone(), m["units"].clone()),
            (json!(1000), json!(8))
        );
        let muddled = json!({"name": "b0", "remove": true, "seed": 1});
        assert_eq!(code(set(muddled)), -32602);
        assert_eq!(set(json!({"name": "b0", "remove": true})), Ok(json!(true)));
        assert!(bdev(&h, "b0")["driver_specific"].get("model").is_none());
    }

    #[test]
    fn save_config_writes_delay_bdevs_after_their_bases_and_replays_them() {
        let (a, _stop_a) = handler();
        // "a0" sorts before its base "z0": save_config must still create z0 first.
        null(&a, "z0");
        call(&a, "bdev_delay_create", delay("z0", "a0", (10, 20), (5, 6))).unwrap();
        null(&a, "m0");
        let model = json!({"name": "m0", "preset": "scm", "seed": 4});
        call(&a, "nvmemu_bdev_set_model", model).unwrap();
        let saved = call(&a, "save_config", json!({})).unwrap();
        let calls = saved_bdev_methods(&saved);
        assert_eq!(
            calls,
            [
                "bdev_null_create",
                "nvmemu_bdev_set_model",
                "bdev_null_create",
                "bdev_delay_create",
                "bdev_wait_for_examine"
            ]
        );
        let (b, _stop_b) = handler();
        let report = load_config(&b, &saved).unwrap();
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        for name in ["a0", "m0", "z0"] {
            assert_eq!(bdev(&a, name), bdev(&b, name), "{name}");
        }
    }
}
