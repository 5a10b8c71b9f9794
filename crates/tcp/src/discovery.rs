// SPDX-License-Identifier: Apache-2.0
//! The discovery controller (NVMe over Fabrics 1.1, 5): a Connect to
//! `nqn.2014-08.org.nvmexpress.discovery` gets a controller that answers Identify (CNTRLTYPE
//! discovery) and the Discovery log page: one entry per subsystem the host may use and TCP
//! listener it is reachable on. It has no queues and no namespaces, so it lives here rather
//! than in `ctrl`; its few commands are answered at once.

use std::net::SocketAddr;

use nvmemu_spec::identify::{IdentifyController, ascii_field, ctrl_bits};
use nvmemu_spec::{Sqe, Status};
use zerocopy::{FromZeros, IntoBytes};

use crate::config::Subsystems;

/// The well-known discovery subsystem NQN.
pub const DISCOVERY_NQN: &str = "nqn.2014-08.org.nvmexpress.discovery";
/// Log page identifier of the Discovery log page.
const LID_DISCOVERY: u8 = 0x70;
/// Size of the log page header and of each entry.
const RECORD: usize = 1024;
/// Most entries listed: the whole page stays within [`MAX_DATA`].
const MAX_ENTRIES: usize = 63;
/// Most data one discovery command returns (bounds what a response needs in the send
/// buffer).
pub(crate) const MAX_DATA: usize = 64 * 1024;
/// CNTRLTYPE of a discovery controller.
const CNTRLTYPE_DISCOVERY: u8 = 2;
/// Entries of the queue the host may use (CAP.MQES + 1).
const QUEUE_ENTRIES: u16 = 32;

/// Register state of a discovery controller.
#[derive(Debug, Default)]
pub(crate) struct Discovery {
    cc: u32,
    hostnqn: String,
}

/// What an admin command on the discovery controller gets back.
#[derive(Debug)]
pub(crate) enum Answer {
    /// A completion with this status and DW0, after these data bytes (may be empty).
    Complete(Status, u32, Vec<u8>),
    /// No completion now (Asynchronous Event Request: none ever comes).
    Hold,
}

impl Discovery {
    pub(crate) fn new(hostnqn: String) -> Discovery {
        Discovery { cc: 0, hostnqn }
    }

    /// Property Get: CAP, VS, CC, CSTS.
    pub(crate) fn property_get(&self, offset: u32) -> Result<u64, Status> {
        let ready = u64::from(self.cc & 1);
        let shst = if (self.cc >> 14) & 3 != 0 { 2 << 2 } else { 0 };
        match offset {
            // MQES, CQR, TO = 15 s, CSS NVM.
            0x00 => Ok(u64::from(QUEUE_ENTRIES - 1) | (1 << 16) | (30 << 24) | (1 << 37)),
            0x08 => Ok(u64::from(nvmemu_spec::regs::VERSION_1_4)),
            0x14 => Ok(u64::from(self.cc)),
            0x1C => Ok(ready | shst),
            _ => Err(Status::INVALID_FIELD),
        }
    }

    /// Property Set: CC only.
    pub(crate) fn property_set(&mut self, offset: u32, value: u64) -> Status {
        if offset != 0x14 {
            return Status::INVALID_FIELD;
        }
        self.cc = u32::try_from(value & 0xFFFF_FFFF).unwrap_or(0);
        Status::SUCCESS
    }

    /// An admin command; `len` is the data length the host's SGL asks for.
    pub(crate) fn admin(&self, sqe: &Sqe, len: usize, subsystems: &Subsystems) -> Answer {
        if self.cc & 1 == 0 {
            return Answer::Complete(Status::COMMAND_SEQUENCE_ERROR, 0, Vec::new());
        }
        match sqe.opcode() {
            // Identify Controller.
            0x06 if sqe.cdw10 & 0xFF == 1 => {
                let id = identify();
                let mut data = id.as_bytes().to_vec();
                data.resize(len, 0);
                Answer::Complete(Status::SUCCESS, 0, data)
            }
            0x06 => Answer::Complete(Status::INVALID_FIELD, 0, Vec::new()),
            // Get Log Page.
            0x02 => {
                if sqe.cdw10 & 0xFF != u32::from(LID_DISCOVERY) {
                    return Answer::Complete(Status::INVALID_LOG_PAGE, 0, Vec::new());
                }
                let offset = u64::from(sqe.cdw12) | (u64::from(sqe.cdw13) << 32);
                let page = log_page(subsystems, &self.hostnqn);
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(page.len());
                let mut data = page.get(start..).unwrap_or_default().to_vec();
                data.resize(len, 0);
                Answer::Complete(Status::SUCCESS, 0, data)
            }
            // Keep Alive, Set Features (KATO, AEN configuration), Get Features.
            0x18 | 0x09 | 0x0A => Answer::Complete(Status::SUCCESS, 0, Vec::new()),
            0x0C => Answer::Hold,
            _ => Answer::Complete(Status::INVALID_OPCODE, 0, Vec::new()),
        }
    }
}

