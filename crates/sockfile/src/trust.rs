// SPDX-License-Identifier: Apache-2.0
//! Who else could touch a socket: the directories a server binds in, and the server a client
//! connects to. Only root and the user running us are trusted, as OpenSSH trusts files.
//!
//! * A directory is safe when it and every directory above it belong to root or to us and
//!   are writable by nobody else, unless sticky (`/tmp`): otherwise another user could rename
//!   our socket aside and bind theirs in its place. The walk goes up from the opened
//!   directory through `..`, so it checks where the socket really goes, whatever symlinks
//!   the path took to get there.
//! * A server is trusted when the process listening on the socket (`SO_PEERCRED`, which no
//!   file swap can fake) runs as root or as us.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, Stat};

/// Most directory levels walked up before the root is assumed unreachable.
const MAX_DEPTH: usize = 256;

/// Why a directory is not safe for a socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsafe {
    /// Owned by a user other than root and us.
    Owner(u32),
    /// Writable by its group or by others, and not sticky.
    Writable(u32),
}

impl std::fmt::Display for Unsafe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsafe::Owner(uid) => write!(f, "is owned by uid {uid}, neither root nor you"),
            Unsafe::Writable(mode) => {
                write!(f, "is writable by others (mode {mode:04o}) and not sticky")
            }
        }
    }
}

/// The user a process runs as, as [`check_dir`] and [`check_server`] see it.
fn me() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn judge(st: &Stat) -> Option<Unsafe> {
    const STICKY: u32 = 0o1000;
    if st.st_uid != 0 && st.st_uid != me() {
        return Some(Unsafe::Owner(st.st_uid));
    }
    let mode = st.st_mode & 0o7777;
    (mode & 0o022 != 0 && mode & STICKY == 0).then_some(Unsafe::Writable(mode))
}

/// Checks the directory `dir` (opened from `path`) and every directory above it: the first
/// unsafe one, named by its place above `path`'s real location, and why.
pub(crate) fn check_dir(dir: &OwnedFd, path: &Path) -> io::Result<Option<(PathBuf, Unsafe)>> {
    // Names for the messages only; the checks use the fds.
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut names = real.ancestors();
    let mut here = rustix::fs::fstat(dir)?;
    let mut fd: Option<OwnedFd> = None;
    for _ in 0..MAX_DEPTH {
        let name = names.next().unwrap_or(Path::new("/")).to_path_buf();
        if let Some(why) = judge(&here) {
            return Ok(Some((name, why)));
        }
        let cur = fd.as_ref().map_or(dir.as_fd(), |f| f.as_fd());
        // O_PATH: a directory we may search but not list (0711) is still checked.
        let up = rustix::fs::openat(
            cur,
            "..",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let above = rustix::fs::fstat(&up)?;
        if (above.st_dev, above.st_ino) == (here.st_dev, here.st_ino) {
            return Ok(None); // the root is its own parent
        }
        here = above;
        fd = Some(up);
    }
    Err(io::Error::other("directory tree deeper than 256 levels"))
}

/// A server socket that root or the caller does not own.
#[derive(Debug, thiserror::Error)]
#[error(
    "{} is served by uid {uid}, neither root nor you (uid {me}): not talking to it; \
     is another user's socket at that path?",
    path.display()
)]
pub struct UntrustedServer {
    /// The socket path.
    pub path: PathBuf,
    /// The uid of the process listening on it.
    pub uid: u32,
    /// Our effective uid.
    pub me: u32,
}

/// Whether the server that accepted `stream` (connected to `path`) runs as root or as us;
/// call it before sending anything. A peer whose credentials cannot be read is refused too.
pub fn check_server(stream: impl AsFd, path: &Path) -> Result<(), UntrustedServer> {
    let uid = match rustix::net::sockopt::socket_peercred(stream) {
        Ok(cred) => cred.uid.as_raw(),
        Err(_) => u32::MAX,
    };
    if uid == 0 || uid == me() {
        return Ok(());
    }
    Err(UntrustedServer {
        path: path.to_path_buf(),
        uid,
        me: me(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::{UnixListener, UnixStream};

    fn open(path: &Path) -> OwnedFd {
        rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap()
    }

    fn verdict(path: &Path) -> Option<(PathBuf, Unsafe)> {
        check_dir(&open(path), path).unwrap()
    }

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_private_directory_under_tmp_is_safe_a_world_writable_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        assert_eq!(verdict(&sub), None);
        chmod(dir.path(), 0o777);
        let real = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(verdict(&sub), Some((real, Unsafe::Writable(0o777))));
        chmod(dir.path(), 0o1777); // sticky, as /tmp
        assert_eq!(verdict(&sub), None);
        chmod(&sub, 0o770);
        let real = std::fs::canonicalize(&sub).unwrap();
        assert_eq!(verdict(&sub), Some((real, Unsafe::Writable(0o770))));
    }

    #[test]
    fn a_directory_of_another_user_is_unsafe_even_through_a_symlink() {
        if !rustix::process::geteuid().is_root() {
            return; // chown needs root
        }
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(1001), Some(1001)).unwrap();
        let ours = theirs.join("ours");
        std::fs::create_dir(&ours).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&ours, &link).unwrap();
        let real = std::fs::canonicalize(&theirs).unwrap();
        for path in [&ours, &link] {
            assert_eq!(verdict(path), Some((real.clone(), Unsafe::Owner(1001))));
        }
    }

    #[test]
    fn a_server_of_ours_is_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let _l = UnixListener::bind(&path).unwrap();
        let c = UnixStream::connect(&path).unwrap();
        check_server(&c, &path).unwrap();
        let e = UntrustedServer {
            path: path.clone(),
            uid: 1001,
            me: 0,
        };
        assert_eq!(
            e.to_string(),
            format!(
                "{} is served by uid 1001, neither root nor you (uid 0): not talking to it; \
                 is another user's socket at that path?",
                path.display()
            )
        );
    }
}
