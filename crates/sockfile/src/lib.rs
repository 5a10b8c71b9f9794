// SPDX-License-Identifier: Apache-2.0
//! nvmemu-sockfile: listening UNIX socket files that have their final mode (and group) from
//! the moment they appear at their path, for the vfio-user `<dir>/cntrl` sockets and the
//! JSON-RPC socket; and blocking on such a socket until it is ready, the server is stopped
//! ([`StopHandle`]) or a deadline passes ([`wait`]).
//!
//! **Owns:** creating, checking and removing those socket files; the servers' stop signal and
//! their socket waits. **Depends on:** no internal crate (the design note in
//! `docs/architecture.md`, "Local access", says why this is a crate: `nvmemu-vfio-user` and
//! `nvmemu-rpc` both need it and may not depend on each other).
//! **Never:** changes the mode of a path that someone else can swap, replaces a file it did
//! not create, or uses `unsafe`.
//!
//! # How [`bind`] works
//!
//! `bind(2)` creates the socket file with the process umask, so setting the mode takes a
//! second step; done on the final path (bind, then chmod), that step follows whatever is there
//! by then, e.g. a symlink to a file the server's user owns. Setting the umask around `bind`
//! is process-wide and would race with other threads creating files. Instead:
//!
//! 1. The parent directory is opened once; everything else is relative to that fd. It and
//!    every directory above it must belong to root or us and be writable by nobody else
//!    unless sticky ([`BindError::UnsafeDir`]), or another user could swap the socket later.
//! 2. What is at the final name is checked: nothing is fine; a socket of ours that nobody
//!    accepts on (stale, left by a crash) is removed; a live socket, someone else's socket or
//!    any other file is an error ([`BindError`]), left untouched.
//! 3. A private directory (mode 0700, ours, checked through its fd) is made beside it, and the
//!    socket is bound inside it through `/proc/self/fd/N/`, so no path lookup can be
//!    redirected. Group and mode are set there, where nobody else can reach the file.
//!    (The socket's own address, as `getsockname` and `ss -x` show it, is that
//!    `/proc/self/fd/N/s` path; clients connect by the final path.)
//! 4. The socket is hard-linked to its final name, which fails if anything appeared there
//!    meanwhile (nothing is ever replaced), and the private name and directory are removed.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod stop;
mod trust;

pub use stop::{StopHandle, Wake, peer_gone, wait};
pub use trust::{Unsafe, UntrustedServer, check_server};

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

/// Who may connect: the socket file's permission bits and, optionally, its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// Permission bits (at most 0o777), e.g. 0o600.
    pub mode: u32,
    /// Group to give the file (the server must be a member, or root).
    pub gid: Option<u32>,
}

impl Access {
    /// Owner only: 0600.
    pub const OWNER: Access = Access {
        mode: 0o600,
        gid: None,
    };
}

/// Why a socket file could not be created.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// A server is accepting connections on the path.
    #[error(
        "{} is in use: a server is listening on it (stop that server or choose another path)",
        path.display()
    )]
    InUse {
        /// The socket path.
        path: PathBuf,
    },
    /// A socket of another user is at the path (live or not, it is not ours to replace).
    #[error("{} is a socket of another user (uid {owner})", path.display())]
    NotOurs {
        /// The socket path.
        path: PathBuf,
        /// Its owner.
        owner: u32,
    },
    /// Something other than a socket is at the path.
    #[error("{} exists and is not a socket", path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// The socket's directory, or one above it, can be changed by another user, who could
    /// then rename the socket aside and bind their own in its place.
    #[error(
        "{} {why}: another user could replace the socket {}; use a directory that only root \
         and you can write",
        dir.display(),
        path.display()
    )]
    UnsafeDir {
        /// The socket path.
        path: PathBuf,
        /// The directory at fault.
        dir: PathBuf,
        /// What is wrong with it.
        why: Unsafe,
    },
    /// The mode has bits beyond 0o777.
    #[error("socket mode {mode:#o} is not a permission mode")]
    BadMode {
        /// The mode asked for.
        mode: u32,
    },
    /// The group id is -1, which means "no change" to the kernel.
    #[error("group id {gid} is not a group")]
    BadGroup {
        /// The group id asked for.
        gid: u32,
    },
    /// A system call failed.
    #[error("cannot {op} for socket {}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The socket path.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl From<BindError> for io::Error {
    fn from(e: BindError) -> io::Error {
        let kind = match &e {
            BindError::InUse { .. } => io::ErrorKind::AddrInUse,
            BindError::NotOurs { .. } | BindError::NotASocket { .. } => {
                io::ErrorKind::AlreadyExists
            }
            BindError::BadMode { .. } | BindError::BadGroup { .. } => io::ErrorKind::InvalidInput,
            BindError::UnsafeDir { .. } => io::ErrorKind::PermissionDenied,
            BindError::Io { source, .. } => source.kind(),
        };
        io::Error::new(kind, e)
    }
}

