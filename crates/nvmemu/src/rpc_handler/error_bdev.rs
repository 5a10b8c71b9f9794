// SPDX-License-Identifier: Apache-2.0
//! SPDK's error bdev over RPC (`bdev_error_create`, `bdev_error_delete`,
//! `bdev_error_inject_error`): `EE_<base>` shares its base's blocks and claims it, as
//! SPDK's does; the pollers apply what is armed (`nvmemu_ctrl`'s `fault.rs`).

use nvmemu_bdev::BdevKind;
use nvmemu_bdev::fault::{FaultIo, FaultKind};
use nvmemu_device::Target;
use nvmemu_rpc::methods::error_bdev::{BdevErrorCreateParams, BdevErrorInjectErrorParams};
use nvmemu_rpc::{Errno, RpcError};
use serde_json::{Value, json};

use super::State;
use super::bdev::{BdevEntry, Registry};

/// SPDK's name for the error bdev on `base`.
fn error_name(base: &str) -> String {
    format!("EE_{base}")
}

/// `bdev_error_create`. A base that is already claimed is EPERM, the name `EE_<base>`
/// taken EEXIST. Unlike SPDK, a base that does not exist yet is ENODEV, not a creation
/// deferred until it appears (`save_config` writes bases first).
pub(crate) fn create(st: &mut State, p: &BdevErrorCreateParams) -> Result<Value, RpcError> {
    let (base, _) = st.bdevs.get(&p.base_name).ok_or_else(|| {
        RpcError::errno_msg(
            Errno::ENODEV,
            format!(
                "Cannot create error bdev on {}: no such bdev (create the base bdev first)",
                p.base_name
            ),
        )
    })?;
    let base = base.to_owned();
    let name = error_name(&base);
    if super::delay::is_claimed(st, &base) {
        return Err(RpcError::errno_msg(
            Errno::EPERM,
            format!("Cannot create error bdev {name}: bdev {base} is already claimed"),
        ));
    }
    st.bdevs
        .add_stacked(BdevKind::Error, &name, p.uuid.as_deref(), &base)?;
    st.log.notify("bdev_register", &name);
    Ok(Value::Bool(true))
}

/// `bdev_error_delete`: as any bdev delete (its namespaces go first); a bdev that is not
/// an error bdev is ENODEV, as SPDK's unregister by module answers.
pub(crate) fn delete(st: &mut State, target: &Target, name: &str) -> Result<Value, RpcError> {
    super::delete_bdev(st, target, BdevKind::Error, name)
}

/// `bdev_error_inject_error`, with SPDK's answers: an unknown `io_type` or `error_type`
/// fails decoding (-32603), no such error bdev is ENODEV, `corrupt_data` without a
/// `corrupt_value` EINVAL. `queue_depth` N (SPDK's `error_qd`, default 0) hits only
/// commands taken while N or more others are outstanding (`FaultCmd::outstanding`).
pub(crate) fn inject(reg: &Registry, p: &BdevErrorInjectErrorParams) -> Result<Value, RpcError> {
    let decode_failed = || RpcError::internal("spdk_json_decode_object failed");
    let types: &[FaultIo] = match p.io_type.as_str() {
        "all" | "clear" => &FaultIo::ALL,
        other => {
            let io = FaultIo::ALL.iter().find(|io| io.name() == other);
            std::slice::from_ref(io.ok_or_else(decode_failed)?)
        }
    };
    let kind = FaultKind::from_name(&p.error_type).ok_or_else(decode_failed)?;
    let (name, e) = reg
        .get(&p.name)
        .filter(|(_, e)| e.bdev.kind() == BdevKind::Error)
        .ok_or_else(|| RpcError::errno(Errno::ENODEV))?;
    let corrupt_value = p.corrupt_value.unwrap_or(0);
    if kind == FaultKind::CorruptData && corrupt_value == 0 {
        return Err(RpcError::errno_msg(
            Errno::EINVAL,
            "corrupt_data needs a corrupt_value from 1 to 255",
        ));
    }
    let faults = e.bdev.faults();
    if p.io_type == "clear" {
        faults.clear();
        tracing::info!(name, "injected errors cleared");
        return Ok(Value::Bool(true));
    }
    let (num, queue_depth) = (p.num.unwrap_or(1), p.queue_depth.unwrap_or(0));
    let action = kind.action(p.corrupt_offset.unwrap_or(0), corrupt_value);
    for &io in types {
        faults
            .arm(io, kind, action, (num, queue_depth))
            .map_err(|full| RpcError::errno_msg(Errno::ENOSPC, format!("{name}: {full}")))?;
    }
    tracing::info!(name, io_type = %p.io_type, error_type = kind.name(), num, queue_depth, "error injection armed");
    Ok(Value::Bool(true))
}

/// The `save_config` call that creates the error bdev of `e` (injections are not saved,
/// as SPDK saves none).
pub(crate) fn create_call(e: &BdevEntry) -> Value {
    let base = e.base.as_deref().unwrap_or_default();
    json!({"method": "bdev_error_create", "params": {"base_name": base, "uuid": e.uuid}})
}

#[cfg(test)]
mod tests {
    use nvmemu_bdev::fault::{FaultIo, FaultKind};
    use nvmemu_rpc::load_config;
    use serde_json::{Value, json};

