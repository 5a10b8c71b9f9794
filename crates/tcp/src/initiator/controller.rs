// SPDX-License-Identifier: Apache-2.0
//! A host's view of one NVMe/TCP controller: the admin queue (Connect, Property Set of
//! CC.EN, CSTS.RDY), I/O queues (one connection each), Keep Alive and Disconnect.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use nvmemu_spec::{Cqe, Sqe, Status};

use super::{HostError, HostOptions, HostQueue, Transfer};

/// Fabrics command opcode and its command types (NVMe-oF 1.1, Figure 19).
const FABRICS: u32 = 0x7F;
const PROPERTY_SET: u32 = 0x00;
const CONNECT: u32 = 0x01;
const PROPERTY_GET: u32 = 0x04;
const DISCONNECT: u32 = 0x08;
/// Connect command data: host ID, CNTLID, SUBNQN, HOSTNQN.
const CONNECT_DATA: u32 = 1024;
/// Controller properties.
const CAP: u32 = 0x00;
const CC: u32 = 0x14;
const CSTS: u32 = 0x1C;
/// Admin Keep Alive opcode.
const KEEP_ALIVE: u32 = 0x18;
/// The admin queue takes this much in-capsule data (a Connect's 1 KiB fits).
const ADMIN_ICD: u32 = 8192;
/// I/O queue pairs asked for with Set Features Number of Queues.
const IO_QUEUES: u32 = 64;
/// Admin Set Features opcode and the Number of Queues feature.
const SET_FEATURES: u32 = 0x09;
const NUMBER_OF_QUEUES: u32 = 0x07;
/// Connect CDW11: CATTR's Disable SQ Flow Control bit (NVMe over Fabrics 1.1, 3.3).
const DISABLE_SQ_FLOW_CONTROL: u32 = 1 << 18;
/// Admin queue entries asked for at Connect.
const ADMIN_ENTRIES: u16 = 32;

/// Who the host is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostIdentity {
    /// The host NQN the subsystem's allow list names.
    pub hostnqn: String,
    /// The host identifier (Connect data bytes 0-15).
    pub hostid: [u8; 16],
}

/// A connected, enabled controller: its admin queue and what Connect returned.
#[derive(Debug)]
pub struct HostController {
    addr: SocketAddr,
    opts: HostOptions,
    host: HostIdentity,
    subnqn: String,
    admin: HostQueue,
    cntlid: u16,
    kato: Duration,
    last_admin: Instant,
    io_queues: u32,
}

fn fabrics_sqe(fctype: u32) -> Sqe {
    Sqe {
        cdw0: FABRICS,
        nsid: fctype,
        ..Sqe::default()
    }
}

fn checked(what: &'static str, cqe: Cqe) -> Result<Cqe, HostError> {
    let status = cqe.status();
    if status == Status::SUCCESS {
        Ok(cqe)
    } else {
        Err(HostError::Status { what, status })
    }
}

/// Send Fabrics Connect for queue `qid` on `q`; returns the controller ID.
fn connect_queue(
    q: &mut HostQueue,
    subnqn: &str,
    host: &HostIdentity,
    (qid, entries, cntlid, kato_ms): (u16, u16, u16, u32),
) -> Result<u16, HostError> {
    let mut data = [0u8; CONNECT_DATA as usize];
    data[0..16].copy_from_slice(&host.hostid);
    data[16..18].copy_from_slice(&cntlid.to_le_bytes());
    let (sub, hn) = (subnqn.as_bytes(), host.hostnqn.as_bytes());
    if sub.len() > 223 || hn.len() > 223 {
        return Err(HostError::Protocol("an NQN is longer than 223 bytes"));
    }
    data[256..256 + sub.len()].copy_from_slice(sub);
    data[512..512 + hn.len()].copy_from_slice(hn);
    // I/O queues disable SQ flow control (CATTR bit 2, CDW11 bit 18; SPDK's and Linux's
    // hosts keep it on unless asked): the host never needs SQHD, and any target may then
    // complete a read with the C2HData SUCCESS flag instead of a response capsule.
    let cattr = if qid == 0 { 0 } else { DISABLE_SQ_FLOW_CONTROL };
    let sqe = Sqe {
        cdw10: u32::from(qid) << 16,
        cdw11: u32::from(entries.saturating_sub(1)) | cattr,
        cdw12: kato_ms,
        ..fabrics_sqe(CONNECT)
    };
    // Connect data always travels in-capsule, as Linux and SPDK send it.
    let icd = q.icd_max;
    q.set_in_capsule_max(icd.max(CONNECT_DATA));
    let r = q.exec(sqe, Transfer::Out(&data));
    q.set_in_capsule_max(icd);
    let cqe = checked("Connect", r?)?;
    let [lo, hi, ..] = cqe.dw0.to_le_bytes();
    Ok(u16::from_le_bytes([lo, hi]))
}

