// SPDX-License-Identifier: Apache-2.0
//! Active namespaces as seen at attach time: what the I/O helpers check ranges against.

use nvmemu_spec::Nsid;

use crate::error::NvmeError;
use crate::identify::IdentifyNamespace;

/// One active namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveNamespace {
    /// Its NSID.
    pub nsid: Nsid,
    /// Size in logical blocks (NSZE).
    pub nsze: u64,
    /// Logical block size in bytes.
    pub lba_size: u32,
    /// The full Identify Namespace data.
    pub identify: IdentifyNamespace,
}

impl ActiveNamespace {
    /// Bytes covered by `nblocks` blocks.
    pub fn bytes(&self, nblocks: u32) -> u64 {
        u64::from(nblocks) * u64::from(self.lba_size)
    }

    /// Check that `[slba, slba + nblocks)` is a valid range of 1..=65536 blocks inside the
    /// namespace.
    pub fn check_range(&self, slba: u64, nblocks: u32) -> Result<(), NvmeError> {
        if nblocks == 0 || nblocks > 65536 {
            return Err(NvmeError::InvalidBlockCount(nblocks));
        }
        match slba.checked_add(u64::from(nblocks)) {
            Some(end) if end <= self.nsze => Ok(()),
            _ => Err(NvmeError::LbaOutOfRange {
                slba,
                nblocks,
                nsze: self.nsze,
            }),
        }
    }
}

/// Find `nsid` in `list`.
pub(crate) fn lookup(list: &[ActiveNamespace], nsid: Nsid) -> Result<&ActiveNamespace, NvmeError> {
    list.iter()
        .find(|n| n.nsid == nsid)
        .ok_or(NvmeError::UnknownNamespace(nsid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_checks() {
        let ns = ActiveNamespace {
            nsid: Nsid(1),
            nsze: 100,
            lba_size: 512,
            identify: IdentifyNamespace::default(),
        };
        assert!(ns.check_range(0, 100).is_ok());
        assert!(matches!(
            ns.check_range(99, 2),
            Err(NvmeError::LbaOutOfRange {
                slba: 99,
                nblocks: 2,
                nsze: 100
            })
        ));
        assert!(ns.check_range(u64::MAX, 1).is_err());
        assert!(matches!(
            ns.check_range(0, 0),
            Err(NvmeError::InvalidBlockCount(0))
        ));
        assert!(matches!(
            lookup(std::slice::from_ref(&ns), Nsid(2)),
            Err(NvmeError::UnknownNamespace(Nsid(2)))
        ));
    }
}
