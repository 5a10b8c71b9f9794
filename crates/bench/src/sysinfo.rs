// SPDX-License-Identifier: Apache-2.0
//! The machine and the calling thread: CPU model, online CPUs, pinning, and
//! per-thread CPU time / context switches / faults (fio's `cpu :` line), read
//! from procfs at job start and end only.

use std::fs;

/// CPU time, context switches and page faults of one thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadUsage {
    /// User CPU time, ms.
    pub usr_ms: u64,
    /// System CPU time, ms.
    pub sys_ms: u64,
    /// Voluntary plus involuntary context switches.
    pub ctx: u64,
    /// Major faults.
    pub majf: u64,
    /// Minor faults.
    pub minf: u64,
}

impl ThreadUsage {
    /// The usage accumulated between `start` and `self`.
    pub fn since(&self, start: &ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            usr_ms: self.usr_ms.saturating_sub(start.usr_ms),
            sys_ms: self.sys_ms.saturating_sub(start.sys_ms),
            ctx: self.ctx.saturating_sub(start.ctx),
            majf: self.majf.saturating_sub(start.majf),
            minf: self.minf.saturating_sub(start.minf),
        }
    }

    /// Sums two usages (group totals).
    pub fn add(&mut self, o: &ThreadUsage) {
        self.usr_ms += o.usr_ms;
        self.sys_ms += o.sys_ms;
        self.ctx += o.ctx;
        self.majf += o.majf;
        self.minf += o.minf;
    }
}

/// Parses `/proc/<pid>/task/<tid>/stat` text: fields after the `comm` field.
pub fn parse_stat(text: &str, ticks_per_sec: u64) -> Option<ThreadUsage> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state(3) ppid pgrp session tty tpgid flags minflt(10) cminflt majflt(12) cmajflt utime(14) stime(15)
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let to_ms = |t: u64| t * 1000 / ticks_per_sec.max(1);
    Some(ThreadUsage {
        usr_ms: to_ms(field(14)?),
        sys_ms: to_ms(field(15)?),
        ctx: 0,
        majf: field(12)?,
        minf: field(10)?,
    })
}

fn parse_ctx(status: &str) -> u64 {
    status
        .lines()
        .filter(|l| {
            l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches")
        })
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<u64>().ok())
        .sum()
}

/// Usage of the calling thread so far (zeros where procfs is unavailable).
pub fn thread_usage() -> ThreadUsage {
    let ticks = rustix::param::clock_ticks_per_second();
    let mut u = fs::read_to_string("/proc/thread-self/stat")
        .ok()
        .and_then(|t| parse_stat(&t, ticks))
        .unwrap_or_default();
    u.ctx = fs::read_to_string("/proc/thread-self/status")
        .map(|s| parse_ctx(&s))
        .unwrap_or(0);
    u
}

/// Pins the calling thread to one CPU.
pub fn pin_to(cpu: usize) -> rustix::io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)
}

/// The first `model name` in `/proc/cpuinfo` text.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// The CPU model name, or "unknown".
pub fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| parse_cpu_model(&t))
        .unwrap_or_else(|| "unknown".into())
}

/// Number of online CPUs.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .max(
            fs::read_to_string("/sys/devices/system/cpu/online")
                .ok()
                .and_then(|s| crate::option_values::parse_cpu_list(s.trim()).ok())
                .map(|v| v.len())
                .unwrap_or(0),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_comm() {
        let text = "1234 (bench job) R 1 2 3 0 -1 4194304 77 0 5 0 250 30 0 0 20 0 1 0 100 0 0";
        let u = parse_stat(text, 100).unwrap();
        assert_eq!(
            u,
            ThreadUsage {
                usr_ms: 2500,
                sys_ms: 300,
                ctx: 0,
                majf: 5,
                minf: 77
            }
        );
    }

    #[test]
    fn ctx_sums_both_kinds() {
        assert_eq!(
            parse_ctx("Name:\tx\nvoluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t3\n"),
            13
        );
    }

    #[test]
    fn cpu_model_from_cpuinfo() {
        let t = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n";
        assert_eq!(
            parse_cpu_model(t).as_deref(),
            Some("Intel(R) Xeon(R) CPU @ 2.20GHz")
        );
    }
}
