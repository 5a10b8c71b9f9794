// SPDX-License-Identifier: Apache-2.0
//! `nvmemu serve --json FILE` with a configuration written by SPDK's `save_config`: what it
//! applies and what it tells the operator it left out.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use serde_json::json;

/// Every call nvmemu does not implement is named on its own line at the default log level,
/// so QoS limits or options in an SPDK file are never dropped without a word.
#[test]
fn serve_json_names_each_skipped_method() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("spdk.json");
    let doc = json!({"subsystems": [
        {"subsystem": "iobuf", "config": [
            {"method": "iobuf_set_options", "params": {"small_pool_count": 8192}}]},
        {"subsystem": "sock", "config": [
            {"method": "sock_impl_set_options", "params": {"impl_name": "posix"}}]},
        {"subsystem": "bdev", "config": [
            {"method": "bdev_malloc_create",
             "params": {"name": "Malloc0", "num_blocks": 64, "block_size": 512}},
            {"method": "bdev_set_qos_limit",
             "params": {"name": "Malloc0", "rw_ios_per_sec": 2000}},
            {"method": "bdev_nvme_set_options", "params": {"action_on_timeout": "none"}}]}
    ]});
    std::fs::write(&config, doc.to_string()).unwrap();
    let sock = dir.path().join("rpc.sock");
    let child = common::spawn_logged_serve(&sock, &["--json".as_ref(), config.as_os_str()]);
    common::wait_for_rpc_socket(&sock);
    let mut c = nvmemu_rpc::Client::connect(&sock, Duration::from_secs(30)).unwrap();
    let bdevs = c.call("bdev_get_bdevs", json!({})).unwrap();
    assert_eq!(bdevs[0]["name"], json!("Malloc0"));
    // SPDK's QoS call is applied, not skipped.
    let limits = &bdevs[0]["assigned_rate_limits"];
    assert_eq!(limits["rw_ios_per_sec"], json!(2000));
    c.call("spdk_kill_instance", json!({"sig_name": "SIGTERM"}))
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let skipped: Vec<&str> = stderr.lines().filter(|l| l.contains("skipped")).collect();
    assert_eq!(skipped.len(), 3, "{stderr}");
    for (line, method) in skipped.iter().zip([
        "iobuf_set_options",
        "sock_impl_set_options",
        "bdev_nvme_set_options",
    ]) {
        assert!(line.contains(&format!("skipped {method}:")), "{line}");
        assert!(line.contains("spdk.json"), "{line}");
    }
}
