// SPDX-License-Identifier: Apache-2.0
//! Newtypes for NVMe identifiers, so a queue id cannot be passed where a namespace id is meant.

/// Queue identifier (SQID/CQID); 0 is the admin queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Qid(pub u16);

/// Command identifier, chosen by the host and echoed in the completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Cid(pub u16);

/// Namespace identifier; 0 is invalid for I/O, 0xFFFF_FFFF is the broadcast value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nsid(pub u32);

impl Nsid {
    /// The broadcast NSID ("all namespaces").
    pub const BROADCAST: Nsid = Nsid(0xFFFF_FFFF);
}

/// Logical block address within a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lba(pub u64);

impl Qid {
    /// The admin queue pair.
    pub const ADMIN: Qid = Qid(0);

    /// Index for tables indexed by queue id.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}
