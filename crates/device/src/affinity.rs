// SPDX-License-Identifier: Apache-2.0
//! SPDK-style core masks (`-m 0x2`, `-m [0,2-3]`) and thread pinning.

/// Why a core mask was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CoreMaskError {
    /// The text is neither a hex mask nor a bracketed list.
    #[error("core mask '{0}' is not a hex mask like 0x2 or a list like [0,2-3]")]
    Syntax(String),
    /// The mask names no core.
    #[error("core mask '{0}' selects no core")]
    Empty(String),
    /// A core beyond what this machine has.
    #[error("core {core} in mask '{mask}' does not exist (this machine has {online} CPUs)")]
    NoSuchCore {
        /// The mask as given.
        mask: String,
        /// The offending core.
        core: usize,
        /// Online CPUs.
        online: usize,
    },
}

/// Parse a core mask into ascending core numbers, checked against the CPUs online.
pub fn parse_core_mask(mask: &str) -> Result<Vec<usize>, CoreMaskError> {
    let syntax = || CoreMaskError::Syntax(mask.to_owned());
    let text = mask.trim();
    let mut cores = Vec::new();
    if let Some(list) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        cores = parse_cpu_list(list).ok_or_else(syntax)?;
    } else {
        let hex = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))
            .unwrap_or(text);
        if hex.is_empty() || hex.len() > 32 {
            return Err(syntax());
        }
        let bits = u128::from_str_radix(hex, 16).map_err(|_| syntax())?;
        cores.extend((0..128).filter(|i| bits & (1u128 << i) != 0));
    }
    cores.sort_unstable();
    cores.dedup();
    if cores.is_empty() {
        return Err(CoreMaskError::Empty(mask.to_owned()));
    }
    let online = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if let Some(&core) = cores.iter().find(|&&c| c >= online) {
        return Err(CoreMaskError::NoSuchCore {
            mask: mask.to_owned(),
            core,
            online,
        });
    }
    Ok(cores)
}

/// A kernel-style CPU list (`0-3,8,10-11`, as in sysfs `cpulist` files) in the order
/// written; `None` when it is not one (or names a CPU from 1024 up). Empty text is empty.
pub fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
            None => (part.parse::<usize>(), part.parse::<usize>()),
        };
        let (lo, hi) = (lo.ok()?, hi.ok()?);
        if lo > hi || hi >= 1024 {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    Some(cpus)
}

/// Pin the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_lists_parse() {
        assert_eq!(parse_core_mask("0x1").unwrap(), vec![0]);
        assert_eq!(parse_core_mask("1").unwrap(), vec![0]);
        assert_eq!(parse_core_mask("[0]").unwrap(), vec![0]);
        assert!(matches!(
            parse_core_mask("0x0"),
            Err(CoreMaskError::Empty(_))
        ));
        assert!(matches!(
            parse_core_mask("zz"),
            Err(CoreMaskError::Syntax(_))
        ));
        assert!(matches!(
            parse_core_mask("[3-1]"),
            Err(CoreMaskError::Syntax(_))
        ));
        assert!(matches!(
            parse_core_mask("0x8000"),
            Err(CoreMaskError::NoSuchCore { core: 15, .. })
        ));
    }
}
