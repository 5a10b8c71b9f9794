// SPDX-License-Identifier: Apache-2.0
//! What every target-side timing test checks of a namespace's layers (`timing.rs`,
//! `file_ns_timing.rs`).

use nvmemu_ctrl::timing::{Layer, LayerSet};

/// Each of `n` commands counted once in every layer, and the four layers adding up to the
/// total command by command, so their sums do too.
pub fn check_layer_sums(set: &LayerSet, n: u64, what: &str) {
    for layer in Layer::ALL {
        assert_eq!(set.get(layer).count(), n, "{what}: {}", layer.name());
    }
    check_parts_add_up(set, what);
}

/// The four layers' sums add up to the total's.
pub fn check_parts_add_up(set: &LayerSet, what: &str) {
    let parts: u128 = [
        Layer::Queued,
        Layer::Backend,
        Layer::Complete,
        Layer::Interrupt,
    ]
    .iter()
    .map(|l| set.get(*l).sum())
    .sum();
    assert_eq!(parts, set.get(Layer::Total).sum(), "{what}");
}