fn identify() -> IdentifyController {
    let mut id = IdentifyController::new_zeroed();
    id.sn = ascii_field("NVMEMU-DISCOVERY");
    id.mn = ascii_field("nvmemu discovery controller");
    id.fr = ascii_field("0.1");
    id.cntlid = 1;
    id.ver = nvmemu_spec::regs::VERSION_1_4;
    id.cntrltype = CNTRLTYPE_DISCOVERY;
    // Extended data for Get Log Page (offsets), Keep Alive in 1 s steps.
    id.lpa = 1 << 2;
    id.kas = 10;
    id.maxcmd = QUEUE_ENTRIES;
    id.sgls = ctrl_bits::SGLS_SUPPORTED | ctrl_bits::SGLS_KEYED | ctrl_bits::SGLS_OFFSET;
    let nqn = DISCOVERY_NQN.as_bytes();
    if let Some(dst) = id.subnqn.get_mut(..nqn.len()) {
        dst.copy_from_slice(nqn);
    }
    id
}

/// The whole Discovery log page for `hostnqn` (NVMe over Fabrics 1.1, Figures 31-32).
pub(crate) fn log_page(subsystems: &Subsystems, hostnqn: &str) -> Vec<u8> {
    let entries: Vec<(String, SocketAddr)> = subsystems
        .lock()
        .iter()
        .filter(|(_, s)| s.admits(hostnqn))
        .flat_map(|(nqn, s)| s.listeners.iter().map(|a| (nqn.clone(), *a)))
        .take(MAX_ENTRIES)
        .collect();
    let mut page = vec![0u8; RECORD * (1 + entries.len())];
    // GENCTR 1: the page as a whole is rebuilt for every read, so a host that reads it in
    // pieces sees one generation.
    page[0..8].copy_from_slice(&1u64.to_le_bytes());
    page[8..16].copy_from_slice(&(entries.len() as u64).to_le_bytes());
    for (i, (nqn, addr)) in entries.iter().enumerate() {
        let e = &mut page[RECORD * (i + 1)..RECORD * (i + 2)];
        e[0] = 3; // TRTYPE: TCP
        e[1] = if addr.is_ipv4() { 1 } else { 2 }; // ADRFAM
        e[2] = 2; // SUBTYPE: NVM subsystem
        e[3] = 0; // TREQ: secure channel not specified
        e[4..6].copy_from_slice(&u16::try_from(i).unwrap_or(0).to_le_bytes()); // PORTID
        e[6..8].copy_from_slice(&0xFFFFu16.to_le_bytes()); // CNTLID: dynamic
        e[8..10].copy_from_slice(&QUEUE_ENTRIES.to_le_bytes()); // ASQSZ
        fill(&mut e[32..64], addr.port().to_string().as_bytes(), b' '); // TRSVCID
        fill(&mut e[256..512], nqn.as_bytes(), 0); // SUBNQN
        fill(&mut e[512..768], addr.ip().to_string().as_bytes(), b' '); // TRADDR
        // TSAS: SECTYPE 0, no security.
    }
    page
}

/// Copy `text` into a field padded with `pad` (spaces for TRSVCID and TRADDR, as SPDK's
/// target writes them; NULs for the NQN).
fn fill(field: &mut [u8], text: &[u8], pad: u8) {
    let n = text.len().min(field.len());
    field[..n].copy_from_slice(&text[..n]);
    field[n..].fill(pad);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TcpSubsystem;

    fn sub(allow_any_host: bool, listeners: Vec<SocketAddr>) -> TcpSubsystem {
        TcpSubsystem {
            serial: "S".into(),
            model: "M".into(),
            allow_any_host,
            hosts: vec!["nqn.2014-08.org.example:h1".into()],
            max_namespaces: 1,
            namespaces: vec![],
            listeners,
        }
    }

    #[test]
    fn log_page_lists_each_listener_of_each_subsystem_the_host_may_use() {
        let subs = Subsystems::default();
        let a: SocketAddr = "127.0.0.1:4420".parse().unwrap();
        let b: SocketAddr = "[::1]:4421".parse().unwrap();
        subs.lock()
            .insert("nqn.x:open".into(), sub(true, vec![a, b]));
        subs.lock()
            .insert("nqn.x:closed".into(), sub(false, vec![a]));
        let page = log_page(&subs, "nqn.2014-08.org.example:h2");
        assert_eq!(
            u64::from_le_bytes(page[8..16].try_into().unwrap()),
            2,
            "NUMREC"
        );
        let e = &page[1024..2048];
        assert_eq!((e[0], e[1], e[2]), (3, 1, 2));
        assert_eq!(&e[32..37], b"4420 ");
        assert_eq!(&e[256..266], b"nqn.x:open");
        assert_eq!(&e[512..521], b"127.0.0.1");
        assert_eq!(page[2048 + 1], 2, "IPv6");
        let page = log_page(&subs, "nqn.2014-08.org.example:h1");
        assert_eq!(u64::from_le_bytes(page[8..16].try_into().unwrap()), 3);
    }
}
