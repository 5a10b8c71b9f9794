// SPDX-License-Identifier: Apache-2.0
//! Get Log Page (NVMe Base 1.4, 5.14): Error Information, SMART / Health, Firmware Slot,
//! Changed Namespace List, Commands Supported and Effects and Reservation Notification
//! (`resv_log.rs`), with NUMD/LPO partial reads.

use nvmemu_spec::identify::ascii_field;
use nvmemu_spec::log_page::{
    CHANGED_NS_LIST_ENTRIES, CRITICAL_WARNING_TEMPERATURE, ErrorLogEntry, FirmwareSlotLog,
    LogPageId, SmartLog, effects, u128_field,
};
use nvmemu_spec::{AdminOpcode, DataPtr, IoOpcode, Nsid, Qid, Sqe, Status};
use zerocopy::{FromZeros, IntoBytes};

use crate::Controller;
use crate::admin::limits::ERROR_LOG_ENTRIES;
use crate::metrics::data_units;

/// The composite temperature this controller reports: 300 K.
pub(crate) const TEMPERATURE_KELVIN: u16 = 300;
/// The largest log page built here.
const LOG_BUF: usize = 4096;

/// A ring of the most recent error completions.
#[derive(Debug)]
pub(crate) struct ErrorLog {
    entries: [ErrorLogEntry; ERROR_LOG_ENTRIES],
    next: usize,
    count: u64,
}

impl Default for ErrorLog {
    fn default() -> Self {
        ErrorLog {
            entries: [ErrorLogEntry::default(); ERROR_LOG_ENTRIES],
            next: 0,
            count: 0,
        }
    }
}

impl ErrorLog {
    /// Record a failed command (error path only).
    pub(crate) fn record(&mut self, sqid: Qid, sqe: &Sqe, status: nvmemu_spec::Status) {
        self.count += 1;
        let io_lba = sqid != Qid::ADMIN
            && matches!(
                IoOpcode::from(sqe.opcode()),
                IoOpcode::Read | IoOpcode::Write | IoOpcode::Compare | IoOpcode::WriteZeroes
            );
        let entry = ErrorLogEntry {
            error_count: self.count,
            sqid: sqid.0,
            cid: sqe.cid().0,
            status: status.to_field() << 1,
            param_error_location: 0xFFFF,
            lba: if io_lba {
                u64::from(sqe.cdw10) | (u64::from(sqe.cdw11) << 32)
            } else {
                0
            },
            nsid: sqe.nsid,
            ..ErrorLogEntry::default()
        };
        if let Some(slot) = self.entries.get_mut(self.next) {
            *slot = entry;
        }
        self.next = if self.next + 1 == ERROR_LOG_ENTRIES {
            0
        } else {
            self.next + 1
        };
    }

    /// Errors recorded since power-on.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// The log page: most recent entry first.
    fn write(&self, buf: &mut [u8]) {
        let newest_first = (0..ERROR_LOG_ENTRIES)
            .map(|i| (self.next + ERROR_LOG_ENTRIES - 1 - i) % ERROR_LOG_ENTRIES)
            .filter_map(|i| self.entries.get(i));
        for (chunk, e) in buf.chunks_exact_mut(64).zip(newest_first) {
            chunk.copy_from_slice(e.as_bytes());
        }
    }
}

/// NSIDs whose attributes changed since the host last read the log, ascending.
#[derive(Debug)]
pub(crate) struct ChangedNsList {
    ids: [u32; CHANGED_NS_LIST_ENTRIES],
    count: usize,
    overflow: bool,
}

impl Default for ChangedNsList {
    fn default() -> Self {
        ChangedNsList {
            ids: [0; CHANGED_NS_LIST_ENTRIES],
            count: 0,
            overflow: false,
        }
    }
}

impl ChangedNsList {
    /// Note a change to `nsid`.
    pub(crate) fn add(&mut self, nsid: u32) {
        let used = self.ids.get(..self.count).unwrap_or(&[]);
        let Err(at) = used.binary_search(&nsid) else {
            return;
        };
        if self.count == CHANGED_NS_LIST_ENTRIES {
            self.overflow = true;
            return;
        }
        if let Some(tail) = self.ids.get_mut(at..=self.count) {
            tail.rotate_right(1);
            if let Some(first) = tail.first_mut() {
                *first = nsid;
            }
        }
        self.count += 1;
    }

