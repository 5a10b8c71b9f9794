// SPDX-License-Identifier: Apache-2.0
//! Get Features / Set Features (NVMe Base 1.4, 5.9 and 5.21). Nothing is saveable; the
//! saved value of every feature is its default.

use nvmemu_spec::features::{
    FeatureId, FeatureSelect, QueueCounts, TemperatureThreshold, aec, capabilities, host_behavior,
};
use nvmemu_spec::log_page::AsyncEvent;
use nvmemu_spec::{DataPtr, Nsid, Status};

use crate::admin::limits::WCTEMP;
use crate::{Controller, ControllerConfig};

/// Asynchronous Event Configuration bits this controller can raise.
const AEC_SUPPORTED: u32 = aec::SMART_MASK | aec::NAMESPACE_ATTRIBUTE;

/// Current feature values. Reset to defaults by a controller reset.
#[derive(Debug, Clone)]
pub(crate) struct Features {
    pub(crate) arbitration: u32,
    pub(crate) power_management: u32,
    pub(crate) temp_over: u16,
    pub(crate) temp_under: u16,
    pub(crate) error_recovery: u32,
    pub(crate) volatile_write_cache: bool,
    /// I/O queues allocated by Number of Queues.
    pub(crate) queues: QueueCounts,
    pub(crate) interrupt_coalescing: u32,
    /// Coalescing Disable per interrupt vector.
    pub(crate) vector_cd: Vec<bool>,
    pub(crate) write_atomicity: u32,
    pub(crate) aec: u32,
    /// Host Identifier (Set Features 81h): 8 bytes zero-extended, or 16 with EXHID; all
    /// zero until the host sets one. Reservations tell hosts apart by it.
    pub(crate) host_id: [u8; 16],
    /// Host Behavior Support byte 0 (ACRE only: no retry delays are ever asked for, so
    /// enabling it changes nothing the host sees).
    pub(crate) host_behavior: u8,
}

impl Features {
    /// Defaults for `config`.
    pub(crate) fn new(config: &ControllerConfig) -> Features {
        let max = u32::from(config.max_io_queues).max(1);
        Features {
            arbitration: 0,
            power_management: 0,
            temp_over: WCTEMP,
            temp_under: 0,
            error_recovery: 0,
            volatile_write_cache: true,
            queues: QueueCounts { sq: max, cq: max },
            interrupt_coalescing: 0,
            vector_cd: vec![false; usize::from(config.msix_vectors)],
            write_atomicity: 0,
            aec: 0,
            host_id: [0; 16],
            host_behavior: 0,
        }
    }

    /// The value Get Features returns; `arg` is CDW11 (selects sensor or vector).
    fn value(&self, fid: FeatureId, arg: u32) -> Result<u32, Status> {
        Ok(match fid {
            FeatureId::Arbitration => self.arbitration,
            FeatureId::PowerManagement => self.power_management,
            FeatureId::TemperatureThreshold => {
                let t = TemperatureThreshold::from_dword(arg);
                let kelvin = match (t.sensor, t.kind) {
                    (0, 0) => self.temp_over,
                    (0, 1) => self.temp_under,
                    _ => return Err(Status::INVALID_FIELD),
                };
                u32::from(kelvin) | (arg & 0x003F_0000)
            }
            FeatureId::ErrorRecovery => self.error_recovery,
            FeatureId::VolatileWriteCache => u32::from(self.volatile_write_cache),
            FeatureId::NumberOfQueues => self.queues.to_dword(),
            FeatureId::InterruptCoalescing => self.interrupt_coalescing,
            FeatureId::InterruptVectorConfig => {
                let iv = arg & 0xFFFF;
                let cd = self
                    .vector_cd
                    .get(iv as usize)
                    .ok_or(Status::INVALID_FIELD)?;
                iv | (u32::from(*cd) << 16)
            }
            FeatureId::WriteAtomicity => self.write_atomicity,
            FeatureId::AsyncEventConfig => self.aec,
            // Their values are data structures, not DW0; `get_features` transfers them.
            FeatureId::HostBehaviorSupport | FeatureId::HostIdentifier => 0,
            // Namespace specific: `get_features` answers them from the namespace.
            FeatureId::ReservationNotificationMask | FeatureId::ReservationPersistence => 0,
            // The default: no timeout (the current one is the controller's `kato_ms`).
            FeatureId::KeepAliveTimer => 0,
            FeatureId::Apst | FeatureId::Unknown(_) => return Err(Status::INVALID_FIELD),
        })
    }

