// SPDX-License-Identifier: Apache-2.0
//! The socket file's mode does not depend on the umask. Its own test binary: the umask is
//! process-wide and would disturb tests running beside it.
#![allow(clippy::unwrap_used)]

use std::os::unix::net::UnixStream;
use std::path::Path;

use nvmemu_sockfile::{Access, bind};
use rustix::fs::Mode;

/// The permission bits of the file at `path` (not following a symlink).
fn mode_of(path: &Path) -> u32 {
    rustix::fs::lstat(path).unwrap().st_mode & 0o7777
}

#[test]
fn socket_has_its_mode_whatever_the_umask_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rpc.sock");
    // Under umask 000 a plain bind makes the socket 0777; under 0777 it makes it 0000.
    let old = rustix::process::umask(Mode::empty());
    let first = bind(&path, Access::OWNER);
    rustix::process::umask(Mode::from_raw_mode(0o777));
    let path2 = dir.path().join("two.sock");
    let second = bind(
        &path2,
        Access {
            mode: 0o660,
            gid: None,
        },
    );
    rustix::process::umask(old);
    let (l, file) = first.unwrap();
    let (_l2, _f2) = second.unwrap();
    assert_eq!(mode_of(&path), 0o600);
    assert_eq!(mode_of(&path2), 0o660);
    // Only the two sockets: no private directory is left behind.
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["rpc.sock", "two.sock"]);
    let _c = UnixStream::connect(&path).unwrap();
    assert!(l.accept().is_ok());
    drop(file);
    assert!(!path.exists());
}
