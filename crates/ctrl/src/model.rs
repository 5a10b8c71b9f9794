// SPDX-License-Identifier: Apache-2.0
//! Latency and throughput models per namespace (`bdev_delay_create`, `bdev_set_model`):
//! each controller keeps its own [`Model`] per modelled namespace, rebuilt when the bdev's
//! model changes, and asks it when each command's completion is due (`hold.rs` holds it
//! until then).

use nvmemu_bdev::model::{Model, OpClass};
use nvmemu_mem::global_clock;
use nvmemu_spec::{IoOpcode, Sqe};

use crate::Namespace;

/// This controller's model of one namespace.
#[derive(Debug, Clone, Default)]
pub(crate) struct NsModel {
    /// The bdev's `ModelSlot` generation `model` was built from.
    generation: u64,
    model: Option<Box<Model>>,
}

/// Rebuild the models whose bdev's configuration changed; whether any namespace has one.
/// Called once per pass while some bdev in the process has a model.
pub(crate) fn refresh_all(namespaces: &mut [Option<Namespace>]) -> bool {
    let mut any = false;
    for ns in namespaces.iter_mut().flatten() {
        let slot = ns.bdev().model();
        let generation = slot.generation();
        if generation != ns.model.generation {
            ns.model.model = slot.get().map(|c| Box::new(Model::new(&c)));
            ns.model.generation = generation;
        }
        any |= ns.model.model.is_some();
    }
    any
}

/// The class a model times `sqe` in (and an injection hits it as, `fault.rs`): None for
/// commands of no class (reservations).
pub(crate) fn op_class(sqe: &Sqe) -> Option<OpClass> {
    Some(match IoOpcode::from(sqe.opcode()) {
        IoOpcode::Read | IoOpcode::Compare => OpClass::Read,
        IoOpcode::Write => OpClass::Write,
        IoOpcode::Flush => OpClass::Flush,
        IoOpcode::WriteZeroes | IoOpcode::DatasetManagement => OpClass::Trim,
        _ => return None,
    })
}

/// When the completion of `sqe` is due on the global clock (ns), or None to post it now:
/// its namespace has no model, or the command is of no class a model times (reservations,
/// a Flush of every namespace, one for a namespace not attached).
pub(crate) fn due(namespaces: &mut [Option<Namespace>], sqe: &Sqe) -> Option<u64> {
    let op = op_class(sqe)?;
    let slot = usize::try_from(sqe.nsid).ok()?.checked_sub(1)?;
    let ns = namespaces.get_mut(slot)?.as_mut()?;
    let shift = ns.block_shift();
    let model = ns.model.model.as_mut()?;
    // NLB is 0's based; Flush, Write Zeroes and Deallocate move no data.
    let bytes = match op {
        OpClass::Read | OpClass::Write => u64::from((sqe.cdw12 & 0xFFFF) + 1) << shift,
        OpClass::Flush | OpClass::Trim => 0,
    };
    Some(model.due(op, bytes, global_clock().now_ns()))
}
