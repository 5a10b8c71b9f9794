// SPDX-License-Identifier: Apache-2.0
//! CPU time of the pollers for `framework_get_reactors`' `usr`, `sys` and `irq` (SPDK reports
//! the same three counters per reactor), from procfs, in clock ticks (`USER_HZ`):
//! - `usr`, `sys`: the poller thread's `utime` and `stime` (`/proc/self/task/TID/stat`);
//! - `irq`: hardware-interrupt time of the reactor's core (`/proc/stat`, line `cpuN`).
//!
//! Each value is 0 when procfs does not have it (no thread id yet, an unpinned core).

use std::fs;

/// The three counters of one reactor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CpuTime {
    pub(crate) usr: u64,
    pub(crate) sys: u64,
    pub(crate) irq: u64,
}

/// The counters of thread `tid` of this process, running on `core`.
pub(crate) fn of_thread(tid: Option<u32>, core: usize) -> CpuTime {
    let (usr, sys) = tid
        .and_then(|t| fs::read_to_string(format!("/proc/self/task/{t}/stat")).ok())
        .and_then(|s| thread_times(&s))
        .unwrap_or_default();
    let irq = fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| core_irq(&s, core))
        .unwrap_or(0);
    CpuTime { usr, sys, irq }
}

/// `(utime, stime)` of a `/proc/PID/task/TID/stat` line: fields 14 and 15 (proc(5)),
/// counted after the command name, which is in parentheses and may itself hold spaces or
/// parentheses (so the last `)` ends it).
fn thread_times(stat: &str) -> Option<(u64, u64)> {
    let rest = stat.get(stat.rfind(')')?.checked_add(1)?..)?;
    let mut fields = rest.split_ascii_whitespace().skip(11); // state is field 3
    let utime = fields.next()?.parse().ok()?;
    let stime = fields.next()?.parse().ok()?;
    Some((utime, stime))
}

/// The `irq` column (the 6th number) of the `cpuN` line of `/proc/stat`.
fn core_irq(proc_stat: &str, core: usize) -> Option<u64> {
    let label = format!("cpu{core}");
    let line = proc_stat
        .lines()
        .find(|l| l.split_ascii_whitespace().next() == Some(label.as_str()))?;
    line.split_ascii_whitespace().nth(6)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_times_skip_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (nvmemu (x) 1) R 1 4242 4242 0 -1 4194368 7 0 0 0 9797 304 0 0 20 0 3 0";
        assert_eq!(thread_times(stat), Some((9797, 304)));
        assert_eq!(thread_times("4242 (short) R 1 2"), None);
        assert_eq!(thread_times("no parenthesis"), None);
    }

    #[test]
    fn core_irq_reads_the_cores_own_line() {
        let stat = "cpu  50228 0 5593 323695 205 9 32 31 0 0\n\
                    cpu0 28514 0 2218 159373 27 5 5 13 0 0\n\
                    cpu1 21714 0 3375 164322 177 4 27 18 0 0\n\
                    cpu10 1 0 1 1 1 77 1 1 0 0\n";
        assert_eq!(core_irq(stat, 0), Some(5));
        assert_eq!(core_irq(stat, 1), Some(4));
        assert_eq!(core_irq(stat, 10), Some(77));
        assert_eq!(core_irq(stat, 2), None);
    }

    #[test]
    fn this_threads_times_are_read_from_procfs() {
        let tid = u32::try_from(rustix::thread::gettid().as_raw_nonzero().get()).unwrap();
        // Burn CPU until the thread has run for a few ticks of its own time (wall time
        // would not do: on a loaded machine the thread may hardly run meanwhile).
        let ran = || {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
            let secs = u64::try_from(t.tv_sec).unwrap();
            std::time::Duration::new(secs, u32::try_from(t.tv_nsec).unwrap())
        };
        let mut x = 0u64;
        while ran() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let t = of_thread(Some(tid), 0);
        assert!(t.usr + t.sys > 0, "{t:?}");
        assert_eq!(of_thread(None, usize::MAX), CpuTime::default());
    }
}