    /// The Host Behavior Support data structure for these values.
    fn host_behavior_data(&self) -> [u8; host_behavior::SIZE] {
        let mut data = [0u8; host_behavior::SIZE];
        data[0] = self.host_behavior;
        data
    }
}

impl Controller {
    /// Get Features.
    pub(crate) fn get_features(
        &mut self,
        fid: FeatureId,
        sel: FeatureSelect,
        nsid: Nsid,
        arg: u32,
        dptr: &DataPtr,
    ) -> Result<u32, Status> {
        if let Some(persistence) = reservation_feature(fid) {
            return match sel {
                FeatureSelect::Current => self.get_reservation_feature(persistence, nsid),
                FeatureSelect::Default | FeatureSelect::Saved => {
                    self.get_reservation_feature(persistence, nsid).map(|_| 0)
                }
                FeatureSelect::SupportedCapabilities => {
                    Ok(capabilities::CHANGEABLE | capabilities::NAMESPACE_SPECIFIC)
                }
                FeatureSelect::Reserved(_) => Err(Status::INVALID_FIELD),
            };
        }
        let defaults;
        let features = match sel {
            FeatureSelect::Current => &self.features,
            FeatureSelect::Default | FeatureSelect::Saved => {
                defaults = Features::new(&self.config);
                &defaults
            }
            FeatureSelect::SupportedCapabilities => {
                // Validate the FID the same way, then: changeable, not saveable.
                Features::new(&self.config).value(fid, arg)?;
                return Ok(capabilities::CHANGEABLE);
            }
            FeatureSelect::Reserved(_) => return Err(Status::INVALID_FIELD),
        };
        let dw0 = match (fid, sel) {
            // The association's timeout, kept outside the features a reset restores.
            (FeatureId::KeepAliveTimer, FeatureSelect::Current) => self.kato_ms,
            _ => features.value(fid, arg)?,
        };
        if fid == FeatureId::HostBehaviorSupport {
            let data = features.host_behavior_data();
            crate::dptr::copy_to_host(&self.mem, dptr, &data, data.len() as u64)?;
        }
        if fid == FeatureId::HostIdentifier {
            let len = host_id_len(arg);
            let id = features.host_id;
            crate::dptr::copy_to_host(&self.mem, dptr, &id, len as u64)?;
        }
        Ok(dw0)
    }

    /// Set Features.
    pub(crate) fn set_features(
        &mut self,
        fid: FeatureId,
        save: bool,
        nsid: Nsid,
        value: u32,
        dptr: &DataPtr,
    ) -> Result<u32, Status> {
        if save {
            return Err(Status::FEATURE_NOT_SAVEABLE);
        }
        if fid == FeatureId::HostBehaviorSupport {
            let mut data = [0u8; host_behavior::SIZE];
            crate::dptr::copy_from_host(&self.mem, dptr, &mut data)?;
            // Only ACRE is implemented; any other field set asks for behaviour this
            // controller does not have.
            if data[0] & !host_behavior::ACRE != 0 || data[1..].iter().any(|&b| b != 0) {
                return Err(Status::INVALID_FIELD);
            }
            self.features.host_behavior = data[0];
            return Ok(0);
        }
        if fid == FeatureId::HostIdentifier {
            return self.set_host_id(value, dptr);
        }
        if let Some(persistence) = reservation_feature(fid) {
            return self.set_reservation_feature(persistence, nsid, value);
        }
        if fid == FeatureId::KeepAliveTimer {
            return self.set_keep_alive_feature(value);
        }
        let f = &mut self.features;
        match fid {
            FeatureId::Arbitration => f.arbitration = value,
            FeatureId::PowerManagement => {
                // One power state (NPSS = 0).
                if value & 0x1F != 0 {
                    return Err(Status::INVALID_FIELD);
                }
                f.power_management = value & 0xFF;
            }
            FeatureId::TemperatureThreshold => {
                let t = TemperatureThreshold::from_dword(value);
                match (t.sensor, t.kind) {
                    (0, 0) => f.temp_over = t.kelvin,
                    (0, 1) => f.temp_under = t.kelvin,
                    _ => return Err(Status::INVALID_FIELD),
                }
                if self.temperature_warning() {
                    self.raise_event(AsyncEvent::TEMPERATURE_THRESHOLD);
                }
            }
            FeatureId::ErrorRecovery => {
                // DULBE needs deallocated-block errors (NSFEAT.DAE), which are not offered.
                if value & (1 << 16) != 0 {
                    return Err(Status::INVALID_FIELD);
                }
                f.error_recovery = value & 0xFFFF;
            }
            FeatureId::VolatileWriteCache => f.volatile_write_cache = value & 1 != 0,
            FeatureId::NumberOfQueues => {
                if self.queues.has_io_queues() {
                    return Err(Status::COMMAND_SEQUENCE_ERROR);
                }
                let want = QueueCounts::from_dword(value);
                if want.sq > 0xFFFF || want.cq > 0xFFFF {
                    return Err(Status::INVALID_FIELD);
                }
                let max = u32::from(self.config.max_io_queues).max(1);
                f.queues = QueueCounts {
                    sq: want.sq.min(max),
                    cq: want.cq.min(max),
                };
                return Ok(f.queues.to_dword());
            }
            FeatureId::InterruptCoalescing => f.interrupt_coalescing = value & 0xFFFF,
            FeatureId::InterruptVectorConfig => {
                let cd = f
                    .vector_cd
                    .get_mut((value & 0xFFFF) as usize)
                    .ok_or(Status::INVALID_FIELD)?;
                *cd = value & (1 << 16) != 0;
            }
            FeatureId::WriteAtomicity => f.write_atomicity = value & 1,
            FeatureId::AsyncEventConfig => f.aec = value & AEC_SUPPORTED,
            // Handled above: they carry data, belong to a namespace or to the association.
            FeatureId::HostBehaviorSupport
            | FeatureId::HostIdentifier
            | FeatureId::ReservationNotificationMask
            | FeatureId::ReservationPersistence
            | FeatureId::KeepAliveTimer => {}
            FeatureId::Apst | FeatureId::Unknown(_) => {
                tracing::debug!(target: "guest", fid = u8::from(fid), "unsupported feature");
                return Err(Status::INVALID_FIELD);
            }
        }
        Ok(0)
    }
}

