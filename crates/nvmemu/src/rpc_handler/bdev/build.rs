// SPDX-License-Identifier: Apache-2.0
//! Building a bdev reserved by `bdev_malloc_create` / `bdev_null_create` (outside the
//! handler's lock for malloc): its NUMA node, the memory, and the one-line error when the
//! machine cannot give it.

use nvmemu_bdev::{Bdev, BdevError, BdevErrorKind, MallocBacking};
use nvmemu_device::NumaTopology;
use nvmemu_mem::{ByteSize, PROGRESS_INTERVAL, Progress};
use nvmemu_rpc::{Errno, RpcError};

use super::{NewBdev, NewKind};

/// A malloc bdev; a long population prints its progress on stderr.
impl NewBdev {
    /// Makes the bdev; for malloc this backs all its memory, which may take seconds.
    pub(crate) fn build(&self) -> Result<Bdev, RpcError> {
        let made = match self.kind {
            NewKind::Malloc(backing) => create_malloc(self, backing),
            NewKind::Null => Bdev::null(&self.name, self.block_size, self.num_blocks),
        };
        made.map_err(|e| create_error(self, &e))
    }
}

/// The node of a `numa_id` (-1: `default_node`), checked against the machine's nodes.
pub(super) fn numa_node(numa_id: i32, default_node: Option<u32>) -> Result<Option<u32>, RpcError> {
    if numa_id == -1 {
        return Ok(default_node);
    }
    let topology = NumaTopology::read();
    u32::try_from(numa_id)
        .map_err(|_| {
            RpcError::invalid_params(format!(
                "Invalid parameters: numa_id {numa_id} is neither -1 (any) nor a node: {}",
                topology.describe()
            ))
        })
        .and_then(|node| match topology.memory_node(node) {
            Ok(_) => Ok(Some(node)),
            Err(e) => Err(RpcError::errno_msg(Errno::EINVAL, e.to_string())),
        })
}

fn create_malloc(n: &NewBdev, backing: MallocBacking) -> Result<Bdev, BdevError> {
    let started = std::time::Instant::now();
    let progress = |p: Progress| {
        crate::say!(
            "nvmemu: bdev {}: {} of {} backed ({:.0} s)",
            n.name,
            ByteSize(p.done),
            ByteSize(p.total),
            p.elapsed.as_secs_f64()
        );
    };
    let b = Bdev::malloc_on_node(
        &n.name,
        n.block_size,
        n.num_blocks,
        backing,
        n.numa_node,
        &progress,
    )?;
    let took = started.elapsed();
    if took >= PROGRESS_INTERVAL {
        crate::say!(
            "nvmemu: bdev {}: {} backed in {:.1} s",
            n.name,
            ByteSize(b.size_bytes()),
            took.as_secs_f64()
        );
    }
    Ok(b)
}

/// The one-line RPC error for a failed creation: what was wrong and what to do.
fn create_error(n: &NewBdev, e: &BdevError) -> RpcError {
    let what = crate::error_chain(e);
    let name = &n.name;
    match (e.kind(), n.kind) {
        (BdevErrorKind::InvalidGeometry, _) => RpcError::errno_msg(
            Errno::EINVAL,
            format!(
                "Cannot create bdev {name}: {what} (block_size {} must be a power of two \
                 from 512 to 65536 and num_blocks non-zero)",
                n.block_size
            ),
        ),
        (BdevErrorKind::NoMemory, kind) => {
            let hint = match (e, kind) {
                (BdevError::Map { .. }, _) => "use a smaller size",
                (_, NewKind::Malloc(MallocBacking::HugePages)) => {
                    "reserve more huge pages (sysctl vm.nr_hugepages) or drop hugepages=on"
                }
                _ => "use a smaller size, or lazy=on (RPC: \"lazy\": true) for sparse memory",
            };
            RpcError::errno_msg(
                Errno::ENOMEM,
                format!("Cannot create bdev {name}: {what}; {hint}"),
            )
        }
        _ => RpcError::errno_msg(Errno::EINVAL, format!("Cannot create bdev {name}: {what}")),
    }
}