impl HostController {
    /// Connect the admin queue to `subnqn` at `addr`, enable the controller (CC.EN = 1,
    /// 64-byte SQEs, 16-byte CQEs) and wait for CSTS.RDY. `kato` 0 turns Keep Alive off.
    pub fn connect(
        addr: SocketAddr,
        subnqn: &str,
        host: HostIdentity,
        kato: Duration,
        opts: HostOptions,
    ) -> Result<HostController, HostError> {
        let mut admin = HostQueue::connect(addr, &opts)?;
        admin.set_in_capsule_max(ADMIN_ICD);
        let kato_ms = u32::try_from(kato.as_millis()).unwrap_or(u32::MAX);
        let cntlid = connect_queue(
            &mut admin,
            subnqn,
            &host,
            (0, ADMIN_ENTRIES, 0xFFFF, kato_ms),
        )?;
        let mut c = HostController {
            addr,
            opts,
            host,
            subnqn: subnqn.to_owned(),
            admin,
            cntlid,
            kato,
            last_admin: Instant::now(),
            io_queues: 0,
        };
        c.enable()?;
        c.set_io_queue_count(IO_QUEUES)?;
        Ok(c)
    }

    fn enable(&mut self) -> Result<(), HostError> {
        let cap = self.property_get(CAP, true)?;
        // CAP.TO is in 500 ms units.
        let timeout = Duration::from_millis(((cap >> 24) & 0xFF).max(1) * 500);
        self.property_set(CC, 1 | (6 << 16) | (4 << 20))?;
        let start = Instant::now();
        loop {
            let csts = self.property_get(CSTS, false)?;
            if csts & 2 != 0 {
                return Err(HostError::Protocol("CSTS.CFS set while enabling"));
            }
            if csts & 1 != 0 {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(HostError::Protocol("CSTS.RDY did not come within CAP.TO"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ask for `pairs` I/O queue pairs; the controller may grant fewer.
    fn set_io_queue_count(&mut self, pairs: u32) -> Result<(), HostError> {
        let n = pairs.saturating_sub(1) & 0xFFFF;
        let sqe = Sqe {
            cdw0: SET_FEATURES,
            cdw10: NUMBER_OF_QUEUES,
            cdw11: n | (n << 16),
            ..Sqe::default()
        };
        let c = checked(
            "Set Features Number of Queues",
            self.admin_exec(sqe, Transfer::None)?,
        )?;
        let granted = (c.dw0 & 0xFFFF).min(c.dw0 >> 16) + 1;
        self.io_queues = granted.min(pairs);
        Ok(())
    }

    /// How many I/O queues the controller granted.
    pub fn io_queue_count(&self) -> u32 {
        self.io_queues
    }

    /// The controller ID the target assigned.
    pub fn cntlid(&self) -> u16 {
        self.cntlid
    }

    /// Property Get of a 4-byte or (`wide`) 8-byte property.
    pub fn property_get(&mut self, offset: u32, wide: bool) -> Result<u64, HostError> {
        let sqe = Sqe {
            cdw10: u32::from(wide),
            cdw11: offset,
            ..fabrics_sqe(PROPERTY_GET)
        };
        let c = checked("Property Get", self.admin_exec(sqe, Transfer::None)?)?;
        Ok(u64::from(c.dw0) | (u64::from(c.dw1) << 32))
    }

    /// Property Set of a 4-byte property.
    pub fn property_set(&mut self, offset: u32, value: u32) -> Result<(), HostError> {
        let sqe = Sqe {
            cdw11: offset,
            cdw12: value,
            ..fabrics_sqe(PROPERTY_SET)
        };
        checked("Property Set", self.admin_exec(sqe, Transfer::None)?).map(|_| ())
    }

    /// Run an admin command (Identify, Get Log Page, Set Features, ...).
    pub fn admin_exec(&mut self, sqe: Sqe, data: Transfer<'_>) -> Result<Cqe, HostError> {
        self.last_admin = Instant::now();
        self.admin.exec(sqe, data)
    }

    /// Send Keep Alive if half of KATO has passed since the last admin command.
    pub fn keep_alive_due(&mut self) -> Result<(), HostError> {
        if self.kato.is_zero() || self.last_admin.elapsed() < self.kato / 2 {
            return Ok(());
        }
        let sqe = Sqe {
            cdw0: KEEP_ALIVE,
            ..Sqe::default()
        };
        checked("Keep Alive", self.admin_exec(sqe, Transfer::None)?).map(|_| ())
    }

    /// Open I/O queue `qid` of `entries` entries on its own connection, with in-capsule
    /// data up to `icd_max` bytes (IOCCSZ * 16 - 64 from Identify Controller).
    pub fn connect_io_queue(
        &mut self,
        qid: u16,
        entries: u16,
        icd_max: u32,
    ) -> Result<HostQueue, HostError> {
        let mut q = HostQueue::connect(self.addr, &self.opts)?;
        q.set_in_capsule_max(icd_max);
        let kato_ms = 0;
        let cntlid = connect_queue(
            &mut q,
            &self.subnqn,
            &self.host,
            (qid, entries, self.cntlid, kato_ms),
        )?;
        if cntlid != self.cntlid {
            return Err(HostError::Protocol("I/O Connect answered another CNTLID"));
        }
        Ok(q)
    }

    /// Fabrics Disconnect of an I/O queue, then close its connection.
    pub fn disconnect_queue(mut q: HostQueue) -> Result<(), HostError> {
        let r = q.exec(fabrics_sqe(DISCONNECT), Transfer::None);
        q.close();
        checked("Disconnect", r?).map(|_| ())
    }

    /// Shut the controller down (CC.SHN normal) and close the admin connection.
    pub fn disconnect(mut self) -> Result<(), HostError> {
        let r = self.property_set(CC, 1 | (6 << 16) | (4 << 20) | (1 << 14));
        self.admin.close();
        r
    }
}
