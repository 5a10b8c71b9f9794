// SPDX-License-Identifier: Apache-2.0
//! The methods a monitoring script calls, against the real `nvmemu serve`: log flags and
//! levels (which change what the server prints), notifications, threads and the scheduler.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use nvmemu_rpc::{Client, ClientError};
use serde_json::{Value, json};

struct Server {
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Server {
    /// `nvmemu serve` with its default log filter and stderr captured.
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let child = common::spawn_logged_serve(&dir.path().join("rpc.sock"), &[]);
        let s = Server {
            child: Some(child),
            dir,
        };
        common::wait_for_rpc_socket(&s.sock());
        s
    }

    fn sock(&self) -> PathBuf {
        self.dir.path().join("rpc.sock")
    }

    fn call(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        Client::connect(&self.sock(), Duration::from_secs(30))
            .unwrap()
            .call(method, params)
    }

    fn ok(&self, method: &str, params: Value) -> Value {
        self.call(method, params)
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    /// Stops the server and returns what it printed on stderr.
    fn stderr(mut self) -> String {
        self.ok("spdk_kill_instance", json!({"sig_name": "SIGTERM"}));
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn subsystem(s: &Server, n: u32) {
    s.ok(
        "nvmf_create_subsystem",
        json!({"nqn": format!("nqn.2016-06.io.spdk:cnode{n}")}),
    );
}

/// A flag turns on one component's lines, the print level the base level; both reach the
/// running server's output (`tracing`'s filter, reloaded).
#[test]
fn log_flags_and_print_level_change_what_the_server_prints() {
    let s = Server::start();
    assert_eq!(s.ok("log_get_print_level", json!({})), json!("WARNING"));
    assert_eq!(s.ok("log_get_flags", json!({}))["nvmf"], json!(false));
    subsystem(&s, 1);
    s.ok("log_set_flag", json!({"flag": "nvmf"}));
    assert_eq!(s.ok("log_get_flags", json!({}))["nvmf"], json!(true));
    subsystem(&s, 2);
    s.ok("log_clear_flag", json!({"flag": "nvmf"}));
    subsystem(&s, 3);
    s.ok("log_set_print_level", json!({"level": "INFO"}));
    assert_eq!(s.ok("log_get_print_level", json!({})), json!("INFO"));
    subsystem(&s, 4);
    s.ok("log_set_level", json!({"level": "DEBUG"}));
    assert_eq!(s.ok("log_get_level", json!({})), json!("DEBUG"));
    for (m, p) in [
        ("log_set_flag", json!({"flag": "bogus"})),
        ("log_set_print_level", json!({"level": "LOUD"})),
    ] {
        match s.call(m, p) {
            Err(ClientError::Rpc(e)) => assert_eq!(e.code, -32602, "{m}"),
            other => panic!("{m}: {other:?}"),
        }
    }
    let err = s.stderr();
    let created: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("subsystem created"))
        .collect();
    assert_eq!(created.len(), 2, "{err}");
    assert!(created[0].contains("cnode2"), "{err}");
    assert!(created[1].contains("cnode4"), "{err}");
}

#[test]
fn notifications_record_bdevs_registered_and_unregistered() {
    let s = Server::start();
    assert_eq!(
        s.ok("notify_get_types", json!({})),
        json!(["bdev_register", "bdev_unregister"])
    );
    s.ok(
        "bdev_malloc_create",
        json!({"name": "M0", "num_blocks": 64, "block_size": 512}),
    );
    s.ok(
        "bdev_null_create",
        json!({"name": "N0", "num_blocks": 64, "block_size": 512}),
    );
    s.ok("bdev_null_delete", json!({"name": "N0"}));
    assert_eq!(
        s.ok("notify_get_notifications", json!({})),
        json!([{"type": "bdev_register", "ctx": "M0", "id": 0},
               {"type": "bdev_register", "ctx": "N0", "id": 1},
               {"type": "bdev_unregister", "ctx": "N0", "id": 2}])
    );
    assert_eq!(
        s.ok("notify_get_notifications", json!({"id": 1, "max": 1})),
        json!([{"type": "bdev_register", "ctx": "N0", "id": 1}])
    );
    assert_eq!(s.ok("bdev_wait_for_examine", json!({})), json!(true));
}

#[test]
fn threads_pollers_channels_and_scheduler() {
    let s = Server::start();
    let stats = s.ok("thread_get_stats", json!({}));
    assert_eq!(stats["tick_rate"], json!(1_000_000_000u64));
    let names: Vec<&str> = stats["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app_thread", "nvmf_tgt_poll_group_000"]);
    let pg = &stats["threads"][1];
    assert_eq!(pg["cpumask"], json!("1"));
    assert_eq!(pg["active_pollers_count"], json!(1));
    assert!(pg["busy"].as_u64().unwrap() + pg["idle"].as_u64().unwrap() > 0);
    // The poller publishes its pass count once it has run (late on a loaded machine).
    let p = common::wait_for("the poller's first pass", || {
        let pollers = s.ok("thread_get_pollers", json!({}));
        let p = pollers["threads"][1]["active_pollers"][0].clone();
        (p["run_count"].as_u64().unwrap() > 0).then_some(p)
    });
    assert_eq!(p["name"], json!("nvmf_VFIOUSER"));
    let channels = s.ok("thread_get_io_channels", json!({}));
    assert_eq!(channels["threads"][1]["io_channels"], json!([]));
    assert_eq!(
        s.ok("framework_get_scheduler", json!({})),
        json!({"scheduler_name": "static", "scheduler_period": 0,
               "isolated_core_mask": "0", "scheduling_core": 0})
    );
}