/// A socket file this process created. Dropping it removes the file, if the path still
/// names the same file (so a successor's socket at the same path is left alone).
pub struct SocketFile {
    path: PathBuf,
    /// Identity of the file we created.
    identity: Identity,
}

impl fmt::Debug for SocketFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SocketFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SocketFile {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = rustix::fs::lstat(&self.path)
            .ok()
            .is_some_and(|st| identity(&st) == self.identity);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Binds a listening UNIX socket at `path` whose file has `access` from the moment it
/// appears there (see the crate docs). The listener is blocking.
pub fn bind(path: &Path, access: Access) -> Result<(UnixListener, SocketFile), BindError> {
    if access.mode & !0o777 != 0 {
        return Err(BindError::BadMode { mode: access.mode });
    }
    if let Some(gid @ u32::MAX) = access.gid {
        return Err(BindError::BadGroup { gid });
    }
    let io_err = |op: &'static str| {
        let path = path.to_path_buf();
        move |e: Errno| BindError::Io {
            op,
            path,
            source: e.into(),
        }
    };
    let (dir, name) = open_parent(path)?;
    clear_the_way(&dir, name, path)?;
    let private = PrivateDir::create(&dir, name).map_err(io_err("make a private directory"))?;
    let inner = format!("/proc/self/fd/{}/s", private.fd.as_raw_fd());
    let listener = UnixListener::bind(&inner).map_err(|e| BindError::Io {
        op: "bind",
        path: path.to_path_buf(),
        source: e,
    })?;
    if let Some(gid) = access.gid {
        rustix::fs::chownat(
            &private.fd,
            "s",
            None,
            Some(rustix::fs::Gid::from_raw(gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(io_err("set the group"))?;
    }
    rustix::fs::chmodat(
        &private.fd,
        "s",
        Mode::from_raw_mode(access.mode),
        AtFlags::empty(),
    )
    .map_err(io_err("set the mode"))?;
    match rustix::fs::linkat(&private.fd, "s", &dir, name, AtFlags::empty()) {
        Ok(()) => {}
        Err(Errno::EXIST) => {
            // Something appeared since the check: say what, and replace nothing.
            return Err(match occupant(&dir, name, path) {
                Err(e) => e,
                Ok(_) => BindError::InUse {
                    path: path.to_path_buf(),
                },
            });
        }
        Err(e) => return Err(io_err("link it into place")(e)),
    }
    // The private name goes first: unlinking it changes the inode's ctime, which is part
    // of the identity taken next.
    drop(private);
    let st =
        rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(io_err("stat it"))?;
    Ok((
        listener,
        SocketFile {
            path: path.to_path_buf(),
            identity: identity(&st),
        },
    ))
}

/// Whether [`bind`] could create a socket at `path` now: `Ok` if nothing is there or a
/// stale socket of ours (which `bind` would replace), else the error `bind` would give.
/// Lets a program refuse a taken path before doing slow work; `bind` checks again.
pub fn check(path: &Path) -> Result<(), BindError> {
    let (dir, name) = open_parent(path)?;
    occupant(&dir, name, path).map(drop)
}

/// The opened parent directory of `path`, and the file name in it; an error if that
/// directory, or one above it, is not safe from other users (see `trust.rs`).
fn open_parent(path: &Path) -> Result<(OwnedFd, &OsStr), BindError> {
    let name = path.file_name().ok_or_else(|| BindError::Io {
        op: "name the socket file",
        path: path.to_path_buf(),
        source: io::ErrorKind::InvalidInput.into(),
    })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = rustix::fs::open(
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| BindError::Io {
        op: "open its directory",
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    match trust::check_dir(&dir, parent) {
        Ok(None) => Ok((dir, name)),
        Ok(Some((at, why))) => Err(BindError::UnsafeDir {
            path: path.to_path_buf(),
            dir: at,
            why,
        }),
        Err(source) => Err(BindError::Io {
            op: "check the directories above",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// What tells our file from a successor's at the same path: device and inode (which a
/// file system may reuse at once) and the inode's change time.
fn identity(st: &Stat) -> Identity {
    (st.st_dev, st.st_ino, st.st_ctime, st.st_ctime_nsec)
}

type Identity = (u64, u64, i64, u64);

/// What is at the socket's final name.
#[derive(Debug, PartialEq, Eq)]
enum Occupant {
    /// Nothing.
    Nothing,
    /// A socket of ours that nobody accepts on.
    StaleSocket,
}

/// Step 2: what is at `name`; an error for anything that must not be replaced.
fn occupant(dir: &OwnedFd, name: &OsStr, path: &Path) -> Result<Occupant, BindError> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(Occupant::Nothing),
        Err(e) => {
            return Err(BindError::Io {
                op: "stat the existing file",
                path: path.to_path_buf(),
                source: e.into(),
            });
        }
    };
    let path = path.to_path_buf();
    if FileType::from_raw_mode(st.st_mode) != FileType::Socket {
        return Err(BindError::NotASocket { path });
    }
    if st.st_uid != rustix::process::geteuid().as_raw() {
        return Err(BindError::NotOurs {
            path,
            owner: st.st_uid,
        });
    }
    match UnixStream::connect(&path) {
        Ok(_) => Err(BindError::InUse { path }),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(Occupant::StaleSocket),
        Err(source) => Err(BindError::Io {
            op: "probe the existing socket",
            path,
            source,
        }),
    }
}

/// Removes a stale socket of ours at `name`, or says why the name is taken.
fn clear_the_way(dir: &OwnedFd, name: &OsStr, path: &Path) -> Result<(), BindError> {
    if occupant(dir, name, path)? == Occupant::StaleSocket {
        match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => {
                return Err(BindError::Io {
                    op: "remove the stale socket",
                    path: path.to_path_buf(),
                    source: e.into(),
                });
            }
        }
    }
    Ok(())
}

/// Step 3: a directory only we can reach, removed (with the socket's private name) on drop.
struct PrivateDir<'a> {
    parent: &'a OwnedFd,
    name: String,
    fd: OwnedFd,
}

impl<'a> PrivateDir<'a> {
    fn create(parent: &'a OwnedFd, socket_name: &OsStr) -> Result<Self, Errno> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let stem: String = String::from_utf8_lossy(socket_name.as_bytes())
            .chars()
            .take(32)
            .collect();
        let pid = rustix::process::getpid().as_raw_nonzero();
        let mut tries = 0;
        loop {
            let n = SEQ.fetch_add(1, Ordering::Relaxed);
            let name = format!(".{stem}.{pid}.{n}");
            match rustix::fs::mkdirat(parent, name.as_str(), Mode::RWXU) {
                Ok(()) => {
                    let fd = rustix::fs::openat(
                        parent,
                        name.as_str(),
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )?;
                    let dir = PrivateDir { parent, name, fd };
                    // The umask may have taken owner bits away; and the directory must be the
                    // one we made (ours), not one swapped in between mkdir and open.
                    let st = rustix::fs::fstat(&dir.fd)?;
                    if st.st_uid != rustix::process::geteuid().as_raw() {
                        return Err(Errno::PERM);
                    }
                    rustix::fs::fchmod(&dir.fd, Mode::RWXU)?;
                    return Ok(dir);
                }
                Err(Errno::EXIST) if tries < 64 => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for PrivateDir<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::unlinkat(&self.fd, "s", AtFlags::empty());
        let _ = rustix::fs::unlinkat(self.parent, self.name.as_str(), AtFlags::REMOVEDIR);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn mode_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn group_is_set_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.sock");
        let gid = rustix::process::getegid().as_raw();
        let (_l, _f) = bind(
            &path,
            Access {
                mode: 0o660,
                gid: Some(gid),
            },
        )
        .unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!((meta.gid(), meta.mode() & 0o777), (gid, 0o660));
    }

    #[test]
    fn live_socket_other_files_and_symlinks_are_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("live");
        let (_l, _f) = bind(&live, Access::OWNER).unwrap();
        assert!(matches!(
            bind(&live, Access::OWNER),
            Err(BindError::InUse { .. })
        ));
        assert!(UnixStream::connect(&live).is_ok());
        let file = dir.path().join("file");
        std::fs::write(&file, b"keep").unwrap();
        let err = bind(&file, Access::OWNER).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{} exists and is not a socket", file.display())
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"keep");
        // A symlink at the path (e.g. to a file the server's user owns) is not followed.
        let target = dir.path().join("precious");
        std::fs::write(&target, b"x").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(
            bind(
                &link,
                Access {
                    mode: 0o666,
                    gid: None
                }
            ),
            Err(BindError::NotASocket { .. })
        ));
        assert_eq!(mode_of(&target), 0o600);
        assert_eq!(
            io::Error::from(bind(&live, Access::OWNER).unwrap_err()).kind(),
            io::ErrorKind::AddrInUse
        );
    }

    #[test]
    fn stale_socket_of_ours_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stale");
        drop(UnixListener::bind(&path).unwrap());
        let (l, _f) = bind(&path, Access::OWNER).unwrap();
        let _c = UnixStream::connect(&path).unwrap();
        assert!(l.accept().is_ok());
        assert_eq!(mode_of(&path), 0o600);
    }

    #[test]
    fn drop_leaves_a_successors_socket_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let (l, first) = bind(&path, Access::OWNER).unwrap();
        drop(l);
        // The file is stale now; a successor replaces it, then the first owner lets go.
        let (_l2, _second) = bind(&path, Access::OWNER).unwrap();
        drop(first);
        assert!(UnixStream::connect(&path).is_ok());
    }

    #[test]
    fn stale_socket_of_another_user_is_not_replaced() {
        if !rustix::process::geteuid().is_root() {
            return; // only root can make a file of another user
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("theirs");
        drop(UnixListener::bind(&path).unwrap());
        std::os::unix::fs::lchown(&path, Some(65534), None).unwrap();
        let err = bind(&path, Access::OWNER).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{} is a socket of another user (uid 65534)", path.display())
        );
        assert!(std::fs::symlink_metadata(&path).is_ok());
    }

    #[test]
    fn a_directory_another_user_owns_is_refused() {
        if !rustix::process::geteuid().is_root() {
            return; // chown needs root
        }
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(dir.path(), Some(1001), Some(1001)).unwrap();
        let path = dir.path().join("s");
        let err = bind(&path, Access::OWNER).unwrap_err();
        let want = format!(
            "{} is owned by uid 1001, neither root nor you: another user could replace the \
             socket {}; use a directory that only root and you can write",
            dir.path().display(),
            path.display()
        );
        assert_eq!(err.to_string(), want);
        assert!(matches!(check(&path), Err(BindError::UnsafeDir { .. })));
        assert!(!path.exists());
    }

    #[test]
    fn bad_mode_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = bind(
            &dir.path().join("m"),
            Access {
                mode: 0o4700,
                gid: None,
            },
        )
        .unwrap_err();
        assert!(matches!(err, BindError::BadMode { mode: 0o4700 }));
    }
}
