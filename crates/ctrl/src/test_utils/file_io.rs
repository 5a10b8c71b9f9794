// SPDX-License-Identifier: Apache-2.0
//! [`TestHost`]'s hooks into the file namespaces' I/O engine: worker threads instead of
//! io_uring, and a gate that holds operations in flight until a test lets them go.

use std::sync::Arc;

use super::TestHost;

impl TestHost {
    /// Run file namespaces' I/O on worker threads, as where io_uring is not allowed.
    pub fn force_file_worker_threads(&mut self) {
        self.ctrl.file_io.force_worker_threads();
    }

    /// Run file namespaces' I/O on worker threads that hold every operation back while
    /// the returned gate is closed (it opens when dropped, so a failing test ends instead
    /// of waiting on it). Declare it after the host, so it is dropped first.
    pub fn hold_file_workers(&mut self) -> HeldFileIo {
        let held = HeldFileIo::closed();
        self.ctrl.file_io.gate_worker_threads(held.gate());
        held
    }

    /// The same on io_uring (worker threads where it is not allowed): the kernel runs each
    /// operation, the controller sees it in flight until the gate opens.
    pub fn hold_file_ring(&mut self) -> HeldFileIo {
        let held = HeldFileIo::closed();
        self.ctrl.file_io.gate_ring(held.gate());
        held
    }
}

/// The gate of [`TestHost::hold_file_workers`] and [`TestHost::hold_file_ring`]: closed
/// until [`HeldFileIo::release`] or drop.
#[derive(Debug)]
pub struct HeldFileIo(Arc<nvmemu_mem::uring::IoGate>);

impl HeldFileIo {
    fn closed() -> HeldFileIo {
        let gate = nvmemu_mem::uring::IoGate::default();
        gate.close();
        HeldFileIo(Arc::new(gate))
    }

    /// Let the operations held go on, and everything after.
    pub fn release(&self) {
        self.0.open();
    }

    /// Hold operations back again.
    pub fn hold(&self) {
        self.0.close();
    }

    /// A handle another thread can open the gate with.
    pub fn gate(&self) -> Arc<nvmemu_mem::uring::IoGate> {
        Arc::clone(&self.0)
    }
}

impl Drop for HeldFileIo {
    fn drop(&mut self) {
        self.0.open();
    }
}
