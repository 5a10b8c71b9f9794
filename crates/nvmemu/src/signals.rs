// SPDX-License-Identifier: Apache-2.0
//! SIGINT and SIGTERM during `nvmemu bench`: the first one stops the run (the jobs end as
//! if their runtime were up, and the partial report is printed); later ones are absorbed,
//! so GNU `timeout`, which signals the child and its group, cannot cut the report short.
//! If the run has not ended [`STOP_GRACE`] after the first signal (a server that stopped
//! answering, say), the process says so in one line, removes the temporary directories
//! registered with [`remove_on_forced_exit`] and exits with 128 + the signal number.
//! A run that a signal stopped fails with [`Interrupted`] once its report is out, so
//! scripts can tell it from a complete run (fio exits with 128 then).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// How long a stop may take before the process exits anyway.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// fio's exit status for a run stopped by SIGINT or SIGTERM.
pub const INTERRUPTED_EXIT: i32 = 128;

/// The signal that stopped the run, 0 for none.
static STOPPED_BY: AtomicI32 = AtomicI32::new(0);

/// The run was stopped by a signal before it completed.
#[derive(Debug, thiserror::Error)]
#[error("{name} stopped the run before it completed; the report covers it until then")]
pub struct Interrupted {
    /// The signal's name.
    pub name: &'static str,
}

/// `Err(Interrupted)` if a signal stopped the run.
pub fn check_interrupted() -> Result<(), Interrupted> {
    match STOPPED_BY.load(Ordering::Relaxed) {
        0 => Ok(()),
        sig => Err(Interrupted { name: name(sig) }),
    }
}

/// Directories a forced exit removes (the in-process target's socket directories).
static TEMP_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes `dir` (recursively) should the process exit because a stop got stuck.
pub fn remove_on_forced_exit(dir: &Path) {
    if let Ok(mut dirs) = TEMP_DIRS.lock() {
        dirs.push(dir.to_path_buf());
    }
}

/// `dir` was removed in the normal way; a forced exit need not touch it.
pub fn forget(dir: &Path) {
    if let Ok(mut dirs) = TEMP_DIRS.lock() {
        dirs.retain(|d| d != dir);
    }
}

fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// Sets `stop` on the first SIGINT/SIGTERM, absorbs the rest, and ends the process if the
/// stop takes longer than [`STOP_GRACE`].
pub fn install(stop: &Arc<AtomicBool>) -> Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM]).context("cannot install signal handlers")?;
    let stop = Arc::clone(stop);
    std::thread::Builder::new()
        .name("nvmemu-signals".into())
        .spawn(move || {
            let mut first = true;
            for sig in signals.forever() {
                if !first {
                    continue; // absorbed: the stop is under way
                }
                first = false;
                STOPPED_BY.store(sig, Ordering::Relaxed);
                // Relaxed: the jobs poll the flag; nothing else is published with it.
                stop.store(true, Ordering::Relaxed);
                nvmemu::say!("nvmemu: {}: stopping the run", name(sig));
                let _ = std::thread::Builder::new()
                    .name("nvmemu-stop-grace".into())
                    .spawn(move || {
                        std::thread::sleep(STOP_GRACE);
                        force_exit(sig);
                    });
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

fn force_exit(sig: i32) -> ! {
    nvmemu::say!(
        "nvmemu: the run did not stop within {} s of {} (is the server answering?); exiting",
        STOP_GRACE.as_secs(),
        name(sig)
    );
    let dirs = TEMP_DIRS.lock().map(|d| d.clone()).unwrap_or_default();
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    std::process::exit(128 + sig)
}
