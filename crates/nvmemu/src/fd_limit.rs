// SPDX-License-Identifier: Apache-2.0
//! The open file limit `serve` needs: every NVMe/TCP connection is a descriptor, and a
//! soft RLIMIT_NOFILE of 1024 (a common default) would make accept(2) fail long before
//! the transport's connection limit. Raised at start-up as far as the hard limit allows.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Descriptors kept for everything but connections: sockets, eventfds, memfds, files.
const RESERVE: u64 = 1024;

/// Raise the soft limit so that `connections` connections fit beside [`RESERVE`], up to
/// the hard limit; one log line says what changed or what is missing.
pub(crate) fn raise_for(connections: usize) {
    let want = (connections as u64).saturating_add(RESERVE);
    let cur = getrlimit(Resource::Nofile);
    let soft = cur.current.unwrap_or(u64::MAX);
    if soft >= want {
        return;
    }
    let hard = cur.maximum.unwrap_or(u64::MAX);
    let target = want.min(hard);
    if target > soft
        && setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(target),
                maximum: cur.maximum,
            },
        )
        .is_ok()
    {
        tracing::info!(
            from = soft,
            to = target,
            "raised the open file limit (RLIMIT_NOFILE) for NVMe/TCP connections"
        );
    }
    if target < want {
        tracing::warn!(
            limit = target,
            connections,
            "the open file limit (hard RLIMIT_NOFILE) is below what the NVMe/TCP connection \
             limit needs: accepts fail beyond about {} connections; raise it with ulimit -Hn \
             or LimitNOFILE=",
            target.saturating_sub(RESERVE)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_towards_the_hard_one() {
        let before = getrlimit(Resource::Nofile);
        let hard = before.maximum.unwrap_or(u64::MAX);
        let low = hard.min(RESERVE + 16);
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(low),
                maximum: before.maximum,
            },
        )
        .unwrap();
        raise_for(64);
        let after = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        assert_eq!(after, hard.min(64 + RESERVE).max(low));
        setrlimit(Resource::Nofile, before).unwrap();
    }
}
