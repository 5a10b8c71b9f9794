// SPDX-License-Identifier: Apache-2.0
//! Identify (NVMe Base 1.4, 5.15): controller, namespace, active namespace list and
//! namespace identification descriptors.

use nvmemu_spec::identify::{
    Cns, DLFEAT_READ_ZEROES, DLFEAT_WRITE_ZEROES_DEALLOCATE, IDENTIFY_SIZE, IdentifyController,
    IdentifyNamespace, LbaFormat, NMIC_SHARED, ascii_field, ctrl_bits, nidt,
};
use nvmemu_spec::regs::VERSION_1_4;
use nvmemu_spec::reservation::rescap;
use nvmemu_spec::{DataPtr, Nsid, Status};
use zerocopy::{FromZeros, IntoBytes};

use crate::Controller;
use crate::admin::aer::AERL;
use crate::admin::limits::{CCTEMP, ERROR_LOG_ENTRIES, WCTEMP};
use crate::namespace::Namespace;

/// Optional NVM commands this controller executes (Identify Controller ONCS). The control
/// plane's `supported_io_types` must agree with it.
pub const ONCS: u16 = ctrl_bits::ONCS_COMPARE
    | ctrl_bits::ONCS_DSM
    | ctrl_bits::ONCS_WRITE_ZEROES
    | ctrl_bits::ONCS_SAVE_SELECT
    | ctrl_bits::ONCS_RESERVATIONS;

/// IEEE OUI reported in Identify Controller (locally administered, "nvmemu").
const IEEE_OUI: [u8; 3] = [0x4e, 0x58, 0x02];

impl Controller {
    /// Identify: build the structure on the stack and copy it to the host.
    pub(crate) fn identify(
        &mut self,
        cns: Cns,
        _cntid: u16,
        nsid: Nsid,
        dptr: &DataPtr,
    ) -> Result<u32, Status> {
        let mut buf = [0u8; IDENTIFY_SIZE];
        match cns {
            Cns::Controller => buf.copy_from_slice(self.identify_controller().as_bytes()),
            Cns::Namespace => {
                if let Some(ns) = self.ns_for_identify(nsid)? {
                    buf.copy_from_slice(identify_namespace(ns).as_bytes());
                }
            }
            Cns::ActiveNamespaceList => {
                if nsid.0 >= 0xFFFF_FFFE {
                    return Err(Status::INVALID_NAMESPACE);
                }
                let ids = self
                    .namespaces()
                    .map(|ns| ns.nsid().0)
                    .filter(|&id| id > nsid.0);
                for (chunk, id) in buf.chunks_exact_mut(4).zip(ids) {
                    chunk.copy_from_slice(&id.to_le_bytes());
                }
            }
            Cns::NamespaceIdDescriptors => {
                if let Some(ns) = self.ns_for_identify(nsid)? {
                    id_descriptors(ns, &mut buf);
                }
            }
            Cns::Unknown(cns) => {
                tracing::debug!(target: "guest", cns, "unsupported Identify CNS");
                return Err(Status::INVALID_FIELD);
            }
        }
        crate::dptr::copy_to_host(&self.mem, dptr, &buf, IDENTIFY_SIZE as u64)?;
        Ok(0)
    }

    /// The namespace behind `nsid` for CNS 00h/03h: `None` for a valid but inactive NSID
    /// (zero-filled data), Invalid Namespace for 0, broadcast or beyond NN.
    fn ns_for_identify(&self, nsid: Nsid) -> Result<Option<&Namespace>, Status> {
        let index = nsid.0.checked_sub(1).and_then(|i| usize::try_from(i).ok());
        match index.and_then(|i| self.namespaces.get(i)) {
            Some(slot) => Ok(slot.as_ref()),
            None => Err(Status::INVALID_NAMESPACE),
        }
    }

