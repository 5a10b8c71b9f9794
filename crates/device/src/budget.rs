// SPDX-License-Identifier: Apache-2.0
//! What one client may map. Every fd-backed DMA_MAP is a mapping in the server's address
//! space, and those are shared by every controller in the process: about 128 TiB of user
//! address space, and `vm.max_map_count` mappings (of which `nvmemu-mem` keeps a process-wide
//! budget). Without a bound per client, one client could take all of either (one 64 TiB
//! sparse memfd mapped twice, or 57,000 small maps) and every other controller's DMA_MAP,
//! and any thread the process starts, would fail. Maps without an fd take no mapping and
//! count only toward VERSION's `max_dma_maps`.

use nvmemu_mem::{DmaBacking, GuestMemory};
use nvmemu_vfio_user::Errno;

use crate::ControllerId;

/// Bounds on one client's fd-backed DMA regions (`nvmemu serve --max-client-maps`,
/// `--max-client-map-bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientBudget {
    /// Most fd-backed regions mapped at once.
    pub max_maps: usize,
    /// Most bytes of fd-backed regions mapped at once.
    pub max_map_bytes: u64,
}

impl Default for ClientBudget {
    /// 4096 maps (a QEMU guest makes tens; SPDK one per memory segment, 4096 covers 8 GiB of
    /// 2 MiB pages mapped one by one) and 1 TiB: the default `vm.max_map_count` then holds
    /// about 14 clients at their full budget, and the address space about 120.
    fn default() -> Self {
        ClientBudget {
            max_maps: 4096,
            max_map_bytes: 1 << 40,
        }
    }
}

/// A client's fd-backed regions now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MapUsage {
    maps: usize,
    bytes: u64,
}

impl MapUsage {
    /// What `table`'s fd-backed regions use (one pass over the table).
    pub(crate) fn of(table: &GuestMemory) -> MapUsage {
        table
            .regions()
            .filter(|r| matches!(r.backing, DmaBacking::Mapped(_)))
            .fold(MapUsage::default(), |u, r| MapUsage {
                maps: u.maps + 1,
                bytes: u.bytes.saturating_add(r.size),
            })
    }

    /// Whether one more fd-backed region of `size` bytes fits `budget`: ENOSPC past the
    /// number of maps (as the kernel's VFIO past `dma_entry_limit`), ENOMEM past the bytes
    /// (as past the locked memory limit). The first refusal of a client is logged as a
    /// warning naming the budget (`warned` remembers it), later ones at debug.
    pub(crate) fn admit(
        &self,
        budget: &ClientBudget,
        size: u64,
        (id, warned): (ControllerId, &mut bool),
    ) -> Result<(), Errno> {
        let (errno, what) = if self.maps >= budget.max_maps {
            (
                Errno::NOSPC,
                format!("{} maps (--max-client-maps)", budget.max_maps),
            )
        } else if self.bytes.saturating_add(size) > budget.max_map_bytes {
            (
                Errno::NOMEM,
                format!(
                    "{} bytes mapped (--max-client-map-bytes; {} in use)",
                    budget.max_map_bytes, self.bytes
                ),
            )
        } else {
            return Ok(());
        };
        if std::mem::replace(warned, true) {
            tracing::debug!(target: "guest", "controller {id:?}: DMA_MAP of {size:#x} bytes refused: the client's budget is {what}");
        } else {
            tracing::warn!(target: "guest", "controller {id:?}: DMA_MAP of {size:#x} bytes refused ({errno}): the client's budget is {what}; later refusals of this client are logged at debug");
        }
        Err(errno)
    }

    /// Count one more region of `size` bytes.
    pub(crate) fn add(&mut self, size: u64) {
        self.maps += 1;
        self.bytes = self.bytes.saturating_add(size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_past_the_count_are_enospc_and_past_the_bytes_enomem() {
        let budget = ClientBudget {
            max_maps: 2,
            max_map_bytes: 1 << 20,
        };
        let id = ControllerId(1);
        let mut warned = false;
        let mut u = MapUsage::default();
        assert_eq!(u.admit(&budget, 1 << 19, (id, &mut warned)), Ok(()));
        u.add(1 << 19);
        // Exactly up to the byte budget fits; one byte more does not.
        assert_eq!(u.admit(&budget, 1 << 19, (id, &mut warned)), Ok(()));
        assert_eq!(
            u.admit(&budget, (1 << 19) + 1, (id, &mut warned)),
            Err(Errno::NOMEM)
        );
        assert!(warned);
        u.add(1 << 19);
        assert_eq!(u.admit(&budget, 1, (id, &mut warned)), Err(Errno::NOSPC));
        assert_eq!(
            u,
            MapUsage {
                maps: 2,
                bytes: 1 << 20
            }
        );
    }
}
