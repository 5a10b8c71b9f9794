// SPDX-License-Identifier: Apache-2.0
//! `save_config` replayed, the stats methods (the TCP poll group among the threads) and
//! `spdk_kill_instance`.

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

/// The `thread_get_stats` entry named `name`.
fn thread(h: &NvmemuHandler, name: &str) -> Option<Value> {
    let stats = call(h, "thread_get_stats", json!({})).unwrap();
    assert_eq!(stats["tick_rate"], json!(1_000_000_000u64));
    stats["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .cloned()
}

#[test]
fn the_tcp_poll_group_is_a_thread_whose_idle_time_grows_while_nothing_connects() {
    let (h, _) = handler();
    assert_eq!(thread(&h, "nvmf_tgt_poll_group_tcp"), None);
    call(&h, "nvmf_create_transport", json!({"trtype": "TCP"})).unwrap();
    let first = thread(&h, "nvmf_tgt_poll_group_tcp").expect("the TCP poll group");
    assert_eq!(
        first["id"],
        json!(3),
        "after app_thread (1) and poll group 000 (2)"
    );
    assert_eq!(first["cpumask"], json!("1"));
    assert_eq!(first["active_pollers_count"], json!(1));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let idle = |t: &Value| t["idle"].as_u64().unwrap();
    let later = loop {
        let t = thread(&h, "nvmf_tgt_poll_group_tcp").unwrap();
        if idle(&t) >= idle(&first) + 50_000_000 {
            break t;
        }
        assert!(std::time::Instant::now() < deadline, "idle time stuck: {t}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // No connection, no work: every pass was idle.
    assert_eq!(later["busy"], json!(0), "{later}");
    let pollers = call(&h, "thread_get_pollers", json!({})).unwrap();
    let tcp = &pollers["threads"][2];
    assert_eq!(tcp["name"], json!("nvmf_tgt_poll_group_tcp"));
    assert_eq!(tcp["active_pollers"][0]["name"], json!("nvmf_TCP"));
}

#[test]
fn a_poller_without_controllers_reads_as_idle() {
    let (h, _) = handler();
    // Busy: its first pass and the time since its last published pass, which a loaded
    // machine stretches while the poller waits for a CPU; so wait for a reading taken
    // soon after a pass, as a poller that counted idle time as busy never gives.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let t = thread(&h, "nvmf_tgt_poll_group_000").unwrap();
        let (idle, busy) = (t["idle"].as_u64().unwrap(), t["busy"].as_u64().unwrap());
        if idle >= 200_000_000 && busy < 50_000_000 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never idle: {t}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