    fn write(&self, buf: &mut [u8]) {
        let ids: &[u32] = if self.overflow {
            &[u32::MAX]
        } else {
            self.ids.get(..self.count).unwrap_or(&[])
        };
        for (chunk, id) in buf.chunks_exact_mut(4).zip(ids) {
            chunk.copy_from_slice(&id.to_le_bytes());
        }
    }

    fn clear(&mut self) {
        self.count = 0;
        self.overflow = false;
    }
}

impl Controller {
    /// Get Log Page.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get_log_page(
        &mut self,
        lid: LogPageId,
        _lsp: u8,
        rae: bool,
        dwords: u32,
        offset: u64,
        nsid: Nsid,
        dptr: &DataPtr,
    ) -> Result<u32, Status> {
        let len = u64::from(dwords) * 4;
        if len > self.max_transfer() || !offset.is_multiple_of(4) {
            return Err(Status::INVALID_FIELD);
        }
        let mut buf = [0u8; LOG_BUF];
        let size = match lid {
            LogPageId::ErrorInformation => {
                self.error_log.write(&mut buf);
                ERROR_LOG_ENTRIES * 64
            }
            LogPageId::SmartHealth => {
                if nsid.0 != 0 && nsid != Nsid::BROADCAST {
                    return Err(Status::INVALID_FIELD);
                }
                let smart = self.smart_log();
                copy_into(&mut buf, smart.as_bytes())
            }
            LogPageId::FirmwareSlot => {
                let mut fw = FirmwareSlotLog::new_zeroed();
                fw.afi = 1;
                if let Some(slot) = fw.frs.first_mut() {
                    *slot = ascii_field(&self.config.firmware);
                }
                copy_into(&mut buf, fw.as_bytes())
            }
            LogPageId::ChangedNamespaceList => {
                self.changed_ns.write(&mut buf);
                CHANGED_NS_LIST_ENTRIES * 4
            }
            LogPageId::CommandEffects => {
                command_effects(&mut buf, self.config.fabrics.is_some());
                LOG_BUF
            }
            LogPageId::ReservationNotification => copy_into(&mut buf, &self.resv.oldest_page()),
            LogPageId::Unknown(lid) => {
                tracing::debug!(target: "guest", lid, "unsupported log page");
                return Err(Status::INVALID_LOG_PAGE);
            }
        };
        let start = usize::try_from(offset)
            .ok()
            .filter(|&o| o < size)
            .ok_or(Status::INVALID_FIELD)?;
        let src = buf.get(start..size).ok_or(Status::INVALID_FIELD)?;
        crate::dptr::copy_to_host(&self.mem, dptr, src, len)?;
        if !rae {
            self.aer.log_read(lid);
            if lid == LogPageId::ChangedNamespaceList {
                self.changed_ns.clear();
            }
        }
        // Reading a Reservation Notification page removes it, whatever RAE says.
        if lid == LogPageId::ReservationNotification {
            self.resv.consume_oldest();
        }
        Ok(0)
    }

    /// SMART / Health Information for the whole controller.
    pub(crate) fn smart_log(&self) -> SmartLog {
        let c = &self.counters;
        let mut s = SmartLog::new_zeroed();
        if self.temperature_warning() {
            s.critical_warning |= CRITICAL_WARNING_TEMPERATURE;
        }
        s.composite_temperature = TEMPERATURE_KELVIN.to_le_bytes();
        s.available_spare = 100;
        s.available_spare_threshold = 10;
        s.data_units_read = u128_field(u128::from(data_units(c.bytes_read)));
        s.data_units_written = u128_field(u128::from(data_units(c.bytes_written)));
        s.host_read_commands = u128_field(u128::from(c.host_read_commands));
        s.host_write_commands = u128_field(u128::from(c.host_write_commands));
        s.controller_busy_time = u128_field(self.instruments.busy_nanos_now() / 60_000_000_000);
        s.power_cycles = u128_field(1);
        s.power_on_hours = u128_field(u128::from(self.created.elapsed().as_secs() / 3600));
        s.media_errors = u128_field(u128::from(c.media_errors));
        s.num_error_log_entries = u128_field(u128::from(self.error_log.count()));
        s.temp_sensors = [0; 8];
        s
    }

    /// The composite temperature is at or past a host-set threshold.
    pub(crate) fn temperature_warning(&self) -> bool {
        let f = &self.features;
        TEMPERATURE_KELVIN >= f.temp_over
            || (f.temp_under != 0 && TEMPERATURE_KELVIN <= f.temp_under)
    }
}

