// SPDX-License-Identifier: Apache-2.0
//! The options that reach an NVMe/TCP target (`--tcp`, `--subnqn`, `--hostnqn`, digests),
//! shared by `identify` and `bench`, and the connect that uses them.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Result, anyhow};
use nvmemu_tcp::initiator::{HostController, HostIdentity, HostOptions};

use nvmemu::error_chain;

/// The host NQN used when neither `--hostnqn` nor `/etc/nvme/hostnqn` gives one.
const DEFAULT_HOSTNQN: &str = "nqn.2019-07.io.nvmemu:host";
/// Keep Alive Timeout for a short session such as `identify` (Linux's default too).
pub const KATO: Duration = Duration::from_secs(5);

/// Where an NVMe/TCP target is and who the host is.
#[derive(Debug, Clone, clap::Args)]
pub struct TcpHostArgs {
    /// The NVMe/TCP target at ADDR (nvmemu serve --tcp, SPDK's nvmf_tgt), e.g. 127.0.0.1:4420.
    #[arg(long = "tcp", value_name = "ADDR", requires = "subnqn")]
    pub tcp: Option<SocketAddr>,
    /// The subsystem to connect to over --tcp.
    #[arg(long, value_name = "NQN", requires = "tcp")]
    pub subnqn: Option<String>,
    /// The host NQN to connect as (default: /etc/nvme/hostnqn, else nqn.2019-07.io.nvmemu:host).
    #[arg(long, value_name = "NQN", requires = "tcp")]
    pub hostnqn: Option<String>,
    /// Ask for header digests (CRC32C) over --tcp.
    #[arg(long = "hdr-digest", requires = "tcp")]
    pub hdr_digest: bool,
    /// Ask for data digests (CRC32C) over --tcp.
    #[arg(long = "data-digest", requires = "tcp")]
    pub data_digest: bool,
}

impl TcpHostArgs {
    fn hostnqn(&self) -> String {
        if let Some(n) = &self.hostnqn {
            return n.clone();
        }
        std::fs::read_to_string("/etc/nvme/hostnqn")
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| DEFAULT_HOSTNQN.to_owned())
    }

    /// Connect and enable the controller at `addr` (`--tcp`), asking for Keep Alive
    /// Timeout `kato` (zero: none).
    pub fn connect(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        max_transfer: usize,
        kato: Duration,
    ) -> Result<HostController> {
        let subnqn = self.subnqn.as_deref().unwrap_or_default();
        let hostnqn = self.hostnqn();
        let host = HostIdentity {
            hostid: host_id(&hostnqn),
            hostnqn,
        };
        let opts = HostOptions {
            hdgst: self.hdr_digest,
            ddgst: self.data_digest,
            timeout,
            max_transfer,
        };
        HostController::connect(addr, subnqn, host, kato, opts).map_err(|e| {
            anyhow!(
                "cannot connect to {subnqn} at {addr} over NVMe/TCP: {}{}",
                error_chain(&e),
                " (is the target listening, and does the subsystem allow this host NQN?)"
            )
        })
    }
}

/// The Host ID for `hostnqn`: the UUID of a `...:uuid:` NQN (as nvme-cli pairs them), else
/// the NQN's bytes folded into 16 (never all zero: targets refuse that).
fn host_id(hostnqn: &str) -> [u8; 16] {
    let mut id = [0u8; 16];
    let hex: Vec<u8> = hostnqn
        .rsplit_once("uuid:")
        .map(|(_, u)| u.bytes().filter(u8::is_ascii_hexdigit).collect())
        .unwrap_or_default();
    if hex.len() == 32 {
        for (i, pair) in hex.chunks(2).enumerate() {
            let digits = std::str::from_utf8(pair).unwrap_or("0");
            id[i] = u8::from_str_radix(digits, 16).unwrap_or(0);
        }
    } else {
        for (i, b) in hostnqn.bytes().enumerate() {
            id[i % 16] = id[i % 16].rotate_left(3) ^ b;
        }
    }
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::host_id;

    #[test]
    fn a_uuid_nqn_gives_its_uuid_and_any_other_a_nonzero_id() {
        let id = host_id("nqn.2014-08.org.nvmexpress:uuid:00112233-4455-6677-8899-aabbccddeeff");
        assert_eq!(
            id,
            [
                0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
                0xee, 0xff
            ]
        );
        assert_ne!(host_id("nqn.2019-07.io.nvmemu:host"), [0; 16]);
        assert_ne!(host_id(""), [0; 16]);
    }
}