    use super::super::NvmemuHandler;
    use super::super::tests::{bdev, call, code, handler, null, saved_bdev_methods};

    fn inject(h: &NvmemuHandler, p: Value) -> Result<Value, i32> {
        call(h, "bdev_error_inject_error", p).map_err(|e| e.0)
    }

    #[test]
    fn error_bdevs_are_created_claimed_and_deleted_as_spdk_does() {
        let (h, _stop) = handler();
        let create = |base: &str| call(&h, "bdev_error_create", json!({"base_name": base}));
        assert_eq!(code(create("b0")), -19);
        null(&h, "b0");
        assert_eq!(create("b0"), Ok(json!(true)));
        assert_eq!(code(create("b0")), -1, "the base is claimed");
        let e = bdev(&h, "EE_b0");
        assert_eq!(e["product_name"], json!("Error Injection Disk"));
        assert_eq!(e["num_blocks"], json!(64));
        assert!(e["driver_specific"].get("delay").is_none());
        assert_eq!(bdev(&h, "b0")["claimed"], json!(true));
        call(&h, "nvmf_create_subsystem", json!({"nqn": "nqn.a"})).unwrap();
        let ns = json!({"nqn": "nqn.a", "namespace": {"bdev_name": "b0"}});
        assert_eq!(code(call(&h, "nvmf_subsystem_add_ns", ns)), -16);
        // Deleting something that is not an error bdev: ENODEV, as SPDK's.
        assert_eq!(
            code(call(&h, "bdev_error_delete", json!({"name": "b0"}))),
            -19
        );
        let del = call(&h, "bdev_error_delete", json!({"name": "EE_b0"}));
        assert_eq!(del, Ok(json!(true)));
        assert_eq!(bdev(&h, "b0")["claimed"], json!(false));
        // Deleting the base takes its error bdev first.
        create("b0").unwrap();
        call(&h, "bdev_null_delete", json!({"name": "b0"})).unwrap();
        assert_eq!(
            code(call(&h, "bdev_get_bdevs", json!({"name": "EE_b0"}))),
            -19
        );
    }

    #[test]
    fn inject_error_arms_the_bdev_and_answers_with_spdks_codes() {
        let (h, _stop) = handler();
        null(&h, "b0");
        call(&h, "bdev_error_create", json!({"base_name": "b0"})).unwrap();
        let p = |io: &str, kind: &str| json!({"name": "EE_b0", "io_type": io, "error_type": kind});
        let faults = || {
            let st = h.lock();
            let (_, e) = st.bdevs.get("EE_b0").unwrap();
            FaultIo::ALL.map(|io| e.bdev.faults().armed(io))
        };
        assert_eq!(inject(&h, p("trim", "failure")), Err(-32603));
        assert_eq!(inject(&h, p("read", "explode")), Err(-32603));
        let not_error = json!({"name": "b0", "io_type": "read", "error_type": "failure"});
        assert_eq!(inject(&h, not_error), Err(-19));
        assert_eq!(inject(&h, p("read", "corrupt_data")), Err(-22));
        let mut corrupt = p("read", "corrupt_data");
        corrupt["corrupt_value"] = json!(1);
        assert_eq!(inject(&h, corrupt), Ok(json!(true)));
        assert_eq!(faults()[0], Some((FaultKind::CorruptData, 1)));
        let mut qd = p("flush", "failure");
        qd["queue_depth"] = json!(8);
        assert_eq!(inject(&h, qd), Ok(json!(true)));
        let rules = call(&h, "nvmemu_bdev_get_faults", json!({"name": "EE_b0"})).unwrap();
        assert_eq!(rules[0]["faults"][1]["queue_depth"], json!(8));
        assert_eq!(rules[0]["faults"][1]["io_type"], json!("flush"));

        let mut three = p("write", "pending");
        three["num"] = json!(3);
        assert_eq!(inject(&h, three), Ok(json!(true)));
        assert_eq!(faults()[1], Some((FaultKind::Pending, 3)));
        assert_eq!(
            faults()[0],
            Some((FaultKind::CorruptData, 1)),
            "reads keep theirs"
        );
        assert_eq!(inject(&h, p("all", "nomem")), Ok(json!(true)));
        assert_eq!(
            faults(),
            [Some((FaultKind::Nomem, 1)); 4],
            "num defaults to 1"
        );
        assert_eq!(inject(&h, p("clear", "failure")), Ok(json!(true)));
        assert_eq!(faults(), [None; 4]);
    }

    #[test]
    fn save_config_writes_error_bdevs_after_their_bases_and_replays_them() {
        let (a, _stop_a) = handler();
        null(&a, "b0");
        call(&a, "bdev_error_create", json!({"base_name": "b0"})).unwrap();
        let saved = call(&a, "save_config", json!({})).unwrap();
        let calls = saved_bdev_methods(&saved);
        assert_eq!(
            calls,
            [
                "bdev_null_create",
                "bdev_error_create",
                "bdev_wait_for_examine"
            ]
        );
        let (b, _stop_b) = handler();
        let report = load_config(&b, &saved).unwrap();
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        assert_eq!(bdev(&a, "EE_b0"), bdev(&b, "EE_b0"));
    }
}
