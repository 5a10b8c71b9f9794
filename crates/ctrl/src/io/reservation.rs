// SPDX-License-Identifier: Apache-2.0
//! Reservation Register, Acquire, Release and Report (NVM Command Set 6.10-6.13): keys
//! come from the data buffer, the state lives in the namespace (see `crate::reservation`).

use nvmemu_spec::reservation::ReservationCommand;
use nvmemu_spec::{DataPtr, Status};

use super::active_ns;
use crate::Controller;
use crate::reservation::{Host, REPORT_MAX};

impl Controller {
    /// The host this controller speaks for: its Host Identifier and controller ID.
    pub(crate) fn host(&self) -> Host {
        Host {
            id: self.features.host_id,
            cntlid: self.config.cntlid,
        }
    }

    /// Execute a reservation command.
    pub(crate) fn reservation(&mut self, cmd: ReservationCommand) -> Result<u32, Status> {
        let host = self.host();
        let ns = active_ns(&self.namespaces, cmd.nsid())?;
        let r = ns.reservations();
        match cmd {
            ReservationCommand::Register {
                action,
                iekey,
                cptpl,
                dptr,
                ..
            } => {
                // CPTPL 00b keeps and 10b clears Persist Through Power Loss, which is never
                // on (RESCAP bit 0 is clear); 11b would set it, 01b is reserved.
                if cptpl & 1 != 0 {
                    return Err(Status::INVALID_FIELD);
                }
                r.register(host, action, iekey, self.key_pair(&dptr)?)?;
            }
            ReservationCommand::Acquire {
                action,
                iekey,
                rtype,
                dptr,
                ..
            } => {
                r.acquire(host, action, iekey, rtype, self.key_pair(&dptr)?)?;
            }
            ReservationCommand::Release {
                action,
                iekey,
                rtype,
                dptr,
                ..
            } => {
                let mut key = [0u8; 8];
                crate::dptr::copy_from_host(&self.mem, &dptr, &mut key)?;
                r.release(host, action, iekey, rtype, u64::from_le_bytes(key))?;
            }
            ReservationCommand::Report {
                dwords, eds, dptr, ..
            } => {
                if !eds && r.has_wide_host_ids() {
                    return Err(Status::HOST_ID_INCONSISTENT_FORMAT);
                }
                let mut buf = [0u8; REPORT_MAX];
                r.report(eds, &mut buf);
                // As much as the host asked for (NUMD), zero past the data, and never more
                // than the largest report.
                let asked = u64::from(dwords).saturating_mul(4);
                crate::dptr::copy_to_host(&self.mem, &dptr, &buf, asked.min(REPORT_MAX as u64))?;
            }
        }
        Ok(0)
    }
}

impl Controller {
    /// CRKEY and the second key (NRKEY or PRKEY) from the data buffer, little-endian.
    fn key_pair(&self, dptr: &DataPtr) -> Result<(u64, u64), Status> {
        let mut keys = [0u8; 16];
        crate::dptr::copy_from_host(&self.mem, dptr, &mut keys)?;
        let (a, b) = keys.split_at(8);
        let key = |half: &[u8]| {
            let mut k = [0u8; 8];
            k.copy_from_slice(half);
            u64::from_le_bytes(k)
        };
        Ok((key(a), key(b)))
    }
}
