// SPDX-License-Identifier: Apache-2.0
//! `bdev_set_qos_limit` and how the limits show: `assigned_rate_limits` in
//! `bdev_get_bdevs`, and a `bdev_set_qos_limit` call after the bdev in `save_config`. The
//! pollers enforce the limits (`nvmemu_ctrl`'s `qos.rs`).

use nvmemu_bdev::{Bdev, QosValues};
use nvmemu_rpc::methods::bdev::{BdevSetQosLimitParams, RateLimits};
use nvmemu_rpc::{Errno, RpcError};
use serde_json::{Value, json};

use super::bdev::Registry;

/// SPDK's smallest IOPS limit and its granularity.
const MIN_IOS_PER_SEC: u64 = 1000;

/// Apply the limits given, keeping those left out, with SPDK's checks in SPDK's order.
pub(crate) fn set_qos_limit(reg: &Registry, p: &BdevSetQosLimitParams) -> Result<Value, RpcError> {
    let (name, e) = reg
        .get(&p.name)
        .ok_or_else(|| RpcError::errno(Errno::ENODEV))?;
    let given = [
        p.rw_ios_per_sec,
        p.rw_mbytes_per_sec,
        p.r_mbytes_per_sec,
        p.w_mbytes_per_sec,
    ];
    if given.iter().all(Option::is_none) {
        return Err(RpcError::invalid_params("No rate limits specified"));
    }
    if let Some(ios) = p.rw_ios_per_sec
        && !ios.is_multiple_of(MIN_IOS_PER_SEC)
    {
        return Err(RpcError::errno_msg(
            Errno::EINVAL,
            format!("rw_ios_per_sec {ios} is not a multiple of {MIN_IOS_PER_SEC}"),
        ));
    }
    let now = e.bdev.qos().get();
    let v = QosValues {
        rw_ios_per_sec: p.rw_ios_per_sec.unwrap_or(now.rw_ios_per_sec),
        rw_mbytes_per_sec: p.rw_mbytes_per_sec.unwrap_or(now.rw_mbytes_per_sec),
        r_mbytes_per_sec: p.r_mbytes_per_sec.unwrap_or(now.r_mbytes_per_sec),
        w_mbytes_per_sec: p.w_mbytes_per_sec.unwrap_or(now.w_mbytes_per_sec),
    };
    e.bdev.qos().set(v);
    tracing::info!(name, ?v, "bdev QoS limits set");
    Ok(Value::Bool(true))
}

/// `assigned_rate_limits` of `bdev_get_bdevs`.
pub(crate) fn rate_limits(b: &Bdev) -> RateLimits {
    let v = b.qos().get();
    RateLimits {
        rw_ios_per_sec: v.rw_ios_per_sec,
        rw_mbytes_per_sec: v.rw_mbytes_per_sec,
        r_mbytes_per_sec: v.r_mbytes_per_sec,
        w_mbytes_per_sec: v.w_mbytes_per_sec,
    }
}

/// The `save_config` call restoring `b`'s limits, naming only those set; None if none is.
pub(crate) fn config_call(name: &str, b: &Bdev) -> Option<Value> {
    let v = b.qos().get();
    if !v.is_set() {
        return None;
    }
    let mut params = json!({"name": name});
    for (key, value) in [
        ("rw_ios_per_sec", v.rw_ios_per_sec),
        ("rw_mbytes_per_sec", v.rw_mbytes_per_sec),
        ("r_mbytes_per_sec", v.r_mbytes_per_sec),
        ("w_mbytes_per_sec", v.w_mbytes_per_sec),
    ] {
        if value != 0 {
            params[key] = json!(value);
        }
    }
    Some(json!({"method": "bdev_set_qos_limit", "params": params}))
}

#[cfg(test)]
mod tests {
    use nvmemu_rpc::load_config;
    use serde_json::json;

    use super::super::tests::{call, code, handler};

    fn limits(h: &super::super::NvmemuHandler) -> serde_json::Value {
        call(h, "bdev_get_bdevs", json!({"name": "q0"})).unwrap()[0]["assigned_rate_limits"].clone()
    }

    #[test]
    fn set_qos_limit_checks_as_spdk_and_keeps_limits_left_out() {
        let (h, _stop) = handler();
        let missing = call(
            &h,
            "bdev_set_qos_limit",
            json!({"name": "nope", "rw_ios_per_sec": 1000}),
        );
        assert_eq!(code(missing), -19);
        call(
            &h,
            "bdev_null_create",
            json!({"name": "q0", "num_blocks": 64, "block_size": 512}),
        )
        .unwrap();
        let none = call(&h, "bdev_set_qos_limit", json!({"name": "q0"}));
        assert_eq!(none, Err((-32602, "No rate limits specified".into())));
        let odd = call(
            &h,
            "bdev_set_qos_limit",
            json!({"name": "q0", "rw_ios_per_sec": 1500}),
        );
        assert_eq!(code(odd), -22);
        let unknown = call(
            &h,
            "bdev_set_qos_limit",
            json!({"name": "q0", "iops": 1000}),
        );
        assert!(unknown.is_err());
        let set = json!({"name": "q0", "rw_ios_per_sec": 2000, "w_mbytes_per_sec": 5});
        assert_eq!(call(&h, "bdev_set_qos_limit", set), Ok(json!(true)));
        assert_eq!(
            limits(&h),
            json!({"rw_ios_per_sec": 2000, "rw_mbytes_per_sec": 0,
                   "r_mbytes_per_sec": 0, "w_mbytes_per_sec": 5})
        );
        // Left out: kept; 0: removed.
        let more = json!({"name": "q0", "r_mbytes_per_sec": 7, "rw_ios_per_sec": 0});
        call(&h, "bdev_set_qos_limit", more).unwrap();
        assert_eq!(
            limits(&h),
            json!({"rw_ios_per_sec": 0, "rw_mbytes_per_sec": 0,
                   "r_mbytes_per_sec": 7, "w_mbytes_per_sec": 5})
        );
        let off = json!({"name": "q0", "r_mbytes_per_sec": 0, "w_mbytes_per_sec": 0});
        call(&h, "bdev_set_qos_limit", off).unwrap();
        assert_eq!(limits(&h)["w_mbytes_per_sec"], json!(0));
    }

    #[test]
    fn save_config_writes_the_limits_after_the_bdev_and_replays_them() {
        let (a, _stop_a) = handler();
        call(
            &a,
            "bdev_null_create",
            json!({"name": "q0", "num_blocks": 64, "block_size": 512}),
        )
        .unwrap();
        let set = json!({"name": "q0", "rw_ios_per_sec": 3000, "rw_mbytes_per_sec": 9});
        call(&a, "bdev_set_qos_limit", set).unwrap();
        let saved = call(&a, "save_config", json!({})).unwrap();
        let bdev = &saved["subsystems"][0]["config"];
        assert_eq!(bdev[0]["method"], json!("bdev_null_create"));
        assert_eq!(
            bdev[1],
            json!({"method": "bdev_set_qos_limit",
                   "params": {"name": "q0", "rw_ios_per_sec": 3000, "rw_mbytes_per_sec": 9}})
        );
        let (b, _stop_b) = handler();
        let report = load_config(&b, &saved).unwrap();
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        assert_eq!(limits(&b), limits(&a));
        for h in [&a, &b] {
            call(
                h,
                "bdev_set_qos_limit",
                json!({"name": "q0", "rw_ios_per_sec": 0,
                 "rw_mbytes_per_sec": 0}),
            )
            .unwrap();
        }
    }
}
