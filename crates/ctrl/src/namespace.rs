// SPDX-License-Identifier: Apache-2.0
//! A namespace: an NSID bound to a block device, plus its identifiers (NGUID, EUI-64, UUID).

use std::sync::Arc;

use nvmemu_bdev::{Bdev, BdevChannel};
use nvmemu_spec::Nsid;

use crate::reservation::Reservations;

/// A namespace attached to a controller.
#[derive(Debug, Clone)]
pub struct Namespace {
    nsid: Nsid,
    /// This namespace's own channel: its I/O is counted without sharing a line with other
    /// controllers' namespaces on the same bdev.
    io: BdevChannel,
    block_shift: u32,
    nguid: [u8; 16],
    eui64: [u8; 8],
    uuid: [u8; 16],
    /// Shared by every clone: each controller the namespace is attached to gets a clone.
    reservations: Arc<Reservations>,
    /// Whether it takes I/O (`ctrl_faults.rs`); shared by every clone, as `reservations`.
    readiness: Arc<crate::ctrl_faults::Readiness>,
    /// This controller's QoS tokens for the namespace (`qos.rs`).
    pub(crate) qos: crate::qos::QosBucket,
    /// Reservation Notification Mask (Features 82h) this controller set for it.
    pub(crate) notice_mask: u32,
    /// This controller's latency model of the namespace (`model.rs`).
    pub(crate) model: crate::model::NsModel,
}

impl Namespace {
    /// A namespace `nsid` backed by `bdev`, with a UUID derived from the bdev name and the
    /// NSID (stable across restarts), the NGUID equal to it and no EUI-64. The control plane
    /// gives each bdev its own random UUID and sets the identifiers from it with
    /// [`Namespace::with_ids`]; this default serves namespaces built without one.
    pub fn new(nsid: Nsid, bdev: Arc<Bdev>) -> Namespace {
        let mut uuid = fnv1a_128(bdev.name().as_bytes(), nsid.0).to_be_bytes();
        // RFC 4122 version 4 layout, variant 10b.
        if let Some(b) = uuid.get_mut(6) {
            *b = (*b & 0x0F) | 0x40;
        }
        if let Some(b) = uuid.get_mut(8) {
            *b = (*b & 0x3F) | 0x80;
        }
        let block_shift = bdev.block_size().trailing_zeros();
        Namespace {
            nsid,
            io: bdev.channel(),
            block_shift,
            nguid: uuid,
            eui64: [0; 8],
            uuid,
            reservations: Arc::default(),
            readiness: Arc::default(),
            qos: crate::qos::QosBucket::default(),
            notice_mask: 0,
            model: crate::model::NsModel::default(),
        }
    }

    /// The same namespace with explicit identifiers (all-zero NGUID/EUI-64 are not reported).
    pub fn with_ids(mut self, nguid: [u8; 16], eui64: [u8; 8], uuid: [u8; 16]) -> Namespace {
        self.nguid = nguid;
        self.eui64 = eui64;
        self.uuid = uuid;
        self
    }

    /// The namespace identifier.
    pub fn nsid(&self) -> Nsid {
        self.nsid
    }

    /// The backing block device.
    pub fn bdev(&self) -> &Arc<Bdev> {
        self.io.bdev()
    }

    /// The channel for I/O on the backing block device.
    pub fn io(&self) -> &BdevChannel {
        &self.io
    }

    /// log2 of the logical block size.
    pub fn block_shift(&self) -> u32 {
        self.block_shift
    }

    /// Namespace Globally Unique Identifier.
    pub fn nguid(&self) -> [u8; 16] {
        self.nguid
    }

    /// IEEE Extended Unique Identifier.
    pub fn eui64(&self) -> [u8; 8] {
        self.eui64
    }

    /// Namespace UUID.
    pub fn uuid(&self) -> [u8; 16] {
        self.uuid
    }

    /// The bdev's QoS limits and pool, and this controller's bucket for them.
    pub(crate) fn qos_parts(&mut self) -> (&nvmemu_bdev::QosLimits, &mut crate::qos::QosBucket) {
        (self.io.bdev().qos(), &mut self.qos)
    }

    /// Whether it takes I/O, shared with every controller this namespace is attached to.
    pub(crate) fn readiness(&self) -> &crate::ctrl_faults::Readiness {
        &self.readiness
    }

    /// The reservation state, shared with every controller this namespace is attached to.
    pub(crate) fn reservations(&self) -> &Reservations {
        &self.reservations
    }
}

fn fnv1a_128(bytes: &[u8], salt: u32) -> u128 {
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013B;
    let mut h: u128 = 0x6C62_272E_07BB_0142_62B8_2175_6295_C58D;
    for b in bytes.iter().chain(salt.to_le_bytes().iter()) {
        h ^= u128::from(*b);
        h = h.wrapping_mul(PRIME);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinct() {
        let bdev = Arc::new(Bdev::null("null0", 512, 8).unwrap());
        let a = Namespace::new(Nsid(1), Arc::clone(&bdev));
        let b = Namespace::new(Nsid(2), Arc::clone(&bdev));
        assert_eq!(a.uuid(), Namespace::new(Nsid(1), Arc::clone(&bdev)).uuid());
        assert_ne!(a.uuid(), b.uuid());
        assert_ne!(a.nguid(), b.nguid());
        assert_eq!(a.nguid(), a.uuid());
        assert_eq!(a.eui64(), [0; 8]);
        assert_eq!(a.uuid()[6] >> 4, 4);
        assert_eq!(a.block_shift(), 9);
    }
}
