// SPDX-License-Identifier: Apache-2.0
//! A file-backed namespace keeps its data across a restart of `nvmemu serve`, whether it
//! comes from the command line (`--ns file:path=...`) or from SPDK's RPCs
//! (`bdev_aio_create` / `bdev_uring_create` exported in a subsystem): what a real client
//! wrote (our driver over vfio-user) is in the file once Flush completes, and a new process
//! on the same file reads it back.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use nvmemu_spec::{Lba, Nsid};
use serde_json::json;

const LBA: u64 = 4096;
const AT: usize = 4096 * 512;
const BLOCKS: u32 = 128;
const NQN: &str = "nqn.2016-06.io.spdk:file";

/// How a server gets its file namespace.
#[derive(Clone, Copy)]
enum Setup {
    /// `serve --ns file:path=IMG`.
    CommandLine,
    /// This SPDK create method with `filename` IMG, then the bdev exported over RPC.
    Rpc(&'static str),
}

/// `nvmemu serve` with one controller at `dir/ctrl` whose namespace is `img`; the caller
/// stops it by RPC.
fn serve(dir: &Path, img: &Path, setup: Setup) -> std::process::Child {
    let ctrl = dir.join("ctrl");
    std::fs::create_dir_all(&ctrl).unwrap();
    let sock = dir.join("rpc.sock");
    let ns = format!("file:path={}", img.display());
    let cli: &[&std::ffi::OsStr] = match setup {
        Setup::CommandLine => &[
            "--socket-dir".as_ref(),
            ctrl.as_os_str(),
            "--ns".as_ref(),
            ns.as_ref(),
        ],
        Setup::Rpc(_) => &[],
    };
    let child = common::spawn_logged_serve(&sock, cli);
    if let Setup::Rpc(method) = setup {
        common::wait_for_rpc_socket(&sock);
        export_file(&sock, method, img, &ctrl);
    }
    common::wait_for("the controller socket", || {
        ctrl.join("cntrl").exists().then_some(())
    });
    child
}

/// SPDK's set-up calls: a file bdev on `img` by `method`, exported as namespace 1 of
/// [`NQN`] with its vfio-user listener at `traddr`.
fn export_file(sock: &Path, method: &str, img: &Path, traddr: &Path) {
    let mut c = nvmemu_rpc::Client::connect(sock, Duration::from_secs(30)).unwrap();
    let created = c
        .call(method, json!({"name": "File0", "filename": img}))
        .unwrap();
    assert_eq!(created, json!("File0"));
    for (m, p) in [
        ("nvmf_create_transport", json!({"trtype": "VFIOUSER"})),
        (
            "nvmf_create_subsystem",
            json!({"nqn": NQN, "allow_any_host": true}),
        ),
        (
            "nvmf_subsystem_add_ns",
            json!({"nqn": NQN, "namespace": {"bdev_name": "File0"}}),
        ),
        (
            "nvmf_subsystem_add_listener",
            json!({"nqn": NQN, "listen_address": {"trtype": "VFIOUSER",
                   "traddr": traddr, "trsvcid": "0"}}),
        ),
    ] {
        c.call(m, p).unwrap();
    }
}

fn stop(dir: &Path, child: std::process::Child) {
    let sock = dir.join("rpc.sock");
    let mut c = nvmemu_rpc::Client::connect(&sock, Duration::from_secs(30)).unwrap();
    c.call("spdk_kill_instance", json!({"sig_name": "SIGTERM"}))
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The next server makes its sockets afresh.
    let _ = std::fs::remove_file(&sock);
}

/// Writes `data` at [`LBA`] through a server set up by `setup` and flushes it, stops that
/// server, then reads the blocks back through a new one set up alike on the same file.
fn write_restart_read(setup: Setup, data: &[u8]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();

    let server = serve(dir.path(), &img, setup);
    let mut c = common::attach_dir(&dir.path().join("ctrl")).unwrap();
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(data.len() as u64).unwrap();
    buf.copy_from(0, data).unwrap();
    q.write_blocking(Nsid(1), Lba(LBA), BLOCKS, &buf).unwrap();
    q.flush_blocking(Nsid(1)).unwrap();
    // Flush completed: the data is in the file for anyone who reads it.
    let file = std::fs::read(&img).unwrap();
    assert!(
        file[AT..AT + data.len()] == data[..],
        "the file lacks the data after Flush"
    );
    drop(q);
    c.shutdown().unwrap();
    stop(dir.path(), server);

    let server = serve(dir.path(), &img, setup);
    let mut c = common::attach_dir(&dir.path().join("ctrl")).unwrap();
    let mut q = c.take_qpair().unwrap();
    let back = c.alloc_dma(data.len() as u64).unwrap();
    q.read_blocking(Nsid(1), Lba(LBA), BLOCKS, &back).unwrap();
    let mut got = vec![0u8; data.len()];
    back.copy_to(0, &mut got).unwrap();
    drop(q);
    c.shutdown().unwrap();
    stop(dir.path(), server);
    got
}

#[test]
fn data_written_by_a_client_survives_a_restart_of_serve() {
    let data = common::pattern(BLOCKS as usize * 512, 0x3C);
    let got = write_restart_read(Setup::CommandLine, &data);
    assert!(got == data, "the data read after the restart differs");
}

#[test]
fn data_written_through_a_bdev_aio_create_bdev_survives_a_restart() {
    let data = common::pattern(BLOCKS as usize * 512, 0x5A);
    let got = write_restart_read(Setup::Rpc("bdev_aio_create"), &data);
    assert!(got == data, "the data read after the restart differs");
}

#[test]
fn data_written_through_a_bdev_uring_create_bdev_survives_a_restart() {
    let data = common::pattern(BLOCKS as usize * 512, 0xA7);
    let got = write_restart_read(Setup::Rpc("bdev_uring_create"), &data);
    assert!(got == data, "the data read after the restart differs");
}
