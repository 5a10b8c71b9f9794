// SPDX-License-Identifier: Apache-2.0
//! `save_config` replayed, the stats methods and `spdk_kill_instance`.

use super::*;

#[test]
fn save_config_replays_to_the_same_state() {
    let (a, _) = handler();
    let dir = tempfile::tempdir().unwrap();
    setup(&a, dir.path().to_str().unwrap());
    call(
        &a,
        "bdev_null_create",
        json!({"name": "N", "num_blocks": 8, "block_size": 4096}),
    )
    .unwrap();
    let saved = dispatch(&a, Request::SaveConfig).unwrap();
    let subs = call(&a, "nvmf_get_subsystems", json!({})).unwrap();
    let bdevs = call(&a, "bdev_get_bdevs", json!({})).unwrap();
    drop(a);
    let (b, _) = handler();
    let report = load_config(&b, &saved).unwrap();
    // Two bdevs, SPDK's closing bdev_wait_for_examine, transport, subsystem, listener, ns.
    assert_eq!((report.applied, report.skipped.len()), (7, 0));
    assert_eq!(call(&b, "nvmf_get_subsystems", json!({})).unwrap(), subs);
    assert_eq!(call(&b, "bdev_get_bdevs", json!({})).unwrap(), bdevs);
    assert_eq!(dispatch(&b, Request::SaveConfig).unwrap(), saved);
}

#[test]
fn stats_and_kill_instance() {
    let (h, stop) = handler();
    let r = call(&h, "framework_get_reactors", json!({})).unwrap();
    assert_eq!(r["reactors"][0]["lcore"], json!(0));
    assert_eq!(r["reactors"][0]["lw_threads"][0]["cpumask"], json!("1"));
    let s = call(&h, "nvmf_get_stats", json!({})).unwrap();
    assert_eq!(s["poll_groups"].as_array().map(Vec::len), Some(1));
    // SPDK's VFIOUSER counters: passes and the commands they took.
    let t = &s["poll_groups"][0]["transports"][0];
    assert_eq!(t["trtype"], json!("VFIOUSER"));
    for key in [
        "polls",
        "poll_reqs",
        "polls_spurious",
        "ctrlr_intr",
        "cq_full",
        "cqh_io_writes",
    ] {
        assert!(t[key].is_u64(), "{key} in {t}");
    }
    assert!(t["poll_reqs_variance"].is_f64(), "{t}");
    let v = call(&h, "spdk_get_version", json!({})).unwrap();
    assert_eq!(
        v["version"],
        json!(format!("nvmemu v{}", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(
        call(&h, "bdev_get_iostat", json!({})).unwrap()["bdevs"],
        json!([])
    );
    assert_eq!(code(call(&h, "bdev_get_iostat", json!({"name": "x"}))), -19);
    assert!(!stop.is_stopped());
    assert_eq!(
        call(&h, "spdk_kill_instance", json!({"sig_name": "SIGINT"})),
        Ok(json!(true))
    );
    assert!(stop.is_stopped());
}
