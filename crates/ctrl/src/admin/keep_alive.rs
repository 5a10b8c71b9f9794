// SPDX-License-Identifier: Apache-2.0
//! Keep Alive (NVMe Base 1.4, 5.16). KAS is 0 (no keep alive timer is enforced on PCIe),
//! so the command is accepted and does nothing.

use nvmemu_spec::Status;

/// Complete a Keep Alive.
pub(crate) fn keep_alive() -> Result<u32, Status> {
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn keep_alive_succeeds() {
        assert_eq!(super::keep_alive(), Ok(0));
    }
}
