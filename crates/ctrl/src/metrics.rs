// SPDX-License-Identifier: Apache-2.0
//! Controller and per-queue counters: plain integers written only by the poller that owns
//! the controller, read as a snapshot through `Controller::stats`. They also feed the
//! SMART / Health log page.

use nvmemu_spec::Qid;

/// Counters of one submission queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Commands completed.
    pub commands: u64,
    /// Commands completed with an error status.
    pub errors: u64,
    /// Bytes moved to the host (reads).
    pub bytes_read: u64,
    /// Bytes moved from the host (writes).
    pub bytes_written: u64,
}

/// Controller-wide counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CtrlCounters {
    pub(crate) admin_commands: u64,
    pub(crate) io_commands: u64,
    pub(crate) errors: u64,
    /// Errors with a Media and Data Integrity status (SCT 2): SMART Media and Data
    /// Integrity Errors.
    pub(crate) media_errors: u64,
    pub(crate) bytes_read: u64,
    pub(crate) bytes_written: u64,
    /// Read and Compare commands (SMART Host Read Commands).
    pub(crate) host_read_commands: u64,
    /// Write commands (SMART Host Write Commands).
    pub(crate) host_write_commands: u64,
    /// Invalid doorbell values seen.
    pub(crate) bad_doorbells: u64,
    /// Times client memory vanished under an access (each one made the controller fatal).
    pub(crate) memory_faults: u64,
    /// Admin queue pairs created (one per enable).
    pub(crate) admin_qpairs_created: u64,
    /// I/O submission queues created (Create I/O Submission Queue that succeeded).
    pub(crate) io_qpairs_created: u64,
}

/// A snapshot of a controller's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerStats {
    /// Admin commands completed.
    pub admin_commands: u64,
    /// I/O commands completed.
    pub io_commands: u64,
    /// Commands completed with an error status (admin and I/O).
    pub errors: u64,
    /// Of those, the ones with a Media and Data Integrity status (SCT 2).
    pub media_errors: u64,
    /// Bytes read by the host.
    pub bytes_read: u64,
    /// Bytes written by the host.
    pub bytes_written: u64,
    /// Read and Compare commands.
    pub host_read_commands: u64,
    /// Write commands.
    pub host_write_commands: u64,
    /// SMART Data Units Read (thousands of 512-byte units, rounded up).
    pub data_units_read: u64,
    /// SMART Data Units Written.
    pub data_units_written: u64,
    /// Invalid doorbell values the host wrote.
    pub bad_doorbells: u64,
    /// Accesses to client memory that found the page gone (the client shrank the file
    /// behind a DMA region); each one set Controller Fatal Status.
    pub memory_faults: u64,
    /// Admin queue pairs created so far (one per enable: SPDK's poll group `admin_qpairs`).
    pub admin_qpairs_created: u64,
    /// I/O queue pairs created so far (one per Create I/O Submission Queue: `io_qpairs`).
    pub io_qpairs_created: u64,
    /// Per submission queue counters, admin queue first.
    pub queues: Vec<(Qid, QueueCounters)>,
}

impl ControllerStats {
    /// Admin queue pairs live now: 1 while the controller is enabled, else 0.
    pub fn current_admin_qpairs(&self) -> u64 {
        self.queues.iter().filter(|(q, _)| *q == Qid::ADMIN).count() as u64
    }

    /// I/O queue pairs (submission queues) live now.
    pub fn current_io_qpairs(&self) -> u64 {
        self.queues.iter().filter(|(q, _)| *q != Qid::ADMIN).count() as u64
    }
}

/// SMART data units: thousands of 512-byte units, rounded up (NVMe Base 1.4, Figure 196).
pub(crate) fn data_units(bytes: u64) -> u64 {
    bytes.div_ceil(512 * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_units_round_up() {
        assert_eq!(data_units(0), 0);
        assert_eq!(data_units(512), 1);
        assert_eq!(data_units(512_000), 1);
        assert_eq!(data_units(512_001), 2);
    }
}
