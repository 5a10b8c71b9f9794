// SPDX-License-Identifier: Apache-2.0
//! Flush (NVM Command Set, 6.8). The broadcast NSID flushes every namespace (VWC bits 2:1
//! = 11b).

use nvmemu_spec::{Nsid, Status};

use super::{active_ns, bdev_status};
use crate::namespace::Namespace;

/// Flush one namespace, or all of them for the broadcast NSID.
pub(super) fn flush(namespaces: &[Option<Namespace>], nsid: Nsid) -> Result<(), Status> {
    if nsid == Nsid::BROADCAST {
        for ns in namespaces.iter().flatten() {
            ns.io().flush().map_err(|e| bdev_status(&e))?;
        }
        return Ok(());
    }
    active_ns(namespaces, nsid)?
        .io()
        .flush()
        .map_err(|e| bdev_status(&e))
}
