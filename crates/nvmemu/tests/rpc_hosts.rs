// SPDX-License-Identifier: Apache-2.0
//! A subsystem's host access control and what is connected to it, end to end: the real
//! `nvmemu serve`, configured over JSON-RPC, attached to by the userspace driver.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nvmemu_driver::AttachedController;
use nvmemu_rpc::{Client, ClientError};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_nvmemu");
const NQN: &str = "nqn.2016-06.io.spdk:cnode1";
const HOST: &str = "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";

/// `nvmemu serve` with a subsystem that does not allow any host, one namespace and one
/// listener at `DIR/vfu`.
struct Server {
    child: Child,
    dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("vfu")).unwrap();
        let child = Command::new(BIN)
            .arg("serve")
            .arg("-r")
            .arg(dir.path().join("rpc.sock"))
            .args(["-m", "0x1"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let s = Server { child, dir };
        common::wait_for_rpc_socket(&s.dir.path().join("rpc.sock"));
        for (m, p) in [
            (
                "bdev_malloc_create",
                json!({"name": "Malloc0", "num_blocks": 2048, "block_size": 512}),
            ),
            ("nvmf_create_transport", json!({"trtype": "VFIOUSER"})),
            ("nvmf_create_subsystem", json!({"nqn": NQN})),
            (
                "nvmf_subsystem_add_ns",
                json!({"nqn": NQN, "namespace": {"bdev_name": "Malloc0"}}),
            ),
            (
                "nvmf_subsystem_add_listener",
                json!({"nqn": NQN, "listen_address": {"trtype": "VFIOUSER",
                       "traddr": s.traddr().to_str().unwrap(), "trsvcid": "0"}}),
            ),
        ] {
            s.call(m, p).unwrap();
        }
        s
    }

    fn traddr(&self) -> PathBuf {
        self.dir.path().join("vfu")
    }

    fn call(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let sock = self.dir.path().join("rpc.sock");
        Client::connect(&sock, Duration::from_secs(30))
            .unwrap()
            .call(method, params)
    }

    fn code(&self, method: &str, params: Value) -> i32 {
        match self.call(method, params) {
            Err(ClientError::Rpc(e)) => e.code,
            other => panic!("{method}: expected an RPC error, got {other:?}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn attach(dir: &Path) -> anyhow::Result<AttachedController> {
    Ok(common::attach_dir(dir)?)
}

/// Whether attaching failed because the controller refused the client (EACCES to VERSION).
fn refused(r: anyhow::Result<AttachedController>) -> bool {
    let Err(e) = r else {
        panic!("the client was admitted");
    };
    e.chain().any(|c| {
        c.downcast_ref::<nvmemu_vfio_user::ClientError>()
            .is_some_and(|ce| matches!(ce, nvmemu_vfio_user::ClientError::Refused))
    })
}

/// vfio-user clients present no host NQN (SPDK's transport connects with an empty one), so
/// a subsystem that does not allow any host admits none, whatever its host list says;
/// `nvmf_subsystem_allow_any_host` opens and closes the door for the next client.
#[test]
fn a_subsystem_that_allows_no_host_refuses_clients() {
    let s = Server::start();
    assert!(refused(attach(&s.traddr())));
    s.call("nvmf_subsystem_add_host", json!({"nqn": NQN, "host": HOST}))
        .unwrap();
    assert!(refused(attach(&s.traddr())), "a host list cannot match");
    let any = |allow: bool| {
        s.call(
            "nvmf_subsystem_allow_any_host",
            json!({"nqn": NQN, "allow_any_host": allow}),
        )
        .unwrap()
    };
    any(true);
    let mut c = attach(&s.traddr()).unwrap();
    assert_eq!(c.active_namespaces().unwrap().len(), 1);
    // Closing the door keeps the attached client and refuses the next one.
    any(false);
    assert_eq!(c.active_namespaces().unwrap().len(), 1);
    c.shutdown().unwrap();
    drop(c);
    assert!(refused(attach(&s.traddr())));
    let subs = s.call("nvmf_get_subsystems", json!({"nqn": NQN})).unwrap();
    assert_eq!(subs[0]["allow_any_host"], json!(false));
    assert_eq!(subs[0]["hosts"], json!([{"nqn": HOST}]));
}

#[test]
fn host_list_errors_and_save_config() {
    let s = Server::start();
    let add = |host: &str| json!({"nqn": NQN, "host": host});
    s.call("nvmf_subsystem_add_host", add(HOST)).unwrap();
    // SPDK's codes: an unknown subsystem is -32602, a refused change -32603.
    assert_eq!(s.code("nvmf_subsystem_add_host", add(HOST)), -32603);
    assert_eq!(s.code("nvmf_subsystem_add_host", add("host1")), -32603);
    assert_eq!(
        s.code(
            "nvmf_subsystem_add_host",
            json!({"nqn": "nqn.2016-06.io.spdk:none", "host": HOST})
        ),
        -32602
    );
    let saved = s.call("save_config", json!({})).unwrap();
    let nvmf = saved["subsystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["subsystem"] == "nvmf")
        .unwrap();
    let methods: Vec<&str> = nvmf["config"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["method"].as_str().unwrap())
        .collect();
    let create = methods
        .iter()
        .position(|m| *m == "nvmf_create_subsystem")
        .unwrap();
    assert_eq!(methods[create + 1], "nvmf_subsystem_add_host");
    assert_eq!(nvmf["config"][create + 1]["params"], add(HOST));
    s.call("nvmf_subsystem_remove_host", add(HOST)).unwrap();
    assert_eq!(s.code("nvmf_subsystem_remove_host", add(HOST)), -32603);
    let subs = s.call("nvmf_get_subsystems", json!({"nqn": NQN})).unwrap();
    assert_eq!(subs[0]["hosts"], json!([]));
}

#[test]
fn controllers_qpairs_and_listeners_of_a_subsystem() {
    let s = Server::start();
    s.call(
        "nvmf_subsystem_allow_any_host",
        json!({"nqn": NQN, "allow_any_host": true}),
    )
    .unwrap();
    let q = json!({"nqn": NQN});
    assert_eq!(
        s.call("nvmf_subsystem_get_controllers", q.clone()).unwrap(),
        json!([])
    );
    let listener = json!({"trtype": "VFIOUSER", "adrfam": "IPv4",
                          "traddr": s.traddr().to_str().unwrap(), "trsvcid": "0"});
    assert_eq!(
        s.call("nvmf_subsystem_get_listeners", q.clone()).unwrap(),
        json!([{"address": listener}])
    );
    let c = attach(&s.traddr()).unwrap();
    let ctrls = s.call("nvmf_subsystem_get_controllers", q.clone()).unwrap();
    assert_eq!(
        ctrls,
        json!([{"cntlid": 1, "hostnqn": "",
                "hostid": "00000000-0000-0000-0000-000000000000", "num_io_qpairs": 1}])
    );
    let qpairs = s.call("nvmf_subsystem_get_qpairs", q.clone()).unwrap();
    let qids: Vec<u64> = qpairs
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["qid"].as_u64().unwrap())
        .collect();
    assert_eq!(qids, vec![0, 1]);
    assert_eq!(qpairs[1]["cntlid"], json!(1));
    assert_eq!(qpairs[1]["state"], json!("enabled"));
    assert_eq!(qpairs[1]["peer_address"]["adrfam"], json!("unknown"));
    assert_eq!(qpairs[1]["thread"], json!("nvmf_tgt_poll_group_000"));
    assert_eq!(qpairs[1]["listen_address"], listener);
    drop(c);
    let none = json!({"nqn": "nqn.2016-06.io.spdk:none"});
    for m in [
        "nvmf_subsystem_get_controllers",
        "nvmf_subsystem_get_qpairs",
        "nvmf_subsystem_get_listeners",
    ] {
        assert_eq!(s.code(m, none.clone()), -32602, "{m}");
    }
}
