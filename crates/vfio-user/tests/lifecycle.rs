// SPDX-License-Identifier: Apache-2.0
//! Listener + serve_connection + StopHandle working together.
#![allow(
    clippy::unwrap_used,
    clippy::cast_sign_loss,
    clippy::cast_possible_truncation
)]

mod common;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use common::{Call, Calls, FakeDevice, Harness};
use nvmemu_vfio_user::{Client, DEFAULT_SOCKET_MODE, Listener, StopHandle, serve_connection};

#[test]
fn stop_unblocks_serve_connection_and_disconnects_the_device() {
    let (s, h) = Harness::start();
    let _client = Client::from_stream(s).unwrap();
    h.stop.stop();
    let calls = h.calls.clone();
    assert!(h.join().is_ok());
    assert!(matches!(
        calls.lock().unwrap().as_slice(),
        [Call::Disconnected]
    ));
}

#[test]
fn listener_serves_clients_one_after_another_until_stopped() {
    let dir = tempfile::tempdir().unwrap();
    // A stale socket from a previous run is replaced.
    drop(std::os::unix::net::UnixListener::bind(dir.path().join("cntrl")).unwrap());
    let listener = Listener::bind(dir.path(), DEFAULT_SOCKET_MODE).unwrap();
    let path = listener.path().to_path_buf();
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    let stop = StopHandle::new().unwrap();
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    let (s2, c2) = (stop.clone(), calls.clone());
    let server = std::thread::spawn(move || {
        let mut dev = FakeDevice::new(c2);
        let mut served = 0;
        while let Some(stream) = listener.accept(&s2).unwrap() {
            let _ = serve_connection(stream, &mut dev, &s2, &Default::default());
            served += 1;
        }
        served
    });
    for _ in 0..2 {
        let mut c = Client::connect(&path).unwrap();
        c.reset().unwrap();
        assert_eq!(c.device_info().unwrap().num_irqs, 5);
    }
    // Wait until both sessions ended (the device logged two disconnects) before stopping, so
    // the count below is deterministic.
    let probe = UnixStream::connect(&path).unwrap();
    drop(probe);
    loop {
        let n = calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| matches!(c, Call::Disconnected))
            .count();
        if n >= 3 {
            break;
        }
        std::thread::yield_now();
    }
    stop.stop();
    assert_eq!(server.join().unwrap(), 3);
    assert!(
        !path.exists(),
        "socket removed when the listener is dropped"
    );
}
