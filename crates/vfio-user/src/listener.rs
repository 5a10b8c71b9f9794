// SPDX-License-Identifier: Apache-2.0
//! The server's listening socket, `<dir>/cntrl` (the name SPDK's client connects to).

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use nvmemu_sockfile::{Access, SocketFile, Wake};
use rustix::event::PollFlags;

use crate::StopHandle;

/// File name of the socket inside the listen directory.
pub const SOCKET_NAME: &str = "cntrl";
/// Default permission bits of the socket: owner only.
pub const DEFAULT_SOCKET_MODE: u32 = 0o600;

/// A bound vfio-user socket. Dropping it removes the socket file (if it is still ours).
#[derive(Debug)]
pub struct Listener {
    listener: UnixListener,
    file: SocketFile,
}

impl Listener {
    /// Binds `dir/cntrl` with permission bits `mode` (use [`DEFAULT_SOCKET_MODE`]).
    ///
    /// The file has `mode` from the moment it appears (no chmod after bind; see
    /// `nvmemu_sockfile`). A stale socket of ours at that path (nobody accepts on it) is
    /// replaced; a socket someone listens on fails with `AddrInUse`, and someone else's
    /// socket or any other kind of file is left alone and fails with `AlreadyExists`. `dir`
    /// must exist.
    pub fn bind(dir: &Path, mode: u32) -> io::Result<Self> {
        let (listener, file) =
            nvmemu_sockfile::bind(&dir.join(SOCKET_NAME), Access { mode, gid: None })?;
        listener.set_nonblocking(true)?;
        Ok(Self { listener, file })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Waits for the next client; `None` once `stop` is stopped. The stream is blocking.
    pub fn accept(&self, stop: &StopHandle) -> io::Result<Option<UnixStream>> {
        loop {
            if stop.wait(&self.listener, PollFlags::IN, None)? == Wake::Stopped {
                return Ok(None);
            }
            if let Some(stream) = self.try_accept()? {
                return Ok(Some(stream));
            }
        }
    }

    /// The next queued client without waiting, `None` if there is none. The stream is
    /// blocking.
    pub(crate) fn try_accept(&self) -> io::Result<Option<UnixStream>> {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false)?;
                    return Ok(Some(stream));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The listening socket, for a loop that polls it beside other fds.
impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.listener.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    #[test]
    fn stale_socket_is_replaced_and_mode_applied() {
        let dir = tempfile::tempdir().unwrap();
        let stale = UnixListener::bind(dir.path().join(SOCKET_NAME)).unwrap();
        drop(stale); // leaves the socket file behind
        let l = Listener::bind(dir.path(), DEFAULT_SOCKET_MODE).unwrap();
        let meta = fs::symlink_metadata(l.path()).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let path = l.path().to_path_buf();
        drop(l);
        assert!(!path.exists());
    }

    #[test]
    fn live_socket_is_not_stolen() {
        let dir = tempfile::tempdir().unwrap();
        let first = Listener::bind(dir.path(), DEFAULT_SOCKET_MODE).unwrap();
        // The same directory under another spelling must not unlink the live socket.
        let alias = dir.path().join(".");
        let err = Listener::bind(&alias, DEFAULT_SOCKET_MODE).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        let _c = UnixStream::connect(first.path()).unwrap();
        let stop = StopHandle::new().unwrap();
        assert!(first.accept(&stop).unwrap().is_some());
    }

    #[test]
    fn regular_file_is_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(SOCKET_NAME), b"keep").unwrap();
        let err = Listener::bind(dir.path(), DEFAULT_SOCKET_MODE).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(dir.path().join(SOCKET_NAME)).unwrap(), b"keep");
    }

    #[test]
    fn accept_returns_client_then_none_on_stop() {
        let dir = tempfile::tempdir().unwrap();
        let l = Listener::bind(dir.path(), 0o640).unwrap();
        let stop = StopHandle::new().unwrap();
        let _c = UnixStream::connect(l.path()).unwrap();
        assert!(l.accept(&stop).unwrap().is_some());
        let s2 = stop.clone();
        let t = std::thread::spawn(move || {
            let r = l.accept(&s2).unwrap();
            r.is_none()
        });
        stop.stop();
        assert!(t.join().unwrap());
    }
}
