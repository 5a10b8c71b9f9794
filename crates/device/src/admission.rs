// SPDX-License-Identifier: Apache-2.0
//! Whether a controller admits new clients: the vfio-user side of an NVMe-oF subsystem's
//! host access control.
//!
//! An NVMe-oF host names itself by the host NQN of its Fabrics Connect. A vfio-user client
//! sends no Connect and no NQN (SPDK's own vfio-user transport connects its controllers on
//! the client's behalf with an empty host NQN), so a host list can never match one: a
//! subsystem that does not allow any host admits no vfio-user client, exactly as SPDK's
//! target refuses "host ''". One [`Admission`] is shared by every controller of a subsystem,
//! so changing it takes effect at each of them for the next client that connects.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A shared admit/refuse switch, checked when a client's VERSION arrives.
#[derive(Debug, Clone)]
pub struct Admission(Arc<AtomicBool>);

impl Admission {
    /// A switch that starts admitting (`true`) or refusing clients.
    pub fn new(admit: bool) -> Admission {
        Admission(Arc::new(AtomicBool::new(admit)))
    }

    /// Admit or refuse the clients that connect from now on; attached ones stay.
    pub fn set(&self, admit: bool) {
        // Relaxed: a lone flag read at connect time; nothing else is published with it.
        self.0.store(admit, Ordering::Relaxed);
    }

    /// Whether a client connecting now is admitted.
    pub fn admits(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl Default for Admission {
    /// Admits every client (a controller without a host policy).
    fn default() -> Admission {
        Admission::new(true)
    }
}
