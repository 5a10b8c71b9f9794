// SPDX-License-Identifier: Apache-2.0
//! A file-backed namespace (`serve --ns file:path=...`) keeps its data across a restart of
//! `nvmemu serve`: what a real client wrote (our driver over vfio-user) is in the file once
//! Flush completes, and a new process on the same file reads it back.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use nvmemu_spec::{Lba, Nsid};
use serde_json::json;

const LBA: u64 = 4096;
const AT: usize = 4096 * 512;
const BLOCKS: u32 = 128;

/// `nvmemu serve` with one controller at `dir/ctrl` whose namespace is `img`; the caller
/// stops it by RPC.
fn serve(dir: &Path, img: &Path) -> std::process::Child {
    let ns = format!("file:path={}", img.display());
    let ctrl = dir.join("ctrl");
    std::fs::create_dir_all(&ctrl).unwrap();
    let child = common::spawn_logged_serve(
        &dir.join("rpc.sock"),
        &[
            "--socket-dir".as_ref(),
            ctrl.as_os_str(),
            "--ns".as_ref(),
            ns.as_ref(),
        ],
    );
    common::wait_for("the controller socket", || {
        ctrl.join("cntrl").exists().then_some(())
    });
    child
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

#[test]
fn data_written_by_a_client_survives_a_restart_of_serve() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let data = common::pattern(BLOCKS as usize * 512, 0x3C);

    let server = serve(dir.path(), &img);
    let mut c = common::attach_dir(&dir.path().join("ctrl")).unwrap();
    let mut q = c.take_qpair().unwrap();
    let buf = c.alloc_dma(data.len() as u64).unwrap();
    buf.copy_from(0, &data).unwrap();
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

    let server = serve(dir.path(), &img);
    let mut c = common::attach_dir(&dir.path().join("ctrl")).unwrap();
    let mut q = c.take_qpair().unwrap();
    let back = c.alloc_dma(data.len() as u64).unwrap();
    q.read_blocking(Nsid(1), Lba(LBA), BLOCKS, &back).unwrap();
    let mut got = vec![0u8; data.len()];
    back.copy_to(0, &mut got).unwrap();
    assert!(got == data, "the data read after the restart differs");
    drop(q);
    c.shutdown().unwrap();
    stop(dir.path(), server);
}
