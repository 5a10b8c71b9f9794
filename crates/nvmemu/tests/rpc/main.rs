// SPDX-License-Identifier: Apache-2.0
//! The JSON-RPC control plane end to end: the real `nvmemu serve` binary configured by
//! `nvmemu rpc` (rpc.py's command lines) and by raw JSON-RPC, then used by the userspace
//! driver over the vfio-user socket it created.
#![allow(clippy::cast_possible_truncation)] // Test patterns: `i as u8` wraps on purpose.

#[path = "../common/mod.rs"]
mod common;
mod configure;
mod ctrl_faults;
mod delay;
mod errors;
mod faults;
mod hotplug;
mod malloc;
mod server;
mod sockets;
mod stats;

use nvmemu_driver::{AttachOptions, AttachedController, sqe};
use nvmemu_rpc::{Client, ClientError};
use nvmemu_spec::opcode::IoOpcode;
use nvmemu_spec::{Lba, Nsid, Status};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use server::Server;

const BIN: &str = env!("CARGO_BIN_EXE_nvmemu");
const NQN: &str = "nqn.2016-06.io.spdk:cnode1";

/// A `Key:   N kB` field of a /proc file, in bytes.
fn kb_field(text: &str, key: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.split(':').next() == Some(key))
        .unwrap_or_else(|| panic!("no {key}"));
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("a number of kB");
    kb * 1024
}

fn attach(dir: &Path) -> AttachedController {
    AttachedController::attach(
        dir,
        AttachOptions {
            io_queues: 1,
            queue_depth: 32,
            dma_pool_bytes: 8 << 20,
            ..AttachOptions::default()
        },
    )
    .expect("driver attaches")
}

/// Submits reads of one block at LBAs `0..n` (tokens 0..n) into `buf`, then rings the SQ
/// doorbell once, so the controller sees them all at once.
fn ring_reads(q: &mut nvmemu_driver::IoQpair, buf: &nvmemu_driver::DmaBuf, n: u64) {
    for i in 0..n {
        let rd = sqe::rw(IoOpcode::Read, Nsid(1), Lba(i), 1);
        q.submit_raw(rd, Some((buf, 512)), i)
            .expect("submit a read");
    }
    q.ring().expect("ring the SQ doorbell");
}

fn rpc_code(r: Result<Value, ClientError>) -> (i32, String) {
    match r {
        Err(ClientError::Rpc(e)) => (e.code, e.message),
        other => panic!("expected an RPC error, got {other:?}"),
    }
}

/// SUBNQN: Identify Controller bytes 1023:768, NUL padded.
fn identify_subnqn(c: &mut AttachedController) -> String {
    let buf = c.alloc_dma(4096).expect("DMA buffer");
    let cqe = c
        .admin_raw_with_data(
            sqe::identify(sqe::cns::CONTROLLER, Nsid(0)),
            Some((&buf, 4096)),
        )
        .expect("Identify Controller");
    assert!(cqe.status().is_success());
    let mut raw = vec![0u8; 256];
    buf.copy_to(768, &mut raw).expect("copy identify data");
    String::from_utf8_lossy(&raw)
        .trim_end_matches('\0')
        .to_owned()
}