fn copy_into(buf: &mut [u8], src: &[u8]) -> usize {
    if let Some(dst) = buf.get_mut(..src.len()) {
        dst.copy_from_slice(src);
    }
    src.len()
}

/// The Fabrics command opcode (NVMe over Fabrics 1.1, 3.3), an admin opcode only a
/// fabrics controller accepts; the transport decodes it, the controller never sees it.
const FABRICS_OPCODE: u8 = 0x7F;

/// Commands Supported and Effects (Figure 200): admin entries at 0, I/O entries at 1024.
/// A fabrics controller lists what it accepts: Keep Alive and the Fabrics commands, but no
/// queue creation or deletion (Connect and Disconnect do that) and no Doorbell Buffer
/// Config (there are no doorbells); the transport refuses those opcodes.
fn command_effects(buf: &mut [u8], fabrics: bool) {
    use AdminOpcode as A;
    use IoOpcode as I;
    let common = [
        A::GetLogPage,
        A::Identify,
        A::Abort,
        A::SetFeatures,
        A::GetFeatures,
        A::AsyncEventRequest,
    ];
    let pcie = [
        A::DeleteIoSq,
        A::CreateIoSq,
        A::DeleteIoCq,
        A::CreateIoCq,
        A::DoorbellBufferConfig,
    ];
    let mut supported = |op: u8| put(buf, usize::from(op) * 4, effects::CSUPP);
    common.into_iter().for_each(|op| supported(op.into()));
    if fabrics {
        supported(A::KeepAlive.into());
        supported(FABRICS_OPCODE);
    } else {
        pcie.into_iter().for_each(|op| supported(op.into()));
    }
    let io = [
        (I::Flush, effects::CSUPP),
        (I::Write, effects::CSUPP | effects::LBCC),
        (I::Read, effects::CSUPP),
        (I::Compare, effects::CSUPP),
        (I::WriteZeroes, effects::CSUPP | effects::LBCC),
        (I::DatasetManagement, effects::CSUPP | effects::LBCC),
        (I::ReservationRegister, effects::CSUPP),
        (I::ReservationReport, effects::CSUPP),
        (I::ReservationAcquire, effects::CSUPP),
        (I::ReservationRelease, effects::CSUPP),
    ];
    for (op, e) in io {
        put(buf, 1024 + usize::from(u8::from(op)) * 4, e);
    }
}

fn put(buf: &mut [u8], at: usize, value: u32) {
    if let Some(d) = buf.get_mut(at..at + 4) {
        d.copy_from_slice(&value.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmemu_spec::Cid;

    #[test]
    fn error_log_is_newest_first_and_wraps() {
        let mut log = ErrorLog::default();
        for i in 0..70u16 {
            let sqe = Sqe {
                cdw0: Sqe::make_cdw0(0x02, nvmemu_spec::Psdt::Prp, Cid(i)),
                ..Sqe::default()
            };
            log.record(Qid(1), &sqe, Status::LBA_OUT_OF_RANGE);
        }
        let mut buf = [0u8; 4096];
        log.write(&mut buf);
        let first: ErrorLogEntry = zerocopy::FromBytes::read_from_bytes(&buf[..64]).unwrap();
        let last: ErrorLogEntry = zerocopy::FromBytes::read_from_bytes(&buf[4032..]).unwrap();
        assert_eq!((first.error_count, first.cid), (70, 69));
        assert_eq!(last.error_count, 7);
        assert_eq!(first.status >> 1, Status::LBA_OUT_OF_RANGE.to_field());
    }

    #[test]
    fn changed_list_is_sorted_deduplicated_and_overflows() {
        let mut l = ChangedNsList::default();
        for id in [5, 2, 5, 9] {
            l.add(id);
        }
        let mut buf = [0u8; 16];
        l.write(&mut buf);
        assert_eq!(buf, [2, 0, 0, 0, 5, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
        for id in 100..1200 {
            l.add(id);
        }
        let mut buf = [0u8; 16];
        l.write(&mut buf);
        assert_eq!(&buf[..8], &[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]);
    }
}