    fn identify_controller(&self) -> IdentifyController {
        let c = &self.config;
        let mut id = IdentifyController::new_zeroed();
        id.vid = c.vendor_id;
        id.ssvid = c.vendor_id;
        id.sn = ascii_field(&c.serial);
        id.mn = ascii_field(&c.model);
        id.fr = ascii_field(&c.firmware);
        id.rab = 6;
        id.ieee = IEEE_OUI;
        // As SPDK's target: a subsystem may have several ports (listeners) and controllers,
        // which share its namespaces. No ANA reporting.
        id.cmic = ctrl_bits::CMIC_MULTI_PORT | ctrl_bits::CMIC_MULTI_CTRLR;
        id.ctratt = ctrl_bits::CTRATT_EXHID;
        id.mdts = c.mdts;
        id.cntlid = c.cntlid;
        id.ver = VERSION_1_4;
        id.oaes = ctrl_bits::OAES_NS_ATTRIBUTE;
        id.oacs = if c.shadow_doorbells {
            ctrl_bits::OACS_DBBUF
        } else {
            0
        };
        id.acl = 3;
        id.aerl = AERL;
        // Slot 1 read-only, one slot.
        id.frmw = 0b11;
        id.lpa = ctrl_bits::LPA_CMD_EFFECTS | ctrl_bits::LPA_EXTENDED;
        id.elpe = u8::try_from(ERROR_LOG_ENTRIES - 1).unwrap_or(u8::MAX);
        id.npss = 0;
        id.wctemp = WCTEMP;
        id.cctemp = CCTEMP;
        id.sqes = 0x66;
        id.cqes = 0x44;
        id.maxcmd = c.max_queue_entries;
        id.nn = c.max_namespaces;
        id.oncs = ONCS;
        id.vwc = ctrl_bits::VWC_PRESENT | ctrl_bits::VWC_FLUSH_BROADCAST;
        id.nvscc = 1;
        id.sgls = ctrl_bits::SGLS_SUPPORTED | ctrl_bits::SGLS_BIT_BUCKET;
        let nqn = c.subnqn.as_bytes();
        let n = nqn.len().min(id.subnqn.len() - 1);
        if let (Some(dst), Some(src)) = (id.subnqn.get_mut(..n), nqn.get(..n)) {
            dst.copy_from_slice(src);
        }
        if let Some(f) = &c.fabrics {
            f.fill(&mut id);
        }
        if let Some(ps) = id.psd.first_mut() {
            // 25 W active, in centiwatts.
            ps.mp = 2500;
        }
        let capacity: u128 = self
            .namespaces()
            .map(|ns| u128::from(ns.bdev().num_blocks()) << ns.block_shift())
            .sum();
        id.tnvmcap = capacity.to_le_bytes();
        id
    }
}

fn identify_namespace(ns: &Namespace) -> IdentifyNamespace {
    let mut id = IdentifyNamespace::new_zeroed();
    let blocks = ns.bdev().num_blocks();
    id.nsze = blocks;
    id.ncap = blocks;
    id.nuse = blocks;
    id.nlbaf = 0;
    id.flbas = 0;
    id.dlfeat = DLFEAT_READ_ZEROES | DLFEAT_WRITE_ZEROES_DEALLOCATE;
    // Every namespace may be attached to several controllers (one per listener).
    id.nmic = NMIC_SHARED;
    id.rescap = rescap::ALL_TYPES_AND_IEKEY;
    id.nvmcap = (u128::from(blocks) << ns.block_shift()).to_le_bytes();
    id.nguid = ns.nguid();
    id.eui64 = ns.eui64();
    let lbads = u8::try_from(ns.block_shift()).unwrap_or(9);
    if let Some(f) = id.lbaf.first_mut() {
        *f = LbaFormat {
            ms: 0,
            lbads,
            rp: 0,
        }
        .to_dword();
    }
    id
}

/// Namespace Identification Descriptor list (Figure 249): EUI-64, NGUID, UUID; each
/// present only when non-zero; the zeroed rest terminates the list.
fn id_descriptors(ns: &Namespace, buf: &mut [u8]) {
    let eui64 = ns.eui64();
    let nguid = ns.nguid();
    let uuid = ns.uuid();
    let mut pos = 0usize;
    for (kind, id) in [
        (nidt::EUI64, &eui64[..]),
        (nidt::NGUID, &nguid[..]),
        (nidt::UUID, &uuid[..]),
    ] {
        if id.iter().all(|&b| b == 0) {
            continue;
        }
        let len = id.len();
        if let Some(d) = buf.get_mut(pos..pos + 4 + len) {
            let (header, body) = d.split_at_mut(4);
            header.copy_from_slice(&[kind, u8::try_from(len).unwrap_or(0), 0, 0]);
            body.copy_from_slice(id);
        }
        pos += 4 + len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn descriptors_are_typed_and_terminated() {
        let bdev = Arc::new(nvmemu_bdev::Bdev::null("n", 4096, 16).unwrap());
        let ns = Namespace::new(Nsid(1), bdev).with_ids([1; 16], [0; 8], [2; 16]);
        let mut buf = [0u8; 64];
        id_descriptors(&ns, &mut buf);
        assert_eq!(&buf[..4], &[nidt::NGUID, 16, 0, 0]);
        assert_eq!(&buf[4..20], &[1; 16]);
        assert_eq!(&buf[20..24], &[nidt::UUID, 16, 0, 0]);
        assert_eq!(&buf[24..40], &[2; 16]);
        assert_eq!(buf[40], 0);
    }

    #[test]
    fn namespace_geometry() {
        let bdev = Arc::new(nvmemu_bdev::Bdev::null("n", 4096, 16).unwrap());
        let id = identify_namespace(&Namespace::new(Nsid(1), bdev));
        assert_eq!((id.nsze, id.ncap), (16, 16));
        assert_eq!(LbaFormat::from_dword(id.lbaf[0]).lbads, 12);
        assert_eq!(u128::from_le_bytes(id.nvmcap), 16 * 4096);
    }
}