impl Controller {
    /// Set Features Host Identifier: 8 bytes, or 16 with CDW11.EXHID. Refused with Command
    /// Sequence Error while this host holds a registration on one of the namespaces (the
    /// registration would lose its owner).
    fn set_host_id(&mut self, cdw11: u32, dptr: &DataPtr) -> Result<u32, Status> {
        let mut id = [0u8; 16];
        let len = host_id_len(cdw11);
        let dst = id.get_mut(..len).ok_or(Status::INTERNAL_ERROR)?;
        crate::dptr::copy_from_host(&self.mem, dptr, dst)?;
        let host = self.host();
        if self
            .namespaces()
            .any(|ns| ns.reservations().is_registered(host))
        {
            tracing::debug!(target: "guest", "Host Identifier change while registered");
            return Err(Status::COMMAND_SEQUENCE_ERROR);
        }
        self.features.host_id = id;
        self.resv.inbox.set_host(self.host());
        Ok(0)
    }
}

/// For the reservation features: whether it is Reservation Persistence (83h) rather than
/// the Notification Mask (82h).
fn reservation_feature(fid: FeatureId) -> Option<bool> {
    match fid {
        FeatureId::ReservationNotificationMask => Some(false),
        FeatureId::ReservationPersistence => Some(true),
        _ => None,
    }
}

/// Bytes of the Host Identifier CDW11 asks for: 16 with EXHID (bit 0), else 8.
fn host_id_len(cdw11: u32) -> usize {
    if cdw11 & 1 != 0 { 16 } else { 8 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_vector_range() {
        let f = Features::new(&ControllerConfig::default());
        assert_eq!(f.value(FeatureId::NumberOfQueues, 0), Ok(0x007E_007E));
        assert_eq!(f.value(FeatureId::VolatileWriteCache, 0), Ok(1));
        assert_eq!(f.value(FeatureId::InterruptVectorConfig, 63), Ok(63));
        assert_eq!(
            f.value(FeatureId::InterruptVectorConfig, 64),
            Err(Status::INVALID_FIELD)
        );
        assert_eq!(f.value(FeatureId::TemperatureThreshold, 0), Ok(343));
        assert_eq!(
            f.value(FeatureId::TemperatureThreshold, 1 << 20),
            Ok(1 << 20)
        );
        assert_eq!(
            f.value(FeatureId::TemperatureThreshold, 1 << 16),
            Err(Status::INVALID_FIELD)
        );
        assert_eq!(
            f.value(FeatureId::Unknown(0x7F), 0),
            Err(Status::INVALID_FIELD)
        );
    }
}
