// SPDX-License-Identifier: Apache-2.0
//! Shared fixtures: a target serving one controller on a real socket in a temp directory.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nvmemu_bdev::Bdev;
use nvmemu_ctrl::{ControllerConfig, Namespace};
use nvmemu_spec::Nsid;
use nvmemu_target::{Backoff, ControllerId, ControllerSpec, Target, TargetConfig};

/// A running target with one controller, removed on drop.
pub struct TestTarget {
    pub target: Target,
    pub id: ControllerId,
    pub dir: tempfile::TempDir,
}

impl TestTarget {
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("cntrl")
    }
}

/// Namespaces: (kind "malloc"/"null", LBA size, blocks).
pub fn start(namespaces: &[(&str, u32, u64)]) -> TestTarget {
    let dir = tempfile::tempdir().expect("tempdir");
    // Pollers unpinned and backing off: tests run in parallel on 2 cores.
    let target = Target::start(TargetConfig {
        cores: vec![0],
        pin: false,
        backoff: Backoff::default(),
    })
    .expect("target starts");
    let namespaces = namespaces
        .iter()
        .enumerate()
        .map(|(i, &(kind, lba, blocks))| {
            let name = format!("ns{}", i + 1);
            let bdev = match kind {
                "malloc" => Bdev::malloc(&name, lba, blocks),
                "null" => Bdev::null(&name, lba, blocks),
                other => panic!("unknown kind {other}"),
            }
            .expect("bdev");
            Namespace::new(Nsid(u32::try_from(i + 1).unwrap()), Arc::new(bdev))
        })
        .collect();
    let config = ControllerConfig {
        serial: "TESTSERIAL01".into(),
        model: "nvmemu test controller".into(),
        ..ControllerConfig::default()
    };
    let id = target
        .add_controller(ControllerSpec {
            socket_dir: dir.path().to_path_buf(),
            socket_mode: 0o600,
            config,
            namespaces,
        })
        .expect("controller");
    TestTarget { target, id, dir }
}
